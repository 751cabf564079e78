package controller

import (
	"context"
	"log/slog"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/samsa-broker/samsa/coordinator/controller/quorum"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// raftBackend runs the real voters (quorum.Quorum over quorum.MemStorage) stepped by
// the simulation: ticks every raftTick, HandleReady after every tick, delivered
// message and proposal, messages over the simulation's faulty network (marshalled,
// so a duplicate is a copy), crashes that keep what the storage had synced (and a
// random prefix of what it had not).
type raftBackend struct {
	s           *sim
	nodes       map[int32]*raftNode
	snapEntries uint64
}

const (
	raftTick          = 100 * time.Millisecond
	raftElectionTicks = 10
)

type raftNode struct {
	b     *raftBackend
	id    int32
	st    *quorum.MemStorage
	q     *quorum.Quorum
	gen   int
	props []raftProp // proposals whose results are forwarded to the controller
}

type raftProp struct {
	in  <-chan quorum.ProposeResult
	out chan ProposeResult
}

func newRaftBackend(s *sim) *raftBackend {
	b := &raftBackend{s: s, nodes: map[int32]*raftNode{}, snapEntries: uint64(8 + s.rng.IntN(40))}
	for _, id := range s.voterIDs {
		n := &raftNode{b: b, id: id, st: quorum.NewMemStorage()}
		b.nodes[id] = n
		n.open()
	}
	return b
}

func (n *raftNode) open() {
	s := n.b.s
	n.gen++
	logger := slog.New(slog.DiscardHandler)
	if s.trace {
		logger = s.logger(n.id).With("component", "quorum")
	}
	q, err := quorum.New(quorum.Config{NodeID: n.id, Voters: s.voterIDs, ElectionTicks: raftElectionTicks, HeartbeatTicks: 1,
		TickInterval: raftTick, SnapshotEntries: n.b.snapEntries, Clock: quorumClock{s.clock}, Logger: logger},
		n.st, raftTransport{n: n, gen: n.gen})
	if err != nil {
		s.t.Fatalf("voter %d: %v", n.id, err)
	}
	n.q, n.props = q, nil
}

func (b *raftBackend) voter(id int32) (Quorum, CommittedLog) {
	v := raftVoter{b.nodes[id]}
	return v, v
}

func (b *raftBackend) start() {
	var loop func()
	loop = func() {
		for _, id := range b.s.voterIDs {
			if n := b.nodes[id]; !b.s.ctrls[id].down {
				n.q.Tick()
				n.ready()
			}
		}
		b.s.after(raftTick, loop)
	}
	b.s.after(raftTick, loop)
}

func (b *raftBackend) crash(id int32) {
	n := b.nodes[id]
	keep := b.s.rng.IntN(n.st.Unsynced() + 1)
	n.st = n.st.Crash(keep)
	n.props = nil
}

func (b *raftBackend) restart(id int32) { b.nodes[id].open() }

func (b *raftBackend) fault(int) {} // the network and crashes are the faults

// ready is the core's work after an input, then the forwarding of resolved
// proposals and the controller's observation of them.
func (n *raftNode) ready() {
	s := n.b.s
	if s.ctrls[n.id].down {
		return
	}
	if err := n.q.HandleReady(); err != nil {
		s.failf("voter %d: %v", n.id, err)
		return
	}
	kept := n.props[:0]
	for _, p := range n.props {
		select {
		case r := <-p.in:
			p.out <- ProposeResult{Offset: r.Offset, Err: r.Err}
		default:
			kept = append(kept, p)
		}
	}
	n.props = kept
	if c := s.ctrls[n.id].c; c != nil {
		c.Poll()
	}
}

// raftTransport sends a voter's messages over the simulation's network.
type raftTransport struct {
	n   *raftNode
	gen int
}

func (t raftTransport) Send(msgs []*raftpb.Message) {
	n := t.n
	s := n.b.s
	if n.gen != t.gen {
		return // an earlier incarnation
	}
	for _, m := range msgs {
		to := quorum.NodeOf(m.GetTo())
		data, err := proto.Marshal(m)
		if err != nil {
			s.failf("marshal raft message: %v", err)
			continue
		}
		s.send(n.id, to, "raft "+m.GetType().String(), func() {
			dst := n.b.nodes[to]
			msg := &raftpb.Message{}
			if err := proto.Unmarshal(data, msg); err != nil {
				s.failf("unmarshal raft message: %v", err)
				return
			}
			dst.q.Step(msg)
			dst.ready()
		})
	}
}

// raftVoter presents a raftNode as the controller's Quorum and CommittedLog,
// forwarding proposal results deterministically (in ready, not on goroutines).
type raftVoter struct{ n *raftNode }

func (v raftVoter) Propose(recs []metadata.Record) <-chan ProposeResult {
	n := v.n
	out := make(chan ProposeResult, 1)
	n.props = append(n.props, raftProp{in: n.q.Propose(recs), out: out})
	gen := n.gen
	n.b.s.after(0, func() {
		if n.gen == gen {
			n.ready()
		}
	})
	return out
}

func (v raftVoter) Committed() (uint64, *metadata.Image) { return v.n.q.Committed() }

func (v raftVoter) CurrentLeadership() Leadership {
	l := v.n.q.CurrentLeadership()
	return Leadership{Leader: l.Leader, Term: l.Term, IsLeader: l.IsLeader, ReadyForWrites: l.ReadyForWrites}
}

func (v raftVoter) Status() QuorumStatus {
	st := v.n.q.Status()
	out := QuorumStatus{NodeID: st.NodeID, Leader: st.Leader, Term: st.Term, CommitIndex: st.CommitIndex, LastIndex: st.LastIndex}
	for _, vs := range st.Voters {
		out.Voters = append(out.Voters, VoterStatus{ID: vs.ID, MatchIndex: vs.MatchIndex, LastContact: vs.LastContact, LastCaughtUp: vs.LastCaughtUp})
	}
	return out
}

func (v raftVoter) ReadCommitted(from uint64, maxBytes int) (LogRead, error) {
	r, err := v.n.q.ReadCommitted(from, maxBytes)
	out := LogRead{SnapshotNeeded: r.SnapshotNeeded, SnapshotOffset: r.SnapshotOffset, Committed: r.Committed, Leader: r.Leader, Term: r.Term}
	for _, e := range r.Entries {
		out.Entries = append(out.Entries, MetadataEntry{Offset: e.Offset, Data: e.Data})
	}
	return out, err
}

func (v raftVoter) Snapshot() (uint64, uint64, []byte, error) { return v.n.q.Snapshot() }

func (v raftVoter) WaitCommitted(ctx context.Context, after uint64) (uint64, error) {
	return v.n.q.WaitCommitted(ctx, after)
}

// quorumClock is the simulation's clock as the quorum's Clock.
type quorumClock struct{ c *ManualClock }

func (q quorumClock) Now() time.Time { return q.c.Now() }

func (q quorumClock) NewTicker(d time.Duration) quorum.Ticker {
	t := &manualTicker{c: q.c, d: d, ch: make(chan time.Time, 1)}
	t.arm()
	return t
}

type manualTicker struct {
	c       *ManualClock
	d       time.Duration
	ch      chan time.Time
	timer   Timer
	stopped bool
}

func (t *manualTicker) arm() {
	t.timer = t.c.AfterFunc(t.d, func() {
		if t.stopped {
			return
		}
		select {
		case t.ch <- t.c.Now():
		default:
		}
		t.arm()
	})
}

func (t *manualTicker) C() <-chan time.Time { return t.ch }
func (t *manualTicker) Stop()               { t.stopped = true; t.timer.Stop() }
