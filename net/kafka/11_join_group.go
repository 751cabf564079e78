// JoinGroup (key 11), versions 0-9.
//
// Joins a member to a classic group (see coordinator/group). The answer waits in the
// coordinator until the rebalance completes (or the rebalance timeout ends it); the
// connection's later requests are answered after it, in order, as Kafka does. v4+
// dynamic members first get MEMBER_ID_REQUIRED with their id (KIP-394); v5+ static
// members (group.instance.id, KIP-345) get their place back without a rebalance; v9
// static leaders learn they lead with SkipAssignment (KIP-814). Joins whose protocol
// metadata exceeds 1 MiB get INVALID_REQUEST.

package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 11, MinVersion: 0, MaxVersion: 9, Handle: handleJoinGroup, Authz: authz.JoinGroup})
}

func handleJoinGroup(b *Broker, r *Request) {
	req := r.Body.(*kmsg.JoinGroupRequest)
	c := b.groupCoordinatorOr(func(code int16) {
		resp := kmsg.NewPtrJoinGroupResponse()
		resp.Version, resp.ErrorCode, resp.Generation, resp.MemberID = req.Version, code, -1, req.MemberID
		r.Respond(resp)
	})
	if c == nil {
		return
	}
	c.JoinGroup(req, r.Header.ClientID, clientHost(r), func(resp *kmsg.JoinGroupResponse) { r.Respond(resp) })
}
