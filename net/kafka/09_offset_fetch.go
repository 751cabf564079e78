// OffsetFetch (key 9), versions 0-9.
//
// Committed offsets, leader epochs (v5+) and metadata from the coordinator's memory;
// partitions without a commit answer offset -1. A null topic list (v2+) returns every
// committed offset of the group; v8+ fetches a batch of groups (KIP-709). Offsets of a
// commit are visible only once it is durable; with RequireStable (v7+) a partition
// whose transactional offsets wait for their marker answers UNSTABLE_OFFSET_COMMIT,
// as Kafka (TxnOffsetCommit, see coordinator/group). v9+ members of a consumer group
// (KIP-848) fetch with their member id and epoch: another epoch is
// STALE_MEMBER_EPOCH, an unknown member UNKNOWN_MEMBER_ID, as Kafka 4.
//
// Not served: v10+ (topic ids).

package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

func init() {
	register(API{Key: 9, MinVersion: 0, MaxVersion: 9, Handle: handleOffsetFetch})
}

func handleOffsetFetch(b *Broker, r *Request) {
	req := r.Body.(*kmsg.OffsetFetchRequest)
	c := b.groupCoordinatorOr(func(code int16) {
		resp := kmsg.NewPtrOffsetFetchResponse()
		resp.Version, resp.ErrorCode = req.Version, code
		for _, g := range req.Groups {
			resp.Groups = append(resp.Groups, kmsg.OffsetFetchResponseGroup{Group: g.Group, ErrorCode: code})
		}
		r.Respond(resp)
	})
	if c == nil {
		return
	}
	r.Respond(c.OffsetFetch(req))
}
