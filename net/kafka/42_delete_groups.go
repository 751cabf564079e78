// DeleteGroups (key 42), versions 0-2.
//
// Deletes empty groups (classic, consumer and share groups) with their committed
// offsets (tombstones in __consumer_offsets); answers once the tombstones are durable.
// Groups with members get NON_EMPTY_GROUP, unknown ones GROUP_ID_NOT_FOUND. The configs
// of a deleted group (GROUP resources) are deleted with it, as in Kafka 4: an
// IncrementalAlterConfigs DELETE of each of its keys, sent to the active controller so
// that the metadata log records it; the answer waits for it (bounded by the forwarding
// timeout; a failure is logged and leaves the configs, the groups stay deleted).

package kafka

import (
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

func init() {
	register(API{Key: 42, MinVersion: 0, MaxVersion: 2, Handle: handleDeleteGroups})
}

func handleDeleteGroups(b *Broker, r *Request) {
	req := r.Body.(*kmsg.DeleteGroupsRequest)
	c := b.groupCoordinatorOr(func(code int16) {
		resp := kmsg.NewPtrDeleteGroupsResponse()
		resp.Version = req.Version
		for _, g := range req.Groups {
			resp.Groups = append(resp.Groups, kmsg.DeleteGroupsResponseGroup{Group: g, ErrorCode: code})
		}
		r.Respond(resp)
	})
	if c == nil {
		return
	}
	c.DeleteGroups(req, func(resp *kmsg.DeleteGroupsResponse) {
		cfgs := b.deletedGroupConfigs(resp)
		if cfgs == nil {
			r.Respond(resp)
			return
		}
		b.async(func(ctx context.Context) {
			b.deleteGroupConfigs(ctx, cfgs)
			r.Respond(resp)
		})
	})
}

// deletedGroupConfigs is the request deleting the configs of the groups resp deleted,
// nil when none of them has any.
func (b *Broker) deletedGroupConfigs(resp *kmsg.DeleteGroupsResponse) *kmsg.IncrementalAlterConfigsRequest {
	im := b.meta.Image()
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
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Op = k, kmsg.IncrementalAlterConfigOpDelete
			res.Configs = append(res.Configs, c)
		}
		req.Resources = append(req.Resources, res)
	}
	return req
}

// deleteGroupConfigs sends req to the active controller and waits until this broker's
// image has the change.
func (b *Broker) deleteGroupConfigs(ctx context.Context, req *kmsg.IncrementalAlterConfigsRequest) {
	ctx, cancel := context.WithTimeout(ctx, defaultForwardTimeout)
	defer cancel()
	req.SetVersion(req.MaxVersion())
	resp, err := b.ctrl.Request(ctx, req)
	if err != nil {
		b.log.Warn("deleting the configs of deleted groups", "err", err)
		return
	}
	for _, res := range resp.(*kmsg.IncrementalAlterConfigsResponse).Resources {
		if res.ErrorCode != 0 {
			b.log.Warn("deleting the configs of a deleted group", "group", res.ResourceName, "code", res.ErrorCode, "message", res.ErrorMessage)
		}
	}
	b.syncMetadata(ctx)
}
