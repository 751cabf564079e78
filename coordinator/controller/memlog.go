package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// Errors of MemLog's proposals (the real quorum has its own of the same meaning).
var (
	ErrMemNotLeader = errors.New("memlog: not the leader")
	ErrMemLost      = errors.New("memlog: proposal lost (leadership lost)")
	ErrMemRejected  = errors.New("memlog: committed entry rejected by the state machine")
)

// MemLog is an in-memory model of the metadata quorum for tests and simulations: one
// committed log shared by its voters (MemVoter), with leadership assigned by the
// caller. It is not a consensus protocol; it is what a correct one shows, step by
// step: one leader per term; an entry once committed is never lost or changed; a
// leader's proposals wait until Commit; a proposal pending at a change of leader is
// either committed by the next term or dropped, and its proposer learns ErrMemLost
// in both cases (as raft's "may still have committed"); each voter applies the
// committed entries at its own pace (CatchUp), and leads for writes only once it has
// applied its term's first entry. Safe for concurrent use.
//
// With SetAuto(true) every proposal commits at once and every voter applies it: a
// one-voter quorum that needs no driving, for tests of code above the quorum.
//
// With SetLaggingViews(true) a voter learns of a new term only when it hears from
// the new leader (CatchUp) or steps down (StepDown): until then a deposed leader
// still believes it leads, may even be ready for writes, and accepts proposals that
// can never commit (they fail with ErrMemLost once it learns). Otherwise every voter
// learns of a term at once.
type MemLog struct {
	mu      sync.Mutex
	term    uint64
	leader  int32 // -1: none
	auto    bool
	lagging bool
	entries []memEntry // committed entries after the snapshot, offsets consecutive
	end     uint64     // the last committed offset
	image   *metadata.Image
	snap    memSnapshot
	pending []*memProposal // the leader's proposals, not yet committed
	voters  map[int32]*MemVoter
	log     *slog.Logger
}

type memEntry struct {
	offset uint64
	term   uint64
	data   []byte
	prop   *memProposal // the proposal it commits, if any
}

type memSnapshot struct {
	offset, term uint64
	data         []byte
}

type memProposal struct {
	voter int32
	term  uint64
	data  []byte
	ch    chan ProposeResult
	done  bool
}

// NewMemLog returns a log of the given voters, with no leader (call Elect).
func NewMemLog(voters ...int32) *MemLog {
	l := &MemLog{leader: -1, image: &metadata.Image{}, voters: map[int32]*MemVoter{}, log: slog.New(slog.DiscardHandler)}
	for _, id := range voters {
		l.voters[id] = &MemVoter{l: l, id: id, image: &metadata.Image{}, changed: make(chan struct{}), knownLeader: -1}
	}
	return l
}

// NewSingleMemLog returns a one-voter log whose voter leads and is ready for writes,
// committing every proposal at once (SetAuto).
func NewSingleMemLog(id int32) (*MemLog, *MemVoter) {
	l := NewMemLog(id)
	l.SetAuto(true)
	l.Elect(id, 0)
	return l, l.Voter(id)
}

// SetAuto makes every proposal commit at once, and every live voter apply it.
func (l *MemLog) SetAuto(on bool) {
	l.mu.Lock()
	l.auto = on
	l.mu.Unlock()
}

// SetLaggingViews makes voters learn of new terms only by CatchUp or StepDown.
func (l *MemLog) SetLaggingViews(on bool) {
	l.mu.Lock()
	l.lagging = on
	l.mu.Unlock()
}

// Voter returns voter id (nil if it is not one).
func (l *MemLog) Voter(id int32) *MemVoter {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.voters[id]
}

// Term returns the current term and leader (-1: none).
func (l *MemLog) Term() (uint64, int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.term, l.leader
}

// End returns the last committed offset.
func (l *MemLog) End() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.end
}

// Image returns the image at the last committed offset.
func (l *MemLog) Image() (uint64, *metadata.Image) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.end, l.image
}

// PendingCount returns the number of proposals waiting for Commit.
func (l *MemLog) PendingCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pending)
}

// Entries returns the committed entries from offset from on that the log still
// holds (not compacted), for checkers.
func (l *MemLog) Entries(from uint64) []MetadataEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []MetadataEntry
	for _, e := range l.entries {
		if e.offset >= from {
			out = append(out, MetadataEntry{Offset: e.offset, Data: e.data})
		}
	}
	return out
}

// Elect starts a new term led by voter id (-1: no leader). The first keep proposals
// pending under the old leader commit in the new term (the rest are dropped); every
// one of them fails with ErrMemLost. Then the new term's empty entry commits. The new
// leader is ready for writes once it has applied that entry (CatchUp; at once with
// SetAuto).
func (l *MemLog) Elect(id int32, keep int) {
	l.mu.Lock()
	var res []resolvedProp
	keep = min(max(keep, 0), len(l.pending))
	for i, p := range l.pending {
		if i < keep {
			l.appendLocked(p.term, p.data, nil)
		}
		res = append(res, resolvedProp{p, ProposeResult{Err: fmt.Errorf("%w: term %d ended", ErrMemLost, l.term)}})
		p.done = true
	}
	l.pending = nil
	l.term++
	l.leader = id
	if id >= 0 {
		l.appendLocked(l.term, nil, nil)
	}
	for vid, v := range l.voters {
		if !l.lagging || vid == id {
			res = append(res, v.learnLocked(l.term, id)...)
		}
	}
	auto := l.auto
	l.mu.Unlock()
	deliver(res)
	if auto {
		l.catchUpAll()
	}
}

// Commit commits the first n pending proposals (all if n < 0) in order and returns
// how many it committed. Their proposers learn the result when they apply them.
func (l *MemLog) Commit(n int) int {
	l.mu.Lock()
	if n < 0 || n > len(l.pending) {
		n = len(l.pending)
	}
	for _, p := range l.pending[:n] {
		l.appendLocked(p.term, p.data, p)
	}
	l.pending = append(l.pending[:0:0], l.pending[n:]...)
	l.mu.Unlock()
	return n
}

// appendLocked commits one entry and applies it to the log's reference image.
func (l *MemLog) appendLocked(term uint64, data []byte, p *memProposal) {
	l.end++
	l.entries = append(l.entries, memEntry{offset: l.end, term: term, data: data, prop: p})
	if data != nil {
		if im, err := applyEntry(l.image, data); err == nil {
			l.image = im
		}
	}
}

// Compact takes a snapshot at the furthest offset a voter has applied (its image;
// as a raft voter snapshots only what it applied) and drops the entries it covers.
// Voters behind it install the snapshot when they catch up.
func (l *MemLog) Compact() {
	l.mu.Lock()
	defer l.mu.Unlock()
	var off, term uint64
	var im *metadata.Image
	for _, v := range l.voters {
		v.mu.Lock()
		if v.applied > off || im == nil {
			off, term, im = v.applied, v.term, v.image
		}
		v.mu.Unlock()
	}
	if im == nil || off <= l.snap.offset {
		return
	}
	data, err := metadata.EncodeSnapshot(nil, im)
	if err != nil {
		l.log.Error("memlog: snapshot", "err", err)
		return
	}
	l.snap = memSnapshot{offset: off, term: term, data: data}
	kept := l.entries[:0]
	for _, e := range l.entries {
		if e.offset > off {
			kept = append(kept, e)
		}
	}
	l.entries = kept
}

func (l *MemLog) catchUpAll() {
	l.mu.Lock()
	vs := make([]*MemVoter, 0, len(l.voters))
	for _, v := range l.voters {
		vs = append(vs, v)
	}
	l.mu.Unlock()
	for _, v := range vs {
		v.CatchUp(^uint64(0))
	}
}

// applyEntry decodes an entry frame and applies its records.
func applyEntry(im *metadata.Image, data []byte) (*metadata.Image, error) {
	recs, _, err := metadata.DecodeEntry(data)
	if err != nil {
		return nil, err
	}
	return im.Apply(recs...)
}

type resolvedProp struct {
	p   *memProposal
	res ProposeResult
}

func deliver(rs []resolvedProp) {
	for _, r := range rs {
		r.p.ch <- r.res
	}
}

// MemVoter is one voter of a MemLog: a Quorum and a CommittedLog.
type MemVoter struct {
	l       *MemLog
	id      int32
	mu      sync.Mutex // guards the fields below; taken after l.mu, never before
	down    bool
	applied uint64
	term    uint64 // term of the last applied entry
	image   *metadata.Image
	changed chan struct{} // closed when applied moves
	// The leadership this voter believes in (see SetLaggingViews), and the
	// proposals it accepted as a deposed leader.
	knownTerm   uint64
	knownLeader int32
	doomed      []*memProposal
}

// learnLocked makes the voter believe in term's leader, failing the proposals it
// accepted in earlier terms. l.mu held; takes v.mu.
func (v *MemVoter) learnLocked(term uint64, leader int32) []resolvedProp {
	v.mu.Lock()
	defer v.mu.Unlock()
	if term < v.knownTerm || (term == v.knownTerm && v.knownLeader == leader) {
		return nil
	}
	v.knownTerm, v.knownLeader = term, leader
	var res []resolvedProp
	for _, p := range v.doomed {
		res = append(res, resolvedProp{p, ProposeResult{Err: fmt.Errorf("%w: term %d ended", ErrMemLost, p.term)}})
	}
	v.doomed = nil
	return res
}

// StepDown makes the voter stop believing it (or anyone) leads, as a raft leader
// that lost contact with a majority does. A leader that steps down ends its term's
// leadership: the term has no leader any more (its pending proposals wait for the
// next Elect, which may keep them), and the voter can lead again only in a later
// term. It learns the current term at its next CatchUp.
func (v *MemVoter) StepDown() {
	v.l.mu.Lock()
	if v.l.leader == v.id && v.l.term == v.knownTerm {
		v.l.leader = -1
	}
	v.mu.Lock()
	v.knownLeader = -1
	doomed := v.doomed
	v.doomed = nil
	v.mu.Unlock()
	v.l.mu.Unlock()
	var res []resolvedProp
	for _, p := range doomed {
		res = append(res, resolvedProp{p, ProposeResult{Err: fmt.Errorf("%w: stepped down", ErrMemLost)}})
	}
	deliver(res)
}

var (
	_ Quorum       = (*MemVoter)(nil)
	_ CommittedLog = (*MemVoter)(nil)
)

// ID returns the voter's node id.
func (v *MemVoter) ID() int32 { return v.id }

// Propose implements Quorum.
func (v *MemVoter) Propose(recs []metadata.Record) <-chan ProposeResult {
	ch := make(chan ProposeResult, 1)
	l := v.l
	l.mu.Lock()
	v.mu.Lock()
	down, believes, term := v.down, v.knownLeader == v.id, v.knownTerm
	if !down && believes && term < l.term && len(recs) > 0 {
		// A deposed leader that does not know it yet: the entry can never commit.
		v.doomed = append(v.doomed, &memProposal{voter: v.id, term: term, ch: ch})
		v.mu.Unlock()
		l.mu.Unlock()
		return ch
	}
	v.mu.Unlock()
	if l.leader != v.id || down || !believes {
		l.mu.Unlock()
		ch <- ProposeResult{Err: ErrMemNotLeader}
		return ch
	}
	if len(recs) == 0 {
		l.mu.Unlock()
		ch <- ProposeResult{Err: errors.New("memlog: no records")}
		return ch
	}
	p := &memProposal{voter: v.id, term: l.term, data: metadata.EncodeEntry(nil, recs...), ch: ch}
	l.pending = append(l.pending, p)
	auto := l.auto
	l.mu.Unlock()
	if auto {
		l.Commit(-1)
		l.catchUpAll()
	}
	return ch
}

// Committed implements Quorum.
func (v *MemVoter) Committed() (uint64, *metadata.Image) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.applied, v.image
}

// CurrentLeadership implements Quorum.
func (v *MemVoter) CurrentLeadership() Leadership {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.down {
		return Leadership{Leader: -1, Term: v.knownTerm}
	}
	lead := Leadership{Leader: v.knownLeader, Term: v.knownTerm, IsLeader: v.knownLeader == v.id}
	lead.ReadyForWrites = lead.IsLeader && v.term == v.knownTerm
	return lead
}

// Status implements Quorum.
func (v *MemVoter) Status() QuorumStatus {
	l := v.l
	l.mu.Lock()
	s := QuorumStatus{NodeID: v.id, Leader: l.leader, Term: l.term, CommitIndex: l.end, LastIndex: l.end + uint64(len(l.pending))}
	var ids []int32
	if l.leader == v.id {
		for id := range l.voters {
			ids = append(ids, id)
		}
	}
	voters := l.voters
	l.mu.Unlock()
	sortInt32s(ids)
	for _, id := range ids {
		o := voters[id]
		o.mu.Lock()
		s.Voters = append(s.Voters, VoterStatus{ID: id, MatchIndex: o.applied})
		o.mu.Unlock()
	}
	return s
}

// Crash stops the voter: it proposes and applies nothing until Restart, and a
// leader's term loses its leader. What it has applied is committed, hence durable:
// Restart resumes from it.
func (v *MemVoter) Crash() {
	v.l.mu.Lock()
	if v.l.leader == v.id {
		// Its term has no leader any more: a voter comes back a follower and leads
		// again only in a later term. Its pending proposals wait for the next Elect.
		v.l.leader = -1
	}
	v.l.mu.Unlock()
	v.mu.Lock()
	v.down = true
	doomed := v.doomed
	v.doomed = nil
	v.mu.Unlock()
	var res []resolvedProp
	for _, p := range doomed {
		res = append(res, resolvedProp{p, ProposeResult{Err: fmt.Errorf("%w: crashed", ErrMemLost)}})
	}
	deliver(res)
}

// Restart brings a crashed voter back. It remembers its term (raft's hard state)
// but not who leads.
func (v *MemVoter) Restart() {
	v.mu.Lock()
	v.down = false
	v.knownLeader = -1
	v.mu.Unlock()
}

// Down reports whether the voter is crashed.
func (v *MemVoter) Down() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.down
}

// CatchUp applies the committed entries up to offset upTo (installing the log's
// snapshot first when the entries it needs are compacted) and resolves this voter's
// proposals among them. It returns the applied offset.
func (v *MemVoter) CatchUp(upTo uint64) uint64 {
	l := v.l
	l.mu.Lock()
	v.mu.Lock()
	if v.down {
		v.mu.Unlock()
		l.mu.Unlock()
		return v.applied
	}
	v.mu.Unlock()
	res := v.learnLocked(l.term, l.leader)
	v.mu.Lock()
	moved := false
	if v.applied < l.snap.offset && (len(l.entries) == 0 || l.entries[0].offset > v.applied+1) && upTo >= l.snap.offset {
		im, err := metadata.DecodeSnapshot(l.snap.data)
		if err == nil {
			v.image, v.applied, v.term, moved = im, l.snap.offset, l.snap.term, true
		}
	}
	for _, e := range l.entries {
		if e.offset <= v.applied {
			continue
		}
		if e.offset > upTo || e.offset != v.applied+1 {
			break
		}
		var err error
		if e.data != nil {
			var im *metadata.Image
			if im, err = applyEntry(v.image, e.data); err == nil {
				v.image = im
			} else {
				l.log.Error("memlog: committed entry rejected", "offset", e.offset, "err", err)
			}
		}
		v.applied, v.term, moved = e.offset, e.term, true
		if p := e.prop; p != nil && p.voter == v.id && !p.done && p.term == v.knownTerm {
			p.done = true
			r := ProposeResult{Offset: e.offset}
			if err != nil {
				r.Err = fmt.Errorf("%w: %v", ErrMemRejected, err)
			}
			res = append(res, resolvedProp{p, r})
		}
	}
	if moved {
		close(v.changed)
		v.changed = make(chan struct{})
	}
	applied := v.applied
	v.mu.Unlock()
	l.mu.Unlock()
	deliver(res)
	return applied
}

// ReadCommitted implements CommittedLog: entries this voter has applied.
func (v *MemVoter) ReadCommitted(from uint64, maxBytes int) (LogRead, error) {
	from = max(from, 1)
	l := v.l
	l.mu.Lock()
	defer l.mu.Unlock()
	v.mu.Lock()
	applied := v.applied
	v.mu.Unlock()
	res := LogRead{Committed: applied, Leader: l.leader, Term: l.term}
	if from > applied {
		return res, nil
	}
	if len(l.entries) == 0 || from < l.entries[0].offset {
		if from <= l.snap.offset {
			res.SnapshotNeeded, res.SnapshotOffset = true, l.snap.offset
			return res, nil
		}
	}
	size := 0
	for _, e := range l.entries {
		if e.offset < from {
			continue
		}
		if e.offset > applied || (len(res.Entries) > 0 && size+len(e.data) > maxBytes) {
			break
		}
		res.Entries = append(res.Entries, MetadataEntry{Offset: e.offset, Data: e.data})
		size += len(e.data) + 12
	}
	return res, nil
}

// Snapshot implements CommittedLog.
func (v *MemVoter) Snapshot() (uint64, uint64, []byte, error) {
	v.l.mu.Lock()
	defer v.l.mu.Unlock()
	s := v.l.snap
	return s.offset, s.term, s.data, nil
}

// WaitCommitted implements CommittedLog.
func (v *MemVoter) WaitCommitted(ctx context.Context, after uint64) (uint64, error) {
	for {
		v.mu.Lock()
		applied, ch := v.applied, v.changed
		v.mu.Unlock()
		if applied > after {
			return applied, nil
		}
		select {
		case <-ctx.Done():
			return applied, ctx.Err()
		case <-ch:
		}
	}
}

// waitApplied is WaitCommitted with a deadline, for tests.
func (v *MemVoter) waitApplied(after uint64, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, err := v.WaitCommitted(ctx, after)
	return err == nil
}

// appliedOffset returns the voter's applied offset and term, for simulations.
func (v *MemVoter) appliedOffset() (uint64, uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.term, v.applied
}
