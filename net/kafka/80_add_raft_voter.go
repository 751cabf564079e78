// AddRaftVoter (key 80), versions 0-1 (KIP-853).
//
// On a broker listener: forwarded to the active controller, as Kafka's brokers do.
// On the controller listener: the quorum's leader adds the controller VoterID with
// metadata directory VoterDirectoryID and its Listeners (which must include the
// controller listener) to the voters: first as a raft learner that catches up, then
// as a voter in a joint configuration raft leaves by itself
// (coordinator/controller/quorum, voterops.go); the answer comes once the new voter
// set has committed, or at TimeoutMillis (REQUEST_TIMED_OUT: the change may still
// complete). A voter that does not lead answers NOT_CONTROLLER. Errors as Kafka's:
// UNSUPPORTED_VERSION on a static quorum (kraft.version 0), DUPLICATE_VOTER when the
// node id is a voter already, REQUEST_TIMED_OUT while another change is in progress,
// INVALID_REQUEST for listeners without the controller listener. Needs ALTER on the
// cluster (coordinator/acl).
//
// Differences from Apache Kafka: v1's AckWhenCommitted=false is answered as true
// (once the new voter set has committed); the leader does not ask the new controller
// for its ApiVersions first (a controller that cannot catch up times the request
// out and stays a learner: remove it with RemoveRaftVoter).

package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(API{Key: 80, MinVersion: 0, MaxVersion: 1, Handle: handleAddRaftVoter})
}

func handleAddRaftVoter(b *Broker, r *Request) {
	req := r.Body.(*kmsg.AddRaftVoterRequest)
	b.forward(r, forwarded{timeout: time.Duration(req.TimeoutMillis) * time.Millisecond, write: true})
}
