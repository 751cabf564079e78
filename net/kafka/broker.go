package kafka

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/controller"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/net/brokermetrics"
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

// Deps are the broker's collaborators, built by the node's wiring (net/node).
type Deps struct {
	// Engine holds the partition logs.
	Engine *engine.Manager
	// Metadata is the published image the broker answers from.
	Metadata MetadataView
	// Controller takes every metadata change (admin requests, auto-created topics,
	// producer-id blocks).
	Controller ControllerChannel
	// ControllerID returns the active controller's node id as last learned (-1:
	// unknown); nil: always unknown. Metadata and DescribeCluster name it.
	ControllerID func() int32
	// Fetch returns the client of replica fetcher index of a source broker, for this
	// node's follower replicas (net/peer's Client.FetchClient); nil: follower replicas
	// stay idle (a single node has none).
	Fetch func(source int32, index int) replication.FetchClient
	// Peer sends req to broker's inter-broker listener and returns its answer
	// (net/peer's Client.Request to peer.Broker(broker)): the transaction
	// coordinator's WriteTxnMarkers to the leaders of other brokers' partitions and a
	// partition leader's transaction verification (AddPartitionsToTxn v4 VerifyOnly)
	// at the transaction coordinator of another broker. It may block until ctx ends;
	// the broker calls it from goroutines of its own. nil: a single node (everything
	// is local); on a cluster, markers for and verifications at other brokers then
	// fail and are retried (markers) or answered NOT_ENOUGH_REPLICAS (produce).
	Peer func(ctx context.Context, broker int32, req kmsg.Request) (kmsg.Response, error)
}

// Broker serves the Kafka protocol on a transport: it implements transport.Handler and
// transport.ConnObserver. Serve runs on connection read goroutines, concurrently for
// different connections; everything a Broker holds is safe for that.
//
// The broker reads metadata from its published image (Deps.Metadata) and writes none:
// every change goes to the active controller (Deps.Controller), and the broker sees it
// when its image does. MetadataChanged, which the wiring calls for every published
// image in offset order, keeps the replica manager (and through it the engine's logs),
// the group coordinator and waiting requests in step with the image.
//
// adminMu serializes changes of replicas and logs (MetadataChanged's delta, start-up's
// removal of stray logs) so that a log is never re-created for a topic being
// deleted.
type Broker struct {
	cfg          Config
	log          *slog.Logger
	metrics      *metrics
	eng          *engine.Manager
	source       MetadataView // the published image (Deps.Metadata)
	meta         *brokerView  // the image as far as MetadataChanged processed it: what handlers read
	ctrl         ControllerChannel
	controllerID func() int32
	fetch        func(source int32, index int) replication.FetchClient                            // Deps.Fetch
	peer         func(ctx context.Context, broker int32, req kmsg.Request) (kmsg.Response, error) // Deps.Peer

	apiVersions []apiKeyEntry // the table; ApiVersions advertises it less what the feature levels turn off (features.go)
	feat        featureState  // the feature levels the broker acts on (features.go)
	panics      atomic.Int64  // handler panics recovered (bugs)

	adminMu sync.Mutex

	dirs       *dirHealth       // failed log directories, cached (03_metadata.go reads it)
	mdCache    *metadataCache   // encoded all-topics Metadata answers (03_metadata_cache.go); nil: off
	groups     *groupState      // the group coordinator (groups.go)
	txns       *txnState        // the transaction coordinator (txns.go)
	shares     *shareState      // share groups' share partitions and share coordinator (shares.go)
	streams    streamsBroker    // streams groups: served or not, internal topics being created (88_streams_group_heartbeat.go)
	txnProd    txnProduceQueues // transactional produce requests in verification (00_produce.go)
	published  notifier         // closed and renewed by MetadataChanged
	offsets    topicGate        // the creation of __consumer_offsets
	txnTopic   topicGate        // the creation of __transaction_state
	shareTopic topicGate        // the creation of __share_group_state

	quotas   *quota.Manager           // client quotas (net/quota; quotas.go)
	dataPath atomic.Pointer[dataPath] // data-path state, created on first use (partition_state.go)
	repl     *replication.Manager     // the replica manager: leadership, ISR, HW (partition_state.go)

	ctx    context.Context // ends at Close: forwarded requests give up
	cancel context.CancelFunc
	wg     sync.WaitGroup // goroutines of forwarded requests (async)
	// asyncMu guards asyncDone, set by Close before it waits for wg.
	asyncMu   sync.Mutex
	asyncDone bool
	closed    atomic.Bool
}

var (
	_ transport.Handler      = (*Broker)(nil)
	_ transport.ConnObserver = (*Broker)(nil)
)

// NewBroker returns a Broker over deps. deps.Metadata's image must be at least as new
// as every image this node applied before it last stopped (the wiring waits for the
// metadata follower to catch up with what was committed): logs of partitions that
// image does not place here are deleted. It builds every piece of state the handlers
// use (nothing is created on first request): the replica manager takes this node's
// replicas of the image (their logs created or reconfigured), the group coordinator
// starts and loads the __consumer_offsets partitions this node leads, and the
// transaction coordinator those of __transaction_state. log may be nil.
func NewBroker(cfg Config, deps Deps, log *slog.Logger) (*Broker, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if deps.Engine == nil || deps.Metadata == nil || deps.Controller == nil {
		return nil, errors.New("kafka: NewBroker needs an engine, a metadata view and a controller channel")
	}
	if cfg.Static == nil {
		cfg.Static = map[string]string{}
	}
	if cfg.Listener == "" {
		cfg.Listener = "PLAINTEXT"
	}
	b := &Broker{cfg: cfg, log: log, eng: deps.Engine, source: deps.Metadata, meta: &brokerView{}, ctrl: deps.Controller,
		controllerID: deps.ControllerID, fetch: deps.Fetch, peer: deps.Peer}
	if b.controllerID == nil {
		b.controllerID = func() int32 { return -1 }
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.metrics = newMetrics(cfg.Registerer)
	b.quotas = quota.New(cfg.Static, cfg.Registerer)
	b.apiVersions = buildApiVersions()
	b.dirs = newDirHealth(b.eng)
	b.mdCache = newMetadataCache()
	off, im := b.source.Image()
	if err := b.removeStrayLogs(im); err != nil {
		return nil, err
	}
	b.meta.store(off, im)
	b.initFeatures(off, im)
	if err := b.startReplication(); err != nil {
		return nil, err
	}
	b.groups = newGroupState(b, im)
	b.txns = newTxnState(b, im)
	b.shares = newShareState(b, im)
	// The cluster's state as this broker sees it, read at scrape time (net/brokermetrics).
	src := brokermetrics.Sources{NodeID: cfg.NodeID, Image: b.Image, Replicas: b.repl, ControllerID: b.controllerID,
		Groups: b.groups.coordinator, Engine: b.eng, Topics: b.metrics.topics}
	if v, ok := b.source.(interface{ HighWatermark() uint64 }); ok {
		src.MetadataHighWatermark = v.HighWatermark // the metadata follower's: the last committed offset + 1
	}
	brokermetrics.RegisterCluster(cfg.Registerer, src)
	return b, nil
}

// NodeID is this broker's node id.
func (b *Broker) NodeID() int32 { return b.cfg.NodeID }

// Engine is the broker's storage.
func (b *Broker) Engine() *engine.Manager { return b.eng }

// Image returns the image the broker answers from (the published image as far as
// MetadataChanged has processed it) and its metadata offset.
func (b *Broker) Image() (uint64, *metadata.Image) {
	at := b.meta.load()
	return at.offset, at.im
}

// Logger is the broker's logger.
func (b *Broker) Logger() *slog.Logger { return b.log }

// MetadataChanged tells the broker that its published image moved to im at offset.
// The wiring calls it for every published image, in offset order, on one goroutine at
// a time (old, the image before, is not needed: the broker diffs against the last
// image it processed; an offset not past that one is ignored). In order:
//
//  1. the replica manager applies what the change asks of this node's replicas
//     (controller.ReplicaDelta: become leader, follower, stop; logs created, deleted,
//     reconfigured);
//  2. the feature levels follow im's (features.go: the group types served, the
//     transaction coordinator's transaction.version);
//  3. the group coordinator loads the __consumer_offsets partitions this node now
//     leads and unloads those it no longer leads; the transaction coordinator does the
//     same with __transaction_state's (a partition led at a newer leader epoch is
//     loaded again, at that coordinator epoch);
//  4. im becomes the image handlers answer from, and requests waiting for it wake.
//
// It does not block on the network.
func (b *Broker) MetadataChanged(offset uint64, _, im *metadata.Image) {
	if b.closed.Load() {
		return
	}
	cur := b.meta.load()
	if offset <= cur.offset && cur.im != nil {
		return
	}
	b.adminMu.Lock()
	d := controller.ReplicaDelta(b.cfg.NodeID, cur.im, im, b.cfg.Static)
	d.Offset = offset
	if err := b.repl.Apply(d); err != nil {
		b.log.Error("applying the metadata to the replicas", "offset", offset, "err", err)
	}
	b.adminMu.Unlock()
	b.followFeatures(offset, im)
	b.groups.follow(im)
	b.txns.follow(im)
	b.shares.follow(im)
	b.meta.store(offset, im)
	b.published.broadcast()
}

// Close stops the broker's own background work: forwarded requests still waiting for
// the controller are answered (NOT_CONTROLLER), the group coordinator stops (parked
// joins answer NOT_COORDINATOR, timers stop). Call it after the transport has drained
// and before closing the engine. Idempotent.
func (b *Broker) Close() {
	if b.closed.Swap(true) {
		return
	}
	b.cancel()
	b.txns.close()
	b.shares.close()
	b.asyncMu.Lock()
	b.asyncDone = true
	b.asyncMu.Unlock()
	b.wg.Wait()
	b.groups.close()
}

// layers returns the config layers for topic (empty: broker keys only).
func (b *Broker) layers(im *metadata.Image, topic string) configs.Layers {
	return configs.ForImage(im, b.cfg.NodeID, b.cfg.Static, topic)
}

// groupLayers is layers for group: its own configs (GROUP resources) over the broker's.
func (b *Broker) groupLayers(im *metadata.Image, group string) configs.Layers {
	return configs.ForGroup(im, b.cfg.NodeID, b.cfg.Static, group)
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

// brokerView is the image the broker answers from, with its metadata offset: the
// last one MetadataChanged processed. Safe for concurrent use.
type brokerView struct {
	p atomic.Pointer[imageAt]
}

type imageAt struct {
	offset uint64
	im     *metadata.Image
}

func (v *brokerView) load() imageAt {
	if p := v.p.Load(); p != nil {
		return *p
	}
	return imageAt{}
}

func (v *brokerView) store(offset uint64, im *metadata.Image) { v.p.Store(&imageAt{offset, im}) }

// Image is the image handlers answer from.
func (v *brokerView) Image() *metadata.Image { return v.p.Load().im }

// Offset is Image's metadata offset.
func (v *brokerView) Offset() uint64 { return v.p.Load().offset }

// notifier wakes waiters: wait returns a channel that closes at the next broadcast.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

func (n *notifier) broadcast() {
	n.mu.Lock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
	n.mu.Unlock()
}
