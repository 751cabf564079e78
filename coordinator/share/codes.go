package share

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-broker/samsa/coordinator/group"
)

// ErrorCode maps a Store's error to the code the share coordinator's APIs
// (InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState,
// DeleteShareGroupState, ReadShareGroupStateSummary) answer.
func ErrorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrNotCoordinator), errors.Is(err, group.ErrNotLeader):
		return kerr.NotCoordinator.Code
	case errors.Is(err, ErrLoading):
		return kerr.CoordinatorLoadInProgress.Code
	case errors.Is(err, ErrFenced):
		return kerr.FencedLeaderEpoch.Code
	case errors.Is(err, ErrFencedState):
		return kerr.FencedStateEpoch.Code
	case errors.Is(err, ErrUninitialized):
		return kerr.InvalidRequest.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}
