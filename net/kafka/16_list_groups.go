// ListGroups (key 16), versions 0-5.
//
// Every group of the __consumer_offsets partitions this broker leads, with the state
// filter (v4+, KIP-518, case-insensitive) and the type filter (v5+, KIP-848: "classic",
// "consumer", "share" or "streams", case-insensitive), as Kafka 4: a consumer group
// (KIP-848) reports type "consumer", protocol type "consumer" and its own states
// (Empty, Assigning, Reconciling, Stable); a streams group (KIP-1071) type "streams",
// protocol type "streams" and its states (Empty, NotReady, which the filter also takes
// as not_ready, Assigning, Reconciling, Stable); a classic group type "classic" and the
// classic states. While partitions load the answer carries
// COORDINATOR_LOAD_IN_PROGRESS with the groups known so far.

package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 16, MinVersion: 0, MaxVersion: 5, Handle: handleListGroups, Authz: authz.ListGroups})
}

func handleListGroups(b *Broker, r *Request) {
	req := r.Body.(*kmsg.ListGroupsRequest)
	c := b.groupCoordinatorOr(func(code int16) {
		resp := kmsg.NewPtrListGroupsResponse()
		resp.Version, resp.ErrorCode = req.Version, code
		r.Respond(resp)
	})
	if c == nil {
		return
	}
	r.Respond(c.ListGroups(req))
}
