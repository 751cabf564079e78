package quorum

import (
	"fmt"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// Changes of the voter set (KIP-853's AddRaftVoter, RemoveRaftVoter and
// UpdateRaftVoter), run by the leader's core one at a time (membership.go has the
// configuration changes they make). Each is checked as Kafka's handlers check it:
//
//  1. this voter leads (ErrNotLeader) and has applied its term's first entry (the
//     change waits for it, up to its deadline: ErrTimeout);
//  2. the quorum is dynamic: the log records its voters (ErrStaticQuorum,
//     kraft.version 0);
//  3. no other change is in progress: none queued before it, no joint
//     configuration (ErrVoterChangePending);
//  4. add: no voter has the node id (ErrDuplicateVoter); remove, update: a member
//     has the node id and directory id (ErrVoterNotFound); remove: it is not the
//     last voter (ErrInvalidVoter).
//
// An add makes the controller a learner, waits until its match index reaches the
// commit index the leader had when the learner's entry applied, then makes it a
// voter; a controller that is already a learner (an add that timed out) goes on from
// there. Each change resolves when its last entry has applied here, or with
// ErrTimeout at its deadline (its entries may still commit: DescribeQuorum shows the
// outcome), ErrLost when leadership is lost on the way, ErrStopped when the voter
// stops.

type voterOpKind uint8

const (
	opAdd voterOpKind = iota + 1
	opRemove
	opUpdate
)

func (k voterOpKind) String() string {
	switch k {
	case opAdd:
		return "add"
	case opRemove:
		return "remove"
	}
	return "update"
}

type opStage uint8

const (
	stageStart   opStage = iota
	stageLearner         // the learner's entry is proposed
	stageCatchUp         // the learner catches up
	stageJoint           // the entry entering the joint configuration (add: as a voter; remove) is proposed
	stageLeave           // waiting for raft to leave the joint configuration
	stageEntry           // the op's last entry is proposed
)

// voterOp is one change of the voter set: queued by AddVoter, RemoveVoter or
// UpdateVoter, then the core's.
type voterOp struct {
	kind     voterOpKind
	voter    metadata.QuorumVoter // add, update: the member as it is to be recorded; remove: its ID and DirectoryID
	timeout  time.Duration
	deadline time.Time
	ch       chan error

	stage       opStage
	index, term uint64 // the entry awaited (0: none)
	applied     bool   // it applied as proposed
	failed      error  // it did not
	target      uint64 // add: the index the learner must reach
}

// AddVoter adds controller v (ID, DirectoryID, Endpoints, KRaftVersion; RaftID and
// Learner are set here) to the voters, within timeout. The channel (buffered)
// receives nil once v is a voter and the configuration is no longer joint, or the
// error. Safe from any goroutine.
func (q *Quorum) AddVoter(v metadata.QuorumVoter, timeout time.Duration) <-chan error {
	v.RaftID, v.Learner = DynamicRaftID(v.ID, v.DirectoryID), false
	v.Endpoints = slices.Clone(v.Endpoints)
	return q.queueOp(&voterOp{kind: opAdd, voter: v, timeout: timeout})
}

// RemoveVoter removes the member with node id and directory dir (a voter, or a
// learner left by an add that timed out), within timeout. Safe from any goroutine.
func (q *Quorum) RemoveVoter(id int32, dir metadata.UUID, timeout time.Duration) <-chan error {
	return q.queueOp(&voterOp{kind: opRemove, voter: metadata.QuorumVoter{ID: id, DirectoryID: dir}, timeout: timeout})
}

// UpdateVoter records the endpoints and kraft.version range of v (the member with
// its ID and DirectoryID; a member recorded without a directory id and with the
// static raft id of its node takes v's), within timeout. Safe from any goroutine.
func (q *Quorum) UpdateVoter(v metadata.QuorumVoter, timeout time.Duration) <-chan error {
	v.Endpoints = slices.Clone(v.Endpoints)
	return q.queueOp(&voterOp{kind: opUpdate, voter: v, timeout: timeout})
}

func (q *Quorum) queueOp(o *voterOp) <-chan error {
	o.ch = make(chan error, 1)
	if !q.IsLeader() {
		o.ch <- ErrNotLeader
		return o.ch
	}
	q.inbox.Lock()
	switch {
	case q.inbox.stopped != nil:
		o.ch <- fmt.Errorf("%w: %v", ErrStopped, q.inbox.stopped)
	case len(q.inbox.ops) > 0:
		o.ch <- fmt.Errorf("%w: another change of the voter set is queued", ErrVoterChangePending)
	default:
		q.inbox.ops = append(q.inbox.ops, o)
	}
	q.inbox.Unlock()
	q.wake()
	return o.ch
}

// runVoterOps takes the queued ops and moves the current one on, handling the Readys
// its proposals make. Core only.
func (q *Quorum) runVoterOps(ops []*voterOp, now time.Time) error {
	for _, o := range ops {
		if q.op != nil {
			o.ch <- fmt.Errorf("%w: the %s of voter %d is in progress", ErrVoterChangePending, q.op.kind, q.op.voter.ID)
			continue
		}
		o.deadline = now.Add(o.timeout)
		q.op = o
		q.log.Info("voter change started", "change", o.kind.String(), "voter", o.voter.ID, "directory_id", o.voter.DirectoryID.String(), "timeout", o.timeout)
	}
	for i := 0; q.op != nil && i < 4; i++ {
		proposed := q.advanceOp(now)
		if err := q.drain(); err != nil {
			return err
		}
		if !proposed {
			break
		}
	}
	return nil
}

// finishOp resolves the current op with err.
func (q *Quorum) finishOp(err error) {
	o := q.op
	q.op = nil
	if err != nil {
		q.log.Warn("voter change failed", "change", o.kind.String(), "voter", o.voter.ID, "directory_id", o.voter.DirectoryID.String(), "err", err)
	} else {
		q.log.Info("voter change done", "change", o.kind.String(), "voter", o.voter.ID, "directory_id", o.voter.DirectoryID.String(),
			"configuration", describeConfState(q.cs))
	}
	o.ch <- err
}

// opApplied notes that entry e applied (rejected: its records did not); the op
// waiting for it moves on. Core only, from apply.
func (q *Quorum) opApplied(e *raftpb.Entry, rejected error) {
	o := q.op
	if o == nil {
		return
	}
	if o.index != 0 && e.GetIndex() == o.index {
		wantConf := o.stage != stageEntry || o.kind == opRemove
		switch {
		case e.GetTerm() != o.term:
			o.failed = fmt.Errorf("%w: index %d holds an entry of term %d", ErrLost, e.GetIndex(), e.GetTerm())
		case wantConf && e.GetType() == raftpb.EntryNormal:
			o.failed = fmt.Errorf("%w: raft refused the configuration change at index %d", ErrVoterChangePending, e.GetIndex())
		case rejected != nil:
			o.failed = fmt.Errorf("%w: %v", ErrRejected, rejected)
		default:
			o.applied = true
		}
		o.index = 0
	}
	if o.stage == stageLeave && !joint(q.cs) {
		q.finishOp(nil) // before raft steps down a leader that removed itself
	}
}

// advanceOp moves the current op on; it reports whether it proposed an entry.
func (q *Quorum) advanceOp(now time.Time) bool {
	o := q.op
	if o.failed != nil {
		q.finishOp(o.failed)
		return false
	}
	if o.applied {
		o.applied = false
		switch o.stage {
		case stageLearner:
			o.stage, o.target = stageCatchUp, q.rn.BasicStatus().GetCommit()
			q.log.Info("voter change: the learner is in the configuration; waiting for it to catch up", "voter", o.voter.ID, "target", o.target)
		case stageJoint:
			o.stage = stageLeave
		case stageEntry:
			q.finishOp(nil)
			return false
		}
	}
	if o.stage == stageLeave && !joint(q.cs) {
		q.finishOp(nil)
		return false
	}
	if !q.leads() {
		err := error(ErrNotLeader)
		if o.stage != stageStart {
			err = fmt.Errorf("%w: leadership lost in term %d; the change may still complete (describe the quorum to know)", ErrLost, q.term)
		}
		q.finishOp(err)
		return false
	}
	if now.After(o.deadline) {
		q.finishOp(fmt.Errorf("%w after %v at stage %d (the change may still complete: describe the quorum to know)", ErrTimeout, o.timeout, o.stage))
		return false
	}
	switch o.stage {
	case stageStart:
		return q.startOp(o)
	case stageCatchUp:
		if q.matchOf(o.voter.RaftID) < o.target {
			return false
		}
		return q.proposeOpConf(o, stageJoint, raftpb.ConfChangeAddNode, raftpb.ConfChangeTransitionJointImplicit)
	}
	return false
}

// leaveLeadership moves leadership to the voter with the highest match index, saying
// why in the log.
func (q *Quorum) leaveLeadership(why string) {
	var best, match uint64
	q.rn.WithProgress(func(id uint64, typ raft.ProgressType, pr tracker.Progress) {
		if typ != raft.ProgressTypeLearner && id != q.self && (best == 0 || pr.Match > match) {
			best, match = id, pr.Match
		}
	})
	if best != 0 {
		q.log.Info("moving leadership: "+why, "to", fmt.Sprintf("%x", best))
		q.rn.TransferLeader(best)
	}
}

// matchOf is member id's match index as the leader tracks it (0: unknown).
func (q *Quorum) matchOf(id uint64) uint64 {
	var m uint64
	q.rn.WithProgress(func(pid uint64, _ raft.ProgressType, pr tracker.Progress) {
		if pid == id {
			m = pr.Match
		}
	})
	return m
}

// startOp checks the op (the rules in the file's comment) and proposes its first
// entry; it reports whether it proposed one.
func (q *Quorum) startOp(o *voterOp) bool {
	if q.appliedTerm != q.term {
		// A leader just elected (often because the last one handed over before
		// its removal): the change waits, within its deadline, for the term's
		// first entry to apply, where Kafka answers REQUEST_TIMED_OUT at once.
		return false
	}
	recorded, dynamic := q.image.QuorumVoters()
	if !dynamic {
		q.finishOp(fmt.Errorf("%w: the voter set is static (kraft.version %d)", ErrStaticQuorum, q.image.FinalizedLevel(metadata.FeatureKRaftVersion)))
		return false
	}
	if joint(q.cs) {
		q.finishOp(fmt.Errorf("%w: the voters are changing (%s)", ErrVoterChangePending, describeConfState(q.cs)))
		return false
	}
	find := func(match func(metadata.QuorumVoter) bool) int {
		return slices.IndexFunc(recorded, match)
	}
	switch o.kind {
	case opAdd:
		if i := find(func(v metadata.QuorumVoter) bool {
			return v.ID == o.voter.ID && !(v.Learner && v.RaftID == o.voter.RaftID)
		}); i >= 0 {
			v := recorded[i]
			q.finishOp(fmt.Errorf("%w: node %d (directory %s) is already %s of the quorum", ErrDuplicateVoter, v.ID, v.DirectoryID, roleOf(v)))
			return false
		}
		if slices.Contains(q.cs.GetLearners(), o.voter.RaftID) {
			o.stage, o.target = stageCatchUp, q.rn.BasicStatus().GetCommit()
			q.log.Info("voter change: the controller is a learner already; waiting for it to catch up", "voter", o.voter.ID, "target", o.target)
			return q.advanceOp(time.Time{})
		}
		return q.proposeOpConf(o, stageLearner, raftpb.ConfChangeAddLearnerNode, raftpb.ConfChangeTransitionAuto)
	case opRemove:
		i := find(func(v metadata.QuorumVoter) bool { return v.ID == o.voter.ID && v.DirectoryID == o.voter.DirectoryID })
		if i < 0 || !slices.Contains(confStateIDs(q.cs), recorded[i].RaftID) {
			q.finishOp(fmt.Errorf("%w: no member %d with directory %s (members: %s)", ErrVoterNotFound, o.voter.ID, o.voter.DirectoryID, memberKeys(recorded)))
			return false
		}
		o.voter = recorded[i]
		if o.voter.Learner {
			return q.proposeOpConf(o, stageEntry, raftpb.ConfChangeRemoveNode, raftpb.ConfChangeTransitionAuto)
		}
		if len(q.cs.GetVoters()) == 1 {
			q.finishOp(fmt.Errorf("%w: voter %d is the last voter", ErrInvalidVoter, o.voter.ID))
			return false
		}
		if o.voter.RaftID == q.self {
			// A leader that removed itself would leave the voters unable to elect
			// one of them without its vote until they learn that the change
			// committed: leadership moves first, and the new leader removes it.
			q.leaveLeadership("before this voter's removal")
			q.finishOp(fmt.Errorf("%w: voter %d is this leader; leadership is moving to another voter: ask the new leader", ErrNotLeader, o.voter.ID))
			return false
		}
		return q.proposeOpConf(o, stageJoint, raftpb.ConfChangeRemoveNode, raftpb.ConfChangeTransitionJointImplicit)
	default:
		i := find(func(v metadata.QuorumVoter) bool { return v.ID == o.voter.ID && v.DirectoryID == o.voter.DirectoryID })
		if i < 0 {
			i = find(func(v metadata.QuorumVoter) bool {
				return v.ID == o.voter.ID && v.DirectoryID == metadata.ZeroUUID && v.RaftID == RaftID(v.ID)
			})
		}
		if i < 0 {
			q.finishOp(fmt.Errorf("%w: no member %d with directory %s (members: %s)", ErrVoterNotFound, o.voter.ID, o.voter.DirectoryID, memberKeys(recorded)))
			return false
		}
		next := slices.Clone(recorded)
		u := next[i]
		u.DirectoryID, u.Endpoints, u.KRaftVersion = o.voter.DirectoryID, o.voter.Endpoints, o.voter.KRaftVersion
		next[i] = u
		if _, err := (&metadata.Image{}).Apply(&metadata.VotersRecord{Voters: next}); err != nil {
			q.finishOp(fmt.Errorf("%w: %v", ErrInvalidVoter, err))
			return false
		}
		data := metadata.EncodeEntry(nil, &metadata.VotersRecord{Voters: next})
		last, _ := q.st.LastIndex()
		if err := q.rn.Propose(data); err != nil {
			q.finishOp(fmt.Errorf("%w: %v", ErrNotLeader, err))
			return false
		}
		o.stage, o.index, o.term = stageEntry, last+1, q.term
		return true
	}
}

func roleOf(v metadata.QuorumVoter) string {
	if v.Learner {
		return "a learner"
	}
	return "a voter"
}

// memberKeys is "1:<dir>, 2:<dir>" of the recorded members.
func memberKeys(vs []metadata.QuorumVoter) string {
	var b []byte
	for i, v := range vs {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = fmt.Appendf(b, "%d:%s", v.ID, v.DirectoryID)
	}
	return string(b)
}

// proposeOpConf proposes the configuration change of op o's member (typ, in
// transition tr) with the members after it in its context, and moves o to stage.
func (q *Quorum) proposeOpConf(o *voterOp, stage opStage, typ raftpb.ConfChangeType, tr raftpb.ConfChangeTransition) bool {
	recorded, _ := q.image.QuorumVoters()
	next := slices.DeleteFunc(slices.Clone(recorded), func(v metadata.QuorumVoter) bool { return v.RaftID == o.voter.RaftID })
	switch typ {
	case raftpb.ConfChangeAddLearnerNode:
		v := o.voter
		v.Learner = true
		next = append(next, v)
	case raftpb.ConfChangeAddNode:
		v := o.voter
		v.Learner = false
		next = append(next, v)
	}
	cc := &raftpb.ConfChangeV2{Transition: tr.Enum(),
		Changes: []*raftpb.ConfChangeSingle{{Type: typ.Enum(), NodeId: proto.Uint64(o.voter.RaftID)}},
		Context: metadata.EncodeEntry(nil, &metadata.VotersRecord{Voters: next})}
	if err := checkConfChange(q.cs, cc); err != nil {
		q.finishOp(fmt.Errorf("%w: %v", ErrInvalidVoter, err))
		return false
	}
	if _, err := (&metadata.Image{}).Apply(&metadata.VotersRecord{Voters: next}); err != nil {
		q.finishOp(fmt.Errorf("%w: %v", ErrInvalidVoter, err))
		return false
	}
	last, _ := q.st.LastIndex()
	if err := q.rn.ProposeConfChange(cc); err != nil {
		q.finishOp(fmt.Errorf("%w: %v", ErrNotLeader, err))
		return false
	}
	o.stage, o.index, o.term = stage, last+1, q.term
	q.log.Info("voter change: proposing a configuration change", "change", confchangeString(cc), "index", o.index, "term", o.term)
	return true
}

func confchangeString(cc *raftpb.ConfChangeV2) string {
	s := ""
	for i, c := range cc.GetChanges() {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%s(%x)", c.GetType(), c.GetNodeId())
	}
	if _, j := cc.EnterJoint(); j {
		s += " joint"
	}
	return s
}

// applyConfChange applies a committed configuration change: the records of its
// context to the image (skipped, like a normal entry's, when they do not apply) and
// the change to raft's configuration (skipped, and logged, when raft's rules refuse
// it: the same on every voter). In a static quorum no voter proposes one; one that
// commits is cancelled (raft's way: a change of node 0). Core only.
func (q *Quorum) applyConfChange(e *raftpb.Entry) error {
	var cc *raftpb.ConfChangeV2
	if e.GetType() == raftpb.EntryConfChange {
		v1 := &raftpb.ConfChange{}
		if err := proto.Unmarshal(e.GetData(), v1); err != nil {
			q.log.Error("committed conf change skipped: it does not decode", "index", e.GetIndex(), "err", err)
			return err
		}
		cc = v1.AsV2()
	} else {
		cc = &raftpb.ConfChangeV2{}
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			q.log.Error("committed conf change skipped: it does not decode", "index", e.GetIndex(), "err", err)
			return err
		}
	}
	var rejected error
	if ctx := cc.GetContext(); len(ctx) > 0 {
		recs, n, err := metadata.DecodeEntry(ctx)
		if err == nil && n != len(ctx) {
			err = fmt.Errorf("%w: %d bytes after the entry frame", metadata.ErrCorrupt, len(ctx)-n)
		}
		var im *metadata.Image
		if err == nil {
			im, err = q.image.Apply(recs...)
		}
		if err != nil {
			q.log.Error("the records of a committed conf change skipped: they do not apply", "index", e.GetIndex(), "term", e.GetTerm(), "err", err)
			rejected = err
		} else {
			q.image = im
		}
	}
	if _, dynamic := q.image.QuorumVoters(); !dynamic && !joint(q.cs) {
		q.log.Error("committed conf change ignored: the voter set is static", "index", e.GetIndex(), "term", e.GetTerm())
		q.rn.ApplyConfChange(&raftpb.ConfChange{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: proto.Uint64(0)})
		q.publishMembers()
		return rejected
	}
	if err := checkConfChange(q.cs, cc); err != nil {
		q.log.Error("committed conf change skipped: raft refuses it", "index", e.GetIndex(), "term", e.GetTerm(), "change", confchangeString(cc), "err", err)
		q.publishMembers()
		return err
	}
	q.cs = cloneConfState(q.rn.ApplyConfChange(cc))
	for _, c := range cc.GetChanges() {
		if c.GetType() == raftpb.ConfChangeAddLearnerNode {
			q.snapForLearner = true // core.go, maybeSnapshot
		}
	}
	q.log.Info("configuration changed", "index", e.GetIndex(), "term", e.GetTerm(), "change", confchangeString(cc), "configuration", describeConfState(q.cs))
	q.publishMembers()
	return rejected
}

// publishMembers publishes the members of the applied configuration: the set Step
// reads, and the members' subscribers, when they changed. Core only.
func (q *Quorum) publishMembers() {
	ids := confStateIDs(q.cs)
	_, dynamic := q.image.QuorumVoters()
	q.members.Store(&memberSet{ids: ids, open: dynamic || !slices.Contains(ids, q.self)})
	ms := members(q.cs, q.image)
	q.pub.Lock()
	for i, m := range ms {
		// A voter being removed is in the joint configuration but no longer in
		// the VotersRecord: it keeps the endpoints it had, since raft still
		// needs its vote until the configuration is left.
		if len(m.Endpoints) > 0 {
			continue
		}
		for _, p := range q.pub.members {
			if p.RaftID == m.RaftID {
				ms[i].DirectoryID, ms[i].Endpoints = p.DirectoryID, p.Endpoints
			}
		}
	}
	changed := !slices.EqualFunc(ms, q.pub.members, equalMember)
	q.pub.members = ms
	subs := q.pub.memberSubs
	q.pub.Unlock()
	if changed {
		for _, fn := range subs {
			fn(ms)
		}
	}
}

func equalMember(a, b Member) bool {
	return a.ID == b.ID && a.DirectoryID == b.DirectoryID && a.RaftID == b.RaftID && a.Voter == b.Voter && slices.Equal(a.Endpoints, b.Endpoints)
}

// Members returns the members of the applied configuration. Safe from any goroutine.
func (q *Quorum) Members() []Member {
	q.pub.Lock()
	defer q.pub.Unlock()
	return q.pub.members
}

// SubscribeMembers registers fn, called on the core's goroutine with the members
// whenever the configuration or their recorded endpoints change (before raft sends
// anything to a new member). fn must not block. Call Members for the current ones.
func (q *Quorum) SubscribeMembers(fn func([]Member)) {
	q.pub.Lock()
	q.pub.memberSubs = append(slices.Clip(q.pub.memberSubs), fn)
	q.pub.Unlock()
}
