package samsakafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	fieldSeedBrokers     = "seed_brokers"
	fieldClientID        = "client_id"
	fieldTopics          = "topics"
	fieldConsumerGroup   = "consumer_group"
	fieldStartFromOldest = "start_from_oldest"
	fieldCheckpointLimit = "checkpoint_limit"
	fieldCommitPeriod    = "commit_period"
	fieldFetchMaxBytes   = "fetch_max_bytes"
)

func inputSpec() *service.ConfigSpec {
	return service.NewConfigSpec().
		Beta().
		Categories("Services").
		Summary("Consumes topics of a Kafka-compatible broker in a consumer group with franz-go, committing a record's offset only after the pipeline acknowledged it and every record before it.").
		Description(`
The fields mirror those of the kafka_franz input of Redpanda Connect. Each batch
holds records of one partition, in offset order. An acknowledged batch's offsets are
marked; a partition's commit advances over acknowledged batches only up to the first
one still in flight, so a crash or a rebalance re-delivers (at least once) and never
skips a record. Marked offsets are committed every commit_period, when partitions are
revoked, and on close.

Each message carries the metadata kafka_key, kafka_topic, kafka_partition,
kafka_offset, kafka_timestamp_unix, kafka_timestamp_ms, kafka_tombstone_message and
the record's headers.`).
		Fields(
			service.NewStringListField(fieldSeedBrokers).
				Description("Addresses of brokers to bootstrap from; an entry may hold several, comma separated.").
				Example([]string{"127.0.0.1:9092"}),
			service.NewStringListField(fieldTopics).
				Description("Topics to consume."),
			service.NewStringField(fieldConsumerGroup).
				Description("The consumer group whose committed offsets are kept."),
			service.NewStringField(fieldClientID).
				Description("The client id sent to the broker.").
				Default("benthos").Advanced(),
			service.NewBoolField(fieldStartFromOldest).
				Description("With no committed offset, start from the oldest record (true) or the newest (false).").
				Default(true).Advanced(),
			service.NewIntField(fieldCheckpointLimit).
				Description("The most records handed to the pipeline and not yet acknowledged; reading waits while this many are in flight.").
				Default(1024).Advanced(),
			service.NewDurationField(fieldCommitPeriod).
				Description("How often marked offsets are committed.").
				Default("5s").Advanced(),
			service.NewStringField(fieldFetchMaxBytes).
				Description("The most bytes a fetch request asks for.").
				Default("50MiB").Advanced(),
			service.NewAutoRetryNacksToggleField(),
		)
}

// batchInput is the samsa_kafka input. ReadBatch is called by the stream's single
// reading goroutine; ack functions are called from any goroutine; the rebalance
// callbacks from the client's. mu guards the queue of unread batches, the partition
// trackers and the in-flight count.
type batchInput struct {
	log     *service.Logger
	opts    []kgo.Opt
	limit   int
	mu      sync.Mutex
	cond    *sync.Cond // signalled when inflight drops or the input closes
	cl      *kgo.Client
	queue   []*kgo.FetchPartition // polled, not yet handed out, one partition's records each
	tracks  map[topicPartition]*tracker
	flight  int // records handed out, not yet acknowledged
	closing bool
	// gen counts revocations; forgot holds the gen at which each partition was last
	// revoked, so that records polled before a revocation and queued after it are
	// dropped (the partition's next owner reads them from the committed offset).
	gen    uint64
	forgot map[topicPartition]uint64
}

type topicPartition struct {
	topic     string
	partition int32
}

// tracker orders a partition's batches in flight: the commit mark advances over the
// acknowledged prefix only. A tracker is replaced when its partition is revoked and
// reassigned, so a late acknowledgement of a batch read before cannot mark anything.
type tracker struct {
	pending []*pendingBatch // in offset order
}

type pendingBatch struct {
	records int
	next    kgo.EpochOffset // the offset after the batch's last record, and its leader epoch
	done    bool
}

func newInput(conf *service.ParsedConfig, mgr *service.Resources) (service.BatchInput, error) {
	brokers, err := seedBrokers(conf)
	if err != nil {
		return nil, err
	}
	topics, err := conf.FieldStringList(fieldTopics)
	if err != nil {
		return nil, err
	}
	if len(topics) == 0 {
		return nil, errors.New("topics: at least one topic is needed")
	}
	group, err := conf.FieldString(fieldConsumerGroup)
	if err != nil {
		return nil, err
	}
	if group == "" {
		return nil, errors.New("consumer_group: a group is needed (offsets are committed in it)")
	}
	clientID, err := conf.FieldString(fieldClientID)
	if err != nil {
		return nil, err
	}
	oldest, err := conf.FieldBool(fieldStartFromOldest)
	if err != nil {
		return nil, err
	}
	limit, err := conf.FieldInt(fieldCheckpointLimit)
	if err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, fmt.Errorf("checkpoint_limit: %d, want at least 1", limit)
	}
	period, err := conf.FieldDuration(fieldCommitPeriod)
	if err != nil {
		return nil, err
	}
	maxBytesStr, err := conf.FieldString(fieldFetchMaxBytes)
	if err != nil {
		return nil, err
	}
	maxBytes, err := parseBytes(maxBytesStr)
	if err != nil {
		return nil, fmt.Errorf("fetch_max_bytes: %w", err)
	}
	in := &batchInput{log: mgr.Logger(), limit: limit, tracks: map[topicPartition]*tracker{}, forgot: map[topicPartition]uint64{}}
	in.cond = sync.NewCond(&in.mu)
	offset := kgo.NewOffset().AtEnd()
	if oldest {
		offset = kgo.NewOffset().AtStart()
	}
	in.opts = []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ClientID(clientID),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeResetOffset(offset),
		kgo.FetchMaxBytes(maxBytes),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(period),
		kgo.OnPartitionsRevoked(in.revoked),
		kgo.OnPartitionsLost(in.lost),
	}
	return service.AutoRetryNacksBatchedToggled(conf, in)
}

func (in *batchInput) Connect(ctx context.Context) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.cl != nil {
		return nil
	}
	cl, err := kgo.NewClient(in.opts...)
	if err != nil {
		return err
	}
	if err := cl.Ping(ctx); err != nil {
		cl.Close()
		return fmt.Errorf("no broker answered: %w", err)
	}
	in.cl = cl
	in.closing = false
	return nil
}

// ReadBatch hands out the next polled partition's records, polling when none is
// queued; it waits while checkpoint_limit records are in flight.
func (in *batchInput) ReadBatch(ctx context.Context) (service.MessageBatch, service.AckFunc, error) {
	stop := context.AfterFunc(ctx, func() {
		in.mu.Lock()
		in.cond.Broadcast()
		in.mu.Unlock()
	})
	defer stop()
	in.mu.Lock()
	for {
		if in.cl == nil || in.closing {
			in.mu.Unlock()
			return nil, nil, service.ErrNotConnected
		}
		if err := ctx.Err(); err != nil {
			in.mu.Unlock()
			return nil, nil, err
		}
		if in.flight < in.limit {
			break
		}
		in.cond.Wait()
	}
	for len(in.queue) == 0 {
		cl, room, gen := in.cl, in.limit-in.flight, in.gen
		in.mu.Unlock()
		fetches := cl.PollRecords(ctx, room) // never more in flight than the limit
		if fetches.IsClientClosed() {
			return nil, nil, service.ErrNotConnected
		}
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			in.log.Warnf("fetch from %s/%d: %v", topic, partition, err)
		})
		in.mu.Lock()
		if in.cl == nil || in.closing {
			in.mu.Unlock()
			return nil, nil, service.ErrNotConnected
		}
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) > 0 && in.forgot[topicPartition{p.Topic, p.Partition}] <= gen {
				fp := p.FetchPartition
				in.queue = append(in.queue, &fp)
			}
		})
	}
	p := in.queue[0]
	in.queue = in.queue[1:]
	tp := topicPartition{p.Records[0].Topic, p.Partition}
	t := in.tracks[tp]
	if t == nil {
		t = &tracker{}
		in.tracks[tp] = t
	}
	last := p.Records[len(p.Records)-1]
	pb := &pendingBatch{records: len(p.Records), next: kgo.EpochOffset{Epoch: last.LeaderEpoch, Offset: last.Offset + 1}}
	t.pending = append(t.pending, pb)
	in.flight += pb.records
	in.mu.Unlock()

	batch := make(service.MessageBatch, len(p.Records))
	for i, r := range p.Records {
		batch[i] = toMessage(r)
	}
	return batch, func(_ context.Context, _ error) error {
		// A nack reaches here only with auto_replay_nacks off: the batch is
		// discarded, as kafka_franz does, and its offsets committed.
		in.acked(tp, t, pb)
		return nil
	}, nil
}

// acked marks pb of partition tp done and moves tp's commit mark over the
// acknowledged prefix of its batches.
func (in *batchInput) acked(tp topicPartition, t *tracker, pb *pendingBatch) {
	in.mu.Lock()
	defer in.mu.Unlock()
	pb.done = true
	in.flight -= pb.records
	in.cond.Broadcast()
	if in.tracks[tp] != t || in.cl == nil {
		return // revoked since: the new owner reads these records again
	}
	var mark *kgo.EpochOffset
	for len(t.pending) > 0 && t.pending[0].done {
		mark = &t.pending[0].next
		t.pending = t.pending[1:]
	}
	if mark != nil {
		in.cl.MarkCommitOffsets(map[string]map[int32]kgo.EpochOffset{tp.topic: {tp.partition: *mark}})
	}
}

// revoked commits what is marked (the default revoke callback would, and a custom
// one must) and forgets the revoked partitions: their queued batches are dropped,
// their batches in flight can no longer mark.
func (in *batchInput) revoked(ctx context.Context, cl *kgo.Client, rev map[string][]int32) {
	if err := cl.CommitMarkedOffsets(ctx); err != nil {
		in.log.Warnf("commit on revoke: %v", err)
	}
	in.forget(rev)
}

// lost forgets the partitions: another member may own them already, so nothing is
// committed for them.
func (in *batchInput) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	in.forget(lost)
}

func (in *batchInput) forget(parts map[string][]int32) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.gen++
	gone := map[topicPartition]bool{}
	for topic, ps := range parts {
		for _, p := range ps {
			tp := topicPartition{topic, p}
			gone[tp] = true
			delete(in.tracks, tp)
			in.forgot[tp] = in.gen
		}
	}
	kept := in.queue[:0]
	for _, p := range in.queue {
		if !gone[topicPartition{p.Records[0].Topic, p.Partition}] {
			kept = append(kept, p)
		}
	}
	in.queue = kept
}

// Close commits the marked offsets and leaves the group.
func (in *batchInput) Close(ctx context.Context) error {
	in.mu.Lock()
	cl := in.cl
	in.closing = true
	in.cond.Broadcast()
	in.mu.Unlock()
	if cl == nil {
		return nil
	}
	err := cl.CommitMarkedOffsets(ctx)
	cl.Close()
	in.mu.Lock()
	in.cl = nil
	in.queue = nil
	in.tracks = map[topicPartition]*tracker{}
	in.mu.Unlock()
	if err != nil {
		return fmt.Errorf("commit on close: %w", err)
	}
	return nil
}

func toMessage(r *kgo.Record) *service.Message {
	m := service.NewMessage(r.Value)
	m.MetaSetMut("kafka_key", string(r.Key))
	m.MetaSetMut("kafka_topic", r.Topic)
	m.MetaSetMut("kafka_partition", int(r.Partition))
	m.MetaSetMut("kafka_offset", int(r.Offset))
	m.MetaSetMut("kafka_timestamp_unix", r.Timestamp.Unix())
	m.MetaSetMut("kafka_timestamp_ms", r.Timestamp.UnixMilli())
	m.MetaSetMut("kafka_tombstone_message", r.Value == nil)
	for _, h := range r.Headers {
		m.MetaSetMut(h.Key, string(h.Value))
	}
	return m
}

// parseBytes reads a size such as 50MiB, 1MB, 4096.
func parseBytes(s string) (int32, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if len(s) > len(u.suffix) && s[len(s)-len(u.suffix):] == u.suffix {
			s, mult = s[:len(s)-len(u.suffix)], u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n*mult > 1<<31-1 {
		return 0, fmt.Errorf("%q is not a size between 1 byte and 2 GiB", s)
	}
	return int32(n * mult), nil
}
