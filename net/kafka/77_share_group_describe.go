// ShareGroupDescribe (key 77), version 1 (KIP-932).
//
// Each share group's state (Empty, Stable), group and assignment epochs, assignor
// ("simple") and members: epochs, client, subscribed topic names and assignment. A
// group that does not exist, or is not a share group, answers GROUP_ID_NOT_FOUND.
// With ACLs, a group the principal may not describe answers
// GROUP_AUTHORIZATION_FAILED (authz.ShareGroupDescribe). Served only when share groups are
// enabled (see ShareGroupHeartbeat).

package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 77, MinVersion: 1, MaxVersion: 1, Handle: handleShareGroupDescribe, Authz: authz.ShareGroupDescribe})
}

func handleShareGroupDescribe(b *Broker, r *Request) {
	req := r.Body.(*kmsg.ShareGroupDescribeRequest)
	fail := func(code int16) {
		resp := kmsg.NewPtrShareGroupDescribeResponse()
		resp.Version = req.Version
		for _, g := range req.GroupIDs {
			dg := kmsg.NewShareGroupDescribeResponseGroup()
			dg.GroupID, dg.ErrorCode = g, code
			resp.Groups = append(resp.Groups, dg)
		}
		r.Respond(resp)
	}
	if !b.features().share {
		fail(kerr.UnsupportedVersion.Code)
		return
	}
	c := b.groupCoordinatorOr(fail)
	if c == nil {
		return
	}
	r.Respond(c.ShareGroupDescribe(req))
}
