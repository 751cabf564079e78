package group

import (
	"github.com/twmb/franz-go/pkg/kerr"
)

// Committed offsets of streams groups, as Kafka's StreamsGroup validates and expires
// them. offsets.go and txn_offsets.go call these for a group of kind kindStreams.

// validateStreamsCommitLocked checks a commit to a streams group (Kafka's
// StreamsGroup.validateOffsetCommit): with a negative epoch to a group without members
// it is an admin's commit (or an application reset's); a transactional commit that
// names no member (TxnOffsetCommit with member "" and generation -1) passes; else the
// member must exist (UNKNOWN_MEMBER_ID), commit with OffsetCommit v9+ when not
// transactional (UNSUPPORTED_VERSION) and with its current member epoch
// (STALE_MEMBER_EPOCH).
func (g *group) validateStreamsCommitLocked(version int16, epoch int32, memberID string, instanceID *string, txn bool) int16 {
	st := g.st
	if epoch < 0 && len(st.members) == 0 {
		return 0
	}
	if txn && epoch == -1 && memberID == "" && instanceID == nil {
		return 0
	}
	m := st.members[memberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case !txn && version < 9:
		return kerr.UnsupportedVersion.Code
	case epoch != m.epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// validateStreamsFetchLocked checks the member of an OffsetFetch v9+ to a streams group
// (Kafka's StreamsGroup.validateOffsetFetch, as a consumer group's).
func (g *group) validateStreamsFetchLocked(memberID *string, epoch int32) int16 {
	return g.st.fetchMemberCode(memberID, epoch)
}

// streamsOffsetExpiryLocked is ExpireOffsets' rule for a streams group (Kafka's
// StreamsGroup.offsetExpirationCondition and isSubscribedToTopic): an offset expires a
// retention period after its commit unless the group has members and its topology
// reads the topic. keep is nil for an empty group.
func (g *group) streamsOffsetExpiryLocked() (base func(OffsetValue) int64, keep map[string]struct{}) {
	base = func(v OffsetValue) int64 { return v.CommitTimestamp }
	if len(g.st.members) > 0 {
		keep = g.subscriptions
	}
	return base, keep
}

// dropExpiredStreamsLocked deletes a streams group left with no members, no offsets
// and no commit in flight (Kafka deletes such a group when its offsets expire): its
// tombstones are added to recs and the group leaves the coordinator. It reports whether
// it did.
func (g *group) dropExpiredStreamsLocked(recs *[]Record) bool {
	if len(g.st.members) > 0 || len(g.offsets) > 0 || len(g.pendingCommits) > 0 {
		return false
	}
	*recs = append(*recs, g.st.tombstonesLocked(g)...)
	g.transition(stateDead)
	g.stopTimersLocked()
	g.c.dropGroupLocked(g)
	return true
}
