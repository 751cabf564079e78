package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/group"
	"github.com/samsa-broker/samsa/coordinator/share"
	"github.com/samsa-broker/samsa/coordinator/txn"
)

// Coordinators are the coordinators this node hosts, as handlers call them. The node's
// assembly (net/broker) hosts each on the leadership of its internal topic's
// partitions and may rebuild it (another partition count), so handlers ask for it at
// each request. Each returns nil when there is none: the node is closing, or, for the
// share coordinator, __share_group_state does not exist yet.
type Coordinators interface {
	// Group is the group coordinator (__consumer_offsets).
	Group() *group.Coordinator
	// Txn is the transaction coordinator (__transaction_state).
	Txn() *txn.Coordinator
	// ShareStore is the share coordinator (__share_group_state) of the partitions this
	// node leads.
	ShareStore() *share.Store
	// DeleteShareGroupsState deletes, for each of groups that is a share group without
	// members on c, the state of the share partitions it holds, before DeleteGroups
	// deletes the group; done gets the groups whose state could not be deleted, with
	// the code to answer (they are not deleted). done may run on any goroutine.
	DeleteShareGroupsState(c *group.Coordinator, groups []string, done func(failed map[string]int16))
	// DeleteGroupConfigs deletes the configs (GROUP resources) of the groups resp
	// deleted, through the active controller, and calls done once this node's image
	// has the change (or the attempt failed): at once when none had any, else on a
	// goroutine of the node's.
	DeleteGroupConfigs(resp *kmsg.DeleteGroupsResponse, done func())
}

// groupCoordinatorOr returns the coordinator, or answers code via fail. Before
// __consumer_offsets exists a group request starts its creation (as FindCoordinator
// does) and is answered COORDINATOR_LOAD_IN_PROGRESS, so the client retries.
func (b *Broker) groupCoordinatorOr(fail func(code int16)) *group.Coordinator {
	c := b.coord.Group()
	if c == nil {
		fail(kerr.NotCoordinator.Code)
		return nil
	}
	if _, ok := b.meta.Image().Topic(group.OffsetsTopic); !ok {
		b.async(func(ctx context.Context) {
			ctx, cancel := context.WithTimeout(ctx, defaultForwardTimeout)
			defer cancel()
			if err := b.topicMgr.EnsureInternal(ctx, group.OffsetsTopic); err != nil {
				b.log.Warn("creating __consumer_offsets", "err", err)
			}
		})
		fail(kerr.CoordinatorLoadInProgress.Code)
		return nil
	}
	return c
}

// txnCoordinatorOr returns the transaction coordinator, or answers code via fail
// (NOT_COORDINATOR once the broker is closing).
func (b *Broker) txnCoordinatorOr(fail func(code int16)) *txn.Coordinator {
	c := b.coord.Txn()
	if c == nil {
		fail(kerr.NotCoordinator.Code)
	}
	return c
}
