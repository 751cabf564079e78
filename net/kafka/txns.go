package kafka

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/group"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/coordinator/txn"
)

// txnState is the broker's transaction coordinator (coordinator/txn) and the
// __transaction_state partitions it serves: exactly those this node leads in the
// published image, each at the coordinator epoch of its leader epoch. Built with the
// broker, beside the group coordinator; follow (from MetadataChanged, after the replica
// manager applied the change) loads a partition when this node becomes its leader, or
// leads it at a newer leader epoch, and unloads it when it stops leading it.
//
// The coordinator writes through the replicated partition (txn.ReplicatedLog: the
// leader's append, acks=all) and sends its markers through txn.Markers: to this
// node's MarkerWriter for the partitions it leads, to the other leaders over
// Deps.Peer (WriteTxnMarkers on their inter-broker listener). Producer ids come from
// the broker's block (the active controller's AllocateProducerIds).
//
// As for groups, the coordinator maps an id to a partition by the topic's partition
// count, transaction.state.log.num.partitions until the topic exists; should the
// topic appear with another count, the coordinator is rebuilt with it before any
// partition is loaded.
//
// The keys read (Kafka's names and defaults): transaction.state.log.num.partitions
// (50), transaction.state.log.replication.factor (3, capped at the live brokers),
// transaction.state.log.min.isr (2, capped at the replication factor),
// transaction.state.log.segment.bytes (104857600), transaction.max.timeout.ms
// (900000), transactional.id.expiration.ms (604800000),
// transaction.abort.timed.out.transaction.cleanup.interval.ms (10000),
// transaction.remove.expired.transaction.cleanup.interval.ms (3600000), and Samsa's
// samsa.transaction.version (0): the finalized transaction.version feature, which
// every node of a cluster must set alike (docs/CLUSTER.md).
type txnState struct {
	b       *Broker
	log     txn.Log
	writer  *txn.MarkerWriter
	markers *txn.Markers

	// version is the finalized transaction.version (samsa.transaction.version, read
	// at start-up): the coordinator's TransactionVersion and what ApiVersions reports.
	version int16

	followMu sync.Mutex      // serializes follow (MetadataChanged's and load retries')
	last     *metadata.Image // the image follow last followed (under followMu)

	mu struct {
		sync.Mutex
		c       *txn.Coordinator
		topicID metadata.UUID   // the __transaction_state topic the loaded set belongs to
		loaded  map[int32]int32 // partitions loaded or loading, at their leader epoch
		closed  bool
	}
}

// transactionVersionKey is the node key of the finalized transaction.version.
const transactionVersionKey = "samsa.transaction.version"

// markerTimeout bounds a WriteTxnMarkers append on this node (Kafka's
// request.timeout.ms for the marker requests) and a marker request to another broker.
const markerTimeout = 30 * time.Second

func newTxnState(b *Broker, im *metadata.Image) *txnState {
	s := &txnState{b: b, log: txn.NewReplicatedLog(b.repl, 0), writer: txn.NewMarkerWriter(b.repl, markerTimeout, nil)}
	s.writer.OnOffsetsMarker = b.completeTxnOffsets // 28_txn_offset_commit.go
	s.markers = &txn.Markers{Self: b.cfg.NodeID, Image: b.meta.Image, Local: s.writer, Remote: b.sendMarkers}
	s.mu.loaded = map[int32]int32{}
	s.version = int16(min(max(b.groupInt(im, transactionVersionKey, 2), 0), 2))
	n := int32(b.groupInt(im, "transaction.state.log.num.partitions", 50))
	if t, ok := im.Topic(txn.StateTopic); ok {
		n = int32(len(t.Partitions))
	}
	s.mu.c = s.newCoordinator(im, n)
	s.follow(im)
	return s
}

// newCoordinator builds a coordinator for n partitions with the broker's keys.
func (s *txnState) newCoordinator(im *metadata.Image, n int32) *txn.Coordinator {
	b := s.b
	ms := func(key string, def int64) time.Duration {
		return time.Duration(b.groupInt(im, key, def)) * time.Millisecond
	}
	offsets := int32(b.groupInt(im, "offsets.topic.num.partitions", 50))
	if t, ok := im.Topic(group.OffsetsTopic); ok {
		offsets = int32(len(t.Partitions))
	}
	return txn.New(txn.Config{
		NumPartitions:      n,
		OffsetsPartitions:  offsets,
		MaxTimeout:         ms("transaction.max.timeout.ms", 900000),
		IDExpiration:       ms("transactional.id.expiration.ms", 604800000),
		AbortInterval:      ms("transaction.abort.timed.out.transaction.cleanup.interval.ms", 10000),
		ExpirationInterval: ms("transaction.remove.expired.transaction.cleanup.interval.ms", 3600000),
		TransactionVersion: s.version,
		Logger:             b.log.With("component", "transactions"),
	}, s.log, s.markers, txn.ProducerIDFunc(func() (int64, error) { return b.data().pids.get(b) }))
}

// coordinator returns the coordinator (nil after close).
func (s *txnState) coordinator() *txn.Coordinator {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil
	}
	return s.mu.c
}

// follow loads the partitions this node now leads (or leads at a newer epoch) and
// unloads the ones it no longer leads.
func (s *txnState) follow(im *metadata.Image) {
	s.followMu.Lock()
	defer s.followMu.Unlock()
	s.last = im
	s.followLocked(im)
}

func (s *txnState) refollow() {
	s.followMu.Lock()
	defer s.followMu.Unlock()
	if s.last != nil {
		s.followLocked(s.last)
	}
}

type txnLoad struct{ p, epoch int32 }

// followLocked is follow's body. Caller holds followMu.
func (s *txnState) followLocked(im *metadata.Image) {
	self := s.b.cfg.NodeID
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return
	}
	c := s.mu.c
	t, ok := im.Topic(txn.StateTopic)
	var unload []int32
	var load []txnLoad
	if !ok || t.ID != s.mu.topicID {
		for p := range s.mu.loaded {
			unload = append(unload, p)
		}
		clear(s.mu.loaded)
	}
	if ok {
		s.mu.topicID = t.ID
		if n := int32(len(t.Partitions)); n != c.NumPartitions() && len(s.mu.loaded) == 0 {
			old := c
			c = s.newCoordinator(im, n)
			s.mu.c = c
			defer old.Close()
		}
		for i := range t.Partitions {
			p, pi := int32(i), &t.Partitions[i]
			epoch, loaded := s.mu.loaded[p]
			leads := pi.Leader == self
			switch {
			case leads && (!loaded || epoch < pi.LeaderEpoch):
				s.mu.loaded[p] = pi.LeaderEpoch
				load = append(load, txnLoad{p, pi.LeaderEpoch})
			case !leads && loaded:
				delete(s.mu.loaded, p)
				unload = append(unload, p)
			}
		}
	}
	s.mu.Unlock()
	for _, p := range unload {
		c.UnloadPartition(p, -1)
	}
	for _, l := range load {
		c.StartLoading(l.p, l.epoch, func(err error) {
			if err != nil {
				s.loadFailed(c, l, err)
			}
		})
	}
}

// loadFailed forgets that l.p is loaded at l.epoch, so that it is loaded again after
// loadRetry if this node still leads it.
func (s *txnState) loadFailed(c *txn.Coordinator, l txnLoad, err error) {
	s.b.log.Warn("loading __transaction_state partition failed; retrying", "partition", l.p, "in", loadRetry, "err", err)
	s.mu.Lock()
	if s.mu.c == c && s.mu.loaded[l.p] == l.epoch {
		delete(s.mu.loaded, l.p)
	}
	closed := s.mu.closed
	s.mu.Unlock()
	if closed {
		return
	}
	s.b.async(func(ctx context.Context) {
		t := time.NewTimer(loadRetry)
		defer t.Stop()
		select {
		case <-t.C:
			s.refollow()
		case <-ctx.Done():
		}
	})
}

func (s *txnState) close() {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return
	}
	s.mu.closed = true
	c := s.mu.c
	s.mu.Unlock()
	c.Close()
}

// txnCoordinatorOr returns the transaction coordinator, or answers code via fail
// (NOT_COORDINATOR once the broker is closing).
func (b *Broker) txnCoordinatorOr(fail func(code int16)) *txn.Coordinator {
	c := b.txns.coordinator()
	if c == nil {
		fail(kerr.NotCoordinator.Code)
	}
	return c
}

// sendMarkers is txn.Markers' Remote: the request goes to broker's inter-broker
// listener over Deps.Peer, from a goroutine of its own.
func (b *Broker) sendMarkers(broker int32, req *kmsg.WriteTxnMarkersRequest, done func(*kmsg.WriteTxnMarkersResponse, error)) {
	if b.peer == nil {
		done(nil, errNoPeer)
		return
	}
	b.async(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, markerTimeout)
		defer cancel()
		resp, err := b.peer(ctx, broker, req)
		if err != nil {
			done(nil, err)
			return
		}
		wr, ok := resp.(*kmsg.WriteTxnMarkersResponse)
		if !ok {
			done(nil, errors.New("kafka: WriteTxnMarkers answered by another kind"))
			return
		}
		done(wr, nil)
	})
}

// errNoPeer: the wiring gave the broker no channel to the other brokers (Deps.Peer).
var errNoPeer = errors.New("kafka: no channel to the other brokers (Deps.Peer is nil)")

// findTxnCoordinator returns the broker coordinating transactional id key: the
// leader of its __transaction_state partition in im, or the error code.
func (b *Broker) findTxnCoordinator(im *metadata.Image, key string) (int32, string, int32, int16) {
	if key == "" {
		return -1, "", -1, kerr.InvalidRequest.Code
	}
	t, ok := im.Topic(txn.StateTopic)
	if !ok || len(t.Partitions) == 0 {
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code
	}
	leader := t.Partitions[txn.PartitionFor(key, int32(len(t.Partitions)))].Leader
	bi, ok := im.Broker(leader)
	if leader < 0 || !ok || bi.Fenced {
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code
	}
	host, port := b.endpoint(bi)
	return leader, host, port, 0
}

// txnCoordinatorOf returns the broker leading id's __transaction_state partition in
// the image (-1 when there is none).
func (b *Broker) txnCoordinatorOf(id string) int32 {
	leader, _, _, code := b.findTxnCoordinator(b.meta.Image(), id)
	if code != 0 {
		return -1
	}
	return leader
}

// ensureTxnTopic returns once the image has __transaction_state, creating it through
// the active controller if it has not (see txnState for the keys). It blocks: call it
// off the read path.
func (b *Broker) ensureTxnTopic(ctx context.Context) error {
	for {
		im := b.meta.Image()
		if _, ok := im.Topic(txn.StateTopic); ok {
			return nil
		}
		o := &b.txnTopic
		o.mu.Lock()
		if ch := o.creating; ch != nil {
			o.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		ch := make(chan struct{})
		o.creating = ch
		o.mu.Unlock()

		code := b.createTopics(ctx, txnTopicRequest(b, im))[txn.StateTopic]

		o.mu.Lock()
		o.creating = nil
		close(ch)
		o.mu.Unlock()
		if code != 0 {
			return kerr.ErrorForCode(code)
		}
		if _, ok := b.meta.Image().Topic(txn.StateTopic); ok {
			return nil
		}
		return kerr.CoordinatorNotAvailable
	}
}

func txnTopicRequest(b *Broker, im *metadata.Image) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(defaultForwardTimeout.Milliseconds())
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = txn.StateTopic
	rt.NumPartitions = int32(b.groupInt(im, "transaction.state.log.num.partitions", 50))
	rf := b.groupInt(im, "transaction.state.log.replication.factor", 3)
	if live := int64(len(im.UnfencedBrokers())); rf > live {
		rf = live // as for __consumer_offsets: capped at the brokers there are
	}
	rf = max(rf, 1)
	rt.ReplicationFactor = int16(rf)
	minISR := min(max(b.groupInt(im, "transaction.state.log.min.isr", 2), 1), rf)
	for _, kv := range [][2]string{
		{"cleanup.policy", "compact"},
		{"segment.bytes", strconv.FormatInt(b.groupInt(im, "transaction.state.log.segment.bytes", 104857600), 10)},
		{"min.insync.replicas", strconv.FormatInt(minISR, 10)},
		{"retention.ms", "-1"},
		{"retention.bytes", "-1"},
		{"compression.type", "producer"},
	} {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = kv[0], stringPtr(kv[1])
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	return req
}
