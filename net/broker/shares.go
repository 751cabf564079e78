package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/group"
	"github.com/samsa-broker/samsa/coordinator/host"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/coordinator/share"
)

// shareState is the broker's side of share groups (KIP-932), built with the broker:
//
//   - the share coordinator (share.Store) of the __share_group_state partitions this
//     node leads, loaded and unloaded as leadership moves (follow, like groupState
//     does for __consumer_offsets), written through group.ReplicatedLog over that
//     topic (acks=all);
//   - the share partitions this node leads (share.Manager), whose state is read from
//     and written to the key's share coordinator: the local Store, or the leader of
//     the key's state partition over ReadShareGroupState/WriteShareGroupState (84/85).
//
// The share sessions of ShareFetch and ShareAcknowledge are the adapter's.
//
// Served while share.version is finalized at 1 (Kafka 4.2 finalizes it on new
// clusters) and the node's keys allow it: group.share.enable (default true) or
// "share" in group.coordinator.rebalance.protocols (Kafka 4.0's switch); see
// features.go.
//
// A group's own configs (GROUP resources) are read from the published image at each
// decision: share.record.lock.duration.ms, share.delivery.count.limit,
// share.partition.max.record.locks and share.renew.acknowledge.enable by the Manager
// (ForGroup).
type shareState struct {
	b   *Broker
	log group.Log
	mgr *share.Manager
	// h hosts the share coordinator (share.Store) of the __share_group_state
	// partitions this node leads: built when the topic appears (Lazy).
	h *host.Host[*share.Store]
}

// shareWriteTimeout bounds a share partition's write to its share coordinator (and a
// read's retries): the acknowledgement waiting for it is then answered with an error.
const shareWriteTimeout = 10 * time.Second

func newShareState(b *Broker, im *metadata.Image) *shareState {
	s := &shareState{b: b, log: group.NewReplicatedTopicLog(b.repl, share.StateTopic, 0)}
	s.mgr = share.NewManager(share.ManagerConfig{
		Partition: share.Config{
			LockDuration:  time.Duration(b.groupInt(im, "group.share.record.lock.duration.ms", 30000)) * time.Millisecond,
			DeliveryLimit: int(b.groupInt(im, "group.share.delivery.count.limit", 5)),
			MaxInFlight:   int(b.groupInt(im, "group.share.partition.max.record.locks", 2000)),
		},
		ForGroup:  s.partitionConfig,
		Persister: sharePersister{s},
		Available: s.wake,
		Logger:    b.log.With("component", "share"),
	})
	// A state partition is read on a goroutine of its own; one this node leads before
	// its replica manager made it leader fails to read and is tried again shortly.
	s.h = host.New(host.Config[*share.Store]{
		Topic:         share.StateTopic,
		Self:          b.cfg.NodeID,
		New:           func(_ *metadata.Image, n int32) *share.Store { return share.NewStore(s.log, n, nil) },
		Lazy:          true,
		NumPartitions: (*share.Store).NumPartitions,
		Load: func(st *share.Store, p, _ int32, done func(error)) {
			b.async(func(context.Context) {
				err := st.Load(p)
				if err != nil {
					st.Unload(p)
				}
				done(err)
			})
		},
		Unload: (*share.Store).Unload,
		Close:  func(*share.Store) {},
		Retry:  100 * time.Millisecond,
		After:  b.after,
		Failed: func(p int32, err error) {
			b.log.Debug("loading __share_group_state partition failed; retrying", "partition", p, "err", err)
		},
	}, im)
	s.follow(im)
	return s
}

// store returns the share coordinator for the image's __share_group_state (nil before
// the topic exists or after close).
func (s *shareState) store() *share.Store { return s.h.Coordinator() }

// follow loads the __share_group_state partitions this node now leads and unloads
// the others, and drops the share partitions of data partitions it no longer leads.
// Called from MetadataChanged. While share groups are not served it does nothing,
// unless it hosts state partitions already (share.version went to 0 at run time):
// their leadership is still followed, so they unload as it moves.
func (s *shareState) follow(im *metadata.Image) {
	if !s.b.sharesEnabled() && s.h.Coordinator() == nil {
		return
	}
	self := s.b.cfg.NodeID
	s.mgr.Drop(func(k share.Key) bool {
		t, ok := im.TopicByID(metadata.UUID(k.TopicID))
		return ok && int(k.Partition) < len(t.Partitions) && t.Partitions[k.Partition].Leader == self
	})
	s.h.Follow(im)
}

func (s *shareState) close() {
	s.h.Close()
	s.mgr.Close()
}

// wake retries the parked share fetches reading k's partition (records of k may be
// acquirable now).
func (s *shareState) wake(k share.Key) {
	if kb := s.b.kafka.Load(); kb != nil {
		kb.ShareAvailable(k)
	}
}

// partitionConfig is the Manager's ForGroup: the limits of group's share partitions
// from its own configs, capped to this broker's bounds; zero fields (the Manager's) for
// the keys it does not set.
func (s *shareState) partitionConfig(group string) share.Config {
	im := s.b.meta.Image()
	own := im.Configs(metadata.ResourceGroup, group)
	if len(own) == 0 {
		return share.Config{}
	}
	l := s.b.groupLayers(im, group)
	n := func(key string) int64 {
		if _, ok := own[key]; !ok {
			return 0
		}
		return l.GroupInt(key)
	}
	return share.Config{
		LockDuration:  time.Duration(n("share.record.lock.duration.ms")) * time.Millisecond,
		DeliveryLimit: int(n("share.delivery.count.limit")),
		MaxInFlight:   int(n("share.partition.max.record.locks")),
		// A group key only (default true): Kafka has no broker key behind it.
		RenewDisabled: strings.EqualFold(own["share.renew.acknowledge.enable"], "false"),
	}
}

// errBrokerClosing fails share-state reads and writes asked of a closing broker.
var errBrokerClosing = errors.New("share state: broker closing")

// asyncOr is async, calling closed instead of fn when the broker is closing.
func (b *Broker) asyncOr(closed func(), fn func(ctx context.Context)) {
	b.asyncMu.Lock()
	if b.asyncDone {
		b.asyncMu.Unlock()
		closed()
		return
	}
	b.wg.Add(1)
	b.asyncMu.Unlock()
	go func() {
		defer b.wg.Done()
		fn(b.ctx)
	}()
}

// errRetry marks a persister attempt to be retried (no coordinator yet, loading).
var errRetry = errors.New("share coordinator not available")

// sharePersister is the Manager's Persister: the share coordinator of a key is the
// leader of its __share_group_state partition; this node's Store when it leads it,
// else that broker over ReadShareGroupState/WriteShareGroupState. Transient failures
// (no topic yet, no leader, loading, a leader moving) are retried for up to
// shareWriteTimeout.
type sharePersister struct{ s *shareState }

func (p sharePersister) Read(k share.Key, done func(share.Snapshot, bool, error)) {
	b := p.s.b
	b.asyncOr(func() { done(share.Snapshot{}, false, errBrokerClosing) }, func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, shareWriteTimeout)
		defer cancel()
		var snap share.Snapshot
		var found bool
		err := p.retry(ctx, k, func(leader int32, st *share.Store) error {
			if st != nil {
				var err error
				snap, found, err = st.Read(k)
				return storeErr(err)
			}
			req := kmsg.NewPtrReadShareGroupStateRequest()
			req.GroupID = k.Group
			rt := kmsg.NewReadShareGroupStateRequestTopic()
			rt.TopicID = k.TopicID
			rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
			rp.Partition, rp.LeaderEpoch = k.Partition, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := b.peer(ctx, leader, req)
			if err != nil {
				return fmt.Errorf("%w: %w", errRetry, err)
			}
			r := resp.(*kmsg.ReadShareGroupStateResponse)
			if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
				return errors.New("malformed ReadShareGroupState answer")
			}
			rpp := r.Topics[0].Partitions[0]
			if uninitializedRead(rpp.ErrorCode) {
				found = false
				return nil
			}
			if err := codeErr(rpp.ErrorCode); err != nil {
				return err
			}
			found = rpp.StateEpoch >= 0
			snap = share.Snapshot{StateEpoch: rpp.StateEpoch, StartOffset: rpp.StartOffset}
			for _, sb := range rpp.StateBatches {
				snap.Batches = append(snap.Batches, share.Batch{First: sb.FirstOffset, Last: sb.LastOffset, State: share.State(sb.DeliveryState), Count: sb.DeliveryCount})
			}
			return nil
		})
		done(snap, found, err)
	})
}

func (p sharePersister) Write(k share.Key, snap *share.Snapshot, done func(error)) {
	b := p.s.b
	b.asyncOr(func() { done(errBrokerClosing) }, func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, shareWriteTimeout)
		defer cancel()
		done(p.retry(ctx, k, func(leader int32, st *share.Store) error {
			if st != nil {
				ch := make(chan error, 1)
				st.Write(k, snap, func(err error) { ch <- err })
				return storeErr(<-ch)
			}
			req := kmsg.NewPtrWriteShareGroupStateRequest()
			req.GroupID = k.Group
			rt := kmsg.NewWriteShareGroupStateRequestTopic()
			rt.TopicID = k.TopicID
			rp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
			rp.Partition, rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset = k.Partition, snap.StateEpoch, snap.LeaderEpoch, snap.StartOffset
			for _, sb := range snap.Batches {
				rp.StateBatches = append(rp.StateBatches, kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch{
					FirstOffset: sb.First, LastOffset: sb.Last, DeliveryState: int8(sb.State), DeliveryCount: sb.Count})
			}
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := b.peer(ctx, leader, req)
			if err != nil {
				return fmt.Errorf("%w: %w", errRetry, err)
			}
			r := resp.(*kmsg.WriteShareGroupStateResponse)
			if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
				return errors.New("malformed WriteShareGroupState answer")
			}
			return codeErr(r.Topics[0].Partitions[0].ErrorCode)
		}))
	})
}

// retry runs attempt against k's share coordinator until it succeeds, fails for
// good, or ctx ends: st is this node's Store when it leads k's state partition, else
// nil and leader names the broker to ask.
func (p sharePersister) retry(ctx context.Context, k share.Key, attempt func(leader int32, st *share.Store) error) error {
	var last error
	for {
		err := p.once(ctx, k, attempt)
		if err == nil || !errors.Is(err, errRetry) {
			return err
		}
		last = err
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("share state of %s: %w (last: %w)", k, ctx.Err(), last)
		}
	}
}

func (p sharePersister) once(ctx context.Context, k share.Key, attempt func(leader int32, st *share.Store) error) error {
	b := p.s.b
	im := b.meta.Image()
	t, ok := im.Topic(share.StateTopic)
	if !ok {
		if err := b.topics.EnsureInternal(ctx, share.StateTopic); err != nil {
			return fmt.Errorf("%w: creating %s: %w", errRetry, share.StateTopic, err)
		}
		return errRetry
	}
	leader := t.Partitions[share.PartitionFor(k, int32(len(t.Partitions)))].Leader
	switch {
	case leader < 0:
		return fmt.Errorf("%w: no leader", errRetry)
	case leader != b.cfg.NodeID:
		if b.peer == nil {
			return fmt.Errorf("%w: share coordinator %d is another broker and this node has no peer client", errRetry, leader)
		}
		return attempt(leader, nil)
	}
	st := p.s.store()
	if st == nil || st.NumPartitions() != int32(len(t.Partitions)) {
		return fmt.Errorf("%w: share coordinator not started", errRetry)
	}
	return attempt(leader, st)
}

// storeErr marks a Store's transient errors for a retry.
func storeErr(err error) error {
	switch {
	case errors.Is(err, share.ErrNotCoordinator), errors.Is(err, share.ErrLoading), errors.Is(err, group.ErrNotLeader):
		return fmt.Errorf("%w: %w", errRetry, err)
	}
	return err
}

// codeErr is a peer's answer code as an error (retriable ones marked for a retry).
func codeErr(code int16) error {
	switch code {
	case 0:
		return nil
	case kerr.InvalidRequest.Code:
		return fmt.Errorf("%w: %w", share.ErrUninitialized, kerr.InvalidRequest)
	case kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code, kerr.NotLeaderForPartition.Code:
		return fmt.Errorf("%w: %w", errRetry, kerr.ErrorForCode(code))
	}
	return kerr.ErrorForCode(code)
}
