package quorum

import (
	"bytes"
	"container/heap"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/cryptotest"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// The simulation: N voters (MemStorage, Quorum) on a seeded in-memory network and
// clock, driven by one goroutine from an event queue. raft's randomised election
// timeouts read crypto/rand, which cryptotest.SetGlobalRandom makes a function of
// the seed; nothing else is random, so a seed replays exactly.

var (
	flagSeed  = flag.Uint64("seed", 0, "run only this simulation seed (TestSim*)")
	flagTrace = flag.Bool("simtrace", false, "print the simulation's events (with -seed)")
)

func longRun() bool { return os.Getenv("SAMSA_LONG") == "1" }

const (
	simTick         = 10 * time.Millisecond
	simElection     = 10 // ticks
	simHeartbeat    = 2  // ticks
	simHealBound    = 10 * time.Second
	simMaxTraceKeep = 300
)

type eventKind uint8

const (
	evTick eventKind = iota
	evDeliver
	evClient
	evFault
	evRestart
	evHeal
	evMembers // a change of the voter set (sim_members_test.go)
)

type event struct {
	at    time.Duration
	seq   uint64
	kind  eventKind
	node  int // target node index
	from  int
	gen   int // node incarnation, for ticks
	msg   []byte
	mtype raftpb.MessageType
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
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

// simParams are drawn from the seed.
type simParams struct {
	voters          int
	chaos           time.Duration
	drop, dup       float64
	minDelay        time.Duration
	maxDelay        time.Duration
	snapshotEntries uint64
	faultEvery      time.Duration
	clientEvery     time.Duration
}

func drawParams(rng *rand.Rand, voters int, chaos time.Duration) simParams {
	return simParams{
		voters:          voters,
		chaos:           chaos,
		drop:            []float64{0, 0.01, 0.05, 0.15, 0.3}[rng.IntN(5)],
		dup:             []float64{0, 0.01, 0.05}[rng.IntN(3)],
		minDelay:        time.Duration(rng.IntN(3)) * time.Millisecond,
		maxDelay:        time.Duration(2+rng.IntN(40)) * time.Millisecond,
		snapshotEntries: uint64(4 + rng.IntN(40)),
		faultEvery:      time.Duration(80+rng.IntN(400)) * time.Millisecond,
		clientEvery:     time.Duration(2+rng.IntN(30)) * time.Millisecond,
	}
}

type simNode struct {
	id      int32
	dir     metadata.UUID     // a dynamic quorum's directory id (sim_members_test.go)
	boot    []metadata.Record // a dynamic quorum's format records
	st      *MemStorage
	q       *Quorum
	gen     int
	group   int    // partition group: messages cross only within a group
	checked uint64 // offset up to which the node's applied log was checked

	lastImage  *metadata.Image // the image last checked, at lastOffset
	lastOffset uint64
	checks     int
}

type clientOp struct {
	ch        <-chan ProposeResult
	data      []byte
	node      int
	afterHeal bool
}

type histEntry struct {
	term uint64
	data []byte
}

type sim struct {
	t      testing.TB
	seed   uint64
	p      simParams
	rng    *rand.Rand
	now    time.Duration
	queue  eventQueue
	seq    uint64
	nodes  []*simNode
	voters []int32
	// lossUnseen: no voter learns of a crash (Config.LeaderLost always false), as
	// when a host dies without closing its connections.
	lossUnseen bool

	history   map[uint64]histEntry       // committed entries, by offset
	images    map[uint64]*metadata.Image // the image after each offset
	digests   map[uint64]uint64          // imageDigest of images, by offset
	leaders   map[uint64]int32           // term → the leader seen in it
	ops       []clientOp
	acked     int
	nextTopic int
	healed    bool
	healAt    time.Duration
	target    uint64 // offset of the first proposal acknowledged after heal
	hash      uint64
	trace     []string

	installTime time.Duration // wall time of HandleReady on delivered snapshots
	stats       simStats

	// dynamic: the nodes are controllers of a dynamic quorum (their dir and boot
	// make their Config; sim_members_test.go); convergence is then asked of the
	// members of the leader's configuration only.
	dynamic bool
	members *simMembers
}

type simStats struct {
	events, delivered, dropped, crashes, partitions, snapshotsSent int
}

type simClock struct{ s *sim }

func (c simClock) Now() time.Time                 { return time.Unix(0, 0).Add(c.s.now) }
func (c simClock) NewTicker(time.Duration) Ticker { panic("simulation has no tickers") }

type simTransport struct {
	s    *sim
	from int
}

func (tr simTransport) Send(msgs []*raftpb.Message) {
	for _, m := range msgs {
		tr.s.send(tr.from, m)
	}
}

func newSim(t testing.TB, seed uint64, voters int, chaos time.Duration) *sim {
	s := newQuietSim(t, seed, voters, chaos)
	s.schedule(&event{at: s.p.clientEvery, kind: evClient})
	s.schedule(&event{at: s.p.faultEvery, kind: evFault})
	return s
}

// newQuietSim is a simulation without clients or faults: the test drives it.
func newQuietSim(t testing.TB, seed uint64, voters int, chaos time.Duration) *sim {
	return newQuietSimWith(t, seed, voters, func(p *simParams) { p.chaos = chaos })
}

// newQuietSimWith is newQuietSim with the drawn parameters adjusted by adjust.
func newQuietSimWith(t testing.TB, seed uint64, voters int, adjust func(*simParams)) *sim {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	p := drawParams(rng, voters, time.Hour)
	adjust(&p)
	s := &sim{t: t, seed: seed, rng: rng, p: p,
		history: map[uint64]histEntry{}, images: map[uint64]*metadata.Image{1: {}},
		digests: map[uint64]uint64{}, leaders: map[uint64]int32{}}
	for i := 0; i < voters; i++ {
		s.voters = append(s.voters, int32(i+1))
	}
	for i := range s.voters {
		n := &simNode{id: s.voters[i], st: NewMemStorage()}
		s.nodes = append(s.nodes, n)
		s.start(i)
	}
	return s
}

// advance processes the events up to (and at) until.
func (s *sim) advance(until time.Duration) {
	for len(s.queue) > 0 && s.queue[0].at <= until {
		s.step(heap.Pop(&s.queue).(*event))
	}
	s.now = until
}

func (s *sim) fatalf(format string, args ...any) {
	s.t.Helper()
	msg := fmt.Sprintf(format, args...)
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d (voters %d, params %+v) at %v: %s\n", s.seed, s.p.voters, s.p, s.now, msg)
	if len(s.trace) > 0 {
		b.WriteString("last events:\n  " + strings.Join(s.trace, "\n  ") + "\n")
	}
	env := ""
	if longRun() {
		env = "SAMSA_LONG=1 "
	}
	run := fmt.Sprintf("'^TestSim$/voters=%d'", s.p.voters)
	if s.dynamic {
		run = "'^TestSimMembership$'"
	}
	fmt.Fprintf(&b, "replay: %sgo test ./coordinator/controller/quorum -run %s -seed %d -simtrace -v\n", env, run, s.seed)
	s.t.Fatal(b.String())
}

func (s *sim) tracef(format string, args ...any) {
	if !*flagTrace && *flagSeed == 0 {
		return
	}
	line := fmt.Sprintf("%8v ", s.now) + fmt.Sprintf(format, args...)
	if *flagTrace {
		s.t.Log(line)
	}
	s.trace = append(s.trace, line)
	if len(s.trace) > simMaxTraceKeep {
		s.trace = s.trace[1:]
	}
}

func (s *sim) mix(vs ...uint64) {
	h := fnv.New64a()
	var b [8]byte
	for _, v := range append(vs, s.hash) {
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
		h.Write(b[:])
	}
	s.hash = h.Sum64()
}

func (s *sim) schedule(e *event) {
	s.seq++
	e.seq = s.seq
	heap.Push(&s.queue, e)
}

func (s *sim) config(i int) Config {
	c := Config{NodeID: s.nodes[i].id, Voters: s.voters, ElectionTicks: simElection, HeartbeatTicks: simHeartbeat,
		TickInterval: simTick, SnapshotEntries: s.p.snapshotEntries, Clock: simClock{s}, LeaderLost: s.crashed}
	if s.dynamic {
		c.Voters, c.DirectoryID, c.FormatRecords = nil, s.nodes[i].dir, s.nodes[i].boot
	}
	return c
}

// start (re)creates node i's Quorum from its storage and starts its ticks.
func (s *sim) start(i int) {
	n := s.nodes[i]
	q, err := New(s.config(i), n.st, simTransport{s, i})
	if err != nil {
		s.fatalf("node %d: restart: %v", n.id, err)
	}
	n.q, n.gen = q, n.gen+1
	q.SubscribeLeadership(func(l Leadership) {
		if !l.IsLeader {
			return
		}
		prev, ok := s.leaders[l.Term]
		if ok && prev != n.id {
			s.fatalf("two leaders in term %d: %d and %d", l.Term, prev, n.id)
		}
		if !ok {
			s.leaders[l.Term] = n.id
			s.tracef("node %d leads term %d", n.id, l.Term)
		}
	})
	// The restarted node's image is its snapshot's; check it against the history.
	off, im := q.Committed()
	n.checked = off
	s.checkImageFull(n, off, im)
	phase := time.Duration(s.rng.IntN(int(simTick)))
	s.schedule(&event{at: s.now + phase + 1, kind: evTick, node: i, gen: n.gen})
}

// crashed is the voters' Config.LeaderLost: a crashed node's connections are closed
// and its listener refuses, as a killed process's; a partitioned one is not lost.
func (s *sim) crashed(id int32) bool {
	if s.lossUnseen {
		return false
	}
	for _, n := range s.nodes {
		if n.id == id {
			return n.q == nil
		}
	}
	return false
}

func (s *sim) partitioned(a, b int) bool { return s.nodes[a].group != s.nodes[b].group }

func (s *sim) send(from int, m *raftpb.Message) {
	to := int(NodeOf(m.GetTo())) - 1
	if to < 0 || to >= len(s.nodes) {
		s.fatalf("message to unknown raft id %d", m.GetTo())
	}
	if m.GetType() == raftpb.MsgSnap {
		s.stats.snapshotsSent++
	}
	if s.partitioned(from, to) || s.rng.Float64() < s.p.drop {
		s.stats.dropped++
		return
	}
	b, err := proto.Marshal(m)
	if err != nil {
		s.fatalf("marshal: %v", err)
	}
	copies := 1
	if s.rng.Float64() < s.p.dup {
		copies = 2
	}
	for c := 0; c < copies; c++ {
		delay := s.p.minDelay + time.Duration(s.rng.Int64N(int64(s.p.maxDelay-s.p.minDelay)+1))
		s.schedule(&event{at: s.now + delay, kind: evDeliver, node: to, from: from, msg: b, mtype: m.GetType()})
	}
}

// handle runs node i's core after an input and checks the invariants.
func (s *sim) handle(i int) {
	n := s.nodes[i]
	if err := n.q.HandleReady(); err != nil {
		s.fatalf("node %d: HandleReady: %v", n.id, err)
	}
	s.checkNode(i)
}

// checkNode checks that node i's applied log is a prefix of the one history and
// that its image is the image of that prefix.
func (s *sim) checkNode(i int) {
	n := s.nodes[i]
	off, im := n.q.Committed()
	if off < n.checked {
		s.fatalf("node %d: published offset went back from %d to %d", n.id, n.checked, off)
	}
	for n.checked < off {
		res, err := n.q.ReadCommitted(n.checked+1, 1<<20)
		if err != nil {
			s.fatalf("node %d: ReadCommitted(%d): %v", n.id, n.checked+1, err)
		}
		if res.SnapshotNeeded {
			// The node jumped by a snapshot: its data must be the history's image.
			so, _, data, err := n.q.Snapshot()
			if err != nil || so <= n.checked || so > off {
				s.fatalf("node %d: snapshot at %d (%v) while checked %d, published %d", n.id, so, err, n.checked, off)
			}
			sim, err := metadata.DecodeSnapshot(data)
			if err != nil {
				s.fatalf("node %d: snapshot at %d does not decode: %v", n.id, so, err)
			}
			s.checkImageFull(n, so, sim)
			n.checked = so
			continue
		}
		if len(res.Entries) == 0 {
			s.fatalf("node %d: no entries from %d though offset %d is published", n.id, n.checked+1, off)
		}
		for _, e := range res.Entries {
			if e.Offset != n.checked+1 {
				s.fatalf("node %d: entry %d after %d", n.id, e.Offset, n.checked)
			}
			s.record(n, e)
			n.checked = e.Offset
		}
	}
	s.checkImage(n, off, im)
}

// record adds a committed entry to the history, or checks it against it.
func (s *sim) record(n *simNode, e Entry) {
	if h, ok := s.history[e.Offset]; ok {
		if h.term != e.Term || !bytes.Equal(h.data, e.Data) {
			s.fatalf("node %d: committed entry %d changed: term %d→%d, data equal %v", n.id, e.Offset, h.term, e.Term, bytes.Equal(h.data, e.Data))
		}
		return
	}
	prev, ok := s.images[e.Offset-1]
	if !ok {
		s.fatalf("node %d: entry %d committed before entry %d is known", n.id, e.Offset, e.Offset-1)
	}
	s.history[e.Offset] = histEntry{e.Term, slices.Clone(e.Data)}
	im := prev
	if e.Data != nil {
		recs, _, err := metadata.DecodeEntry(e.Data)
		if err != nil {
			s.fatalf("entry %d does not decode: %v", e.Offset, err)
		}
		if next, err := prev.Apply(recs...); err == nil {
			im = next
		}
	}
	s.images[e.Offset] = im
	s.mix(e.Offset, e.Term)
}

// checkImage checks that im, node n's image at off, is the history's image at off.
// Every step checks what changed since the node's last check exactly (each topic
// the entries in between name, and the counts); every 16th check per node, and
// every restart and snapshot install, compare the whole image (digest and
// canonical encoding).
func (s *sim) checkImage(n *simNode, off uint64, im *metadata.Image) {
	if im == n.lastImage && off == n.lastOffset {
		return
	}
	want := s.historyImage(n, off)
	n.checks++
	if n.lastImage == nil || off < n.lastOffset || n.checks%16 == 0 {
		s.checkImageFull(n, off, im)
		return
	}
	if im.NumTopics() != want.NumTopics() {
		s.fatalf("node %d: image at offset %d has %d topics, the history's %d", n.id, off, im.NumTopics(), want.NumTopics())
	}
	for o := n.lastOffset + 1; o <= off; o++ {
		recs, _, _ := metadata.DecodeEntry(s.history[o].data)
		for _, r := range recs {
			if tr, ok := r.(*metadata.TopicRecord); ok {
				got, gok := im.Topic(tr.Name)
				exp, eok := want.Topic(tr.Name)
				if gok != eok || (gok && got.ID != exp.ID) {
					s.fatalf("node %d: image at offset %d: topic %q present %v, the history's %v", n.id, off, tr.Name, gok, eok)
				}
			}
		}
	}
	n.lastImage, n.lastOffset = im, off
}

func (s *sim) historyImage(n *simNode, off uint64) *metadata.Image {
	want, ok := s.images[off]
	if !ok {
		s.fatalf("node %d: image at %d, whose history is not known", n.id, off)
	}
	return want
}

func (s *sim) checkImageFull(n *simNode, off uint64, im *metadata.Image) {
	want := s.historyImage(n, off)
	d, ok := s.digests[off]
	if !ok {
		d = imageDigest(want)
		s.digests[off] = d
	}
	if imageDigest(im) != d || !bytes.Equal(encodeImage(im), encodeImage(want)) {
		s.fatalf("node %d: image at offset %d differs from the history's (%d topics, want %d)", n.id, off, im.NumTopics(), want.NumTopics())
	}
	n.lastImage, n.lastOffset = im, off
}

// imageDigest hashes everything an image holds that the simulation can change
// (topics with their partitions and configs, brokers, the producer-id watermark).
func imageDigest(im *metadata.Image) uint64 {
	h := fnv.New64a()
	var b [8]byte
	u := func(v uint64) {
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
		h.Write(b[:])
	}
	for _, t := range im.Topics() {
		h.Write([]byte(t.Name))
		h.Write(t.ID[:])
		u(uint64(len(t.Partitions)))
		for _, p := range t.Partitions {
			u(uint64(len(p.Replicas)))
			for _, r := range p.Replicas {
				u(uint64(r))
			}
			u(uint64(len(p.ISR)))
			for _, r := range p.ISR {
				u(uint64(r))
			}
			u(uint64(p.Leader))
			u(uint64(p.LeaderEpoch))
		}
		cfg := im.Configs(metadata.ResourceTopic, t.Name)
		keys := make([]string, 0, len(cfg))
		for k := range cfg {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			h.Write([]byte(k + "=" + cfg[k] + "\x00"))
		}
	}
	for _, br := range im.Brokers() {
		u(uint64(br.ID))
		h.Write([]byte(br.Host))
		u(uint64(br.Port))
	}
	u(uint64(im.NextProducerID()))
	u(uint64(im.NumTopics()))
	return h.Sum64()
}

// pollClients collects the results of proposals.
func (s *sim) pollClients() {
	kept := s.ops[:0]
	for _, op := range s.ops {
		select {
		case r := <-op.ch:
			if r.Err != nil {
				continue
			}
			h, ok := s.history[r.Offset]
			if !ok || !bytes.Equal(h.data, op.data) {
				s.fatalf("proposal acknowledged at %d is not the committed entry there (known %v)", r.Offset, ok)
			}
			s.acked++
			if op.afterHeal && s.target == 0 {
				s.target = r.Offset
				s.tracef("post-heal proposal committed at %d", r.Offset)
			}
		default:
			kept = append(kept, op)
		}
	}
	s.ops = kept
}

func (s *sim) leaderIndex() int {
	for i, n := range s.nodes {
		if n.q != nil && n.q.IsLeader() {
			return i
		}
	}
	return -1
}

func (s *sim) clientStep() {
	i := s.leaderIndex()
	if i < 0 || s.rng.IntN(5) == 0 {
		i = s.rng.IntN(len(s.nodes))
	}
	n := s.nodes[i]
	if n.q == nil {
		return
	}
	var recs []metadata.Record
	for k := 1 + s.rng.IntN(3); k > 0; k-- {
		s.nextTopic++
		recs = append(recs, topic(fmt.Sprintf("t%d", s.nextTopic)))
	}
	if s.rng.IntN(20) == 0 {
		recs = append(recs, topic(fmt.Sprintf("t%d", s.nextTopic))) // rejected by Apply
	}
	ch := n.q.Propose(recs)
	s.ops = append(s.ops, clientOp{ch: ch, data: metadata.EncodeEntry(nil, recs...), node: i, afterHeal: s.healed})
	s.handle(i)
}

func (s *sim) faultStep() {
	switch k := s.rng.IntN(10); {
	case k < 3: // crash a node
		i := s.rng.IntN(len(s.nodes))
		n := s.nodes[i]
		if n.q == nil {
			return
		}
		keep := s.rng.IntN(n.st.Unsynced() + 1)
		s.tracef("crash node %d (keeping %d of %d unsynced writes)", n.id, keep, n.st.Unsynced())
		n.st = n.st.Crash(keep)
		n.q = nil
		s.stats.crashes++
		s.schedule(&event{at: s.now + time.Duration(20+s.rng.IntN(500))*time.Millisecond, kind: evRestart, node: i})
	case k < 6: // partition
		for _, n := range s.nodes {
			n.group = 0
		}
		if s.rng.IntN(2) == 0 {
			s.nodes[s.rng.IntN(len(s.nodes))].group = 1 // isolate one
		} else {
			for _, n := range s.nodes {
				n.group = s.rng.IntN(2)
			}
		}
		s.stats.partitions++
		s.tracef("partition %v", s.groups())
		s.schedule(&event{at: s.now + time.Duration(50+s.rng.IntN(800))*time.Millisecond, kind: evHeal})
	}
}

func (s *sim) groups() []int {
	g := make([]int, len(s.nodes))
	for i, n := range s.nodes {
		g[i] = n.group
	}
	return g
}

func (s *sim) step(e *event) {
	s.now = e.at
	s.stats.events++
	s.mix(uint64(e.at), uint64(e.kind), uint64(e.node), uint64(len(e.msg)))
	switch e.kind {
	case evTick:
		n := s.nodes[e.node]
		if n.q == nil || n.gen != e.gen {
			return // the incarnation that scheduled it crashed
		}
		n.q.Tick()
		s.handle(e.node)
		s.schedule(&event{at: s.now + n.q.NextTick(), kind: evTick, node: e.node, gen: e.gen})
	case evDeliver:
		n := s.nodes[e.node]
		if n.q == nil || s.partitioned(e.from, e.node) {
			s.stats.dropped++
			return
		}
		m := &raftpb.Message{}
		if err := proto.Unmarshal(e.msg, m); err != nil {
			s.fatalf("unmarshal: %v", err)
		}
		s.stats.delivered++
		n.q.Step(m)
		if e.mtype == raftpb.MsgSnap {
			start := time.Now()
			if err := n.q.HandleReady(); err != nil {
				s.fatalf("node %d: HandleReady: %v", n.id, err)
			}
			s.installTime += time.Since(start)
			s.checkNode(e.node)
			break
		}
		s.handle(e.node)
	case evClient:
		s.clientStep()
		s.schedule(&event{at: s.now + time.Duration(1+s.rng.Int64N(int64(s.p.clientEvery))), kind: evClient})
	case evMembers:
		s.membersStep()
	case evFault:
		if !s.healed {
			s.faultStep()
			s.schedule(&event{at: s.now + time.Duration(1+s.rng.Int64N(int64(s.p.faultEvery))), kind: evFault})
		}
	case evRestart:
		if s.nodes[e.node].q == nil {
			s.tracef("restart node %d", s.nodes[e.node].id)
			s.start(e.node)
			s.handle(e.node)
		}
	case evHeal:
		if !s.healed {
			for _, n := range s.nodes {
				n.group = 0
			}
			s.tracef("heal partition")
		}
	}
	s.pollClients()
	if s.members != nil {
		s.pollMembers()
	}
}

// heal ends the chaos: every node up, no partition, no loss or duplication.
func (s *sim) heal() {
	s.healed, s.healAt = true, s.now
	s.p.drop, s.p.dup = 0, 0
	for _, n := range s.nodes {
		n.group = 0
	}
	for i, n := range s.nodes {
		if n.q == nil {
			s.start(i)
			s.handle(i)
		}
	}
	s.tracef("healed")
}

// converged reports whether, after heal, a proposal committed and every node
// applied it.
func (s *sim) converged() bool {
	if s.target == 0 {
		return false
	}
	for _, n := range s.nodes {
		if s.dynamic && !s.isMember(n) {
			continue // a controller removed (or never added) follows no more entries
		}
		if off, _ := n.q.Committed(); off < s.target {
			return false
		}
	}
	return true
}

func (s *sim) run() {
	for len(s.queue) > 0 {
		e := heap.Pop(&s.queue).(*event)
		if !s.healed && e.at >= s.p.chaos {
			heap.Push(&s.queue, e)
			s.heal()
			continue
		}
		s.step(e)
		if s.healed && s.converged() {
			return
		}
		if s.healed && s.now > s.healAt+simHealBound {
			s.fatalf("no convergence %v after heal: leader %d, post-heal commit %d, status %s", simHealBound, s.leaderIndex(), s.target, s.statuses())
		}
	}
	s.fatalf("event queue ran dry")
}

func (s *sim) statuses() string {
	var b strings.Builder
	for _, n := range s.nodes {
		st := n.q.Status()
		fmt.Fprintf(&b, "\n  node %d: %s term %d lead %d commit %d applied %d log [%d,%d]", n.id, st.Role, st.Term, st.Leader, st.CommitIndex, st.AppliedIndex, st.FirstIndex, st.LastIndex)
	}
	return b.String()
}

// runSeed runs one seed to convergence and returns the run's digest.
func runSeed(t *testing.T, seed uint64, voters int, chaos time.Duration) (*sim, uint64) {
	t.Helper()
	cryptotest.SetGlobalRandom(t, seed)
	s := newSim(t, seed, voters, chaos)
	s.run()
	for _, n := range s.nodes {
		off, im := n.q.Committed()
		s.checkImageFull(n, off, im)
		st := n.q.Status()
		s.mix(st.Term, st.AppliedIndex, st.CommitIndex)
	}
	return s, s.hash
}

func TestSim(t *testing.T) {
	chaos := time.Second
	seedsFor := map[int]int{3: 150, 5: 100}
	if longRun() {
		chaos = 5 * time.Second
		seedsFor = map[int]int{3: 2500, 5: 2500}
	}
	for _, voters := range []int{3, 5} {
		seeds := seedsFor[voters]
		t.Run(fmt.Sprintf("voters=%d", voters), func(t *testing.T) {
			if *flagSeed != 0 {
				s, h := runSeed(t, *flagSeed, voters, chaos)
				t.Logf("seed %d: digest %x, %d acked, %d committed, stats %+v", *flagSeed, h, s.acked, len(s.history), s.stats)
				return
			}
			var total simStats
			acked, committed := 0, 0
			for seed := uint64(1); seed <= uint64(seeds); seed++ {
				s, _ := runSeed(t, seed*1000+uint64(voters), voters, chaos)
				acked += s.acked
				committed += len(s.history)
				total.events += s.stats.events
				total.crashes += s.stats.crashes
				total.partitions += s.stats.partitions
				total.snapshotsSent += s.stats.snapshotsSent
			}
			t.Logf("%d seeds: %d events, %d crashes, %d partitions, %d snapshots sent, %d proposals acknowledged, %d entries committed",
				seeds, total.events, total.crashes, total.partitions, total.snapshotsSent, acked, committed)
			if acked == 0 || total.crashes == 0 || total.snapshotsSent == 0 {
				t.Fatalf("the simulation did not exercise commits, crashes and snapshots: %+v acked %d", total, acked)
			}
		})
	}
}

// TestSimDeterministic runs seeds twice: the same seed gives the same run.
func TestSimDeterministic(t *testing.T) {
	seen := map[uint64]uint64{}
	for _, seed := range []uint64{7, 8, 9} {
		s, a := runSeed(t, seed, 3, time.Second)
		_, b := runSeed(t, seed, 3, time.Second)
		if a != b {
			t.Fatalf("seed %d: digests %x and %x", seed, a, b)
		}
		if other, ok := seen[a]; ok {
			t.Fatalf("seeds %d and %d give the same digest %x", other, seed, a)
		}
		seen[a] = seed
		if s.stats.events < 300 || len(s.history) < 10 {
			t.Fatalf("seed %d: only %d events and %d entries", seed, s.stats.events, len(s.history))
		}
	}
}
