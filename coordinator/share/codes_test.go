package share

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-broker/samsa/coordinator/group"
)

// TestShareStoreCodes: the share coordinator's errors as its APIs answer them.
func TestShareStoreCodes(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int16
	}{
		{nil, 0},
		{ErrNotCoordinator, kerr.NotCoordinator.Code},
		{group.ErrNotLeader, kerr.NotCoordinator.Code},
		{ErrLoading, kerr.CoordinatorLoadInProgress.Code},
		{ErrFenced, kerr.FencedLeaderEpoch.Code},
		{ErrFencedState, kerr.FencedStateEpoch.Code},
		{ErrUninitialized, kerr.InvalidRequest.Code},
		{errors.New("disk gone"), kerr.CoordinatorNotAvailable.Code},
	} {
		if got := ErrorCode(c.err); got != c.want {
			t.Errorf("ErrorCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
