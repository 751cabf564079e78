package quorum

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"go.etcd.io/raft/v3/tracker"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// Tick advances raft's logical clock by one tick (heartbeats, elections, the
// CheckQuorum lease). Core only: the goroutine that calls HandleReady.
func (q *Quorum) Tick() {
	if q.failed == nil {
		defer q.recoverRaft()
		q.rn.Tick()
	}
}

// NextTick returns when the tick after this one is due: TickInterval, or
// TickInterval/FastTickDivisor (at least a millisecond) while this voter does not
// lead, no voter has led since the leader it last followed, that leader is lost
// (Config.LeaderLost), and at most fastElectionTerms elections were started since
// its term. Raft's election timeout is counted in ticks, so the followers of a
// leader whose process died start the election in a tenth of the time, and a split
// vote is retried as soon; safety does not depend on the tick's length. Past those
// elections ticks are TickInterval again, so that a network or disk too slow for
// the short timeout still elects a leader. Run asks it every
// TickInterval/FastTickDivisor; it calls LeaderLost only while this voter does not
// lead. Core only.
func (q *Quorum) NextTick() time.Duration {
	lost := q.cfg.LeaderLost != nil && q.failed == nil && q.state != raft.StateLeader &&
		q.term <= q.lastLeadTerm+fastElectionTerms &&
		q.lastLead != raft.None && q.lastLead != q.self && q.cfg.LeaderLost(NodeOf(q.lastLead))
	if lost != q.leaderLost {
		q.leaderLost = lost
		if lost {
			q.log.Info("the leader's process is gone: ticking faster until a leader is elected",
				"leader", NodeOf(q.lastLead), "term", q.term, "tick", max(q.cfg.TickInterval/FastTickDivisor, time.Millisecond))
		}
	}
	if lost {
		return max(q.cfg.TickInterval/FastTickDivisor, time.Millisecond)
	}
	return q.cfg.TickInterval
}

// recoverRaft turns a panic of raft's (its invariants broken: a log that lost
// acknowledged entries, say) into the voter's fatal error, so that one voter stops
// with an error the operator sees rather than taking its process down. The RawNode
// is not used again.
func (q *Quorum) recoverRaft() {
	if r := recover(); r != nil {
		q.fail(fmt.Errorf("%w: raft: %v", ErrCorrupt, r))
	}
}

// HandleReady does the core's work: it steps the queued messages into raft, then
// handles every Ready (persist, send, apply, Advance), then appends the queued
// proposals and handles the Readys they make, then publishes the status. Core only.
// An error is fatal (a storage write failed or the stored or received state is
// corrupt): the voter stops, every later call returns the same error.
func (q *Quorum) HandleReady() (err error) {
	if q.failed != nil {
		return q.failed
	}
	q.inbox.Lock()
	msgs, props, ops, unreachable, resign := q.inbox.msgs, q.inbox.props, q.inbox.ops, q.inbox.unreachable, q.inbox.resign
	q.inbox.msgs, q.inbox.props, q.inbox.ops, q.inbox.unreachable, q.inbox.bytes, q.inbox.resign = nil, nil, nil, nil, 0, false
	q.inbox.Unlock()
	opsTaken := false
	defer func() {
		if r := recover(); r != nil {
			err = q.fail(fmt.Errorf("%w: raft: %v", ErrCorrupt, r))
		}
		if q.failed != nil {
			for _, p := range props {
				if !p.handled {
					p.ch <- ProposeResult{Err: q.failed}
				}
			}
			if !opsTaken {
				for _, o := range ops {
					o.ch <- q.failed
				}
			}
		}
	}()

	now := q.cfg.Clock.Now()
	for _, m := range msgs {
		q.contact[m.GetFrom()] = now
		// Errors are messages raft does not want (stale responses, peers it does
		// not know); dropping them is what raft expects of a lossy network.
		_ = q.rn.Step(m)
	}
	for _, id := range unreachable {
		q.rn.ReportUnreachable(id)
	}
	if err := q.drain(); err != nil {
		return q.fail(err)
	}
	if len(props) > 0 {
		if err := q.propose(props); err != nil {
			return q.fail(err)
		}
		if err := q.drain(); err != nil {
			return q.fail(err)
		}
	}
	if len(ops) > 0 || q.op != nil {
		opsTaken = true
		if err := q.runVoterOps(ops, now); err != nil {
			return q.fail(err)
		}
	}
	q.handOver()
	if resign && q.state == raft.StateLeader && q.rn.BasicStatus().LeadTransferee == 0 {
		q.leaveLeadership("this voter is shutting down")
	}
	if err := q.drain(); err != nil {
		return q.fail(err)
	}
	q.publishStatus(now)
	return nil
}

// fail stops the voter for good after a fatal error.
func (q *Quorum) fail(err error) error {
	q.failed = fmt.Errorf("%w: %w", ErrStopped, err)
	q.log.Error("quorum voter stopped", "err", err)
	q.stop(q.failed)
	return q.failed
}

// stop fails every queued and pending proposal, refuses new ones and wakes the
// waiters. Core only.
func (q *Quorum) stop(why error) {
	q.inbox.Lock()
	if q.inbox.stopped == nil {
		q.inbox.stopped = why
	}
	props, ops := q.inbox.props, q.inbox.ops
	q.inbox.msgs, q.inbox.props, q.inbox.ops, q.inbox.bytes = nil, nil, nil, 0
	q.inbox.Unlock()
	for _, p := range props {
		p.ch <- ProposeResult{Err: fmt.Errorf("%w: %v", ErrStopped, why)}
	}
	for _, o := range ops {
		o.ch <- fmt.Errorf("%w: %v", ErrStopped, why)
	}
	if q.op != nil {
		q.finishOp(fmt.Errorf("%w: %v", ErrStopped, why))
	}
	q.failPending(fmt.Errorf("%w: %v", ErrStopped, why))
	q.flushResolved()
	lead := Leadership{Leader: -1, Term: q.term}
	q.pub.Lock()
	if q.pub.stopped == nil {
		q.pub.stopped = why
		close(q.pub.changed)
	}
	changed := q.pub.leadership != lead
	q.pub.leadership = lead
	leaderSubs := q.pub.leaderSubs
	q.pub.Unlock()
	if changed {
		for _, fn := range leaderSubs {
			fn(lead)
		}
	}
}

// drain handles Readys until raft has none.
func (q *Quorum) drain() error {
	for q.rn.HasReady() {
		rd := q.rn.Ready()
		if err := q.handle(rd); err != nil {
			return err
		}
		q.rn.Advance(rd)
		for _, id := range q.snapReports {
			// Send does not report delivery: a snapshot counts as sent, and one that
			// was lost is sent again after the follower rejects the next append.
			q.rn.ReportSnapshot(id, raft.SnapshotFinish)
		}
		q.snapReports = q.snapReports[:0]
		q.observe()
		q.publish()
	}
	q.observe()
	q.publish()
	return nil
}

// handle is one Ready, in etcd raft's order: persist the snapshot, the entries and
// the hard state; send the messages; apply the snapshot and the committed entries.
func (q *Quorum) handle(rd raft.Ready) error {
	var snapImage *metadata.Image
	if !raft.IsEmptySnap(rd.Snapshot) {
		md := rd.Snapshot.GetMetadata()
		im, err := metadata.DecodeSnapshot(rd.Snapshot.GetData())
		if err != nil {
			return fmt.Errorf("%w: snapshot at %d from the leader: %v", ErrCorrupt, md.GetIndex(), err)
		}
		if err := q.st.ApplySnapshot(rd.Snapshot); err != nil {
			return err
		}
		snapImage = im
	}
	if rd.HardState != nil || len(rd.Entries) > 0 {
		if err := q.st.Save(rd.HardState, rd.Entries, rd.MustSync); err != nil {
			return err
		}
	}
	if len(rd.Messages) > 0 {
		q.tr.Send(rd.Messages)
		for _, m := range rd.Messages {
			if m.GetType() == raftpb.MsgSnap {
				q.snapReports = append(q.snapReports, m.GetTo())
			}
		}
	}
	if snapImage != nil {
		md := rd.Snapshot.GetMetadata()
		q.image, q.applied, q.appliedTerm, q.snapIndex = snapImage, md.GetIndex(), md.GetTerm(), md.GetIndex()
		q.cs = cloneConfState(md.GetConfState())
		q.publishMembers()
		q.log.Info("applied a snapshot from the leader", "index", md.GetIndex(), "term", md.GetTerm(), "configuration", describeConfState(q.cs))
	}
	q.apply(rd.CommittedEntries)
	return q.maybeSnapshot()
}

// apply applies committed entries to the image, in order.
func (q *Quorum) apply(ents []*raftpb.Entry) {
	for _, e := range ents {
		if e.GetIndex() <= q.applied {
			continue // already in the image (a snapshot covered it)
		}
		var rejected error
		switch e.GetType() {
		case raftpb.EntryNormal:
			if len(e.GetData()) > 0 {
				rejected = q.applyData(e)
			}
		case raftpb.EntryConfChange, raftpb.EntryConfChangeV2:
			rejected = q.applyConfChange(e)
		}
		q.applied, q.appliedTerm = e.GetIndex(), e.GetTerm()
		q.opApplied(e, rejected)
		if p := q.pending[e.GetIndex()]; p != nil {
			delete(q.pending, e.GetIndex())
			var res ProposeResult
			switch {
			case p.term != e.GetTerm() || !bytes.Equal(p.data, e.GetData()):
				res.Err = fmt.Errorf("%w: index %d holds an entry of term %d", ErrLost, e.GetIndex(), e.GetTerm())
			case rejected != nil:
				res = ProposeResult{Offset: e.GetIndex(), Err: fmt.Errorf("%w: %v", ErrRejected, rejected)}
			default:
				res.Offset = e.GetIndex()
			}
			q.resolved = append(q.resolved, resolved{p, res})
		}
	}
}

// applyData applies one entry frame; a frame that does not decode or apply is
// skipped (and logged) — the same on every voter, since every voter has the same
// bytes and the same image.
func (q *Quorum) applyData(e *raftpb.Entry) error {
	recs, n, err := metadata.DecodeEntry(e.GetData())
	if err == nil && n != len(e.GetData()) {
		err = fmt.Errorf("%w: %d bytes after the entry frame", metadata.ErrCorrupt, len(e.GetData())-n)
	}
	var im *metadata.Image
	if err == nil {
		im, err = q.image.Apply(recs...)
	}
	if err != nil {
		q.log.Error("committed metadata entry skipped: its records do not apply", "index", e.GetIndex(), "term", e.GetTerm(), "err", err)
		return err
	}
	q.image = im
	if slices.ContainsFunc(recs, func(r metadata.Record) bool { _, ok := r.(*metadata.VotersRecord); return ok }) {
		q.publishMembers() // endpoints or directory ids changed (UpdateRaftVoter, kraft.version 1)
	}
	return nil
}

// maybeSnapshot takes a snapshot every SnapshotEntries applied entries, and once a
// configuration change that adds a learner has applied: a controller being added
// starts from an empty log, so the leader sends it its newest snapshot, which raft
// refuses unless its configuration holds the new member.
func (q *Quorum) maybeSnapshot() error {
	if q.applied < q.snapIndex+q.cfg.SnapshotEntries && !q.snapForLearner {
		return nil
	}
	q.snapForLearner = false
	start := time.Now()
	data, err := metadata.EncodeSnapshot(nil, q.image)
	if err != nil {
		return fmt.Errorf("snapshot at %d: %w", q.applied, err)
	}
	if err := q.st.CreateSnapshot(q.applied, q.cs, data); err != nil {
		return fmt.Errorf("snapshot at %d: %w", q.applied, err)
	}
	q.snapIndex = q.applied
	q.log.Info("metadata snapshot taken", "index", q.applied, "bytes", len(data), "topics", q.image.NumTopics(), "took", time.Since(start))
	return nil
}

// propose appends the queued proposals to raft's log (leader only). After drain
// raft holds no unstable entries, so the log ends at the storage's last index and
// each accepted proposal takes the next index.
func (q *Quorum) propose(props []*proposal) error {
	last, err := q.st.LastIndex()
	if err != nil {
		return err
	}
	for _, p := range props {
		if !q.leads() {
			p.handled = true
			p.ch <- ProposeResult{Err: ErrNotLeader}
			continue
		}
		if err := q.rn.Propose(p.data); err != nil {
			if !errors.Is(err, raft.ErrProposalDropped) {
				q.log.Warn("proposal refused by raft", "err", err)
			}
			p.handled = true
			p.ch <- ProposeResult{Err: fmt.Errorf("%w: %v", ErrNotLeader, err)}
			continue
		}
		last++
		p.term, p.index = q.term, last
		q.pending[last] = p
		p.handled = true
	}
	return nil
}

// leads reports whether this voter leads the quorum: raft's leader, and a voter of
// the (incoming) configuration. A leader that applied its own removal stays raft's
// leader until it has moved leadership to a voter (handOver), but proposes nothing
// more: the voters left must be able to elect one of them without its vote.
func (q *Quorum) leads() bool {
	return q.state == raft.StateLeader && slices.Contains(q.cs.GetVoters(), q.self)
}

// handOver moves leadership away from a leader that is no voter of its applied
// configuration (it removed itself, or leadership reached the voter being removed):
// to the voter with the highest match index, as soon as raft has one caught up. Core
// only.
func (q *Quorum) handOver() {
	if q.state != raft.StateLeader || q.leads() || q.rn.BasicStatus().LeadTransferee != 0 {
		return
	}
	var best, match uint64
	q.rn.WithProgress(func(id uint64, typ raft.ProgressType, pr tracker.Progress) {
		if typ != raft.ProgressTypeLearner && id != q.self && slices.Contains(q.cs.GetVoters(), id) && (best == 0 || pr.Match > match) {
			best, match = id, pr.Match
		}
	})
	if best != 0 {
		q.log.Info("this leader is no voter of its configuration: moving leadership", "to", fmt.Sprintf("%x", best), "configuration", describeConfState(q.cs))
		q.rn.TransferLeader(best)
	}
}

// observe reads raft's role, leader and term; a leader that lost its role (or its
// term) fails its pending proposals with ErrLost.
func (q *Quorum) observe() {
	bs := q.rn.BasicStatus()
	wasLeader, oldTerm := q.leads(), q.term
	q.term, q.lead, q.state = bs.GetTerm(), bs.Lead, bs.RaftState
	if q.lead != raft.None {
		q.lastLead, q.lastLeadTerm = q.lead, q.term
	}
	if wasLeader && (!q.leads() || q.term != oldTerm) {
		q.failPending(fmt.Errorf("%w: leadership lost in term %d", ErrLost, oldTerm))
	}
}

func (q *Quorum) failPending(err error) {
	for i, p := range q.pending {
		q.resolved = append(q.resolved, resolved{p, ProposeResult{Err: err}})
		delete(q.pending, i)
	}
}

// publish makes the core's image, offset and leadership visible, calls the
// subscribers, then resolves the proposals the applied entries decided.
func (q *Quorum) publish() {
	lead := Leadership{Leader: NodeOf(q.lead), Term: q.term, IsLeader: q.leads()}
	lead.ReadyForWrites = lead.IsLeader && q.appliedTerm == q.term
	q.pub.Lock()
	if q.pub.stopped != nil {
		q.pub.Unlock()
		q.flushResolved()
		return
	}
	moved := q.applied > q.pub.applied
	if moved {
		q.pub.applied, q.pub.image = q.applied, q.image
		close(q.pub.changed)
		q.pub.changed = make(chan struct{})
		// The Status must not lag what the subscribers and the proposers learn
		// below: a broker's metadata barrier (DescribeQuorum's high watermark,
		// right after its write was answered) would otherwise wait for an older
		// offset. publishStatus refreshes the rest at the end of HandleReady.
		st := &q.pub.status
		st.AppliedIndex = q.applied
		st.CommitIndex = max(st.CommitIndex, q.applied)
	}
	leadChanged := lead != q.pub.leadership
	q.pub.leadership = lead
	subs, leaderSubs := q.pub.subs, q.pub.leaderSubs
	q.pub.Unlock()
	if moved {
		for _, fn := range subs {
			fn(q.applied, q.image)
		}
	}
	if leadChanged {
		for _, fn := range leaderSubs {
			fn(lead)
		}
	}
	q.flushResolved()
}

func (q *Quorum) flushResolved() {
	for _, r := range q.resolved {
		r.p.ch <- r.res
	}
	clear(q.resolved)
	q.resolved = q.resolved[:0]
}
