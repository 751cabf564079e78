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

package controllerapi

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/request"
)

func init() {
	register(request.Spec{Key: 80, MinVersion: 0, MaxVersion: 1}, controlAddRaftVoter)
}

func controlAddRaftVoter(h *Handler, r *request.Request) {
	req := r.Body.(*kmsg.AddRaftVoterRequest)
	resp := r.ResponseKind().(*kmsg.AddRaftVoterResponse)
	respond := func(code int16, msg *string) {
		resp.ErrorCode, resp.ErrorMessage = code, msg
		r.Respond(resp)
	}
	if code := h.checkClusterID(req.ClusterID); code != 0 {
		respond(code, nil)
		return
	}
	eps, bad := h.voterEndpoints(len(req.Listeners), func(i int) (string, string, uint16) {
		l := req.Listeners[i]
		return l.Name, l.Host, l.Port
	})
	if bad != "" || req.VoterID < 0 || req.VoterDirectoryID == metadata.ZeroUUID {
		if bad == "" {
			bad = "a voter needs a node id and a directory id"
		}
		respond(kerr.InvalidRequest.Code, &bad)
		return
	}
	v := metadata.QuorumVoter{ID: req.VoterID, DirectoryID: req.VoterDirectoryID, Endpoints: eps, KRaftVersion: supportedKRaft()}
	h.changeVoters(time.Duration(req.TimeoutMillis)*time.Millisecond, func(vc VoterChanger, t time.Duration) <-chan error {
		return vc.AddVoter(v, t)
	}, respond)
}
