// DescribeGroups (key 15), versions 0-6.
//
// State, protocol and members of each group; member metadata and assignments only for
// Stable groups, as Kafka. Unknown groups are reported Dead (from v6 with
// GROUP_ID_NOT_FOUND). A consumer group (KIP-848) is described by
// ConsumerGroupDescribe, a streams group (KIP-1071) by StreamsGroupDescribe: here they
// are Dead, from v6 with GROUP_ID_NOT_FOUND and "Group <id> is not a classic group.", as
// Kafka 4 answers. Authorized operations (v3+)
// report READ, DESCRIBE and DELETE, not computed from the ACLs.

package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 15, MinVersion: 0, MaxVersion: 6, Handle: handleDescribeGroups, Authz: authz.DescribeGroups})
}

func handleDescribeGroups(b *Broker, r *Request) {
	req := r.Body.(*kmsg.DescribeGroupsRequest)
	c := b.groupCoordinatorOr(func(code int16) {
		resp := kmsg.NewPtrDescribeGroupsResponse()
		resp.Version = req.Version
		for _, g := range req.Groups {
			dg := kmsg.NewDescribeGroupsResponseGroup()
			dg.Group, dg.ErrorCode = g, code
			resp.Groups = append(resp.Groups, dg)
		}
		r.Respond(resp)
	})
	if c == nil {
		return
	}
	r.Respond(c.DescribeGroups(req))
}
