package replication

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

// The deterministic simulation of replication: brokers (each a Manual Manager over
// in-memory logs that lose their unsynced tail on a power cut), follower fetchers, a
// seeded network with delays and cuts, a fake clock, producers with acks=all, and a
// small model of the controller that commits ISR changes and elects leaders from the
// ISR with epochs (Kafka's classic rule: the last ISR member stays, the partition
// waits for it). Everything runs on the test's goroutine, in the order of a seeded
// event queue, so a seed replays exactly.
//
// Invariants, checked after every event:
//
//	I1 every acked record is, at its offset, in the log of the partition's current
//	   leader (the controller's, once that node has applied the leadership)
//	I2 two replicas agree on every offset both have below both their HWs
//	I3 a leader's HW never goes backwards within its leader epoch
//	I4 a replica never truncates below its HW (full sync from the leader's log start
//	   aside)
//
// and at the end, once everything is healed, restarted and quiet:
//
//	I5 every replica's log is the leader's (no divergent log) and holds every acked
//	   record; no produce is left waiting.

// Simulated timing.
const (
	simLag            = 300 * time.Millisecond // replica.lag.time.max.ms
	simMaxWait        = 40 * time.Millisecond  // replica.fetch.wait.max.ms
	simBackoff        = 20 * time.Millisecond  // replica.fetch.backoff.ms
	simRequestTimeout = 300 * time.Millisecond // a request without answer fails after
	simHeartbeat      = 30 * time.Millisecond
	simSessionTimeout = 150 * time.Millisecond // broker.session.timeout.ms
	simProduceTimeout = 400 * time.Millisecond
	simTick           = 5 * time.Millisecond  // nodes step their fetchers, ISR, timeouts
	simFlushEvery     = 50 * time.Millisecond // background flush (replicated)
)

type simConfig struct {
	seed       uint64
	brokers    int
	partitions int
	rf         int
	minISR     int
	fsync      bool // engine fsync policy (else replicated: interval)
	fetchers   int  // num.replica.fetchers
	useOFLE    bool // followers truncate with OffsetForLeaderEpoch
	sessions   bool // leaders keep incremental fetch sessions
	maxBytes   int32
	chaos      time.Duration // random faults for this long
	settle     time.Duration // then healed and quiet, at most this long
	clients    int           // producers per partition
}

func (c simConfig) String() string {
	return fmt.Sprintf("seed=%d brokers=%d partitions=%d rf=%d minISR=%d fsync=%v fetchers=%d ofle=%v sessions=%v maxBytes=%d chaos=%v",
		c.seed, c.brokers, c.partitions, c.rf, c.minISR, c.fsync, c.fetchers, c.useOFLE, c.sessions, c.maxBytes, c.chaos)
}

func randomConfig(seed uint64) simConfig {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	c := simConfig{seed: seed, brokers: 3, partitions: 1 + r.IntN(3), rf: 3, fsync: r.IntN(2) == 0,
		fetchers: 1 + r.IntN(2), useOFLE: r.IntN(4) == 0, sessions: r.IntN(4) != 0,
		maxBytes: []int32{200, 1000, 1 << 20}[r.IntN(3)], chaos: 1500 * time.Millisecond,
		settle: 4 * time.Second, clients: 1 + r.IntN(2)}
	if r.IntN(3) == 0 {
		c.rf = 2
	}
	c.minISR = 1 + r.IntN(c.rf)
	if c.minISR > 2 {
		c.minISR = 2
	}
	return c
}

// event is one thing that happens at a simulated time; seq orders ties.
type event struct {
	at  time.Time
	seq uint64
	fn  func()
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type sim struct {
	t     testing.TB
	cfg   simConfig
	rng   *rand.Rand
	now   time.Time
	start time.Time
	q     eventQueue
	seq   uint64
	nodes []*simNode // by id; [0] is the controller's slot
	ctrl  *simCtrl
	cut   map[[2]int32]bool
	last  map[[2]int32]time.Time // FIFO per link

	topic   string
	topicID [16]byte
	acks    map[engine.TopicPartition]*ackLog
	hwSeen  map[hwKey]hwMark
	agreed  map[pairKey]pairMemo
	faults  []string // violations
	trace   []string // the last lines of the run, printed on failure
	traceAt int
	events  int
	chaosOn bool
	clients []*simClient
	values  int
	ver     int64 // bumped by every log change, Apply and ack: check skips when unchanged
	checked int64
}

type ackLog struct {
	byOffset map[int64]string
	order    []int64 // offsets in ack order
}

type hwKey struct {
	node int32
	inc  int
	tp   engine.TopicPartition
}

type hwMark struct {
	epoch int32
	hw    int64
}

type pairKey struct {
	a, b int32
	tp   engine.TopicPartition
}

type pairMemo struct {
	genA, genB int
	verA, verB int
	upTo       int64
}

type simNode struct {
	id          int32
	up          bool
	inc         int
	brokerEpoch int64
	store       *memStore
	m           *Manager
	srv         *simServer
	powerCut    bool // down after a power cut
	flushAt     time.Time
	metaQ       []metaItem
	leaderSeen  map[engine.TopicPartition]leaderMemo
}

type metaItem struct {
	d   Delta
	inc int // for this incarnation (0: the next one registered)
}

type leaderMemo struct {
	inc      int
	epoch    int32
	verified int
}

func (s *sim) Now() time.Time { return s.now }

func newSim(t testing.TB, cfg simConfig) *sim {
	s := &sim{t: t, cfg: cfg, rng: rand.New(rand.NewPCG(cfg.seed, 0xfeed)),
		now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), cut: map[[2]int32]bool{}, last: map[[2]int32]time.Time{},
		topic: "t", topicID: [16]byte{1, 2, 3}, acks: map[engine.TopicPartition]*ackLog{}, hwSeen: map[hwKey]hwMark{},
		agreed: map[pairKey]pairMemo{}, trace: make([]string, 0, traceLines())}
	s.start = s.now
	s.nodes = make([]*simNode, cfg.brokers+1)
	for id := 1; id <= cfg.brokers; id++ {
		n := &simNode{id: int32(id), store: newMemStore(cfg.fsync), leaderSeen: map[engine.TopicPartition]leaderMemo{}}
		s.nodes[id] = n
		n.store.hook = func(l *memLog) {
			l.simVer = &s.ver
			l.onTruncate = func(l *memLog, to, hw int64) {
				if to < hw {
					s.fail("I4: node %d truncated %s to %d below its HW %d", n.id, l.tp, to, hw)
				}
			}
			l.kick = func() { s.scheduleFlush(n) }
		}
	}
	s.ctrl = newSimCtrl(s)
	for id := 1; id <= cfg.brokers; id++ {
		s.startNode(s.nodes[id])
	}
	for i := range cfg.partitions {
		tp := s.tp(int32(i))
		s.acks[tp] = &ackLog{byOffset: map[int64]string{}}
		for range cfg.clients {
			s.clients = append(s.clients, &simClient{s: s, tp: tp, leader: -1})
		}
	}
	s.every(simTick, s.tick)
	s.every(simHeartbeat, s.heartbeats)
	s.every(simFlushEvery, func() {
		for _, n := range s.nodes[1:] {
			if n.up {
				s.flushNode(n)
			}
		}
	})
	return s
}

// traceLines is how many trace lines a failure prints (SAMSA_SIM_TRACE, default 300).
func traceLines() int {
	if n, err := strconv.Atoi(os.Getenv("SAMSA_SIM_TRACE")); err == nil && n > 0 {
		return n
	}
	return 300
}

func (s *sim) tp(p int32) engine.TopicPartition {
	return engine.TopicPartition{Topic: s.topic, Partition: p}
}

// --- events and the network -------------------------------------------------------

func (s *sim) at(at time.Time, fn func()) {
	if at.Before(s.now) {
		at = s.now
	}
	s.seq++
	heap.Push(&s.q, &event{at: at, seq: s.seq, fn: fn})
}

func (s *sim) after(d time.Duration, fn func()) { s.at(s.now.Add(d), fn) }

func (s *sim) every(d time.Duration, fn func()) {
	var tick func()
	tick = func() {
		fn()
		s.after(d, tick)
	}
	s.after(d, tick)
}

func (s *sim) delay() time.Duration {
	return time.Duration(200+s.rng.IntN(2800)) * time.Microsecond
}

func linkKey(a, b int32) [2]int32 {
	if a > b {
		a, b = b, a
	}
	return [2]int32{a, b}
}

func (s *sim) linked(a, b int32) bool { return !s.cut[linkKey(a, b)] }

func (s *sim) nodeUp(id int32) bool { return id == 0 || s.nodes[id].up }

// send delivers fn at the destination after a network delay, in order per link, if
// the link is up and both ends are up (and the same incarnations) at both ends of the
// trip. Node 0 is the controller, always up.
func (s *sim) send(from, to int32, fn func()) {
	if !s.linked(from, to) || !s.nodeUp(from) || !s.nodeUp(to) {
		return
	}
	fromInc, toInc := s.incOf(from), s.incOf(to)
	k := [2]int32{from, to}
	at := s.now.Add(s.delay())
	if l := s.last[k]; at.Before(l) {
		at = l
	}
	s.last[k] = at
	s.at(at, func() {
		if !s.linked(from, to) || s.incOf(from) != fromInc || s.incOf(to) != toInc || !s.nodeUp(to) || !s.nodeUp(from) {
			return
		}
		fn()
	})
}

func (s *sim) incOf(id int32) int {
	if id == 0 {
		return 0
	}
	n := s.nodes[id]
	if !n.up {
		return -n.inc
	}
	return n.inc
}

// --- tracing and failures ----------------------------------------------------------

func (s *sim) tracef(format string, args ...any) {
	line := fmt.Sprintf("%8.3fms ", float64(s.now.Sub(s.start))/1e6) + fmt.Sprintf(format, args...)
	if len(s.trace) < cap(s.trace) {
		s.trace = append(s.trace, line)
		return
	}
	s.trace[s.traceAt] = line
	s.traceAt = (s.traceAt + 1) % len(s.trace)
}

func (s *sim) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if len(s.faults) < 20 {
		s.faults = append(s.faults, fmt.Sprintf("at %v: %s", s.now.Sub(s.start), msg))
	}
	s.tracef("VIOLATION %s", msg)
}

func (s *sim) traceText() string {
	lines := append(slices.Clone(s.trace[s.traceAt:]), s.trace[:s.traceAt]...)
	return strings.Join(lines, "\n")
}

// simLog is a slog.Handler writing a node's Manager log into the trace.
type simLog struct {
	s     *sim
	node  int32
	attrs []slog.Attr
}

func (h *simLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *simLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "n%d %s", h.node, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.s.tracef("%s", b.String())
	return nil
}
func (h *simLog) WithAttrs(as []slog.Attr) slog.Handler { return h }
func (h *simLog) WithGroup(string) slog.Handler         { return h }

// --- nodes -------------------------------------------------------------------------

func (s *sim) startNode(n *simNode) {
	n.inc++
	n.up, n.powerCut = true, false
	inc := n.inc
	m, err := NewManager(Config{
		NodeID:             n.id,
		BrokerEpoch:        func() int64 { return n.brokerEpoch },
		Logs:               n.store,
		Clock:              s,
		Logger:             slog.New(&simLog{s: s, node: n.id}),
		ReplicaLagTimeMax:  simLag,
		NumReplicaFetchers: s.cfg.fetchers,
		Fetcher: FetcherConfig{MaxBytes: s.cfg.maxBytes, ResponseMaxBytes: 4 * s.cfg.maxBytes, MaxWait: simMaxWait,
			Backoff: simBackoff, Version: 15, UseOffsetForLeaderEpoch: s.cfg.useOFLE},
		AlterPartitionBackoff: 30 * time.Millisecond,
		Hooks: Hooks{
			HighWatermarkMoved: func(p *Partition) { s.noteHW(n, inc, p.Log()) },
			LeaderAppended: func(*Partition) {
				s.after(0, func() {
					if n.up && n.inc == inc {
						n.srv.recheck()
					}
				})
			},
		},
		Manual: true,
	})
	if err != nil {
		s.t.Fatal(err)
	}
	n.m = m
	n.srv = newSimServer(s, n)
	n.brokerEpoch = s.ctrl.register(n.id, n.inc == 1)
	s.tracef("n%d up (incarnation %d, broker epoch %d)", n.id, n.inc, n.brokerEpoch)
}

// crash stops a node: its Manager, fetch sessions, parked requests and in-flight
// messages are gone; its logs keep what the crash keeps.
func (s *sim) crash(n *simNode, powerCut bool) {
	if !n.up {
		return
	}
	n.up, n.powerCut = false, powerCut
	n.m.Close()
	n.m, n.srv = nil, nil
	n.metaQ = nil
	for _, l := range n.store.all() {
		l.crash(powerCut)
	}
	s.tracef("n%d crashed (power cut %v)", n.id, powerCut)
}

func (s *sim) restart(n *simNode) {
	if n.up {
		return
	}
	s.startNode(n)
}

func (s *sim) scheduleFlush(n *simNode) {
	if !n.flushAt.IsZero() && !n.flushAt.Before(s.now) {
		return
	}
	inc := n.inc
	n.flushAt = s.now.Add(time.Duration(300+s.rng.IntN(1700)) * time.Microsecond)
	s.at(n.flushAt, func() {
		if n.up && n.inc == inc {
			s.flushNode(n)
		}
	})
}

func (s *sim) flushNode(n *simNode) {
	for _, l := range n.store.all() {
		l.flush()
	}
}

// tick steps every node: fetchers send what they have, ISR changes go to the
// controller, produce timeouts expire, ISR shrink checks run.
func (s *sim) tick() {
	for _, n := range s.nodes[1:] {
		if !n.up {
			continue
		}
		n.m.AdvanceClock()
		if s.now.Sub(s.start)%(simLag/2) < simTick {
			n.m.MaybeShrinkISR()
		}
	}
}

// pump sends whatever the nodes' fetchers and ISR queues have ready.
func (s *sim) pump() {
	for _, n := range s.nodes[1:] {
		if !n.up {
			continue
		}
		for _, f := range n.m.Fetchers() {
			req, _ := f.Next(s.now)
			if !req.Empty() {
				s.sendFetcher(n, f, req)
			}
		}
		for {
			req := n.m.TakeAlterPartition()
			if req == nil {
				break
			}
			s.sendAlter(n, req)
		}
	}
}

var errSimTimeout = errors.New("sim: request timed out")

func (s *sim) sendFetcher(n *simNode, f *Fetcher, req Request) {
	inc := n.inc
	alive := func() bool { return n.up && n.inc == inc }
	src := s.nodes[req.Source]
	if req.Fetch != nil {
		fr := req.Fetch
		s.after(simMaxWait+simRequestTimeout, func() {
			if alive() {
				f.HandleFetch(s.now, fr, nil, errSimTimeout)
			}
		})
		s.send(n.id, src.id, func() {
			src.srv.fetch(n.id, fr, func(resp *kmsg.FetchResponse) {
				s.send(src.id, n.id, func() {
					if alive() { // an answer to an earlier incarnation finds no connection
						f.HandleFetch(s.now, fr, resp, nil)
					}
				})
			})
		})
		return
	}
	if lr := req.ListOffsets; lr != nil { // only for tiered partitions, which the simulation has none of
		s.after(simRequestTimeout, func() {
			if alive() {
				f.HandleListOffsets(s.now, lr, nil, errSimTimeout)
			}
		})
		return
	}
	er := req.OffsetForLeaderEpoch
	s.after(simRequestTimeout, func() {
		if alive() {
			f.HandleOffsetForLeaderEpoch(s.now, er, nil, errSimTimeout)
		}
	})
	s.send(n.id, src.id, func() {
		resp := src.srv.offsetForLeaderEpoch(er)
		s.send(src.id, n.id, func() {
			if alive() {
				f.HandleOffsetForLeaderEpoch(s.now, er, resp, nil)
			}
		})
	})
}

func (s *sim) sendAlter(n *simNode, req *kmsg.AlterPartitionRequest) {
	inc := n.inc
	s.after(simRequestTimeout, func() {
		if n.up && n.inc == inc {
			n.m.HandleAlterPartition(req, nil, errSimTimeout)
		}
	})
	s.send(n.id, 0, func() {
		resp := s.ctrl.alterPartition(req)
		s.send(0, n.id, func() {
			if n.up && n.inc == inc {
				n.m.HandleAlterPartition(req, resp, nil)
			}
		})
	})
}

func (s *sim) heartbeats() {
	for _, n := range s.nodes[1:] {
		if !n.up {
			continue
		}
		id, epoch := n.id, n.brokerEpoch
		s.send(id, 0, func() { s.ctrl.heartbeat(id, epoch) })
	}
	s.ctrl.checkSessions()
}

// sendMeta queues a metadata change for node id: delivered in order, held while the
// node cannot reach the controller, dropped if the node restarts first.
func (s *sim) sendMeta(id int32, d Delta) {
	n := s.nodes[id]
	if !n.up {
		return // it gets the whole state when it registers
	}
	n.metaQ = append(n.metaQ, metaItem{d: d, inc: n.inc})
	s.after(s.delay(), func() { s.deliverMeta(n) })
}

func (s *sim) deliverMeta(n *simNode) {
	for len(n.metaQ) > 0 && n.up && s.linked(0, n.id) {
		it := n.metaQ[0]
		n.metaQ = n.metaQ[1:]
		if it.inc != n.inc {
			continue
		}
		if err := n.m.Apply(it.d); err != nil {
			s.fail("n%d Apply: %v", n.id, err)
		}
		s.ver++
	}
}

// --- invariants --------------------------------------------------------------------

func (s *sim) noteHW(n *simNode, inc int, l Log) {
	if !n.up || n.inc != inc {
		return
	}
	p := n.m.Partition(l.TopicPartition())
	if p == nil || p.Role() != RoleLeader {
		return
	}
	k := hwKey{n.id, inc, l.TopicPartition()}
	e, hw := p.LeaderEpoch(), l.HighWatermark()
	if prev, ok := s.hwSeen[k]; ok && prev.epoch == e && hw < prev.hw {
		s.fail("I3: n%d leader of %s in epoch %d: HW %d after %d", n.id, k.tp, e, hw, prev.hw)
	}
	s.hwSeen[k] = hwMark{e, hw}
}

func (s *sim) acked(tp engine.TopicPartition, off int64, v string, n *simNode, epoch int32) {
	a := s.acks[tp]
	if old, ok := a.byOffset[off]; ok && old != v {
		s.fail("offset %d of %s acked twice: %q then %q", off, tp, old, v)
		return
	}
	a.byOffset[off] = v
	a.order = append(a.order, off)
	s.ver++
	l := n.store.log(tp)
	s.tracef("ack %s@%d=%q by n%d epoch %d (leader durable %d hw %d)", tp, off, v, n.id, epoch, l.durable, l.hw)
}

func (s *sim) check() {
	if s.ver == s.checked {
		return
	}
	s.checked = s.ver
	for i := range s.cfg.partitions {
		tp := s.tp(int32(i))
		s.checkLeader(tp)
		s.checkAgreement(tp)
	}
	for _, n := range s.nodes[1:] {
		if !n.up {
			continue
		}
		for _, p := range n.m.Partitions() {
			s.noteHW(n, n.inc, p.Log())
		}
	}
}

// checkLeader is I1.
func (s *sim) checkLeader(tp engine.TopicPartition) {
	cp := s.ctrl.part(tp)
	if cp.leader < 0 {
		return
	}
	n := s.nodes[cp.leader]
	if !n.up {
		return
	}
	p := n.m.Partition(tp)
	if p == nil || p.Role() != RoleLeader || p.LeaderEpoch() != cp.leaderEpoch {
		return
	}
	memo := n.leaderSeen[tp]
	if memo.inc != n.inc || memo.epoch != cp.leaderEpoch {
		memo = leaderMemo{inc: n.inc, epoch: cp.leaderEpoch}
	}
	l := n.store.log(tp)
	a := s.acks[tp]
	for ; memo.verified < len(a.order); memo.verified++ {
		off := a.order[memo.verified]
		want := a.byOffset[off]
		if off < l.LogStartOffset() {
			continue
		}
		got, _, ok := l.valueAt(off)
		if !ok || got != want {
			s.fail("I1: acked %s@%d=%q but leader n%d (epoch %d) has %q (present %v, log end %d)",
				tp, off, want, n.id, cp.leaderEpoch, got, ok, l.LogEndOffset())
		}
	}
	n.leaderSeen[tp] = memo
}

// checkAgreement is I2.
func (s *sim) checkAgreement(tp engine.TopicPartition) {
	for i := 1; i < len(s.nodes); i++ {
		for j := i + 1; j < len(s.nodes); j++ {
			la, lb := s.nodes[i].store.log(tp), s.nodes[j].store.log(tp)
			if la == nil || lb == nil {
				continue
			}
			sa, _, hwa, ga, va := la.stat()
			sb, _, hwb, gb, vb := lb.stat()
			k := pairKey{int32(i), int32(j), tp}
			memo := s.agreed[k]
			if memo.verA == va && memo.verB == vb && memo.genA == ga && memo.genB == gb {
				continue // nothing changed since the last check
			}
			if memo.genA != ga || memo.genB != gb {
				memo = pairMemo{genA: ga, genB: gb}
			}
			memo.verA, memo.verB = va, vb
			upTo := min(hwa, hwb)
			from := max(memo.upTo, sa, sb)
			if from < upTo {
				if off, ok := agree(la, lb, from, upTo); !ok {
					s.fail("I2: n%d and n%d differ at %s@%d, below both HWs (%d, %d)", i, j, tp, off, hwa, hwb)
					return
				}
				memo.upTo = upTo
			}
			s.agreed[k] = memo
		}
	}
}

// firstDifference compares two logs' batches over [from, upTo).
func firstDifference(a, b []memBatch, from, upTo int64) (int64, bool) {
	ia, _ := slices.BinarySearchFunc(a, from, func(x memBatch, off int64) int { return cmpLast(x, off) })
	ib, _ := slices.BinarySearchFunc(b, from, func(x memBatch, off int64) int { return cmpLast(x, off) })
	for ia >= 0 && ib >= 0 && ia < len(a) && ib < len(b) {
		x, y := a[ia], b[ib]
		if x.base >= upTo && y.base >= upTo {
			return 0, true
		}
		if x.base != y.base || x.last != y.last || string(x.data) != string(y.data) {
			return max(min(x.base, y.base), from), false
		}
		ia++
		ib++
	}
	// One log ran out below upTo: the HW is clamped to the log end, so this cannot be.
	return 0, true
}

// cmpLast orders a batch before the offsets above its last.
func cmpLast(x memBatch, off int64) int {
	if x.last < off {
		return -1
	}
	return 1
}

// --- running -----------------------------------------------------------------------

// runUntil processes events until the time is reached (or stop says so).
func (s *sim) runUntil(until time.Time, stop func() bool) {
	for len(s.q) > 0 && len(s.faults) == 0 {
		if stop != nil && stop() {
			return
		}
		e := s.q[0]
		if e.at.After(until) {
			s.now = until
			return
		}
		heap.Pop(&s.q)
		s.now = e.at
		e.fn()
		s.pump()
		s.check()
		s.events++
	}
}

func (s *sim) runFor(d time.Duration) { s.runUntil(s.now.Add(d), nil) }

// chaos schedules random faults and producer activity until the end time.
func (s *sim) chaos(d time.Duration) {
	end := s.now.Add(d)
	s.chaosOn = true
	for _, c := range s.clients {
		c.run(end)
	}
	var step func()
	step = func() {
		if !s.now.Before(end) {
			s.chaosOn = false
			return
		}
		s.randomFault()
		s.after(time.Duration(5+s.rng.IntN(60))*time.Millisecond, step)
	}
	s.after(time.Duration(s.rng.IntN(30))*time.Millisecond, step)
	s.runUntil(end, nil)
}

// randomFault is one random change: crash (a power cut under fsync; under
// replicated, a process kill that keeps the page cache, or a power cut of one node while
// all others are up), restart, cut or heal a link, or nothing.
func (s *sim) randomFault() {
	r := s.rng.IntN(100)
	up := func() []*simNode {
		var out []*simNode
		for _, n := range s.nodes[1:] {
			if n.up {
				out = append(out, n)
			}
		}
		return out
	}
	down := func() []*simNode {
		var out []*simNode
		for _, n := range s.nodes[1:] {
			if !n.up {
				out = append(out, n)
			}
		}
		return out
	}
	// Under replicated a power cut loses what a replica counted toward the HW, so it
	// is survivable only while other ISR members keep theirs: one node at a time, not
	// the sole member of an ISR, with every link up, and no other crash or cut until it
	// is back (and registered again, which takes it out of the ISRs). Otherwise the
	// others could be fenced meanwhile and leave it the last ISR member, elected with
	// an incomplete log: the hazard of Kafka's classic rule under flush-by-interval
	// that KIP-966's unclean-shutdown handling removes. Under fsync every crash is a
	// power cut, with no restriction.
	powerCutDown := !s.cfg.fsync && slices.ContainsFunc(s.nodes[1:], func(n *simNode) bool { return !n.up && n.powerCut })
	switch {
	case r < 12: // crash one
		u := up()
		if len(u) == 0 || powerCutDown {
			return
		}
		n := u[s.rng.IntN(len(u))]
		powerCut := s.cfg.fsync || len(u) == len(s.nodes)-1 && len(s.cut) == 0 && s.ctrl.allHealthy() &&
			s.ctrl.notSoleISR(n.id) && s.rng.IntN(3) == 0
		s.crash(n, powerCut)
	case r < 14 && s.cfg.fsync: // every replica power-cut at once
		for _, n := range up() {
			s.crash(n, true)
		}
	case r < 30: // restart one
		if d := down(); len(d) > 0 {
			s.restart(d[s.rng.IntN(len(d))])
		}
	case r < 42: // cut a link (the controller is node 0)
		if powerCutDown {
			return
		}
		a := int32(s.rng.IntN(len(s.nodes)))
		b := int32(s.rng.IntN(len(s.nodes)))
		if a != b {
			s.cut[linkKey(a, b)] = true
			s.tracef("cut %d-%d", a, b)
		}
	case r < 58: // heal one or all
		if s.rng.IntN(3) == 0 {
			s.healAll()
		} else {
			for k := range s.sortedCuts() {
				delete(s.cut, k)
				s.tracef("heal %d-%d", k[0], k[1])
				s.afterHeal()
				break
			}
		}
	}
}

func (s *sim) sortedCuts() map[[2]int32]bool {
	keys := make([][2]int32, 0, len(s.cut))
	for k := range s.cut {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]int32) int {
		if a[0] != b[0] {
			return int(a[0] - b[0])
		}
		return int(a[1] - b[1])
	})
	if len(keys) == 0 {
		return nil
	}
	return map[[2]int32]bool{keys[s.rng.IntN(len(keys))]: true}
}

func (s *sim) healAll() {
	clear(s.cut)
	s.tracef("heal all")
	s.afterHeal()
}

func (s *sim) afterHeal() {
	for _, n := range s.nodes[1:] {
		if len(n.metaQ) > 0 {
			s.after(s.delay(), func() { s.deliverMeta(n) })
		}
	}
}

// settle heals everything, restarts every node, stops the producers and runs until
// every replica has caught up with its leader (or the time is up), then checks I5.
func (s *sim) settle() {
	s.chaosOn = false
	s.healAll()
	for _, n := range s.nodes[1:] {
		s.restart(n)
	}
	deadline := s.now.Add(s.cfg.settle)
	s.runUntil(deadline, func() bool { return s.converged() && s.idle() })
	if len(s.faults) > 0 {
		return
	}
	if !s.converged() {
		s.fail("I5: not converged after %v: %s", s.cfg.settle, s.describe())
		return
	}
	// Let the produce timeouts pass so nothing is left waiting.
	s.runFor(simProduceTimeout + 2*simTick)
	for i := range s.cfg.partitions {
		tp := s.tp(int32(i))
		cp := s.ctrl.part(tp)
		ll := s.nodes[cp.leader].store.log(tp)
		ls, le, _, lb, _ := ll.snapshot()
		for _, id := range cp.replicas {
			l := s.nodes[id].store.log(tp)
			rs, re, _, rb, _ := l.snapshot()
			if re != le {
				s.fail("I5: n%d log end %d, leader n%d %d (%s)", id, re, cp.leader, le, tp)
				continue
			}
			if off, ok := firstDifference(lb, rb, max(ls, rs), le); !ok {
				s.fail("I5: n%d diverges from leader n%d at %s@%d", id, cp.leader, tp, off)
			}
			a := s.acks[tp]
			for _, off := range a.order {
				if off < rs {
					continue
				}
				if got, _, ok := l.valueAt(off); !ok || got != a.byOffset[off] {
					s.fail("I5: acked %s@%d=%q missing on n%d (%q)", tp, off, a.byOffset[off], id, got)
				}
			}
		}
	}
	for _, n := range s.nodes[1:] {
		if w := n.m.WaitingProduces(); w != 0 {
			s.fail("I5: n%d still has %d produces waiting", n.id, w)
		}
	}
}

// converged: every partition has a leader that has applied it, every replica is in the
// ISR, has the leader's log end, and the leader's HW is its log end.
func (s *sim) converged() bool {
	for i := range s.cfg.partitions {
		tp := s.tp(int32(i))
		cp := s.ctrl.part(tp)
		if cp.leader < 0 || len(cp.isr) != len(cp.replicas) {
			return false
		}
		n := s.nodes[cp.leader]
		p := n.m.Partition(tp)
		if !n.up || p == nil || p.Role() != RoleLeader || p.LeaderEpoch() != cp.leaderEpoch {
			return false
		}
		st := p.State()
		if st.PendingISR != nil || len(st.ISR) != len(cp.replicas) || st.HighWatermark != st.LogEndOffset {
			return false
		}
		for _, id := range cp.replicas {
			if s.nodes[id].store.log(tp).LogEndOffset() != st.LogEndOffset {
				return false
			}
		}
	}
	return true
}

func (s *sim) idle() bool {
	for _, c := range s.clients {
		if c.inflight > 0 {
			return false
		}
	}
	return true
}

func (s *sim) describe() string {
	var b strings.Builder
	for i := range s.cfg.partitions {
		tp := s.tp(int32(i))
		cp := s.ctrl.part(tp)
		fmt.Fprintf(&b, "[%s ctrl leader %d epoch %d isr %v pe %d;", tp, cp.leader, cp.leaderEpoch, cp.isr, cp.partitionEpoch)
		for _, n := range s.nodes[1:] {
			l := n.store.log(tp)
			if l == nil {
				continue
			}
			st := "down"
			if n.up {
				if p := n.m.Partition(tp); p != nil {
					ps := p.State()
					st = fmt.Sprintf("%s e%d isr %v pending %v", ps.Role, ps.LeaderEpoch, ps.ISR, ps.PendingISR)
				}
			}
			fmt.Fprintf(&b, " n%d{%s leo %d hw %d epochs %v}", n.id, st, l.LogEndOffset(), l.HighWatermark(), l.epochs)
		}
		b.WriteString("] ")
	}
	return b.String()
}

// --- the tests ---------------------------------------------------------------------

// runSeed runs one random configuration: chaos, then settle. It returns the violations.
func runSeed(t testing.TB, seed uint64) (*sim, []string) {
	cfg := randomConfig(seed)
	s := newSim(t, cfg)
	s.runFor(50 * time.Millisecond)
	s.chaos(cfg.chaos)
	if len(s.faults) == 0 {
		s.settle()
	}
	return s, s.faults
}

func reportSim(t testing.TB, s *sim, name string) {
	t.Helper()
	if len(s.faults) == 0 {
		return
	}
	replay := fmt.Sprintf("go test ./replication -run '%s' -v", replayPattern(t))
	if strings.HasPrefix(t.Name(), "TestSimulation/") {
		replay = fmt.Sprintf("SAMSA_SIM_SEED=%d SAMSA_SIM_TRACE=5000 go test ./replication -run '^TestSimulation$' -v", s.cfg.seed)
	}
	t.Errorf("simulation %s (%s) failed:\n  %s\n\nlast events:\n%s\n\nstate: %s\n\nreplay: %s",
		name, s.cfg, strings.Join(s.faults, "\n  "), s.traceText(), s.describe(), replay)
}

func replayPattern(t testing.TB) string {
	parts := strings.Split(t.Name(), "/")
	for i := range parts {
		parts[i] = "^" + parts[i] + "$"
	}
	return strings.Join(parts, "/")
}
