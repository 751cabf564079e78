package samsakafka

import (
	"context"
	"fmt"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	fieldTopic           = "topic"
	fieldKey             = "key"
	fieldIdempotentWrite = "idempotent_write"
	fieldCompression     = "compression"
	fieldTimeout         = "timeout"
	fieldMaxMessageBytes = "max_message_bytes"
	fieldMetadata        = "metadata"
	fieldBatching        = "batching"
	fieldAutoCreate      = "allow_auto_topic_creation"
)

func outputSpec() *service.ConfigSpec {
	return service.NewConfigSpec().
		Beta().
		Categories("Services").
		Summary("Writes messages to a topic of a Kafka-compatible broker with franz-go: acks=all, idempotent by default.").
		Description(`
The fields mirror those of the kafka_franz output of Redpanda Connect. A batch is
acknowledged to the pipeline once every record of it is acknowledged by the broker
with acks=all (all in-sync replicas). With idempotent_write (the default) the broker
drops a retried duplicate of a batch it already wrote, so retries inside the client
add no duplicates. Records with a key go to the partition of the key's murmur2 hash,
as the Java client places them.`).
		Fields(
			service.NewStringListField(fieldSeedBrokers).
				Description("Addresses of brokers to bootstrap from; an entry may hold several, comma separated.").
				Example([]string{"127.0.0.1:9092"}),
			service.NewInterpolatedStringField(fieldTopic).
				Description("The topic to write each message to."),
			service.NewInterpolatedStringField(fieldKey).
				Description("The record key of each message.").
				Optional(),
			service.NewStringField(fieldClientID).
				Description("The client id sent to the broker.").
				Default("benthos").Advanced(),
			service.NewBoolField(fieldAutoCreate).
				Description("Ask the broker to create a topic that does not exist (with its defaults) when writing to it.").
				Default(true).Advanced(),
			service.NewBoolField(fieldIdempotentWrite).
				Description("Produce idempotently (a producer id and sequence numbers).").
				Default(true).Advanced(),
			service.NewStringEnumField(fieldCompression, "none", "gzip", "snappy", "lz4", "zstd").
				Description("Compression of the record batches.").
				Default("none").Advanced(),
			service.NewDurationField(fieldTimeout).
				Description("How long a write may take before it fails (and the pipeline retries it).").
				Default("10s").Advanced(),
			service.NewStringField(fieldMaxMessageBytes).
				Description("The largest record batch the client builds.").
				Default("1MB").Advanced(),
			service.NewMetadataFilterField(fieldMetadata).
				Description("Which metadata keys are written as record headers.").
				Optional(),
			service.NewOutputMaxInFlightField(),
			service.NewBatchPolicyField(fieldBatching),
		)
}

// batchOutput is the samsa_kafka output. WriteBatch may be called by max_in_flight
// goroutines at once (kgo.Client is safe for that).
type batchOutput struct {
	opts    []kgo.Opt
	topic   *service.InterpolatedString
	key     *service.InterpolatedString
	meta    *service.MetadataFilter
	timeout time.Duration
	cl      *kgo.Client
}

func newOutput(conf *service.ParsedConfig, _ *service.Resources) (service.BatchOutput, service.BatchPolicy, int, error) {
	var policy service.BatchPolicy
	brokers, err := seedBrokers(conf)
	if err != nil {
		return nil, policy, 0, err
	}
	out := &batchOutput{}
	if out.topic, err = conf.FieldInterpolatedString(fieldTopic); err != nil {
		return nil, policy, 0, err
	}
	if conf.Contains(fieldKey) {
		if out.key, err = conf.FieldInterpolatedString(fieldKey); err != nil {
			return nil, policy, 0, err
		}
	}
	if conf.Contains(fieldMetadata) {
		if out.meta, err = conf.FieldMetadataFilter(fieldMetadata); err != nil {
			return nil, policy, 0, err
		}
	}
	clientID, err := conf.FieldString(fieldClientID)
	if err != nil {
		return nil, policy, 0, err
	}
	idempotent, err := conf.FieldBool(fieldIdempotentWrite)
	if err != nil {
		return nil, policy, 0, err
	}
	autoCreate, err := conf.FieldBool(fieldAutoCreate)
	if err != nil {
		return nil, policy, 0, err
	}
	comp, err := conf.FieldString(fieldCompression)
	if err != nil {
		return nil, policy, 0, err
	}
	if out.timeout, err = conf.FieldDuration(fieldTimeout); err != nil {
		return nil, policy, 0, err
	}
	maxStr, err := conf.FieldString(fieldMaxMessageBytes)
	if err != nil {
		return nil, policy, 0, err
	}
	maxBytes, err := parseBytes(maxStr)
	if err != nil {
		return nil, policy, 0, fmt.Errorf("max_message_bytes: %w", err)
	}
	maxInFlight, err := conf.FieldMaxInFlight()
	if err != nil {
		return nil, policy, 0, err
	}
	if policy, err = conf.FieldBatchPolicy(fieldBatching); err != nil {
		return nil, policy, 0, err
	}
	codec := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}[comp]
	out.opts = []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ClientID(clientID),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(codec),
		kgo.ProducerBatchMaxBytes(maxBytes),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)), // murmur2 of the key, as Java's
	}
	if !idempotent {
		out.opts = append(out.opts, kgo.DisableIdempotentWrite())
	}
	if autoCreate {
		out.opts = append(out.opts, kgo.AllowAutoTopicCreation())
	}
	return out, policy, maxInFlight, nil
}

func (o *batchOutput) Connect(ctx context.Context) error {
	if o.cl != nil {
		return nil
	}
	cl, err := kgo.NewClient(o.opts...)
	if err != nil {
		return err
	}
	if err := cl.Ping(ctx); err != nil {
		cl.Close()
		return fmt.Errorf("no broker answered: %w", err)
	}
	o.cl = cl
	return nil
}

// WriteBatch produces the batch and returns once the broker acknowledged every
// record, or with the first failure (the pipeline then retries the whole batch).
func (o *batchOutput) WriteBatch(ctx context.Context, batch service.MessageBatch) error {
	if o.cl == nil {
		return service.ErrNotConnected
	}
	recs := make([]*kgo.Record, len(batch))
	for i, m := range batch {
		topic, err := batch.TryInterpolatedString(i, o.topic)
		if err != nil {
			return fmt.Errorf("topic interpolation: %w", err)
		}
		value, err := m.AsBytes()
		if err != nil {
			return err
		}
		r := &kgo.Record{Topic: topic, Value: value}
		if o.key != nil {
			key, err := batch.TryInterpolatedBytes(i, o.key)
			if err != nil {
				return fmt.Errorf("key interpolation: %w", err)
			}
			r.Key = key
		}
		if o.meta != nil {
			_ = o.meta.Walk(m, func(k, v string) error {
				r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
				return nil
			})
		}
		recs[i] = r
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	return o.cl.ProduceSync(ctx, recs...).FirstErr()
}

func (o *batchOutput) Close(context.Context) error {
	if o.cl != nil {
		o.cl.Close()
		o.cl = nil
	}
	return nil
}
