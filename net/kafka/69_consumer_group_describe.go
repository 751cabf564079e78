// ConsumerGroupDescribe (key 69), versions 0-1 (KIP-848).
//
// Each consumer group's state (Empty, Assigning, Reconciling, Stable), group and
// assignment epochs, server assignor, and members: epochs, client, subscribed names
// and regex, current assignment (what the member owns, not what it still withdraws)
// and target assignment. A group that does not exist, or is not a consumer group,
// answers GROUP_ID_NOT_FOUND, as Kafka. With ACLs, a group the principal may not
// describe answers GROUP_AUTHORIZATION_FAILED (authz.ConsumerGroupDescribe); authorized
// operations, when asked, report READ, DESCRIBE and DELETE, not computed from the ACLs.
//
// Served with ConsumerGroupHeartbeat: at group.version 1 when
// group.coordinator.rebalance.protocols holds "consumer".

package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

const consumerGroupDescribeKey = 69

func init() {
	register(API{Key: consumerGroupDescribeKey, MinVersion: 0, MaxVersion: 1, Handle: handleConsumerGroupDescribe, Authz: authz.ConsumerGroupDescribe})
}

func handleConsumerGroupDescribe(b *Broker, r *Request) {
	req := r.Body.(*kmsg.ConsumerGroupDescribeRequest)
	fail := func(code int16) {
		resp := kmsg.NewPtrConsumerGroupDescribeResponse()
		resp.Version = req.Version
		for _, g := range req.Groups {
			dg := kmsg.NewConsumerGroupDescribeResponseGroup()
			dg.Group, dg.ErrorCode = g, code
			resp.Groups = append(resp.Groups, dg)
		}
		r.Respond(resp)
	}
	if !b.features().consumer {
		fail(kerr.UnsupportedVersion.Code)
		return
	}
	c := b.groupCoordinatorOr(fail)
	if c == nil {
		return
	}
	r.Respond(c.ConsumerGroupDescribe(req))
}
