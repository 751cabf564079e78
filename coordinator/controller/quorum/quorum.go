package quorum

import (
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// ProposeResult is the outcome of a proposal.
type ProposeResult struct {
	// Offset is the entry's index once committed (also with ErrRejected).
	Offset uint64
	// Err is nil when the entry committed and its records were applied; otherwise
	// ErrNotLeader, ErrLost, ErrRejected, ErrBusy, ErrInvalidProposal or ErrStopped
	// (wrapped). Only ErrNotLeader, ErrInvalidProposal and ErrBusy guarantee that
	// nothing was appended; after ErrLost or ErrStopped the entry may still commit.
	Err error
}

// Leadership is this voter's view of the quorum's leadership.
type Leadership struct {
	Leader         int32 // -1: unknown
	Term           uint64
	IsLeader       bool
	ReadyForWrites bool
}

// Quorum is one voter of the metadata quorum: etcd raft's RawNode over a Storage,
// the committed Image it applies, and the proposals in flight.
//
// Goroutines. The core — Tick and HandleReady — runs on one goroutine at a time:
// Run's, or a simulation's. Everything else (Step, Propose, ReportUnreachable and
// the readers Committed, Leader, IsLeader, ReadyForWrites, ReadCommitted, Snapshot,
// WaitCommitted, Status, Subscribe...) is safe from any goroutine: Step, Propose
// and ReportUnreachable queue their input for the core's next HandleReady; readers
// see what the core last published. Subscribers are called on the core's goroutine.
//
// Invariants (numbered as in the package doc):
//
//  1. Entries, hard state and snapshots of a Ready are persisted (fdatasync'ed
//     when raft says MustSync) before any message of that Ready is sent.
//  2. Only committed entries are applied, in index order, each exactly once; the
//     image at offset k is the empty image with every committed entry <= k applied
//     (entries Apply rejects skipped), identical on every voter.
//  3. The published (offset, image) only moves forward and is published before the
//     proposals it resolves.
//  4. A proposal resolves once: success only if the committed entry at its index
//     has its term and data.
type Quorum struct {
	cfg  Config
	st   Storage
	tr   Transport
	log  *slog.Logger
	self uint64 // this voter's raft id (membership.go)

	// Core state: the goroutine running Tick and HandleReady only.
	rn          *raft.RawNode
	cs          *raftpb.ConfState // the configuration of the applied log
	image       *metadata.Image
	applied     uint64
	appliedTerm uint64
	snapIndex   uint64
	term        uint64
	lead        uint64
	state       raft.StateType
	pending     map[uint64]*proposal
	contact     map[uint64]time.Time
	caughtUp    map[uint64]time.Time
	snapReports []uint64
	resolved    []resolved
	failed      error
	op          *voterOp // the voter set's change in progress (voterops.go); nil: none
	// lastLead is the leader this voter last knew (raft.None: none yet), in term
	// lastLeadTerm; leaderLost: NextTick found it lost (Config.LeaderLost).
	lastLead, lastLeadTerm uint64
	leaderLost             bool
	// snapForLearner: a learner was added; snapshot at the next maybeSnapshot.
	snapForLearner bool

	notify chan struct{} // wakes Run: input was queued

	// members is the configuration's raft ids, for Step and ReportUnreachable on
	// any goroutine; the core stores a new set when the configuration changes.
	members atomic.Pointer[memberSet]

	inbox struct {
		sync.Mutex
		msgs        []*raftpb.Message
		bytes       int // messageBytes of msgs
		props       []*proposal
		ops         []*voterOp
		unreachable []uint64
		resign      bool // Resign was called: hand leadership over
		stopped     error
	}

	pub struct {
		sync.Mutex
		applied    uint64
		image      *metadata.Image
		leadership Leadership
		status     Status
		members    []Member
		changed    chan struct{} // closed when applied moves or the quorum stops
		stopped    error
		subs       []func(uint64, *metadata.Image)
		leaderSubs []func(Leadership)
		memberSubs []func([]Member)
	}
}

type proposal struct {
	data    []byte
	ch      chan ProposeResult
	term    uint64
	index   uint64
	handled bool // answered, or appended and pending (core only)
}

type resolved struct {
	p   *proposal
	res ProposeResult
}

// New returns the voter cfg describes over st, restored from it: the newest
// snapshot's image, then (as raft hands them back) the committed entries after it.
// A fresh st is bootstrapped first: a snapshot at offset 1, term 1, holding the
// configuration and the image of cfg's bootstrap records; the configuration is
// cfg.Voters (static), or the VotersRecord of the bootstrap records (dynamic); with
// neither, st stays fresh and the voter starts as no member, waiting for a leader to
// add it. A static quorum's st bootstrapped with another voter set fails with
// ErrVotersChanged. When the configuration's only voter is this one, the voter
// campaigns at once: its first HandleReady makes it leader.
//
// The caller keeps ownership of st (closes it after Run returns) and of tr.
func New(cfg Config, st Storage, tr Transport) (*Quorum, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	q := &Quorum{
		cfg: cfg, st: st, tr: tr, log: cfg.Logger.With("node", cfg.NodeID),
		pending: map[uint64]*proposal{}, contact: map[uint64]time.Time{}, caughtUp: map[uint64]time.Time{},
		notify: make(chan struct{}, 1),
	}
	if err := q.bootstrapIfFresh(); err != nil {
		return nil, err
	}
	hs, cs, err := st.InitialState()
	if err != nil {
		return nil, fmt.Errorf("quorum: initial state: %w", err)
	}
	snap, err := st.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("quorum: snapshot: %w", err)
	}
	im, err := metadata.DecodeSnapshot(snap.GetData())
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot at %d: %v", ErrCorrupt, snap.GetMetadata().GetIndex(), err)
	}
	if _, dynamic := im.QuorumVoters(); len(cfg.Voters) > 0 && !dynamic {
		if err := checkVoters(cs, raftVoters(cfg.Voters)); err != nil {
			return nil, err
		}
	} else if len(cfg.Voters) > 0 {
		q.log.Info("the metadata log records the voter set (kraft.version 1): controller.quorum.voters is not read", "voters", cfg.Voters)
	}
	if q.self, err = selfRaftID(cfg, cs, im); err != nil {
		return nil, err
	}
	md := snap.GetMetadata()
	first, _ := st.FirstIndex()
	last, _ := st.LastIndex()
	if hs.GetCommit() < md.GetIndex() || hs.GetCommit() > last || md.GetIndex()+1 < first {
		return nil, fmt.Errorf("%w: commit %d, snapshot %d, log [%d, %d]", ErrCorrupt, hs.GetCommit(), md.GetIndex(), first, last)
	}
	q.image, q.applied, q.appliedTerm, q.snapIndex, q.cs = im, md.GetIndex(), md.GetTerm(), md.GetIndex(), cloneConfState(cs)

	rn, err := newRawNode(&raft.Config{
		ID:                        q.self,
		ElectionTick:              cfg.ElectionTicks,
		HeartbeatTick:             cfg.HeartbeatTicks,
		Storage:                   st,
		Applied:                   md.GetIndex(),
		MaxSizePerMsg:             maxSizePerMsg,
		MaxInflightMsgs:           maxInflightMsgs,
		MaxUncommittedEntriesSize: maxUncommittedBytes,
		CheckQuorum:               true,
		PreVote:                   true,
		DisableProposalForwarding: true,
		StepDownOnRemoval:         false, // handOver moves leadership away instead

		Logger: raftLogger{q.log},
	})
	if err != nil {
		return nil, err
	}
	q.rn = rn
	q.observe()
	q.pub.applied, q.pub.image = q.applied, q.image
	q.pub.changed = make(chan struct{})
	q.publishMembers()
	q.publishStatus(cfg.Clock.Now())
	if v := cs.GetVoters(); len(v) == 1 && v[0] == q.self && !joint(cs) {
		// A quorum of one need not wait an election timeout.
		if err := rn.Campaign(); err != nil {
			return nil, fmt.Errorf("quorum: campaign: %w", err)
		}
	}
	q.log.Info("quorum voter started", "raft_id", fmt.Sprintf("%x", q.self), "configuration", describeConfState(cs), "term", hs.GetTerm(),
		"commit", hs.GetCommit(), "snapshot", md.GetIndex(), "first", first, "last", last)
	return q, nil
}

// describeConfState is cs as raft ids in hex, the form raft's log lines use.
func describeConfState(cs *raftpb.ConfState) string {
	if len(confStateIDs(cs)) == 0 {
		return "none (not a member)"
	}
	hex := func(ids []uint64) string {
		parts := make([]string, len(ids))
		for i, id := range ids {
			parts[i] = fmt.Sprintf("%x", id)
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	out := "voters=" + hex(cs.GetVoters())
	if joint(cs) {
		out += "&&" + hex(cs.GetVotersOutgoing())
	}
	if l := append(slices.Clone(cs.GetLearners()), cs.GetLearnersNext()...); len(l) > 0 {
		out += " learners=" + hex(l)
	}
	return out
}

// newRawNode is raft.NewRawNode with its panics (a storage it cannot start from)
// returned as errors.
func newRawNode(c *raft.Config) (rn *raft.RawNode, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: raft refuses the stored state: %v", ErrCorrupt, r)
		}
	}()
	return raft.NewRawNode(c)
}

// bootstrapIfFresh writes a fresh storage's first snapshot: the bootstrap records'
// image with the initial configuration (static: cfg.Voters; dynamic: the records'
// VotersRecord). A fresh storage of a dynamic quorum without one stays fresh.
func (q *Quorum) bootstrapIfFresh() error {
	fresh, err := isFresh(q.st)
	if err != nil {
		return fmt.Errorf("quorum: %w", err)
	}
	boot := append(slices.Clip(q.cfg.BootstrapRecords), q.cfg.FormatRecords...)
	if !fresh {
		if len(boot) > 0 {
			q.log.Info("quorum storage already bootstrapped: bootstrap records ignored", "records", len(boot))
		}
		return nil
	}
	im, err := (&metadata.Image{}).Apply(boot...)
	if err != nil {
		return fmt.Errorf("%w: bootstrap records: %v", ErrInvalidConfig, err)
	}
	cs := &raftpb.ConfState{Voters: raftVoters(q.cfg.Voters)}
	if recorded, dynamic := im.QuorumVoters(); dynamic {
		if len(q.cfg.Voters) > 0 {
			return fmt.Errorf("%w: the bootstrap records hold a voter set (a dynamic quorum, formatted with --standalone or --initial-controllers) and controller.quorum.voters is set: use controller.quorum.bootstrap.servers", ErrInvalidConfig)
		}
		cs.Voters = nil
		for _, v := range recorded {
			if v.Learner {
				cs.Learners = append(cs.Learners, v.RaftID)
			} else {
				cs.Voters = append(cs.Voters, v.RaftID)
			}
		}
	} else if len(q.cfg.Voters) == 0 {
		q.log.Info("no initial voters (formatted with --no-initial-controllers): waiting to be added to the quorum")
		return nil
	}
	cs = raftpb.EnsureConfState(cs)
	data, err := metadata.EncodeSnapshot(nil, im)
	if err != nil {
		return fmt.Errorf("%w: bootstrap records: %v", ErrInvalidConfig, err)
	}
	snap := &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{
		Index: proto.Uint64(1), Term: proto.Uint64(1), ConfState: cs}}
	if err := q.st.Bootstrap(snap); err != nil {
		return fmt.Errorf("quorum: bootstrap: %w", err)
	}
	q.log.Info("quorum storage bootstrapped", "configuration", describeConfState(cs), "records", len(boot))
	return nil
}

// checkVoters refuses a stored ConfState other than the static voter set.
func checkVoters(cs *raftpb.ConfState, voters []uint64) error {
	got := slices.Clone(cs.GetVoters())
	slices.Sort(got)
	if !slices.Equal(got, voters) || len(cs.GetLearners()) > 0 || len(cs.GetVotersOutgoing()) > 0 || len(cs.GetLearnersNext()) > 0 {
		return fmt.Errorf("%w: stored voters %v, controller.quorum.voters %v (a static voter set is fixed when the metadata log is created; to change it, upgrade kraft.version to 1 and use AddRaftVoter and RemoveRaftVoter)",
			ErrVotersChanged, nodeIDs(got), nodeIDs(voters))
	}
	return nil
}

func nodeIDs(raftIDs []uint64) []int32 {
	out := make([]int32, len(raftIDs))
	for i, id := range raftIDs {
		out[i] = NodeOf(id)
	}
	return out
}

// Propose queues recs as one entry. The result channel (buffered) receives exactly
// one ProposeResult: at commit and apply, or on failure. Safe from any goroutine.
func (q *Quorum) Propose(recs []metadata.Record) <-chan ProposeResult {
	ch := make(chan ProposeResult, 1)
	data, err := encodeProposal(recs)
	if err != nil {
		ch <- ProposeResult{Err: err}
		return ch
	}
	if !q.IsLeader() {
		ch <- ProposeResult{Err: ErrNotLeader}
		return ch
	}
	q.inbox.Lock()
	switch {
	case q.inbox.stopped != nil:
		ch <- ProposeResult{Err: fmt.Errorf("%w: %v", ErrStopped, q.inbox.stopped)}
	case len(q.inbox.props) >= maxQueuedProposals:
		ch <- ProposeResult{Err: ErrBusy}
	default:
		q.inbox.props = append(q.inbox.props, &proposal{data: data, ch: ch})
	}
	q.inbox.Unlock()
	q.wake()
	return ch
}

// encodeProposal returns the entry frame of recs, checked to decode as it will on
// every voter.
func encodeProposal(recs []metadata.Record) ([]byte, error) {
	if len(recs) == 0 {
		return nil, fmt.Errorf("%w: no records", ErrInvalidProposal)
	}
	for i, r := range recs {
		if r == nil || (reflect.ValueOf(r).Kind() == reflect.Pointer && reflect.ValueOf(r).IsNil()) {
			return nil, fmt.Errorf("%w: record %d is nil", ErrInvalidProposal, i)
		}
	}
	data := metadata.EncodeEntry(nil, recs...)
	if len(data) > metadata.MaxEntrySize {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrInvalidProposal, len(data), metadata.MaxEntrySize)
	}
	if _, _, err := metadata.DecodeEntry(data); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidProposal, err)
	}
	return data, nil
}

// Step queues a message from another member for the core. Messages not addressed
// to this voter, not from a member of its configuration (from anyone while it is no
// member: memberSet), raft-local, or proposals (voters never forward them) are
// dropped, as are messages beyond a bounded queue (raft retransmits). Safe from any
// goroutine; it never blocks.
func (q *Quorum) Step(m *raftpb.Message) {
	if m == nil || m.GetTo() != q.self || m.GetFrom() == q.self || !q.members.Load().accepts(m.GetFrom()) ||
		raft.IsLocalMsg(m.GetType()) || m.GetType() == raftpb.MsgProp {
		return
	}
	size := messageBytes(m)
	q.inbox.Lock()
	if q.inbox.stopped == nil && len(q.inbox.msgs) < maxQueuedMessages && q.inbox.bytes+size <= maxQueuedBytes {
		q.inbox.msgs = append(q.inbox.msgs, m)
		q.inbox.bytes += size
	}
	q.inbox.Unlock()
	q.wake()
}

// messageBytes is the data a message carries (entries and snapshot).
func messageBytes(m *raftpb.Message) int {
	n := len(m.GetSnapshot().GetData())
	for _, e := range m.GetEntries() {
		n += len(e.GetData())
	}
	return n
}

// ReportUnreachable tells raft that the last messages to node may have been lost (a
// transport whose connection broke). Safe from any goroutine.
func (q *Quorum) ReportUnreachable(node int32) {
	ms := q.members.Load()
	ids := ms.raftIDsOf(node)
	q.inbox.Lock()
	for _, id := range ids {
		if id != q.self && len(q.inbox.unreachable) < len(ms.ids)*4 {
			q.inbox.unreachable = append(q.inbox.unreachable, id)
		}
	}
	q.inbox.Unlock()
	q.wake()
}

// Resign hands leadership, if this voter holds it, to the voter of its configuration
// with the highest match index, as Kafka's KRaft leader resigns (EndQuorumEpoch) when
// it shuts down: raft's leadership transfer catches the transferee up and tells it to
// campaign at once (MsgTimeoutNow), so the quorum has a leader again within a round
// trip instead of an election timeout after this voter stops. It returns at once;
// Leader shows the new leader. Safe from any goroutine.
func (q *Quorum) Resign() {
	q.inbox.Lock()
	q.inbox.resign = true
	q.inbox.Unlock()
	q.wake()
}

func (q *Quorum) wake() {
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// Subscribe registers fn, called on the core's goroutine with each newly published
// (offset, image), offsets increasing (not every offset is published: a Ready that
// applies several entries publishes the last). fn must not block. Call Committed for
// the current image.
func (q *Quorum) Subscribe(fn func(offset uint64, im *metadata.Image)) {
	q.pub.Lock()
	q.pub.subs = append(slices.Clip(q.pub.subs), fn)
	q.pub.Unlock()
}

// SubscribeLeadership registers fn, called on the core's goroutine whenever the
// leader, the term, IsLeader or ReadyForWrites change. fn must not block.
func (q *Quorum) SubscribeLeadership(fn func(Leadership)) {
	q.pub.Lock()
	q.pub.leaderSubs = append(slices.Clip(q.pub.leaderSubs), fn)
	q.pub.Unlock()
}

// Committed returns the published offset and image.
func (q *Quorum) Committed() (uint64, *metadata.Image) {
	q.pub.Lock()
	defer q.pub.Unlock()
	return q.pub.applied, q.pub.image
}

// Leader returns the leader this voter knows (-1: none) and the term.
func (q *Quorum) Leader() (int32, uint64) {
	q.pub.Lock()
	defer q.pub.Unlock()
	return q.pub.leadership.Leader, q.pub.leadership.Term
}

// RaftID is this voter's id inside raft (membership.go). Safe from any goroutine.
func (q *Quorum) RaftID() uint64 { return q.self }

// IsLeader reports whether this voter leads the quorum.
func (q *Quorum) IsLeader() bool {
	q.pub.Lock()
	defer q.pub.Unlock()
	return q.pub.leadership.IsLeader
}

// ReadyForWrites reports whether this voter leads and has applied every entry of
// the terms before its own (its term's first entry is applied): the committed image
// is then complete, and the active controller may build its pending state on it.
func (q *Quorum) ReadyForWrites() bool {
	q.pub.Lock()
	defer q.pub.Unlock()
	return q.pub.leadership.ReadyForWrites
}

// CurrentLeadership returns Leader, Term, IsLeader and ReadyForWrites at once.
func (q *Quorum) CurrentLeadership() Leadership {
	q.pub.Lock()
	defer q.pub.Unlock()
	return q.pub.leadership
}
