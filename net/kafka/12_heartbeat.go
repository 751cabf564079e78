// Heartbeat (key 12), versions 0-4.
//
// Keeps a member's session alive. REBALANCE_IN_PROGRESS tells a member of the last
// generation to rejoin; ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID and (v3+)
// FENCED_INSTANCE_ID fence stale members. As in Kafka 2.4+, a heartbeat between the
// join answer and the sync answer (CompletingRebalance) succeeds.

package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 12, MinVersion: 0, MaxVersion: 4, Handle: handleHeartbeat, Authz: authz.Heartbeat})
}

func handleHeartbeat(b *Broker, r *Request) {
	req := r.Body.(*kmsg.HeartbeatRequest)
	c := b.groupCoordinatorOr(func(code int16) {
		resp := kmsg.NewPtrHeartbeatResponse()
		resp.Version, resp.ErrorCode = req.Version, code
		r.Respond(resp)
	})
	if c == nil {
		return
	}
	r.Respond(c.Heartbeat(req))
}
