package controllerapi

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/controller/quorum"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// VoterChanger is what the controller listener needs of a voter to change the
// quorum's members (AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter; KIP-853):
// *quorum.Quorum, whose leader runs the changes one at a time. Each channel receives
// one result: nil once the change has applied, or an error wrapping one of quorum's
// sentinels (voterChangeError maps them to Kafka's codes). Safe from any goroutine.
type VoterChanger interface {
	AddVoter(v metadata.QuorumVoter, timeout time.Duration) <-chan error
	RemoveVoter(id int32, dir metadata.UUID, timeout time.Duration) <-chan error
	UpdateVoter(v metadata.QuorumVoter, timeout time.Duration) <-chan error
}

var _ VoterChanger = (*quorum.Quorum)(nil)

// voterChangeError maps a voter change's error to Kafka's code, as its
// AddVoterHandler, RemoveVoterHandler and UpdateVoterHandler answer:
//
//	quorum.ErrNotLeader, ErrStopped   NOT_CONTROLLER (ask another voter; brokers'
//	                                  forwarding and samsa metadata-quorum do)
//	quorum.ErrLost                    NOT_LEADER_OR_FOLLOWER (the change may still
//	                                  complete: describe the quorum)
//	quorum.ErrStaticQuorum            UNSUPPORTED_VERSION (kraft.version 0)
//	quorum.ErrVoterChangePending,
//	ErrTimeout, a deadline            REQUEST_TIMED_OUT
//	quorum.ErrDuplicateVoter          DUPLICATE_VOTER
//	quorum.ErrVoterNotFound           VOTER_NOT_FOUND
//	quorum.ErrInvalidVoter            INVALID_REQUEST
func voterChangeError(err error) int16 {
	switch {
	case errors.Is(err, quorum.ErrNotLeader), errors.Is(err, quorum.ErrStopped), errors.Is(err, context.Canceled):
		return kerr.NotController.Code
	case errors.Is(err, quorum.ErrLost):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, quorum.ErrStaticQuorum):
		return kerr.UnsupportedVersion.Code
	case errors.Is(err, quorum.ErrVoterChangePending), errors.Is(err, quorum.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, quorum.ErrDuplicateVoter):
		return kerr.DuplicateVoter.Code
	case errors.Is(err, quorum.ErrVoterNotFound):
		return kerr.VoterNotFound.Code
	case errors.Is(err, quorum.ErrInvalidVoter):
		return kerr.InvalidRequest.Code
	}
	return kerr.UnknownServerError.Code
}

// changeVoters runs one change on the voter (a goroutine of the listener's, bounded
// by timeout) and answers with respond(code, message).
func (h *Handler) changeVoters(timeout time.Duration, start func(VoterChanger, time.Duration) <-chan error, respond func(code int16, msg *string)) {
	vc, ok := h.voter.(VoterChanger)
	if !ok {
		respond(kerr.UnsupportedVersion.Code, kmsg.StringPtr("this voter does not change its quorum's members"))
		return
	}
	if timeout <= 0 {
		timeout = forwardTimeout
	}
	h.async(func(ctx context.Context) {
		ch := start(vc, timeout)
		var err error
		select {
		case err = <-ch:
		case <-ctx.Done():
			err = ctx.Err() // the listener is closing
		}
		if err != nil {
			h.log.Info("voter change refused", "err", err)
			respond(voterChangeError(err), kmsg.StringPtr(err.Error()))
			return
		}
		respond(0, nil)
	})
}

// voterEndpoints converts a request's listeners; it returns a message when they do
// not name this quorum's controller listener (Kafka's check) or are not valid.
func (h *Handler) voterEndpoints(n int, at func(i int) (name, host string, port uint16)) ([]metadata.VoterEndpoint, string) {
	var out []metadata.VoterEndpoint
	found := false
	for i := range n {
		name, host, port := at(i)
		if name == "" || host == "" || port == 0 {
			return nil, "every listener needs a name, a host and a port"
		}
		found = found || name == h.cfg.Listener
		out = append(out, metadata.VoterEndpoint{Name: name, Host: host, Port: port})
	}
	if !found {
		return nil, "the voter's listeners do not include the controller listener " + h.cfg.Listener
	}
	return out, ""
}

// supportedKRaft is the kraft.version range this build supports, as a voter records it.
func supportedKRaft() metadata.VersionRange {
	return metadata.SupportedFeatures()[metadata.FeatureKRaftVersion]
}
