// OffsetDelete (key 47), version 0.
//
// Deletes committed offsets of a group (KIP-496): allowed for an Empty group, and for
// a consumer group's topics it does not subscribe to (others get
// GROUP_SUBSCRIBED_TO_TOPIC); answers once the tombstones are durable.

package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 47, MinVersion: 0, MaxVersion: 0, Handle: handleOffsetDelete, Authz: authz.OffsetDelete})
}

func handleOffsetDelete(b *Broker, r *Request) {
	req := r.Body.(*kmsg.OffsetDeleteRequest)
	c := b.groupCoordinatorOr(func(code int16) {
		resp := kmsg.NewPtrOffsetDeleteResponse()
		resp.Version, resp.ErrorCode = req.Version, code
		r.Respond(resp)
	})
	if c == nil {
		return
	}
	c.OffsetDelete(req, func(resp *kmsg.OffsetDeleteResponse) { r.Respond(resp) })
}
