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
// carries Kafka's message for its code (Errors.java, wire.ErrorMessage: "The group is
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
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/group"
	"github.com/samsa-broker/samsa/net/authz"
	"github.com/samsa-broker/samsa/net/wire"
)

func init() {
	register(API{Key: 42, MinVersion: 0, MaxVersion: 3, Handle: handleDeleteGroups, Authz: authz.DeleteGroups})
}

func handleDeleteGroups(b *Broker, r *Request) {
	req := r.Body.(*kmsg.DeleteGroupsRequest)
	respond := func(resp *kmsg.DeleteGroupsResponse) {
		if req.Version >= 3 {
			for i := range resp.Groups {
				if g := &resp.Groups[i]; g.ErrorMessage == nil {
					g.ErrorMessage = wire.ErrorMessage(g.ErrorCode)
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
	// A share group's share-partition state goes first (Coordinators.DeleteShareGroupsState); a group
	// whose state could not be deleted is answered with that error and kept.
	b.coord.DeleteShareGroupsState(c, req.Groups, func(failed map[string]int16) {
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

// deleteGroups deletes req's groups and their configs (Coordinators.DeleteGroupConfigs),
// then responds.
func deleteGroups(b *Broker, c *group.Coordinator, req *kmsg.DeleteGroupsRequest, respond func(*kmsg.DeleteGroupsResponse)) {
	c.DeleteGroups(req, func(resp *kmsg.DeleteGroupsResponse) {
		b.coord.DeleteGroupConfigs(resp, func() { respond(resp) })
	})
}
