package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/group"
	"github.com/samsa-broker/samsa/coordinator/share"
	"github.com/samsa-broker/samsa/internal/latch"
)

// The share coordinator's calls of a share group's life (Kafka's Persister as the
// group coordinator and the share-partition leader use it): InitializeShareGroupState
// (83), DeleteShareGroupState (86) and ReadShareGroupStateSummary (87), to this node's
// Store when it leads the key's __share_group_state partition, else to the leader over
// the wire; retried as Read and Write are (sharePersister.retry).

// Initialize initializes k's state at stateEpoch with start offset start (-1: the
// leader picks it by share.auto.offset.reset).
func (p sharePersister) Initialize(k share.Key, stateEpoch int32, start int64, done func(error)) {
	b := p.s.b
	b.asyncOr(func() { done(errBrokerClosing) }, func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, shareWriteTimeout)
		defer cancel()
		done(p.retry(ctx, k, func(leader int32, st *share.Store) error {
			if st != nil {
				ch := make(chan error, 1)
				st.Initialize(k, stateEpoch, start, func(err error) { ch <- err })
				return storeErr(<-ch)
			}
			req := kmsg.NewPtrInitializeShareGroupStateRequest()
			req.GroupID = k.Group
			rt := kmsg.NewInitializeShareGroupStateRequestTopic()
			rt.TopicID = k.TopicID
			rp := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
			rp.Partition, rp.StateEpoch, rp.StartOffset = k.Partition, stateEpoch, start
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := b.peer(ctx, leader, req)
			if err != nil {
				return fmt.Errorf("%w: %w", errRetry, err)
			}
			r := resp.(*kmsg.InitializeShareGroupStateResponse)
			if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
				return errors.New("malformed InitializeShareGroupState answer")
			}
			return codeErr(r.Topics[0].Partitions[0].ErrorCode)
		}))
	})
}

// Delete deletes k's state (a tombstone in __share_group_state).
func (p sharePersister) Delete(k share.Key, done func(error)) {
	b := p.s.b
	b.asyncOr(func() { done(errBrokerClosing) }, func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, shareWriteTimeout)
		defer cancel()
		done(p.retry(ctx, k, func(leader int32, st *share.Store) error {
			if st != nil {
				ch := make(chan error, 1)
				st.Delete(k, func(err error) { ch <- err })
				return storeErr(<-ch)
			}
			req := kmsg.NewPtrDeleteShareGroupStateRequest()
			req.GroupID = k.Group
			rt := kmsg.NewDeleteShareGroupStateRequestTopic()
			rt.TopicID = k.TopicID
			rp := kmsg.NewDeleteShareGroupStateRequestTopicPartition()
			rp.Partition = k.Partition
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := b.peer(ctx, leader, req)
			if err != nil {
				return fmt.Errorf("%w: %w", errRetry, err)
			}
			r := resp.(*kmsg.DeleteShareGroupStateResponse)
			if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
				return errors.New("malformed DeleteShareGroupState answer")
			}
			return codeErr(r.Topics[0].Partitions[0].ErrorCode)
		}))
	})
}

// Summary reads k's summary (start offset, epochs, delivery-complete count).
func (p sharePersister) Summary(k share.Key, done func(share.Summary, error)) {
	b := p.s.b
	b.asyncOr(func() { done(share.Summary{}, errBrokerClosing) }, func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, shareWriteTimeout)
		defer cancel()
		var out share.Summary
		err := p.retry(ctx, k, func(leader int32, st *share.Store) error {
			if st != nil {
				var err error
				out, err = st.Summary(k)
				return storeErr(err)
			}
			req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
			req.Version = 1
			req.GroupID = k.Group
			rt := kmsg.NewReadShareGroupStateSummaryRequestTopic()
			rt.TopicID = k.TopicID
			rp := kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()
			rp.Partition, rp.LeaderEpoch = k.Partition, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := b.peer(ctx, leader, req)
			if err != nil {
				return fmt.Errorf("%w: %w", errRetry, err)
			}
			r := resp.(*kmsg.ReadShareGroupStateSummaryResponse)
			if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
				return errors.New("malformed ReadShareGroupStateSummary answer")
			}
			rp2 := r.Topics[0].Partitions[0]
			if err := codeErr(rp2.ErrorCode); err != nil {
				return err
			}
			// A key without state answers start -1 and state epoch 0 (Kafka's
			// answer); one initialized without a start too, but at its state epoch.
			out = share.Summary{Found: rp2.StartOffset >= 0 || rp2.StateEpoch > 0, StateEpoch: rp2.StateEpoch,
				LeaderEpoch: rp2.LeaderEpoch, StartOffset: rp2.StartOffset, DeliveryComplete: rp2.DeliveryCompleteCount}
			return nil
		})
		done(out, err)
	})
}

// uninitializedRead reports whether a peer's ReadShareGroupState answer says the
// share partition has no state: Kafka answers that INVALID_REQUEST (the only
// INVALID_REQUEST a well-formed read of one partition gets).
func uninitializedRead(code int16) bool { return code == kerr.InvalidRequest.Code }

// shareInitializer is the group coordinator's Config.ShareState: it initializes the
// share partitions a share group subscribes to at their share coordinators
// (InitializeShareGroupState at the group epoch, start -1). A partition that already
// has a state with a start offset (one its leader initialized itself for a fetch that
// came first, or written before the group coordinator initialized state) is left as
// it is and counts as initialized: initializing it would throw its progress away.
type shareInitializer struct{ b *Broker }

func (si shareInitializer) InitializeShareState(groupID string, epoch int32, topics []group.ShareStateTopic, done func(map[[16]byte][]int32)) {
	b := si.b
	var failed map[[16]byte][]int32
	l := latch.New(func() { done(failed) })
	finish := func(k share.Key, err error) {
		l.Done(func() {
			if err != nil {
				b.log.Debug("initializing share partition state failed", "key", k.String(), "err", err)
				if failed == nil {
					failed = map[[16]byte][]int32{}
				}
				failed[k.TopicID] = append(failed[k.TopicID], k.Partition)
			}
		})
	}
	if !b.sharesEnabled() {
		done(nil)
		return
	}
	p := sharePersister{b.shares}
	for _, t := range topics {
		for _, part := range t.Partitions {
			k := share.Key{Group: groupID, TopicID: t.TopicID, Partition: part}
			l.Add()
			p.Summary(k, func(cur share.Summary, err error) {
				switch {
				case err != nil:
					finish(k, err)
				case cur.Found && cur.StartOffset >= 0:
					finish(k, nil)
				default:
					p.Initialize(k, max(epoch, cur.StateEpoch), -1, func(err error) { finish(k, err) })
				}
			})
		}
	}
	l.Done(nil)
}

// shareStates is kafka.ShareStates: the persister's calls, answered with the codes of
// the share-group admin APIs (shareStateCode).
type shareStates struct{ s *shareState }

func (ss shareStates) Summary(k share.Key, done func(share.Summary, int16)) {
	sharePersister{ss.s}.Summary(k, func(sum share.Summary, err error) { done(sum, shareStateCode(err)) })
}

func (ss shareStates) Initialize(k share.Key, stateEpoch int32, start int64, done func(int16)) {
	sharePersister{ss.s}.Initialize(k, stateEpoch, start, func(err error) { done(shareStateCode(err)) })
}

func (ss shareStates) Delete(k share.Key, done func(int16)) {
	sharePersister{ss.s}.Delete(k, func(err error) { done(shareStateCode(err)) })
}

// shareStateCode is the code an admin API answers for a share-state call's error:
// the share coordinator's own (FENCED_STATE_EPOCH, UNKNOWN_TOPIC_OR_PARTITION, ...)
// when it answered one, else COORDINATOR_NOT_AVAILABLE (no coordinator within the
// retries).
func shareStateCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) && !errors.Is(err, errRetry) {
		return ke.Code
	}
	if c := share.ErrorCode(err); c != kerr.CoordinatorNotAvailable.Code && c != kerr.NotCoordinator.Code && c != kerr.CoordinatorLoadInProgress.Code {
		return c
	}
	return kerr.CoordinatorNotAvailable.Code
}
