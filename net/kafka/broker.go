package kafka

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/coordinator/share"
	"github.com/samsa-broker/samsa/coordinator/txn"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/net/brokermetrics"
	"github.com/samsa-broker/samsa/net/metadatacache"
	"github.com/samsa-broker/samsa/net/quota"
	"github.com/samsa-broker/samsa/net/transport"
	"github.com/samsa-broker/samsa/replication"
)

// Config is the broker's identity and the request-level settings handlers consult.
type Config struct {
	NodeID    int32
	ClusterID string
	// Host, Port and Rack are this node's advertised client address and rack, as the
	// launcher computed them (the registered endpoints, which Metadata advertises, are
	// the broker lifecycle's).
	Host string
	Port int32
	Rack *string
	// Listener names the registered endpoint that Metadata, FindCoordinator and
	// DescribeCluster advertise for each broker (default "PLAINTEXT"; a broker
	// registered without it is advertised at its first endpoint).
	Listener string

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

// Deps are what the handlers call of the node, built by its assembly (net/broker,
// Kafka's BrokerServer, whose doc draws the seam). The broker builds no state beyond
// its handlers' own.
type Deps struct {
	// View is the image handlers answer from; the node's publisher moves it.
	View *View
	// Engine holds the partition logs.
	Engine *engine.Manager
	// Replicas is the replica manager: the owner of every partition and its log, the
	// leader's appends, followers' fetches.
	Replicas *replication.Manager
	// Controller takes every metadata change (admin requests, producer-id blocks) and
	// waits for this broker's image to show a write.
	Controller Controller
	// ControllerID returns the active controller's node id as last learned (-1:
	// unknown); nil: always unknown. Metadata and DescribeCluster name it.
	ControllerID func() int32
	// Topics creates auto-created and internal topics.
	Topics Topics
	// Coordinators are the coordinators this node hosts now.
	Coordinators Coordinators
	// Markers writes WriteTxnMarkers' markers to this node's leader replicas.
	Markers *txn.MarkerWriter
	// Shares are the share partitions this node leads (KIP-932), ShareReader reads
	// and acquires their records, and ShareStates is their state at any node's share
	// coordinator.
	Shares      *share.Manager
	ShareReader ShareReader
	ShareStates ShareStates
	// TxnVerifier checks or adds a transaction's partitions at its coordinator.
	TxnVerifier TxnVerifier
	// ProducerIDs returns an unused producer id (a block from the active controller);
	// it may block on the controller.
	ProducerIDs func() (int64, error)
	// FileHeadroom says why this node cannot open the logs of the partitions req
	// (CreateTopics, CreatePartitions) would add here, "" when it can (nil: it can).
	FileHeadroom func(req kmsg.Request) string
	// Features are the feature levels at start; SetFeatures moves them.
	Features Features
	// TopicMetrics are the per-topic metrics (Kafka's BrokerTopicStats), shared with
	// the node's cluster metrics.
	TopicMetrics *brokermetrics.Topics
	// Async runs fn on a goroutine of the node's; fn's ctx ends when the node closes,
	// and fn does not run once it is closing.
	Async func(fn func(ctx context.Context))
	// Unreachable reports whether this node lost broker id, and since when: its
	// connections to it were closed by its side or refused, none reached it since
	// (net/peer's Client.Unreachable). Metadata answers naming such a broker leader
	// wait for its fence (03_metadata_hold.go). nil: no broker is ever lost.
	Unreachable func(id int32) (since time.Time, ok bool)
}

// View is the image a broker answers from, with its metadata offset
// (net/metadatacache): the node's publisher writes it, handlers read it.
type View = metadatacache.View

// Partition is a partition resolved for a data-path request (net/metadatacache).
type Partition = metadatacache.Partition

// Broker serves the Kafka protocol on a transport: it implements transport.Handler and
// transport.ConnObserver. Serve runs on connection read goroutines, concurrently for
// different connections; everything a Broker holds is safe for that. It is the
// protocol adapter (Kafka's KafkaApis): framing, decoding, the handlers and their
// answers, over what Deps gives it.
//
// The broker reads metadata from the image of Deps.View and writes none: every change
// goes to the active controller (Deps.Controller), and the broker sees it when its
// image does.
type Broker struct {
	cfg          Config
	log          *slog.Logger
	metrics      *metrics
	eng          *engine.Manager
	meta         *View // the image handlers read (Deps.View)
	ctrl         Controller
	controllerID func() int32
	repl         *replication.Manager // the replica manager (Deps.Replicas)
	topicMgr     Topics
	coord        Coordinators
	markers      *txn.MarkerWriter
	pids         func() (int64, error)
	headroom     func(req kmsg.Request) string                    // Deps.FileHeadroom
	async        func(fn func(ctx context.Context))               // Deps.Async
	unreachable  atomic.Pointer[func(id int32) (time.Time, bool)] // Deps.Unreachable (tests replace it while serving)

	apiVersions []apiKeyEntry               // the table; ApiVersions advertises it less what the feature levels turn off (features_view.go)
	feat        atomic.Pointer[featureView] // the feature levels the broker acts on (features_view.go)
	panics      atomic.Int64                // handler panics recovered (bugs)

	route    metadatacache.Routing    // endpoints and coordinators in answers (net/metadatacache)
	parts    metadatacache.Partitions // partition lookups (net/metadatacache)
	keys     brokerKeys               // broker keys and topic and group configs (keys.go)
	dirs     *metadatacache.DirHealth // failed log directories, cached
	mdCache  *metadataCache           // encoded all-topics Metadata answers (03_metadata_cache.go); nil: off
	shares   *shareState              // share partitions, sessions and states (share_groups.go)
	produce  *producer                // Produce (00_produce.go, produce_txn.go)
	quotas   *quota.Manager           // client quotas (net/quota; quotas.go)
	dataPath atomic.Pointer[dataPath] // data-path state, created on first use (partition_state.go)
}

var (
	_ transport.Handler      = (*Broker)(nil)
	_ transport.ConnObserver = (*Broker)(nil)
)

// New returns a Broker over deps (View holding an image already). It registers the
// request metrics with cfg.Registerer. log may be nil.
func New(cfg Config, deps Deps, log *slog.Logger) (*Broker, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if deps.View == nil || deps.Engine == nil || deps.Replicas == nil || deps.Controller == nil || deps.Topics == nil ||
		deps.Coordinators == nil || deps.TxnVerifier == nil || deps.Async == nil || deps.ProducerIDs == nil {
		return nil, errors.New("kafka: New needs an image view, an engine, a replica manager, a controller, topics, coordinators, a transaction verifier, producer ids and goroutines")
	}
	if cfg.Static == nil {
		cfg.Static = map[string]string{}
	}
	if cfg.Listener == "" {
		cfg.Listener = "PLAINTEXT"
	}
	b := &Broker{cfg: cfg, log: log, eng: deps.Engine, meta: deps.View, ctrl: deps.Controller, controllerID: deps.ControllerID,
		repl: deps.Replicas, topicMgr: deps.Topics, coord: deps.Coordinators, markers: deps.Markers, pids: deps.ProducerIDs,
		headroom: deps.FileHeadroom, async: deps.Async}
	if deps.Unreachable != nil {
		b.unreachable.Store(&deps.Unreachable)
	}
	if b.controllerID == nil {
		b.controllerID = func() int32 { return -1 }
	}
	b.route = metadatacache.Routing{Listener: cfg.Listener, View: deps.View, ControllerID: b.controllerID}
	b.parts = metadatacache.Partitions{NodeID: cfg.NodeID, View: deps.View, Repl: deps.Replicas}
	b.keys = brokerKeys{nodeID: cfg.NodeID, static: cfg.Static, log: log}
	b.metrics = newMetrics(cfg.Registerer, cfg.Derived["listeners"], deps.TopicMetrics)
	b.quotas = quota.New(cfg.Static, cfg.Registerer)
	b.produce = &producer{parts: b.parts, route: b.route, repl: deps.Replicas, quotas: b.quotas, metrics: b.metrics, log: log, verify: deps.TxnVerifier}
	b.apiVersions = buildApiVersions()
	b.dirs = metadatacache.NewDirHealth(b.eng)
	b.mdCache = newMetadataCache()
	b.shares = newShareState(b, deps.Shares, deps.ShareReader, deps.ShareStates)
	b.SetFeatures(deps.Features)
	return b, nil
}

// NodeID is this broker's node id.
func (b *Broker) NodeID() int32 { return b.cfg.NodeID }

// Engine is the broker's storage.
func (b *Broker) Engine() *engine.Manager { return b.eng }

// Image returns the image the broker answers from and its metadata offset.
func (b *Broker) Image() (uint64, *metadata.Image) { return b.meta.Load() }

// Logger is the broker's logger.
func (b *Broker) Logger() *slog.Logger { return b.log }
