// LeaveGroup (key 13), versions 0-5.
//
// v0-v2 remove one member by id; v3+ remove a batch of members named by member id
// and/or group instance id (KIP-345), with an error per member. The group rebalances
// without them at once.

package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 13, MinVersion: 0, MaxVersion: 5, Handle: handleLeaveGroup, Authz: authz.LeaveGroup})
}

func handleLeaveGroup(b *Broker, r *Request) {
	req := r.Body.(*kmsg.LeaveGroupRequest)
	c := b.groupCoordinatorOr(func(code int16) {
		resp := kmsg.NewPtrLeaveGroupResponse()
		resp.Version, resp.ErrorCode = req.Version, code
		r.Respond(resp)
	})
	if c == nil {
		return
	}
	r.Respond(c.LeaveGroup(req))
}
