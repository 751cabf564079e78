package controllerapi

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-broker/samsa/coordinator/controller/quorum"
)

// TestVoterChangeError: the quorum's errors of a voter change, wrapped as the
// quorum returns them, map to Kafka's codes.
func TestVoterChangeError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want *kerr.Error
	}{
		{quorum.ErrNotLeader, kerr.NotController},
		{fmt.Errorf("%w: stopped", quorum.ErrStopped), kerr.NotController},
		{fmt.Errorf("%w: leadership lost in term 3", quorum.ErrLost), kerr.NotLeaderForPartition},
		{fmt.Errorf("%w: the voter set is static", quorum.ErrStaticQuorum), kerr.UnsupportedVersion},
		{fmt.Errorf("%w: the voters are changing", quorum.ErrVoterChangePending), kerr.RequestTimedOut},
		{fmt.Errorf("%w after 30s", quorum.ErrTimeout), kerr.RequestTimedOut},
		{context.DeadlineExceeded, kerr.RequestTimedOut},
		{fmt.Errorf("%w: node 2 is a voter", quorum.ErrDuplicateVoter), kerr.DuplicateVoter},
		{fmt.Errorf("%w: no member 3", quorum.ErrVoterNotFound), kerr.VoterNotFound},
		{fmt.Errorf("%w: the last voter", quorum.ErrInvalidVoter), kerr.InvalidRequest},
		{fmt.Errorf("disk"), kerr.UnknownServerError},
	} {
		if got := voterChangeError(tc.err); got != tc.want.Code {
			t.Errorf("%v: code %d, want %s", tc.err, got, tc.want.Message)
		}
	}
}
