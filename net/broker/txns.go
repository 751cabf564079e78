package broker

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/group"
	"github.com/samsa-broker/samsa/coordinator/host"
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
// transaction.remove.expired.transaction.cleanup.interval.ms (3600000). The
// transaction.version the coordinator acts on is the finalized level of the broker's
// image (features.go), handed to it whenever it changes.
type txnState struct {
	b       *Broker
	log     txn.Log
	writer  *txn.MarkerWriter
	markers *txn.Markers
	h       *host.Host[*txn.Coordinator]
}

// transactionVersionKey is the node key an earlier Samsa read the finalized
// transaction.version from; it now sets only the level a cluster is formatted with
// (configs.TransactionVersionKey).
const transactionVersionKey = configs.TransactionVersionKey

// markerTimeout bounds a WriteTxnMarkers append on this node (Kafka's
// request.timeout.ms for the marker requests) and a marker request to another broker.
const markerTimeout = 30 * time.Second

func newTxnState(b *Broker, im *metadata.Image) *txnState {
	s := &txnState{b: b, log: txn.NewReplicatedLog(b.repl, 0), writer: txn.NewMarkerWriter(b.repl, markerTimeout, nil)}
	s.writer.OnOffsetsMarker = b.completeTxnOffsets
	s.markers = &txn.Markers{Self: b.cfg.NodeID, Image: b.meta.Image, Local: s.writer, Remote: b.sendMarkers}
	// A partition is loaded again when this node leads it at a newer leader epoch: the
	// coordinator epoch its markers and writes are fenced by.
	s.h = host.New(host.Config[*txn.Coordinator]{
		Topic:             txn.StateTopic,
		Self:              b.cfg.NodeID,
		New:               s.newCoordinator,
		DefaultPartitions: int32(b.groupInt(im, "transaction.state.log.num.partitions", 50)),
		NumPartitions:     (*txn.Coordinator).NumPartitions,
		Load:              (*txn.Coordinator).StartLoading,
		Unload:            func(c *txn.Coordinator, p int32) { c.UnloadPartition(p, -1) },
		Close:             (*txn.Coordinator).Close,
		ByEpoch:           true,
		Retry:             loadRetry,
		After:             b.after,
		Failed: func(p int32, err error) {
			b.log.Warn("loading __transaction_state partition failed; retrying", "partition", p, "in", loadRetry, "err", err)
		},
	}, im)
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
		TransactionVersion: b.transactionVersion(),
		Logger:             b.log.With("component", "transactions"),
	}, s.log, s.markers, txn.ProducerIDFunc(b.producerID))
}

// coordinator returns the coordinator (nil after close).
func (s *txnState) coordinator() *txn.Coordinator { return s.h.Coordinator() }

// follow loads the partitions this node now leads (or leads at a newer epoch) and
// unloads the ones it no longer leads.
func (s *txnState) follow(im *metadata.Image) { s.h.Follow(im) }

func (s *txnState) close() { s.h.Close() }

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
			done(nil, errors.New("broker: WriteTxnMarkers answered by another kind"))
			return
		}
		done(wr, nil)
	})
}

// errNoPeer: the wiring gave the broker no channel to the other brokers (Deps.Peer).
var errNoPeer = errors.New("broker: no channel to the other brokers (Deps.Peer is nil)")

// completeTxnOffsets is the marker writer's OnOffsetsMarker: a marker durable on
// partition p of __consumer_offsets commits or drops producer pid's pending offsets.
func (b *Broker) completeTxnOffsets(p int32, pid int64, commit bool) {
	if c := b.groups.coordinator(); c != nil {
		c.CompleteTxnOffsets(p, pid, commit)
	}
}
