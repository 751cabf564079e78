// DeleteGroups (key 42), versions 0-3.
//
// Deletes empty groups (classic, consumer, share and streams groups) with their committed
// offsets (tombstones in __consumer_offsets); answers once the tombstones are durable.
// A share group's share-partition state is deleted first (DeleteShareGroupState of
// every partition its ShareGroupStatePartitionMetadata holds: tombstones in
// __share_group_state), as Kafka does, so that a group re-created under the same id
// starts afresh; a group whose state could not be deleted answers that error
// (COORDINATOR_NOT_AVAILABLE when no share coordinator answered) and is kept.
// Groups with members get NON_EMPTY_GROUP, unknown ones GROUP_ID_NOT_FOUND. The configs
// of a deleted group (GROUP resources) are deleted with it, as in Kafka 4: an
// IncrementalAlterConfigs DELETE of each of its keys, sent to the active controller so
// that the metadata log records it; the answer waits for it (bounded by the forwarding
// timeout; a failure is logged and leaves the configs, the groups stay deleted).
//
// v3 (KIP-1331, Kafka 4.4) adds an error message per group: a group not deleted
// carries Kafka's message for its code (Errors.java, deleteGroupsMessage: "The group is
// not empty." for NON_EMPTY_GROUP, ...), the refusals of authorisation too
// (authz.DeleteGroups); a deleted group carries none (null).
//
// Differences from Apache Kafka: KIP-1331 made v3 for GROUP_DELETION_FAILED, the
// failure of a streams group's topology-description plugin, whose message says why;
// Samsa keeps no topology descriptions (so no such plugin) and never answers it. For the older
// codes Kafka 4.4 may leave the message null: a Java client then shows the same text,
// the code's default message, that Samsa sends.

package kafka

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/group"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/coordinator/share"
	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 42, MinVersion: 0, MaxVersion: 3, Handle: handleDeleteGroups, Authz: authz.DeleteGroups})
}

// deleteGroupsMessages are Kafka's messages (Errors.java) for the codes a group of
// DeleteGroups can get.
var deleteGroupsMessages = map[int16]string{
	kerr.UnknownServerError.Code:        "The server experienced an unexpected error when processing the request.",
	kerr.CoordinatorLoadInProgress.Code: "The coordinator is loading and hence can't process requests.",
	kerr.CoordinatorNotAvailable.Code:   "The coordinator is not available.",
	kerr.NotCoordinator.Code:            "This is not the correct coordinator.",
	kerr.InvalidGroupID.Code:            "The configured groupId is invalid.",
	kerr.GroupAuthorizationFailed.Code:  "Group authorization failed.",
	kerr.NonEmptyGroup.Code:             "The group is not empty.",
	kerr.GroupIDNotFound.Code:           "The group id does not exist.",
}

// deleteGroupsMessage is the ErrorMessage (v3+) of a group of DeleteGroups answered
// code: Kafka's message, nil for success.
func deleteGroupsMessage(code int16) *string {
	if code == 0 {
		return nil
	}
	if m, ok := deleteGroupsMessages[code]; ok {
		return &m
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		m := e.Description
		return &m
	}
	return nil
}

func handleDeleteGroups(b *Broker, r *Request) {
	req := r.Body.(*kmsg.DeleteGroupsRequest)
	respond := func(resp *kmsg.DeleteGroupsResponse) {
		if req.Version >= 3 {
			for i := range resp.Groups {
				if g := &resp.Groups[i]; g.ErrorMessage == nil {
					g.ErrorMessage = deleteGroupsMessage(g.ErrorCode)
				}
			}
		}
		r.Respond(resp)
	}
	c := b.groupCoordinatorOr(func(code int16) {
		resp := kmsg.NewPtrDeleteGroupsResponse()
		resp.Version = req.Version
		for _, g := range req.Groups {
			resp.Groups = append(resp.Groups, kmsg.DeleteGroupsResponseGroup{Group: g, ErrorCode: code})
		}
		respond(resp)
	})
	if c == nil {
		return
	}
	// A share group's share-partition state goes first (deleteShareGroupsState); a group
	// whose state could not be deleted is answered with that error and kept.
	b.deleteShareGroupsState(c, req.Groups, func(failed map[string]int16) {
		if len(failed) == 0 {
			deleteGroups(b, c, req, respond)
			return
		}
		rest := *req
		rest.Groups = nil
		for _, g := range req.Groups {
			if failed[g] == 0 {
				rest.Groups = append(rest.Groups, g)
			}
		}
		deleteGroups(b, c, &rest, func(resp *kmsg.DeleteGroupsResponse) {
			byID := map[string]kmsg.DeleteGroupsResponseGroup{}
			for _, g := range resp.Groups {
				byID[g.Group] = g
			}
			resp.Groups = resp.Groups[:0]
			for _, g := range req.Groups {
				out, ok := byID[g]
				if code := failed[g]; code != 0 || !ok {
					out = kmsg.DeleteGroupsResponseGroup{Group: g, ErrorCode: code}
				}
				resp.Groups = append(resp.Groups, out)
			}
			respond(resp)
		})
	})
}

// deleteGroups deletes req's groups and their configs, then responds.
func deleteGroups(b *Broker, c *group.Coordinator, req *kmsg.DeleteGroupsRequest, respond func(*kmsg.DeleteGroupsResponse)) {
	c.DeleteGroups(req, func(resp *kmsg.DeleteGroupsResponse) {
		cfgs := b.deletedGroupConfigs(resp)
		if cfgs == nil {
			respond(resp)
			return
		}
		b.async(func(ctx context.Context) {
			b.deleteGroupConfigs(ctx, cfgs)
			respond(resp)
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
	b.ctrl.Sync(ctx)
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
		if !ok || b.shares == nil || !b.features().share {
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
				b.shares.states.Delete(share.Key{Group: id, TopicID: t.TopicID, Partition: part}, func(code int16) {
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
