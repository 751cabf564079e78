package kafka

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/net/transport"
)

// Config is the broker's identity and the request-level settings handlers consult.
type Config struct {
	NodeID    int32
	ClusterID string
	// Host and Port are advertised in Metadata and DescribeCluster.
	Host string
	Port int32
	Rack *string

	// Static holds the broker keys set explicitly (server.properties, environment,
	// flags), canonical values, Kafka's names. DescribeConfigs reports them as
	// STATIC_BROKER_CONFIG; topic defaults (log.retention.ms, ...) come from them. The
	// keys auto.create.topics.enable, num.partitions and default.replication.factor are
	// read from here too (and from their dynamic overrides).
	Static map[string]string

	// Derived holds values the launcher computed for keys not set explicitly (log.dirs
	// from the data directory, the bound listener, ...): DescribeConfigs reports them
	// in place of Kafka's default, as DEFAULT_CONFIG.
	Derived map[string]string

	// Registerer receives the broker's metrics; nil keeps them unregistered.
	Registerer prometheus.Registerer
}

// Broker serves the Kafka protocol on a transport: it implements transport.Handler and
// transport.ConnObserver. Serve runs on connection read goroutines, concurrently for
// different connections; everything a Broker holds is safe for that.
//
// Metadata changes (create/delete topics, partitions, configs) are serialized by
// adminMu so that a metadata append and the matching engine change happen together.
type Broker struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	eng     *engine.Manager
	meta    *metadata.Store

	apiVersions []apiKeyEntry // the table, as ApiVersions advertises it
	panics      atomic.Int64  // handler panics recovered (bugs)

	adminMu sync.Mutex

	offline atomic.Pointer[offlineSnapshot] // cache of failed log dirs (03_metadata.go)

	groups   groupsHolder             // the group coordinator, started on first use (10_find_coordinator.go)
	dataPath atomic.Pointer[dataPath] // data-path state, created on first use (partition_state.go)

	// maxPartitionsPerOp bounds the partitions one request may create (Kafka's
	// controller refuses more than 10,000 records per user operation).
	maxPartitionsPerOp int32
}

// defaultMaxPartitionsPerOp is Kafka's MAX_RECORDS_PER_USER_OP.
const defaultMaxPartitionsPerOp = 10000

var (
	_ transport.Handler      = (*Broker)(nil)
	_ transport.ConnObserver = (*Broker)(nil)
)

// New returns a Broker serving eng's logs and meta's topics. It registers the node (its
// advertised address) in the metadata log when that changed, and reconciles the two:
// partitions the metadata has and the engine lacks get their logs created; logs of
// topics the metadata no longer has (deleted while the broker was down) are deleted;
// live logs get their topic's configuration. log may be nil.
func New(cfg Config, eng *engine.Manager, meta *metadata.Store, log *slog.Logger) (*Broker, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if eng == nil || meta == nil {
		return nil, errors.New("kafka: New needs an engine and a metadata store")
	}
	if cfg.Static == nil {
		cfg.Static = map[string]string{}
	}
	b := &Broker{cfg: cfg, log: log, eng: eng, meta: meta, maxPartitionsPerOp: defaultMaxPartitionsPerOp}
	b.metrics = newMetrics(cfg.Registerer)
	b.apiVersions = buildApiVersions()
	if err := b.reconcile(); err != nil {
		return nil, err
	}
	return b, nil
}

// NodeID is this broker's node id.
func (b *Broker) NodeID() int32 { return b.cfg.NodeID }

// Engine is the broker's storage.
func (b *Broker) Engine() *engine.Manager { return b.eng }

// Metadata is the broker's metadata store.
func (b *Broker) Metadata() *metadata.Store { return b.meta }

// Logger is the broker's logger.
func (b *Broker) Logger() *slog.Logger { return b.log }

// reconcile makes the engine's logs match the metadata image.
func (b *Broker) reconcile() error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	im := b.meta.Image()
	self := metadata.BrokerImage{ID: b.cfg.NodeID, Host: b.cfg.Host, Port: b.cfg.Port, Rack: b.cfg.Rack}
	if cur, ok := im.Broker(b.cfg.NodeID); !ok || cur.Host != self.Host || cur.Port != self.Port || !sameRack(cur.Rack, self.Rack) {
		rec := &metadata.RegisterBrokerRecord{ID: self.ID, Epoch: im.MaxBrokerEpoch() + 1, Rack: self.Rack,
			Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: self.Host, Port: self.Port, SecurityProtocol: metadata.ProtocolPlaintext}}}
		if err := b.meta.Append(rec); err != nil {
			return fmt.Errorf("kafka: registering broker %d: %w", self.ID, err)
		}
		im = b.meta.Image()
	}
	for _, l := range b.eng.Logs() {
		tp := l.TopicPartition()
		t, ok := im.Topic(tp.Topic)
		if !ok || int(tp.Partition) >= len(t.Partitions) {
			b.log.Warn("deleting log of a partition the metadata does not have", "partition", tp.String())
			if err := b.eng.DeleteLog(tp); err != nil && !errors.Is(err, engine.ErrNoLog) {
				return fmt.Errorf("kafka: deleting stray log %s: %w", tp, err)
			}
		}
	}
	for _, t := range im.Topics() {
		cfg := b.topicLogConfig(im, t.Name)
		for p := range t.Partitions {
			tp := engine.TopicPartition{Topic: t.Name, Partition: int32(p)}
			if l := b.eng.Log(tp); l != nil {
				l.SetConfig(cfg)
				continue
			}
			if _, err := b.eng.CreateLog(tp, cfg); err != nil {
				b.log.Error("creating log", "partition", tp.String(), "err", err)
			}
		}
	}
	return nil
}

func sameRack(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// layers returns the config layers for topic (empty: broker keys only).
func (b *Broker) layers(im *metadata.Image, topic string) configs.Layers {
	return configs.ForImage(im, b.cfg.NodeID, b.cfg.Static, topic)
}

// topicLogConfig is the engine configuration of topic in image im.
func (b *Broker) topicLogConfig(im *metadata.Image, topic string) engine.LogConfig {
	l := b.layers(im, topic)
	return l.LogConfig()
}

// brokerValue resolves a broker key: dynamic node, dynamic default, static, default.
func (b *Broker) brokerValue(im *metadata.Image, key string) string {
	l := b.layers(im, "")
	return l.BrokerValue(key)
}

func (b *Broker) brokerInt(im *metadata.Image, key string) int64 {
	n, _ := strconv.ParseInt(b.brokerValue(im, key), 10, 64)
	return n
}
