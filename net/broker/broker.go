package broker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/controller"
	"github.com/samsa-broker/samsa/coordinator/group"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/coordinator/share"
	"github.com/samsa-broker/samsa/coordinator/txn"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/net/brokermetrics"
	"github.com/samsa-broker/samsa/net/kafka"
	"github.com/samsa-broker/samsa/replication"
)

// Deps are what the broker is built over, by the node's wiring (net/node).
type Deps struct {
	// Engine holds the partition logs.
	Engine *engine.Manager
	// Metadata is the published image: the metadata follower. New reads it once;
	// later images reach the broker through MetadataChanged.
	Metadata MetadataView
	// Controller takes every metadata change (admin requests, auto-created topics,
	// producer-id blocks, ISR changes).
	Controller controller.ControllerChannel
	// ControllerID returns the active controller's node id as last learned (-1:
	// unknown); nil: always unknown. Metadata and DescribeCluster name it.
	ControllerID func() int32
	// Fetch returns the client of replica fetcher index of a source broker, for this
	// node's follower replicas (net/peer's Client.FetchClient); nil: follower replicas
	// stay idle (a single node has none).
	Fetch func(source int32, index int) replication.FetchClient
	// Peer sends req to broker's inter-broker listener and returns its answer
	// (net/peer's Client.Request to peer.Broker(broker)): the transaction
	// coordinator's WriteTxnMarkers to the leaders of other brokers' partitions, a
	// partition leader's transaction verification (AddPartitionsToTxn v4 VerifyOnly)
	// at the transaction coordinator of another broker, a share partition's state at
	// another broker's share coordinator. It may block until ctx ends; the broker
	// calls it from goroutines of its own. nil: a single node (everything is local);
	// on a cluster, markers for and verifications at other brokers then fail and are
	// retried (markers) or answered NOT_ENOUGH_REPLICAS (produce).
	Peer func(ctx context.Context, broker int32, req kmsg.Request) (kmsg.Response, error)
	// Unreachable reports whether this node lost broker id, and since when (net/peer's
	// Client.Unreachable); the adapter's Metadata answers wait for such a leader's
	// fence (kafka.Deps.Unreachable). nil: no broker is ever lost.
	Unreachable func(id int32) (since time.Time, ok bool)
}

// MetadataView is the broker's published metadata: coordinator/controller's
// MetadataFollower. Image returns the published image (never nil) and its metadata
// offset.
type MetadataView interface {
	Image() (uint64, *metadata.Image)
}

// Broker is one node's broker, assembled: the protocol adapter (Kafka) over the
// replica manager, the coordinators and the rest of what its handlers call (see the
// package doc). MetadataChanged, which the wiring calls for every published image in
// offset order, keeps all of it in step with the image.
//
// adminMu serializes changes of replicas and logs (MetadataChanged's delta, start-up's
// removal of stray logs) so that a log is never re-created for a topic being
// deleted.
type Broker struct {
	cfg    kafka.Config
	log    *slog.Logger
	eng    *engine.Manager
	source MetadataView // the published image (Deps.Metadata)
	meta   *kafka.View  // the image as far as MetadataChanged processed it: what handlers read
	ctrl   controller.ControllerChannel
	fetch  func(source int32, index int) replication.FetchClient                            // Deps.Fetch
	peer   func(ctx context.Context, broker int32, req kmsg.Request) (kmsg.Response, error) // Deps.Peer

	kafka atomic.Pointer[kafka.Broker] // the protocol adapter (set once New has built it: the replica manager's hooks may run before)
	repl  *replication.Manager         // the replica manager: leadership, ISR, HW (replicas.go)
	feat  featureState                 // the feature levels the node acts on (features.go)

	adminMu sync.Mutex

	groups *groupState     // the group coordinator (groups.go)
	txns   *txnState       // the transaction coordinator (txns.go)
	shares *shareState     // share groups' share partitions and share coordinator (shares.go)
	topics *internalTopics // the creation of topics (internal_topics.go)
	tiered *tieredState    // tiered storage, nil when off (tiered.go)
	pids   pidBlock        // producer ids (producer_ids.go)

	ctx    context.Context // ends at Close: forwarded requests give up
	cancel context.CancelFunc
	wg     sync.WaitGroup // goroutines of forwarded requests (async)
	// asyncMu guards asyncDone, set by Close before it waits for wg.
	asyncMu   sync.Mutex
	asyncDone bool
	closed    atomic.Bool
}

// New returns a Broker over deps. deps.Metadata's image must be at least as new as
// every image this node applied before it last stopped (the wiring waits for the
// metadata follower to catch up with what was committed): logs of partitions that
// image does not place here are deleted. It builds every piece of state the handlers
// use (nothing is created on first request): the replica manager takes this node's
// replicas of the image (their logs created or reconfigured), the group coordinator
// starts and loads the __consumer_offsets partitions this node leads, and the
// transaction coordinator those of __transaction_state. log may be nil.
func New(cfg kafka.Config, deps Deps, log *slog.Logger) (*Broker, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if deps.Engine == nil || deps.Metadata == nil || deps.Controller == nil {
		return nil, errors.New("broker: New needs an engine, a metadata view and a controller channel")
	}
	if cfg.Static == nil {
		cfg.Static = map[string]string{}
	}
	b := &Broker{cfg: cfg, log: log, eng: deps.Engine, source: deps.Metadata, meta: &kafka.View{}, ctrl: deps.Controller,
		fetch: deps.Fetch, peer: deps.Peer}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.topics = newInternalTopics(b)
	off, im := b.source.Image()
	if err := b.removeStrayLogs(im); err != nil {
		return nil, err
	}
	b.meta.Publish(off, im)
	b.initFeatures(off, im)
	if err := b.startReplication(); err != nil {
		return nil, err
	}
	tiered, err := b.startTiered(im)
	if err != nil {
		b.repl.Close()
		return nil, err
	}
	b.tiered = tiered
	b.groups = newGroupState(b, im)
	b.txns = newTxnState(b, im)
	b.shares = newShareState(b, im)
	controllerID := deps.ControllerID
	if controllerID == nil {
		controllerID = func() int32 { return -1 }
	}
	topicMetrics := brokermetrics.NewTopics(cfg.Registerer)
	kb, err := kafka.New(cfg, kafka.Deps{View: b.meta, Engine: b.eng, Replicas: b.repl, Controller: forwarder{b}, ControllerID: controllerID,
		Topics: b.topics, Coordinators: coordinators{b}, Markers: b.txns.writer, Shares: b.shares.mgr, ShareReader: shareReader{b.shares}, ShareStates: shareStates{b.shares},
		TxnVerifier: txnVerifier{b}, ProducerIDs: b.producerID, FileHeadroom: b.headroom, Features: b.features(), TopicMetrics: topicMetrics, Async: b.async, Unreachable: deps.Unreachable}, log)
	if err != nil {
		return nil, err
	}
	b.kafka.Store(kb)
	// The cluster's state as this broker sees it, read at scrape time (net/brokermetrics).
	src := brokermetrics.Sources{NodeID: cfg.NodeID, Image: b.meta.Load, Replicas: b.repl, ControllerID: controllerID,
		Groups: b.groups.coordinator, Engine: b.eng, Topics: topicMetrics}
	if v, ok := b.source.(interface{ HighWatermark() uint64 }); ok {
		src.MetadataHighWatermark = v.HighWatermark // the metadata follower's: the last committed offset + 1
	}
	brokermetrics.RegisterCluster(cfg.Registerer, src)
	return b, nil
}

// Kafka is the protocol adapter, the transport.Handler of the broker listeners.
func (b *Broker) Kafka() *kafka.Broker { return b.kafka.Load() }

// Image returns the image the broker answers from (the published image as far as
// MetadataChanged has processed it) and its metadata offset.
func (b *Broker) Image() (uint64, *metadata.Image) { return b.meta.Load() }

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
//     loaded again, at that coordinator epoch), the share coordinator with
//     __share_group_state's;
//  4. im becomes the image handlers answer from, and requests waiting for it wake.
//
// It does not block on the network.
func (b *Broker) MetadataChanged(offset uint64, _, im *metadata.Image) {
	if b.closed.Load() {
		return
	}
	curOff, cur := b.meta.Load()
	if offset <= curOff && cur != nil {
		return
	}
	b.adminMu.Lock()
	d := controller.ReplicaDelta(b.cfg.NodeID, cur, im, b.cfg.Static)
	d.Offset = offset
	if err := b.repl.Apply(d); err != nil {
		b.log.Error("applying the metadata to the replicas", "offset", offset, "err", err)
	}
	b.adminMu.Unlock()
	b.followFeatures(offset, im)
	b.groups.follow(im)
	b.txns.follow(im)
	b.shares.follow(im)
	b.meta.Publish(offset, im)
}

// Close stops the broker's own background work: forwarded requests still waiting for
// the controller are answered (NOT_CONTROLLER), the coordinators stop (parked joins
// answer NOT_COORDINATOR, timers stop). Call it after the transport has drained and
// before closing the engine. Idempotent.
func (b *Broker) Close() {
	if b.closed.Swap(true) {
		return
	}
	b.cancel()
	b.tiered.close()
	b.txns.close()
	b.shares.close()
	b.asyncMu.Lock()
	b.asyncDone = true
	b.asyncMu.Unlock()
	b.wg.Wait()
	b.groups.close()
}

// StartDataPath creates the adapter's data-path state now rather than on the first
// data request. CloseDataPath undoes it.
func (b *Broker) StartDataPath() { b.Kafka().StartDataPath() }

// CloseDataPath expires pending long-poll fetches (they are answered with what the
// logs hold) and closes the replica manager (its fetchers and timers; waiting
// acks=all produces answer REQUEST_TIMED_OUT). Call it after the transport has
// drained and before closing the engine. Idempotent; a later request recreates the
// fetch state (the replica manager keeps serving, without goroutines).
func (b *Broker) CloseDataPath() {
	b.Kafka().CloseDataPath()
	b.repl.Close()
}

// async runs fn on a goroutine the broker waits for in Close; fn's ctx ends when the
// broker closes. Once Close has begun waiting, fn does not run (an Add racing the
// WaitGroup's Wait is a data race).
func (b *Broker) async(fn func(ctx context.Context)) {
	b.asyncMu.Lock()
	if b.asyncDone {
		b.asyncMu.Unlock()
		return
	}
	b.wg.Add(1)
	b.asyncMu.Unlock()
	go func() {
		defer b.wg.Done()
		fn(b.ctx)
	}()
}

// coordinators is kafka.Coordinators over the hosts.
type coordinators struct{ b *Broker }

func (c coordinators) Group() *group.Coordinator { return c.b.groups.coordinator() }
func (c coordinators) Txn() *txn.Coordinator     { return c.b.txns.coordinator() }
func (c coordinators) ShareStore() *share.Store  { return c.b.shares.store() }

// layers returns the config layers for topic (empty: broker keys only).
func (b *Broker) layers(im *metadata.Image, topic string) configs.Layers {
	return configs.ForImage(im, b.cfg.NodeID, b.cfg.Static, topic)
}

// groupLayers is layers for group: its own configs (GROUP resources) over the broker's.
func (b *Broker) groupLayers(im *metadata.Image, group string) configs.Layers {
	return configs.ForGroup(im, b.cfg.NodeID, b.cfg.Static, group)
}

// brokerValue resolves a broker key: dynamic node, dynamic default, static, default.
func (b *Broker) brokerValue(im *metadata.Image, key string) string {
	l := b.layers(im, "")
	return l.BrokerValue(key)
}
