package quorum

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// Entry is one committed metadata log entry.
type Entry struct {
	Offset uint64 // raft index
	Term   uint64
	// Data is the entry's metadata.EncodeEntry frame: a normal entry's data, a
	// configuration change's context (its VotersRecord); nil for an entry without
	// records (raft's empty entry of a new term, raft's leaving of a joint
	// configuration). Shared with the storage: do not modify.
	Data []byte
}

// ReadResult answers ReadCommitted.
type ReadResult struct {
	// Entries are committed entries from the offset asked for on, consecutive.
	Entries []Entry
	// SnapshotNeeded: the offset asked for is compacted; read Snapshot, then read
	// on from SnapshotOffset+1. SnapshotOffset and SnapshotTerm name that snapshot.
	SnapshotNeeded               bool
	SnapshotOffset, SnapshotTerm uint64
	// Committed is the last committed (and applied here) offset; the high
	// watermark of the metadata log is Committed+1.
	Committed uint64
	// Leader (-1: unknown) and Term, as this voter knows them.
	Leader int32
	Term   uint64
}

// ReadCommitted returns the committed entries from offset from (1 if 0) on, about
// maxBytes of them (at least one when there is one), or SnapshotNeeded when from is
// compacted away. Entries past this voter's applied offset are not returned. Safe
// from any goroutine.
func (q *Quorum) ReadCommitted(from uint64, maxBytes int) (ReadResult, error) {
	from = max(from, 1)
	q.pub.Lock()
	res := ReadResult{Committed: q.pub.applied, Leader: q.pub.leadership.Leader, Term: q.pub.leadership.Term}
	stopped := q.pub.stopped
	q.pub.Unlock()
	if stopped != nil {
		return res, fmt.Errorf("%w: %v", ErrStopped, stopped)
	}
	if from > res.Committed {
		return res, nil
	}
	ents, err := q.st.Entries(from, res.Committed+1, uint64(max(maxBytes, 0)))
	if errors.Is(err, raft.ErrCompacted) {
		snap, serr := q.st.Snapshot()
		if serr != nil {
			return res, serr
		}
		res.SnapshotNeeded = true
		res.SnapshotOffset, res.SnapshotTerm = snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm()
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("quorum: read %d..%d: %w", from, res.Committed, err)
	}
	res.Entries = make([]Entry, len(ents))
	for i, e := range ents {
		res.Entries[i] = Entry{Offset: e.GetIndex(), Term: e.GetTerm(), Data: entryRecords(e)}
	}
	return res, nil
}

// entryRecords returns the metadata entry frame an entry carries: a normal entry's
// data, a configuration change's context (the VotersRecord of the members after it),
// nil for none.
func entryRecords(e *raftpb.Entry) []byte {
	switch e.GetType() {
	case raftpb.EntryNormal:
		if len(e.GetData()) > 0 {
			return e.GetData()
		}
	case raftpb.EntryConfChangeV2:
		cc := &raftpb.ConfChangeV2{}
		if proto.Unmarshal(e.GetData(), cc) == nil && len(cc.GetContext()) > 0 {
			return cc.GetContext()
		}
	}
	return nil
}

// Snapshot returns the newest snapshot: its offset (raft index), term and data
// (metadata.EncodeSnapshot; shared, do not modify). Safe from any goroutine.
func (q *Quorum) Snapshot() (offset, term uint64, data []byte, err error) {
	snap, err := q.st.Snapshot()
	if err != nil {
		return 0, 0, nil, err
	}
	return snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm(), snap.GetData(), nil
}

// WaitCommitted blocks until the published offset passes after, and returns it; or
// until ctx ends or the quorum stops (with the offset and the error). Safe from any
// goroutine.
func (q *Quorum) WaitCommitted(ctx context.Context, after uint64) (uint64, error) {
	for {
		q.pub.Lock()
		applied, ch, stopped := q.pub.applied, q.pub.changed, q.pub.stopped
		q.pub.Unlock()
		if applied > after {
			return applied, nil
		}
		if stopped != nil {
			return applied, fmt.Errorf("%w: %v", ErrStopped, stopped)
		}
		select {
		case <-ctx.Done():
			return applied, ctx.Err()
		case <-ch:
		}
	}
}

// Status is a voter's view of the quorum, for DescribeQuorum.
type Status struct {
	NodeID int32
	Leader int32 // -1: unknown
	Term   uint64
	// Role is "leader", "follower", "candidate" or "pre-candidate".
	Role string
	// CommitIndex is raft's commit index; the high watermark is CommitIndex+1.
	CommitIndex uint64
	// AppliedIndex is the offset of the published image.
	AppliedIndex uint64
	// FirstIndex and LastIndex bound the retained log; SnapshotIndex is the newest
	// snapshot's.
	FirstIndex, LastIndex, SnapshotIndex uint64
	// Voters, on the leader only, is every voter's replication state, by id;
	// Learners the same of the controllers being added (DescribeQuorum's
	// observers).
	Voters, Learners []VoterStatus
}

// VoterStatus is one member's replication state as the leader sees it.
type VoterStatus struct {
	ID          int32
	DirectoryID metadata.UUID // zero: not recorded (a static quorum)
	RaftID      uint64
	// MatchIndex is the last index known replicated on the voter; Lag is the
	// leader's last index minus it.
	MatchIndex, Lag uint64
	// LastContact is when the leader last heard from the voter; LastCaughtUp when it
	// last saw the voter's match reach the leader's last index (zero: never). The
	// leader's own entry is always now.
	LastContact, LastCaughtUp time.Time
}

// Status returns the status the core last published. Safe from any goroutine.
func (q *Quorum) Status() Status {
	q.pub.Lock()
	defer q.pub.Unlock()
	s := q.pub.status
	s.Voters, s.Learners = slices.Clone(s.Voters), slices.Clone(s.Learners)
	return s
}

func roleName(s raft.StateType) string {
	switch s {
	case raft.StateLeader:
		return "leader"
	case raft.StateCandidate:
		return "candidate"
	case raft.StatePreCandidate:
		return "pre-candidate"
	}
	return "follower"
}

// publishStatus refreshes the published Status. Core only.
func (q *Quorum) publishStatus(now time.Time) {
	bs := q.rn.BasicStatus()
	first, _ := q.st.FirstIndex()
	last, _ := q.st.LastIndex()
	q.pub.Lock()
	defer q.pub.Unlock()
	s := &q.pub.status
	*s = Status{NodeID: q.cfg.NodeID, Leader: NodeOf(bs.Lead), Term: bs.GetTerm(), Role: roleName(bs.RaftState),
		CommitIndex: bs.GetCommit(), AppliedIndex: q.applied, FirstIndex: first, LastIndex: last,
		SnapshotIndex: q.snapIndex, Voters: s.Voters[:0], Learners: s.Learners[:0]}
	if bs.RaftState != raft.StateLeader {
		return
	}
	q.contact[q.self] = now
	recorded, _ := q.image.QuorumVoters()
	q.rn.WithProgress(func(id uint64, typ raft.ProgressType, pr tracker.Progress) {
		if pr.Match >= last {
			q.caughtUp[id] = now
		}
		vs := VoterStatus{ID: NodeOf(id), RaftID: id, MatchIndex: pr.Match, Lag: last - min(pr.Match, last),
			LastContact: q.contact[id], LastCaughtUp: q.caughtUp[id]}
		for _, v := range recorded {
			if v.RaftID == id {
				vs.DirectoryID = v.DirectoryID
			}
		}
		if typ == raft.ProgressTypeLearner {
			s.Learners = append(s.Learners, vs)
		} else {
			s.Voters = append(s.Voters, vs)
		}
	})
	byID := func(a, b VoterStatus) int { return int(a.ID) - int(b.ID) }
	slices.SortFunc(s.Voters, byID)
	slices.SortFunc(s.Learners, byID)
}
