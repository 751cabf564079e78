package kafka

import (
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/coordinator/share"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/net/metadatacache"
	"github.com/samsa-broker/samsa/net/sharesession"
	"github.com/samsa-broker/samsa/net/transport"
)

// shareState is the handlers' side of share groups (KIP-932):
//
//   - the share partitions this node leads (share.Manager, Deps.Shares: the node's
//     assembly builds it and keeps their state at the key's share coordinator);
//   - the share sessions of ShareFetch and ShareAcknowledge (net/sharesession);
//   - share-partition state at any node's share coordinator, for the admin APIs
//     (ShareStates, Deps.ShareStates).
//
// Served while share.version is finalized at 1 (Kafka 4.2 finalizes it on new
// clusters) and the node's keys allow it: group.share.enable (default true) or
// "share" in group.coordinator.rebalance.protocols (Kafka 4.0's switch); see
// features_view.go.
type shareState struct {
	b      *Broker
	parts  metadatacache.Partitions
	mgr    *share.Manager
	reader ShareReader // reads and acquires their records (Deps.ShareReader)
	ses    *sharesession.Cache
	states ShareStates
}

// ShareStates are share partitions' states at their share coordinators, wherever
// those are (the node's assembly: this node's Store when it leads the key's
// __share_group_state partition, else its leader over the wire, retried while none
// answers), for the share-group admin APIs: the answers are the codes those APIs
// give (COORDINATOR_NOT_AVAILABLE when no share coordinator answered in time, the
// share coordinator's own otherwise). done may run on any goroutine.
type ShareStates interface {
	// Summary reads k's summary (start offset, epochs, delivery-complete count).
	Summary(k share.Key, done func(share.Summary, int16))
	// Initialize initializes k's state at stateEpoch with start offset start (-1:
	// the leader picks it by share.auto.offset.reset).
	Initialize(k share.Key, stateEpoch int32, start int64, done func(int16))
	// Delete deletes k's state (a tombstone in __share_group_state).
	Delete(k share.Key, done func(int16))
}

func newShareState(b *Broker, mgr *share.Manager, reader ShareReader, states ShareStates) *shareState {
	if mgr == nil || reader == nil {
		return nil
	}
	ses := sharesession.NewCache(int(b.keys.groupInt(b.meta.Image(), "group.share.max.share.sessions", 2000)))
	return &shareState{b: b, parts: b.parts, mgr: mgr, reader: reader, ses: ses, states: states}
}

// connClosed ends the share sessions conn opened, releasing what their members hold.
func (s *shareState) connClosed(conn transport.Conn) {
	if s == nil {
		return // a Broker built without share groups (tests of its parts)
	}
	for _, ss := range s.ses.CloseConn(conn) {
		s.release(ss.Key.Member, ss.Parts)
	}
}

// ShareAvailable retries the parked share fetches reading k's partition (records of k
// may be acquirable now): the share partitions' Available (share.ManagerConfig).
func (b *Broker) ShareAvailable(k share.Key) {
	im := b.meta.Image()
	t, ok := im.TopicByID(metadata.UUID(k.TopicID))
	if !ok {
		return
	}
	dp := b.dataPath.Load()
	if l := b.eng.Log(engine.TopicPartition{Topic: t.Name, Partition: k.Partition}); l != nil && dp != nil {
		dp.shareWaits.CheckAndComplete(l)
	}
}
