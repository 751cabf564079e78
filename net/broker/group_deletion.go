package broker

import (
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/group"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/coordinator/share"
	"github.com/samsa-broker/samsa/internal/latch"
)

// What deleting groups does beyond the group coordinator, on the DeleteGroups
// handler's behalf (kafka.Coordinators), as Kafka's GroupCoordinatorService does: a
// share group's share-partition state is deleted at its share coordinators first, and
// the configs of the groups deleted go through the active controller.

// DeleteGroupConfigs (kafka.Coordinators) deletes the configs (GROUP resources) of
// the groups resp deleted, through the active controller, waits until this broker's
// image has the change (bounded by the forwarding timeout; a failure is logged and
// leaves the configs) and calls done: at once when none of them has any, else on a
// goroutine of the broker's.
func (c coordinators) DeleteGroupConfigs(resp *kmsg.DeleteGroupsResponse, done func()) {
	req := c.deletedGroupConfigs(resp)
	if req == nil {
		done()
		return
	}
	c.b.async(func(ctx context.Context) {
		c.deleteGroupConfigs(ctx, req)
		done()
	})
}

// deletedGroupConfigs is the request deleting the configs of the groups resp deleted,
// nil when none of them has any.
func (c coordinators) deletedGroupConfigs(resp *kmsg.DeleteGroupsResponse) *kmsg.IncrementalAlterConfigsRequest {
	im := c.b.meta.Image()
	var req *kmsg.IncrementalAlterConfigsRequest
	for _, g := range resp.Groups {
		set := im.Configs(metadata.ResourceGroup, g.Group)
		if g.ErrorCode != 0 || len(set) == 0 {
			continue
		}
		if req == nil {
			req = kmsg.NewPtrIncrementalAlterConfigsRequest()
		}
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, g.Group
		for _, k := range slices.Sorted(maps.Keys(set)) {
			kc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			kc.Name, kc.Op = k, kmsg.IncrementalAlterConfigOpDelete
			res.Configs = append(res.Configs, kc)
		}
		req.Resources = append(req.Resources, res)
	}
	return req
}

// deleteGroupConfigs sends req to the active controller and waits until this broker's
// image has the change.
func (c coordinators) deleteGroupConfigs(ctx context.Context, req *kmsg.IncrementalAlterConfigsRequest) {
	b := c.b
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	resp := forwarder{b}.Forward(ctx, req, true)
	for _, res := range resp.(*kmsg.IncrementalAlterConfigsResponse).Resources {
		if res.ErrorCode != 0 {
			b.log.Warn("deleting the configs of a deleted group", "group", res.ResourceName, "code", res.ErrorCode, "message", res.ErrorMessage)
		}
	}
}

// DeleteShareGroupsState (kafka.Coordinators) deletes, for each of groups that is a
// share group without members on gc, the state of the share partitions it holds (its
// ShareGroupStatePartitionMetadata) with DeleteShareGroupState, before DeleteGroups
// deletes the group; done gets the groups whose state could not be deleted, with the
// code to answer (they are not deleted). Partitions of topics deleted since are
// skipped; nothing is deleted while share groups are off.
func (c coordinators) DeleteShareGroupsState(gc *group.Coordinator, groups []string, done func(failed map[string]int16)) {
	failed := map[string]int16{}
	l := latch.New(func() { done(failed) })
	im := c.b.meta.Image()
	states := shareStates{c.b.shares}
	for _, id := range groups {
		topics, _, ok := gc.ShareStatePartitions(id)
		if !ok || !c.b.sharesEnabled() {
			continue
		}
		for _, t := range topics {
			if _, known := im.TopicByID(metadata.UUID(t.TopicID)); !known {
				continue
			}
			for _, part := range t.Partitions {
				l.Add()
				states.Delete(share.Key{Group: id, TopicID: t.TopicID, Partition: part}, func(code int16) {
					l.Done(func() {
						// UNKNOWN_TOPIC_OR_PARTITION: deleted meanwhile.
						if code != 0 && code != kerr.UnknownTopicOrPartition.Code && failed[id] == 0 {
							failed[id] = code
						}
					})
				})
			}
		}
	}
	l.Done(nil)
}
