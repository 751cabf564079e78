package controller

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/cryptotest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/replication"
)

// The deterministic simulation: controllers (a Controller over each voter of a
// MemLog with lagging views: a model of the raft quorum until the real one is wired
// in) and brokers (a BrokerLifecycle and a MetadataFollower each, driven through
// their I/O-free cores) on a seeded network and a ManualClock. The network drops,
// delays (and so reorders) and duplicates messages and partitions nodes; nodes crash
// and restart (brokers with or without their persisted metadata, voters with their
// committed log). The workload creates and deletes topics and partitions, reassigns,
// elects, changes configs; leaders change ISRs through AlterPartition. Invariants
// are checked after every event (see checkInvariants); at the end the network heals
// and the cluster must converge (checkLiveness).
//
// SAMSA_LONG=1 runs thousands of seeds; SAMSA_SIM_SEED=n runs one (with
// SAMSA_SIM_TRACE=1 printing its events).

// simConfigs are the runs of TestSimulation: 3 and 5 voters, over the model and over
// the real raft quorum.
// seeds is how many of each run in a plain go test (235 in all, about 35 s of CPU
// under -race); SAMSA_LONG=1 runs 2,500 of each.
var simConfigs = []simConfig{
	{voters: 3, brokers: 4, duration: 25 * time.Second, seeds: 100},
	{voters: 5, brokers: 5, duration: 25 * time.Second, seeds: 50},
	{voters: 3, brokers: 4, duration: 25 * time.Second, raft: true, seeds: 60},
	{voters: 5, brokers: 5, duration: 25 * time.Second, raft: true, seeds: 25},
}

func (c simConfig) name() string {
	if c.raft {
		return fmt.Sprintf("raft/voters=%d", c.voters)
	}
	return fmt.Sprintf("model/voters=%d", c.voters)
}

// simConfig sizes one run.
type simConfig struct {
	voters, brokers int
	duration        time.Duration // of the faulty phase
	raft            bool          // the real quorum (coordinator/controller/quorum) instead of MemLog
	seeds           int
}

func TestSimulation(t *testing.T) {
	var only int64 = -1
	if s := os.Getenv("SAMSA_SIM_SEED"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("SAMSA_SIM_SEED=%q", s)
		}
		only = n
	}
	for _, cfg := range simConfigs {
		t.Run(cfg.name(), func(t *testing.T) {
			first, last := int64(1), int64(cfg.seeds)
			if os.Getenv("SAMSA_LONG") != "" {
				last = 2500
			}
			if only >= 0 {
				first, last = only, only
			}
			for seed := first; seed <= last; seed++ {
				seed := seed
				t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
					// etcd raft draws its randomized election timeouts from
					// crypto/rand: a seeded global source makes them a function of
					// the seed.
					cryptotest.SetGlobalRandom(t, uint64(seed))
					s := newSim(t, seed, cfg)
					s.run()
					if os.Getenv("SAMSA_SIM_STATS") != "" {
						t.Logf("events %d, client ops %d (answered %d), log end %d", s.events, s.clientOps, s.clientAnswer, s.refEnd)
					}
					if t.Failed() {
						t.Logf("replay: SAMSA_SIM_SEED=%d SAMSA_SIM_TRACE=1 go test ./coordinator/controller -run 'TestSimulation/%s/seed=%d$' -v",
							seed, cfg.name(), seed)
					}
				})
			}
		})
	}
}

const (
	voterBase       = 100 // voter ids are voterBase+1..
	clientID        = 0
	simSession      = 6 * time.Second
	simHeartbeat    = 1500 * time.Millisecond
	quorumStep      = 25 * time.Millisecond
	electionMin     = time.Second
	fetchInterval   = 100 * time.Millisecond
	fetchTimeout    = time.Second
	liveness        = 25 * time.Second
	maxSimTopics    = 12
	retryNotActive  = 30 * time.Millisecond
	channelDeadline = 5 * time.Second
)

type sim struct {
	t     *testing.T
	seed  int64
	cfg   simConfig
	rng   *rand.Rand
	clock *ManualClock
	qb    simBackend
	trace bool

	voterIDs []int32
	ctrls    map[int32]*simController
	brokers  map[int32]*simBroker

	// The network.
	group    map[int32]int // partition groups (absent: 0); nodes in different groups cannot talk
	dropP    float64
	dupP     float64
	faults   bool // the faulty phase: nemeses and workload run
	healedAt time.Time

	// Checkers' state.
	seen         map[uint64][]byte // every committed entry's data by offset
	refImages    map[uint64]*metadata.Image
	refEnd       uint64
	termLeader   map[uint64]int32
	epochLeader  map[leaderKey]int32 // (topic, partition, leader epoch) → leader, from the committed log
	deltaLeader  map[leaderKey]int32 // the same, from the brokers' ReplicaDeltas
	everTopics   map[metadata.UUID]bool
	everEpochs   map[int64]int32           // broker epochs ever committed → broker
	checked      map[int32]*metadata.Image // the image last checked per node
	topicNames   int
	events       int
	clientOps    int
	clientAnswer int
}

type leaderKey struct {
	topic metadata.UUID
	part  int32
	epoch int32
}

type simController struct {
	id   int32
	q    Quorum
	log  CommittedLog
	c    *Controller
	down bool
	// read: the offset up to which the checker has read this voter's log.
	read uint64
}

type simBroker struct {
	id          int32
	down        bool
	incarnation int
	life        *BrokerLifecycle
	fol         *MetadataFollower
	// Persisted metadata (what the broker's local metadata log would hold).
	persistOff uint64
	persistIm  *metadata.Image
	// Replica roles from its ReplicaDeltas: topic-partition → state.
	roles      map[tpKey]replication.PartitionState
	fetching   bool
	fetchSeq   uint64
	fetchSent  time.Time
	lastVoter  int32
	tickTimer  Timer
	generation int // bumped on crash: stale timers and messages are ignored
}

type tpKey struct {
	topic metadata.UUID
	part  int32
}

func newSim(t *testing.T, seed int64, cfg simConfig) *sim {
	s := &sim{t: t, seed: seed, cfg: cfg, rng: rand.New(rand.NewPCG(uint64(seed), 0x5a17)),
		clock: NewManualClock(t0), trace: os.Getenv("SAMSA_SIM_TRACE") != "",
		ctrls: map[int32]*simController{}, brokers: map[int32]*simBroker{}, group: map[int32]int{},
		seen: map[uint64][]byte{}, refImages: map[uint64]*metadata.Image{0: {}}, termLeader: map[uint64]int32{},
		epochLeader: map[leaderKey]int32{}, deltaLeader: map[leaderKey]int32{}, everTopics: map[metadata.UUID]bool{},
		everEpochs: map[int64]int32{}, checked: map[int32]*metadata.Image{}}
	for i := 1; i <= cfg.voters; i++ {
		s.voterIDs = append(s.voterIDs, int32(voterBase+i))
	}
	if cfg.raft {
		s.qb = newRaftBackend(s)
	} else {
		s.qb = newModelBackend(s)
	}
	for _, id := range s.voterIDs {
		sc := &simController{id: id}
		s.ctrls[id] = sc
		s.startController(sc)
	}
	for i := 1; i <= cfg.brokers; i++ {
		b := &simBroker{id: int32(i), roles: map[tpKey]replication.PartitionState{}}
		s.brokers[b.id] = b
		s.startBroker(b, false)
	}
	return s
}

func (s *sim) tracef(format string, args ...any) {
	if s.trace {
		s.t.Logf("%8.3fs "+format, append([]any{s.clock.Now().Sub(t0).Seconds()}, args...)...)
	}
}

func (s *sim) after(d time.Duration, f func()) Timer {
	return s.clock.AfterFunc(d, func() {
		f()
		s.events++
		s.checkInvariants()
	})
}

func (s *sim) topicID() metadata.UUID {
	var u metadata.UUID
	for i := range u {
		u[i] = byte(s.rng.Uint32())
	}
	u[6] = u[6]&0x0f | 0x40
	if !u.ValidTopicID() {
		u[15] = 7
	}
	return u
}

// traceHandler sends a component's log records to the sim's trace.
type traceHandler struct {
	s     *sim
	attrs []slog.Attr
}

func (h traceHandler) Enabled(context.Context, slog.Level) bool { return h.s.trace }
func (h traceHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	h.s.tracef("%s", b.String())
	return nil
}
func (h traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceHandler{h.s, append(slices.Clone(h.attrs), as...)}
}
func (h traceHandler) WithGroup(string) slog.Handler { return h }

func (s *sim) logger(node int32) *slog.Logger {
	return slog.New(traceHandler{s: s}).With("node", node)
}

func (s *sim) startController(sc *simController) {
	sc.q, sc.log = s.qb.voter(sc.id)
	c, err := New(Config{NodeID: sc.id, ClusterID: "sim", Clock: s.clock, SessionTimeout: simSession, Logger: s.logger(sc.id),
		RebalanceInterval: 10 * time.Second, NewTopicID: s.topicID, TickInterval: 250 * time.Millisecond,
		Static: map[string]string{"default.replication.factor": "2"}}, sc.q)
	if err != nil {
		s.t.Fatal(err)
	}
	sc.c = c
	c.Start()
}

func (s *sim) startBroker(b *simBroker, keepMetadata bool) {
	b.incarnation++
	b.generation++
	b.down = false
	inc := metadata.UUID{0: byte(b.id), 1: byte(b.incarnation), 2: byte(b.incarnation >> 8), 15: 1}
	life, err := NewBrokerLifecycle(LifecycleConfig{NodeID: b.id, ClusterID: "sim", IncarnationID: inc,
		Listeners:         []metadata.Endpoint{{Name: "PLAINTEXT", Host: "broker" + strconv.Itoa(int(b.id)), Port: 9092}},
		HeartbeatInterval: simHeartbeat, RequestTimeout: 2 * time.Second, RetryBackoff: 200 * time.Millisecond, Clock: s.clock})
	if err != nil {
		s.t.Fatal(err)
	}
	b.life = life
	b.fol = NewMetadataFollower(FollowerConfig{Clock: s.clock})
	b.roles = map[tpKey]replication.PartitionState{}
	gen := b.generation
	b.fol.Subscribe(func(off uint64, old, im *metadata.Image) {
		if b.generation != gen {
			return
		}
		b.persistOff, b.persistIm = off, im
		s.applyDelta(b, off, old, im)
		life.MetadataApplied(off, im)
	})
	if keepMetadata && b.persistIm != nil {
		data, err := metadata.EncodeSnapshot(nil, b.persistIm)
		if err != nil {
			s.t.Fatal(err)
		}
		if err := b.fol.InstallSnapshot(b.persistOff, data); err != nil {
			s.t.Fatal(err)
		}
	} else {
		b.persistOff, b.persistIm = 0, nil
	}
	b.fetching = false
	s.brokerTick(b, gen)
	s.fetchLoop(b, gen)
}

// applyDelta updates the broker's replica roles from the ReplicaDelta of one
// publication, and checks them against the image and against other brokers.
func (s *sim) applyDelta(b *simBroker, off uint64, old, im *metadata.Image) {
	d := ReplicaDelta(b.id, old, im, nil)
	for _, st := range d.Stopped {
		for k, r := range b.roles {
			if r.Topic == st.TP.Topic && r.Partition == st.TP.Partition {
				if t, ok := im.TopicByID(k.topic); !ok || int(k.part) >= len(t.Partitions) || !slices.Contains(t.Partitions[k.part].Replicas, b.id) {
					delete(b.roles, k)
				}
			}
		}
	}
	seen := map[tpKey]bool{}
	for _, list := range [][]replication.PartitionState{d.Leaders, d.Followers} {
		for _, st := range list {
			k := tpKey{metadata.UUID(st.TopicID), st.Partition}
			if seen[k] {
				s.failf("broker %d: delta at %d lists %s twice", b.id, off, st.TP())
			}
			seen[k] = true
			b.roles[k] = st
			if st.Leader == b.id {
				lk := leaderKey{k.topic, k.part, st.LeaderEpoch}
				if other, ok := s.deltaLeader[lk]; ok && other != b.id {
					s.failf("brokers %d and %d both lead %s in leader epoch %d", other, b.id, st.TP(), st.LeaderEpoch)
				}
				s.deltaLeader[lk] = b.id
			}
		}
	}
	// The roles built from deltas are exactly what the image says.
	want := 0
	for _, t := range im.Topics() {
		for i, p := range t.Partitions {
			if !slices.Contains(p.Replicas, b.id) {
				continue
			}
			want++
			r, ok := b.roles[tpKey{t.ID, int32(i)}]
			if !ok || r.Leader != p.Leader || r.LeaderEpoch != p.LeaderEpoch || r.PartitionEpoch != p.PartitionEpoch || !slices.Equal(r.ISR, p.ISR) {
				s.failf("broker %d at %d: role of %s-%d %+v, image %+v", b.id, off, t.Name, i, r, p)
			}
		}
	}
	if want != len(b.roles) {
		s.failf("broker %d at %d: %d roles from deltas, %d replicas in the image", b.id, off, len(b.roles), want)
	}
}

func (s *sim) failf(format string, args ...any) {
	s.t.Helper()
	s.t.Errorf("%8.3fs "+format, append([]any{s.clock.Now().Sub(t0).Seconds()}, args...)...)
}

// ---- the network ----

func (s *sim) cut(a, b int32) bool { return s.group[a] != s.group[b] }

func (s *sim) nodeDown(id int32) bool {
	if sc, ok := s.ctrls[id]; ok {
		return sc.down
	}
	if b, ok := s.brokers[id]; ok {
		return b.down
	}
	return false
}

// send delivers f at to after a delay, unless dropped, cut or to is down; it may
// deliver it twice.
func (s *sim) send(from, to int32, what string, f func()) {
	if s.cut(from, to) || s.rng.Float64() < s.dropP {
		s.tracef("drop %s %d→%d", what, from, to)
		return
	}
	copies := 1
	if s.rng.Float64() < s.dupP {
		copies = 2
	}
	for range copies {
		d := time.Duration(1+s.rng.IntN(15)) * time.Millisecond
		s.after(d, func() {
			if s.nodeDown(to) || s.cut(from, to) {
				return
			}
			f()
		})
	}
}

// request sends req from a node to the active controller the way a
// ControllerChannel does: to target, then to the next voter after NOT_CONTROLLER,
// for up to channelDeadline. onResp gets the answer (never an error: lost messages
// are lost).
func (s *sim) request(from int32, req kmsg.Request, target int32, onResp func(int32, kmsg.Response)) {
	s.requestUntil(from, req, target, s.clock.Now().Add(channelDeadline), onResp)
}

func (s *sim) requestUntil(from int32, req kmsg.Request, target int32, deadline time.Time, onResp func(int32, kmsg.Response)) {
	s.send(from, target, fmt.Sprintf("api %d", req.Key()), func() {
		sc := s.ctrls[target]
		sc.c.Submit(req, func(resp kmsg.Response) {
			s.send(target, from, fmt.Sprintf("api %d response", req.Key()), func() {
				if NotController(resp) && s.clock.Now().Before(deadline) {
					next := s.voterIDs[(slices.Index(s.voterIDs, target)+1)%len(s.voterIDs)]
					s.after(retryNotActive, func() { s.requestUntil(from, req, next, deadline, onResp) })
					return
				}
				onResp(target, resp)
			})
		})
	})
}

// ---- brokers ----

func (s *sim) brokerTick(b *simBroker, gen int) {
	if b.generation != gen || b.down {
		return
	}
	now := s.clock.Now()
	req, seq, at := b.life.Next(now)
	if req != nil {
		target := b.lastVoter
		if target == 0 {
			target = s.voterIDs[s.rng.IntN(len(s.voterIDs))]
		}
		s.tracef("broker %d sends %T seq %d to %d", b.id, req, seq, target)
		s.request(b.id, req, target, func(from int32, resp kmsg.Response) {
			if b.generation != gen {
				return
			}
			b.lastVoter = from
			s.checkResponse(req, resp)
			b.life.OnResponse(s.clock.Now(), seq, resp, nil)
			s.brokerTick(b, gen)
		})
		_, _, at = b.life.Next(now)
	}
	if b.life.State() == StateShuttingDown {
		s.tracef("broker %d shut down", b.id)
		s.crashBroker(b)
		return
	}
	if b.tickTimer != nil {
		b.tickTimer.Stop()
	}
	wait := at.Sub(now)
	if at.IsZero() || wait <= 0 {
		wait = 10 * time.Millisecond
	}
	b.tickTimer = s.after(min(wait, time.Second), func() { s.brokerTick(b, gen) })
}

func (s *sim) fetchLoop(b *simBroker, gen int) {
	if b.generation != gen || b.down {
		return
	}
	if !b.fetching {
		b.fetching = true
		b.fetchSeq++
		seq := b.fetchSeq
		off, _ := b.fol.Image()
		voter := s.voterIDs[s.rng.IntN(len(s.voterIDs))]
		s.send(b.id, voter, "fetch", func() {
			v := s.ctrls[voter].log
			res, err := v.ReadCommitted(off+1, 16<<10)
			if err != nil {
				s.failf("read committed: %v", err)
				return
			}
			var snapOff uint64
			var snap []byte
			needSnap := res.SnapshotNeeded
			if needSnap {
				snapOff, _, snap, _ = v.Snapshot()
			}
			s.send(voter, b.id, "fetch response", func() {
				if b.generation != gen || seq != b.fetchSeq {
					return
				}
				b.fetching = false
				var err error
				if needSnap {
					err = b.fol.InstallSnapshot(snapOff, snap)
				} else {
					err = b.fol.Apply(MetadataBatch{Entries: res.Entries, HighWatermark: res.Committed + 1, Leader: res.Leader, Term: res.Term})
				}
				if err != nil && !errors.Is(err, ErrOutOfOrder) {
					s.failf("broker %d applying metadata: %v", b.id, err)
				}
			})
		})
		b.fetchSent = s.clock.Now()
	} else if s.clock.Now().Sub(b.fetchSent) >= fetchTimeout {
		b.fetching = false // lost: fetch again at the next round
	}
	s.after(fetchInterval, func() { s.fetchLoop(b, gen) })
}

func (s *sim) crashBroker(b *simBroker) {
	if b.down {
		return
	}
	s.tracef("crash broker %d", b.id)
	b.down = true
	b.generation++
	if b.tickTimer != nil {
		b.tickTimer.Stop()
	}
	b.roles = map[tpKey]replication.PartitionState{}
	if !s.faults {
		// After the heal, a broker that stopped (a controlled shutdown begun before)
		// comes back.
		s.after(time.Second, func() {
			if b.down {
				s.startBroker(b, true)
			}
		})
	}
}

// alterISR returns a partition b leads in its image, chosen at random.
func (s *sim) alterISR(b *simBroker) {
	if b.down || b.life.State() != StateRunning {
		return
	}
	_, im := b.fol.Image()
	type led struct {
		t *metadata.TopicImage
		i int
	}
	var mine []led
	for _, t := range im.Topics() {
		for i, p := range t.Partitions {
			if p.Leader == b.id {
				mine = append(mine, led{t, i})
			}
		}
	}
	if len(mine) == 0 {
		return
	}
	l := mine[s.rng.IntN(len(mine))]
	p := l.t.Partitions[l.i]
	isr := slices.Clone(p.ISR)
	outside := minus(p.Replicas, isr)
	switch {
	case len(outside) > 0 && s.rng.IntN(2) == 0:
		isr = append(isr, outside[s.rng.IntN(len(outside))])
	case len(isr) > 1:
		others := without(isr, b.id)
		isr = without(isr, others[s.rng.IntN(len(others))])
	default:
		return
	}
	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = 3
	req.BrokerID, req.BrokerEpoch = b.id, b.life.Epoch()
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.TopicID = l.t.ID
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch = int32(l.i), p.LeaderEpoch, p.PartitionEpoch
	rp.LeaderRecoveryState = metadata.LeaderRecovered
	for _, id := range isr {
		rp.NewEpochISR = append(rp.NewEpochISR, kmsg.AlterPartitionRequestTopicPartitionNewEpochISR{BrokerID: id, BrokerEpoch: -1})
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	target := b.lastVoter
	if target == 0 {
		target = s.voterIDs[0]
	}
	s.tracef("broker %d alters ISR of %s-%d to %v", b.id, l.t.Name, l.i, isr)
	gen := b.generation
	s.request(b.id, req, target, func(_ int32, resp kmsg.Response) {
		if b.generation == gen {
			s.checkResponse(req, resp)
		}
	})
}

// ---- controllers and the quorum model ----

// majority reports whether voter id can reach a majority of live voters.
func (s *sim) majority(id int32) bool {
	n := 0
	for _, v := range s.voterIDs {
		if !s.ctrls[v].down && !s.cut(id, v) {
			n++
		}
	}
	return n*2 > len(s.voterIDs)
}

func (s *sim) crashController(sc *simController) {
	s.tracef("crash controller %d", sc.id)
	sc.down = true
	sc.c.Close()
	s.qb.crash(sc.id)
}

func (s *sim) restartController(sc *simController) {
	s.tracef("restart controller %d", sc.id)
	sc.down = false
	s.qb.restart(sc.id)
	s.startController(sc)
}

// pollControllers lets every live controller observe its quorum.
func (s *sim) pollControllers() {
	for _, id := range s.voterIDs {
		if sc := s.ctrls[id]; !sc.down {
			sc.c.Poll()
		}
	}
}

// latest returns the newest committed image the checker knows.
func (s *sim) latest() *metadata.Image { return s.refImages[s.refEnd] }

// ---- the workload and the nemesis ----

func (s *sim) clientRequest(req kmsg.Request) {
	s.clientOps++
	target := s.voterIDs[s.rng.IntN(len(s.voterIDs))]
	s.request(clientID, req, target, func(_ int32, resp kmsg.Response) {
		s.clientAnswer++
		s.checkResponse(req, resp)
	})
}

func (s *sim) workload() {
	im := s.latest()
	topics := im.Topics()
	switch r := s.rng.IntN(100); {
	case r < 40 && len(topics) < maxSimTopics:
		s.topicNames++
		req := createTopic(fmt.Sprintf("t%d", s.topicNames), int32(1+s.rng.IntN(4)), int16(1+s.rng.IntN(3)))
		if s.rng.IntN(4) == 0 {
			req.Topics[0].ReplicationFactor = -1
		}
		s.clientRequest(req)
	case r < 50 && len(topics) > 0:
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.Version = 6
		t := topics[s.rng.IntN(len(topics))]
		req.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: t.ID}}
		s.clientRequest(req)
	case r < 60 && len(topics) > 0:
		t := topics[s.rng.IntN(len(topics))]
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: t.Name, Count: int32(len(t.Partitions) + 1)}}
		s.clientRequest(req)
	case r < 70 && len(topics) > 0:
		req := kmsg.NewPtrElectLeadersRequest()
		req.Version = 2
		req.ElectionType = int8(s.rng.IntN(2))
		if s.rng.IntN(2) == 0 {
			t := topics[s.rng.IntN(len(topics))]
			req.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: t.Name, Partitions: []int32{0}}}
		}
		s.clientRequest(req)
	case r < 82 && len(topics) > 0:
		t := topics[s.rng.IntN(len(topics))]
		p := t.Partitions[s.rng.IntN(len(t.Partitions))]
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		var target []int32
		if s.rng.IntN(5) > 0 {
			ids := make([]int32, 0, len(s.brokers))
			for i := 1; i <= s.cfg.brokers; i++ {
				ids = append(ids, int32(i))
			}
			s.rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
			target = ids[:max(1, len(p.Replicas)-len(p.Adding))]
		}
		idx := int32(slices.IndexFunc(t.Partitions, func(q metadata.PartitionImage) bool { return slices.Equal(q.Replicas, p.Replicas) }))
		req.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{{Topic: t.Name,
			Partitions: []kmsg.AlterPartitionAssignmentsRequestTopicPartition{{Partition: idx, Replicas: target}}}}
		s.clientRequest(req)
	case r < 88 && len(topics) > 0:
		t := topics[s.rng.IntN(len(topics))]
		v := "true"
		if s.rng.IntN(2) == 0 {
			v = "false"
		}
		s.clientRequest(incremental(kmsg.ConfigResourceTypeTopic, t.Name, "unclean.leader.election.enable", kmsg.IncrementalAlterConfigOpSet, v))
	default:
		ids := make([]int32, 0, len(s.brokers))
		for id := range s.brokers {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		s.alterISR(s.brokers[ids[s.rng.IntN(len(ids))]])
	}
}

func (s *sim) nemesis() {
	bids := make([]int32, 0, len(s.brokers))
	for id := range s.brokers {
		bids = append(bids, id)
	}
	slices.Sort(bids)
	b := s.brokers[bids[s.rng.IntN(len(bids))]]
	sc := s.ctrls[s.voterIDs[s.rng.IntN(len(s.voterIDs))]]
	downVoters := 0
	for _, id := range s.voterIDs {
		if s.ctrls[id].down {
			downVoters++
		}
	}
	switch r := s.rng.IntN(100); {
	case r < 15:
		if !b.down {
			s.crashBroker(b)
		} else {
			keep := s.rng.IntN(2) == 0
			s.tracef("restart broker %d (metadata kept: %v)", b.id, keep)
			s.startBroker(b, keep)
		}
	case r < 25:
		if !b.down {
			s.tracef("controlled shutdown of broker %d", b.id)
			b.life.BeginControlledShutdown()
			s.brokerTick(b, b.generation)
		}
	case r < 40:
		if !sc.down && downVoters < (len(s.voterIDs)+1)/2 {
			s.crashController(sc)
		} else if sc.down {
			s.restartController(sc)
		}
	case r < 55:
		// A partition: a random split of every node, healed after a while.
		for id := range s.group {
			delete(s.group, id)
		}
		all := append(slices.Clone(s.voterIDs), bids...)
		for _, id := range all {
			if s.rng.IntN(2) == 0 {
				s.group[id] = 1
			}
		}
		s.tracef("partition %v", s.group)
		s.after(time.Duration(1+s.rng.IntN(6))*time.Second, func() {
			for id := range s.group {
				delete(s.group, id)
			}
			s.tracef("partition healed")
		})
	case r < 65:
		s.dropP = []float64{0, 0.05, 0.2, 0.5}[s.rng.IntN(4)]
		s.dupP = []float64{0, 0.05, 0.2}[s.rng.IntN(3)]
		s.tracef("drop %.2f dup %.2f", s.dropP, s.dupP)
	default:
		s.extendReference() // the checker reads every entry before a fault may compact it
		s.qb.fault(r)
	}
}

// ---- the run ----

func (s *sim) run() {
	s.qb.start()
	s.faults = true
	var work, nem func()
	work = func() {
		if !s.faults {
			return
		}
		s.workload()
		s.after(time.Duration(100+s.rng.IntN(600))*time.Millisecond, work)
	}
	nem = func() {
		if !s.faults {
			return
		}
		s.nemesis()
		s.after(time.Duration(500+s.rng.IntN(2500))*time.Millisecond, nem)
	}
	s.after(time.Second, work)
	s.after(3*time.Second, nem)
	s.runFor(s.cfg.duration)
	if s.t.Failed() {
		return
	}
	s.heal()
	s.runFor(liveness)
	s.checkLiveness()
}

func (s *sim) runFor(d time.Duration) {
	end := s.clock.Now().Add(d)
	for !s.t.Failed() {
		at, ok := s.clock.Next()
		if !ok || at.After(end) {
			break
		}
		s.clock.Step()
	}
	s.clock.AdvanceTo(end)
}

// heal ends the faults: the network is whole and lossless, every node runs.
func (s *sim) heal() {
	s.faults = false
	s.dropP, s.dupP = 0, 0
	for id := range s.group {
		delete(s.group, id)
	}
	for _, id := range s.voterIDs {
		if sc := s.ctrls[id]; sc.down {
			s.restartController(sc)
		}
	}
	ids := make([]int32, 0, len(s.brokers))
	for id := range s.brokers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if b := s.brokers[id]; b.down {
			s.startBroker(b, s.rng.IntN(2) == 0)
		}
	}
	s.healedAt = s.clock.Now()
	s.tracef("healed")
	// A topic created after the heal must commit: the client retries until it has.
	s.topicNames++
	name := fmt.Sprintf("after-heal-%d", s.topicNames)
	var again func()
	again = func() {
		if _, ok := s.latest().Topic(name); ok {
			return
		}
		s.clientRequest(createTopic(name, 2, 2))
		s.after(channelDeadline, again)
	}
	again()
}

// ---- invariants ----

func sortedKeys[V any](m map[int32]V) []int32 {
	out := make([]int32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestSimulationDeterministic: a seed gives the same run twice (so a failing seed
// replays), and different seeds give different runs.
func TestSimulationDeterministic(t *testing.T) {
	digest := func(cfg simConfig, seed int64) string {
		var d string
		t.Run(fmt.Sprintf("%s/seed=%d", cfg.name(), seed), func(t *testing.T) {
			cryptotest.SetGlobalRandom(t, uint64(seed))
			s := newSim(t, seed, cfg)
			s.run()
			h := fnv.New64a()
			for off := uint64(1); off <= s.refEnd; off++ {
				h.Write(s.seen[off])
			}
			d = fmt.Sprintf("events %d, end %d, entries %x", s.events, s.refEnd, h.Sum64())
		})
		return d
	}
	for _, cfg := range []simConfig{simConfigs[0], simConfigs[2]} {
		a, b, c := digest(cfg, 11), digest(cfg, 11), digest(cfg, 12)
		if a != b {
			t.Fatalf("%s: seed 11 ran two ways: %s / %s", cfg.name(), a, b)
		}
		if a == c {
			t.Fatalf("%s: seeds 11 and 12 ran the same: %s", cfg.name(), a)
		}
	}
}
