// StreamsGroupDescribe (key 89), versions 0-1 (KIP-1071).
//
// Each streams group's state (Empty, NotReady, Assigning, Reconciling, Stable), group
// and assignment epochs, topology (configured, with the partition counts of its
// internal topics, once it is ready; as its members sent it before) and members:
// epochs, client, process id, user endpoint, client tags, topology epoch, current
// assignment (the active, standby and warm-up tasks the member owns, not those it still
// revokes) and target assignment. A group that does not exist, or is not a streams
// group, answers GROUP_ID_NOT_FOUND, as Kafka. v1: the assignor's name ("sticky"); a
// topology description asked for answers NOT_STORED (descriptions are not kept).
// Members report no task offsets (warm-up tasks are not built, so they are not kept).
// With ACLs (authz.StreamsGroupDescribe), a group the principal may not describe answers
// GROUP_AUTHORIZATION_FAILED and one whose topology names a topic it may not describe
// TOPIC_AUTHORIZATION_FAILED; authorized operations, when asked, come from the ACLs
// (without an authorizer: READ, DESCRIBE and DELETE, as ConsumerGroupDescribe).
//
// Served with StreamsGroupHeartbeat: at streams.version 1 when
// group.coordinator.rebalance.protocols holds "streams".

package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: streamsGroupDescribeKey, MinVersion: 0, MaxVersion: 1, Handle: handleStreamsGroupDescribe, Authz: authz.StreamsGroupDescribe})
}

func handleStreamsGroupDescribe(b *Broker, r *Request) {
	req := r.Body.(*kmsg.StreamsGroupDescribeRequest)
	fail := func(code int16) {
		resp := kmsg.NewPtrStreamsGroupDescribeResponse()
		resp.Version = req.Version
		for _, g := range req.Groups {
			dg := kmsg.NewStreamsGroupDescribeResponseGroup()
			dg.Group, dg.ErrorCode = g, code
			resp.Groups = append(resp.Groups, dg)
		}
		r.Respond(resp)
	}
	if !b.features().streams {
		fail(kerr.UnsupportedVersion.Code)
		return
	}
	c := b.groupCoordinatorOr(fail)
	if c == nil {
		return
	}
	r.Respond(c.StreamsGroupDescribe(req))
}
