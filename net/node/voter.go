package node

import (
	"context"

	"github.com/samsa-broker/samsa/coordinator/controller"
	"github.com/samsa-broker/samsa/coordinator/controller/quorum"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// voter presents a raft voter (*quorum.Quorum) as the controller package's seams: the
// Quorum the active controller proposes to, and the CommittedLog a combined node's
// broker and the controller listener read. It only translates types; every method is
// safe from any goroutine, as the quorum's are.
type voter struct{ q *quorum.Quorum }

var (
	_ controller.Quorum       = voter{}
	_ controller.CommittedLog = voter{}
)

// Propose implements controller.Quorum. The result is forwarded from the quorum's
// channel by a goroutine that ends with it (one per proposal in flight).
func (v voter) Propose(recs []metadata.Record) <-chan controller.ProposeResult {
	in := v.q.Propose(recs)
	out := make(chan controller.ProposeResult, 1)
	go func() {
		r := <-in
		out <- controller.ProposeResult{Offset: r.Offset, Err: r.Err}
	}()
	return out
}

// Committed implements controller.Quorum.
func (v voter) Committed() (uint64, *metadata.Image) { return v.q.Committed() }

// CurrentLeadership implements controller.Quorum.
func (v voter) CurrentLeadership() controller.Leadership {
	l := v.q.CurrentLeadership()
	return controller.Leadership{Leader: l.Leader, Term: l.Term, IsLeader: l.IsLeader, ReadyForWrites: l.ReadyForWrites}
}

// Status implements controller.Quorum.
func (v voter) Status() controller.QuorumStatus {
	s := v.q.Status()
	out := controller.QuorumStatus{NodeID: s.NodeID, Leader: s.Leader, Term: s.Term, CommitIndex: s.CommitIndex, LastIndex: s.LastIndex}
	if len(s.Voters) == 0 {
		return out
	}
	endpoints := map[uint64][]metadata.VoterEndpoint{}
	for _, m := range v.q.Members() {
		endpoints[m.RaftID] = m.Endpoints
	}
	conv := func(vs quorum.VoterStatus) controller.VoterStatus {
		return controller.VoterStatus{ID: vs.ID, MatchIndex: vs.MatchIndex, LastContact: vs.LastContact, LastCaughtUp: vs.LastCaughtUp,
			DirectoryID: vs.DirectoryID, Endpoints: endpoints[vs.RaftID]}
	}
	for _, vs := range s.Voters {
		out.Voters = append(out.Voters, conv(vs))
	}
	for _, vs := range s.Learners {
		out.Learners = append(out.Learners, conv(vs))
	}
	return out
}

// ReadCommitted implements controller.CommittedLog.
func (v voter) ReadCommitted(from uint64, maxBytes int) (controller.LogRead, error) {
	r, err := v.q.ReadCommitted(from, maxBytes)
	out := controller.LogRead{SnapshotNeeded: r.SnapshotNeeded, SnapshotOffset: r.SnapshotOffset, Committed: r.Committed, Leader: r.Leader, Term: r.Term}
	if len(r.Entries) > 0 {
		out.Entries = make([]controller.MetadataEntry, len(r.Entries))
		for i, e := range r.Entries {
			out.Entries[i] = controller.MetadataEntry{Offset: e.Offset, Data: e.Data}
		}
	}
	return out, err
}

// Snapshot implements controller.CommittedLog.
func (v voter) Snapshot() (offset, term uint64, data []byte, err error) { return v.q.Snapshot() }

// WaitCommitted implements controller.CommittedLog.
func (v voter) WaitCommitted(ctx context.Context, after uint64) (uint64, error) {
	return v.q.WaitCommitted(ctx, after)
}
