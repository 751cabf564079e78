// SyncGroup (key 14), versions 0-5.
//
// The leader hands in the assignment of the generation; every member's answer waits
// until that assignment is durable in __consumer_offsets, then carries the member's
// part. Followers of a Stable group get their assignment at once. v5+ checks the
// protocol type and name against the group's (INCONSISTENT_GROUP_PROTOCOL).

package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 14, MinVersion: 0, MaxVersion: 5, Handle: handleSyncGroup, Authz: authz.SyncGroup})
}

func handleSyncGroup(b *Broker, r *Request) {
	req := r.Body.(*kmsg.SyncGroupRequest)
	c := b.groupCoordinatorOr(func(code int16) {
		resp := kmsg.NewPtrSyncGroupResponse()
		resp.Version, resp.ErrorCode = req.Version, code
		r.Respond(resp)
	})
	if c == nil {
		return
	}
	c.SyncGroup(req, func(resp *kmsg.SyncGroupResponse) { r.Respond(resp) })
}
