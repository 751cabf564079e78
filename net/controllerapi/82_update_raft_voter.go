// UpdateRaftVoter (key 82), version 0 (KIP-853), on the controller listener only.
//
// A voter tells the leader its directory id, controller listeners and supported
// kraft.version range; the leader records them in the VotersRecord (a voter of a
// quorum upgraded from kraft.version 0 is recorded without a directory id until it
// sends this; net/node sends it at start and whenever the leader changes while the
// record differs). The member must exist (VOTER_NOT_FOUND); the listeners must
// include the controller listener (INVALID_REQUEST); a voter that does not lead
// answers NOT_CONTROLLER. The answer carries the leader as this voter knows it
// (CurrentLeader, with its controller endpoint). Needs CLUSTER_ACTION (a node's API).
//
// Differences from Apache Kafka: CurrentLeaderEpoch is not compared with the
// leader's epoch (the change is checked against the applied voter set instead).

package controllerapi

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/request"
)

func init() {
	register(request.Spec{Key: 82, MinVersion: 0, MaxVersion: 0}, controlUpdateRaftVoter)
}

func controlUpdateRaftVoter(h *Handler, r *request.Request) {
	req := r.Body.(*kmsg.UpdateRaftVoterRequest)
	resp := r.ResponseKind().(*kmsg.UpdateRaftVoterResponse)
	respond := func(code int16, _ *string) {
		resp.ErrorCode = code
		leader, term := h.voter.Leader()
		resp.CurrentLeader.LeaderID, resp.CurrentLeader.LeaderEpoch = leader, int32(min(term, 1<<31-1))
		if leader < 0 {
			resp.CurrentLeader.LeaderEpoch = -1
		}
		for _, v := range h.voterList() {
			if v.ID == leader {
				resp.CurrentLeader.Host, resp.CurrentLeader.Port = v.Host, v.Port
			}
		}
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
	if bad != "" {
		respond(kerr.InvalidRequest.Code, nil)
		return
	}
	f := req.KRaftVersionFeature
	v := metadata.QuorumVoter{ID: req.VoterID, DirectoryID: req.VoterDirectoryID, Endpoints: eps,
		KRaftVersion: metadata.VersionRange{Min: f.MinSupportedVersion, Max: f.MaxSupportedVersion}}
	h.changeVoters(0, func(vc VoterChanger, t time.Duration) <-chan error {
		return vc.UpdateVoter(v, t)
	}, respond)
}
