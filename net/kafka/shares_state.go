package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/group"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/coordinator/share"
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

// shareStateItem is one partition of a share coordinator's request (83, 86, 87):
// answer sets its answer's ErrorCode and ErrorMessage (nil on success).
type shareStateItem struct {
	key    share.Key
	answer func(code int16, msg *string)
}

// serveShareState runs op on this node's share coordinator for each item after the
// checks Kafka's ShareCoordinatorShard makes of every key (share groups on, a
// partition index not negative, a topic partition the image holds; this node the
// leader of the key's __share_group_state partition, loaded), items in parallel,
// and calls respond once all are answered. op's error maps by storeCode.
func (b *Broker) serveShareState(items []shareStateItem, op func(st *share.Store, k share.Key, done func(error)), respond func()) {
	st := b.shares.store()
	im := b.meta.Image()
	var mu sync.Mutex
	left := 1
	finish := func() {
		mu.Lock()
		left--
		last := left == 0
		mu.Unlock()
		if last {
			respond()
		}
	}
	for _, it := range items {
		code, msg := int16(0), ""
		switch t, ok := im.TopicByID(metadata.UUID(it.key.TopicID)); {
		case !b.sharesEnabled():
			code = kerr.UnsupportedVersion.Code
		case it.key.Partition < 0:
			code, msg = kerr.InvalidRequest.Code, "The partition id cannot be a negative number."
		case !ok || int(it.key.Partition) >= len(t.Partitions):
			code = kerr.UnknownTopicOrPartition.Code
		case st == nil:
			code = kerr.NotCoordinator.Code
		}
		if code != 0 {
			it.answer(code, shareStateMessage(code, msg))
			continue
		}
		mu.Lock()
		left++
		mu.Unlock()
		op(st, it.key, func(err error) {
			code := storeCode(err)
			var m *string
			if code != 0 {
				m = shareStateMessage(code, err.Error())
			}
			mu.Lock()
			it.answer(code, m)
			mu.Unlock()
			finish()
		})
	}
	finish()
}

// shareStateMessage is an answer's ErrorMessage: msg, else the code's description.
func shareStateMessage(code int16, msg string) *string {
	if msg == "" {
		if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
			msg = e.Description
		}
	}
	return &msg
}

// shareInitializer is the group coordinator's Config.ShareState: it initializes the
// share partitions a share group subscribes to at their share coordinators
// (InitializeShareGroupState at the group epoch, start -1). A partition that already
// has a state with a start offset (one its leader initialized itself for a fetch that
// came first, or written before the group coordinator initialized state) is left as
// it is and counts as initialized: initializing it would throw its progress away.
type shareInitializer struct{ b *Broker }

func (si shareInitializer) InitializeShareState(groupID string, epoch int32, topics []group.ShareStateTopic, done func(map[[16]byte][]int32)) {
	b := si.b
	var mu sync.Mutex
	var failed map[[16]byte][]int32
	left := 1
	finish := func(k share.Key, err error) {
		mu.Lock()
		if err != nil {
			b.log.Debug("initializing share partition state failed", "key", k.String(), "err", err)
			if failed == nil {
				failed = map[[16]byte][]int32{}
			}
			failed[k.TopicID] = append(failed[k.TopicID], k.Partition)
		}
		left--
		last := left == 0
		mu.Unlock()
		if last {
			done(failed)
		}
	}
	if b.shares == nil || !b.sharesEnabled() {
		done(nil)
		return
	}
	p := sharePersister{b.shares}
	for _, t := range topics {
		for _, part := range t.Partitions {
			k := share.Key{Group: groupID, TopicID: t.TopicID, Partition: part}
			mu.Lock()
			left++
			mu.Unlock()
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
	finish(share.Key{}, nil)
}

// deleteShareGroupsState deletes, for each of groups that is a share group without
// members here, the state of the share partitions it holds (its
// ShareGroupStatePartitionMetadata) with DeleteShareGroupState, before DeleteGroups
// deletes the group, as Kafka's GroupCoordinatorService does; done gets the groups
// whose state could not be deleted, with the code to answer (they are not deleted).
// Partitions of topics deleted since are skipped.
func (b *Broker) deleteShareGroupsState(c *group.Coordinator, groups []string, done func(failed map[string]int16)) {
	var mu sync.Mutex
	failed := map[string]int16{}
	left := 1
	finish := func(id string, code int16) {
		mu.Lock()
		if code != 0 && failed[id] == 0 {
			failed[id] = code
		}
		left--
		last := left == 0
		mu.Unlock()
		if last {
			done(failed)
		}
	}
	im := b.meta.Image()
	for _, id := range groups {
		topics, _, ok := c.ShareStatePartitions(id)
		if !ok || b.shares == nil || !b.sharesEnabled() {
			continue
		}
		for _, t := range topics {
			if _, known := im.TopicByID(metadata.UUID(t.TopicID)); !known {
				continue
			}
			for _, part := range t.Partitions {
				mu.Lock()
				left++
				mu.Unlock()
				sharePersister{b.shares}.Delete(share.Key{Group: id, TopicID: t.TopicID, Partition: part}, func(err error) {
					code := shareStateCode(err)
					if code == kerr.UnknownTopicOrPartition.Code {
						code = 0 // deleted meanwhile
					}
					finish(id, code)
				})
			}
		}
	}
	finish("", 0)
}
