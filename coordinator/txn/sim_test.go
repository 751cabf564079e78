package txn

import (
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

// The simulation runs transactional producers against the coordinator
// (over the in-memory Log, appends completed in seeded order) and real
// engine logs as data partitions (markers written through the engine, so
// its producer-state checks take part, KIP-890's verification included),
// with seeded faults: lost and failed appends, marker requests that fail
// or whose answers are lost, leaders that go away, producers that stall
// past their timeout or restart, and coordinator failovers (a new
// coordinator loading the log at the next epoch while the old one's
// markers may still land). Everything runs on the test goroutine, so a
// seed replays exactly.
//
// The model is what a client may rely on:
//
//  1. a transaction whose commit was acknowledged is committed in every
//     partition it wrote to (no batch of it in an aborted transaction);
//  2. a transaction whose commit was never asked for is aborted
//     everywhere (every batch in an aborted transaction of its producer);
//     one acknowledged aborted, too;
//  3. any other (a commit asked, its answer lost) is atomic: all of its
//     batches one way;
//  4. InitProducerId hands out, per transactional id, increasing
//     (producer id, epoch) pairs;
//  5. once quiet, every transaction is decided: each data partition's
//     last stable offset is its end, every transactional id is Empty or
//     complete with nothing pending.
type simWorld struct {
	t       *testing.T
	seed    int64
	rng     *rand.Rand
	clock   *fakeClock
	log     *memLog
	pids    *counterPIDs
	eng     *engine.Manager
	data    map[TopicPartition]*engine.Log
	tps     []TopicPartition
	mk      *simMarkers
	cfg     Config
	c       *Coordinator
	epoch   int32
	clients []*simClient
	txns    []*simTxn
	trace   []string
	step    int
	quiet   bool
}

type simTxn struct {
	id          string
	pid         int64
	epoch       int16
	batches     []simBatch
	commitAsked bool
	committed   bool // the commit was acknowledged
	aborted     bool // the abort was acknowledged
}

type simBatch struct {
	tp          TopicPartition
	first, last int64
}

type simClient struct {
	w          *simWorld
	id         string
	endVersion int16 // 3, or 5 (transaction version 2)
	pid        int64
	epoch      int16
	lastInit   [2]int64 // pid, epoch of the last InitProducerId answered
	busy       bool
	txn        *simTxn
	added      map[TopicPartition]bool
	seq        map[TopicPartition]int32
	sleepUntil time.Time
	ending     *bool // the commit (true) or abort being retried
}

func (w *simWorld) note(format string, args ...any) {
	w.trace = append(w.trace, fmt.Sprintf("%d: ", w.step)+fmt.Sprintf(format, args...))
	if len(w.trace) > 400 {
		w.trace = w.trace[200:]
	}
}

func (w *simWorld) fatalf(format string, args ...any) {
	w.t.Helper()
	n := len(w.trace)
	w.t.Fatalf("seed %d, step %d: %s\nlast events:\n%v\nreplay: SAMSA_TXN_SEED=%d go test -run TestCoordinatorSimulation ./coordinator/txn",
		w.seed, w.step, fmt.Sprintf(format, args...), w.trace[max(0, n-60):], w.seed)
}

// simMarkers writes markers into the engine logs.
type simMarkers struct {
	w     *simWorld
	queue []*markerSend
	down  map[TopicPartition]bool
}

func (m *simMarkers) Leader(tp TopicPartition) (int32, bool, bool) {
	if _, ok := m.w.data[tp]; !ok {
		return -1, false, false
	}
	return 1, !m.down[tp], true
}

func (m *simMarkers) Send(broker int32, req *kmsg.WriteTxnMarkersRequest, done func(*kmsg.WriteTxnMarkersResponse, error)) {
	m.queue = append(m.queue, &markerSend{broker: broker, req: req, done: done})
}

// deliver handles the i-th queued send: maybe a failure before anything is
// written, else the markers written, and maybe the answer lost.
func (m *simMarkers) deliver(i int) {
	w := m.w
	s := m.queue[i]
	m.queue = append(m.queue[:i], m.queue[i+1:]...)
	if !w.quiet && w.rng.Intn(10) == 0 {
		w.note("marker request fails")
		s.done(nil, errNetwork)
		return
	}
	resp := s.req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, mk := range s.req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = mk.ProducerID
		for _, t := range mk.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				tp := TopicPartition{t.Topic, p}
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = p
				if !w.quiet && w.rng.Intn(12) == 0 {
					rp.ErrorCode = kerr.NotLeaderForPartition.Code // the leader moved meanwhile
					w.note("marker to %v: not the leader", tp)
					rt.Partitions = append(rt.Partitions, rp)
					continue
				}
				l := w.data[tp]
				res, err := l.AppendMarker(engine.Marker{ProducerID: mk.ProducerID, ProducerEpoch: mk.ProducerEpoch,
					CoordinatorEpoch: mk.CoordinatorEpoch, Commit: mk.Committed, Timestamp: w.clock.Now().UnixMilli()}, engine.AppendOptions{})
				rp.ErrorCode = markerErrCode(err)
				if err == nil {
					l.SetHighWatermark(l.LogEndOffset())
				}
				w.note("marker pid %d epoch %d commit %v coord %d to %v at %d: %v", mk.ProducerID, mk.ProducerEpoch, mk.Committed,
					mk.CoordinatorEpoch, tp, res.BaseOffset, kerr.ErrorForCode(rp.ErrorCode))
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	if !w.quiet && w.rng.Intn(10) == 0 {
		w.note("marker answer lost")
		s.done(nil, errNetwork)
		return
	}
	s.done(resp, nil)
}

func newSimWorld(t *testing.T, seed int64) *simWorld {
	w := &simWorld{t: t, seed: seed, rng: rand.New(rand.NewSource(seed)), clock: newFakeClock(), log: newMemLog(),
		pids: &counterPIDs{}, data: map[TopicPartition]*engine.Log{}}
	w.log.manual = true
	var err error
	w.eng, err = engine.Open(engine.Options{Dirs: []string{t.TempDir()}, Sync: engine.SyncNone, Now: w.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.eng.Close() })
	for i := 0; i < 4; i++ {
		tp := TopicPartition{fmt.Sprint("data", i%2), int32(i / 2)}
		l, err := w.eng.CreateLog(engine.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}, engine.DefaultLogConfig())
		if err != nil {
			t.Fatal(err)
		}
		w.data[tp], w.tps = l, append(w.tps, tp)
	}
	w.mk = &simMarkers{w: w, down: map[TopicPartition]bool{}}
	w.cfg = Config{NumPartitions: 3, Clock: w.clock, MaxTimeout: time.Minute, RetryBackoff: 100 * time.Millisecond,
		AbortInterval: time.Second, ExpirationInterval: 30 * time.Second, IDExpiration: 2 * time.Minute,
		TransactionVersion: 2, Logger: quietLogger()}
	for i := 0; i < 5; i++ {
		c := &simClient{w: w, id: fmt.Sprint("tx-", i), endVersion: 3, pid: -1, lastInit: [2]int64{-1, -1}}
		if i%2 == 1 {
			c.endVersion = 5
		}
		w.clients = append(w.clients, c)
	}
	w.failover()
	return w
}

// failover closes the coordinator (its appends in flight answered
// NOT_LEADER, some of them durable) and starts one at the next epoch.
func (w *simWorld) failover() {
	if w.c != nil {
		w.note("failover to epoch %d", w.epoch+1)
		w.c.Close()
		for p := int32(0); p < w.cfg.NumPartitions; p++ {
			for w.log.complete(p, w.rng.Intn(2) == 0, fmt.Errorf("%w: failover", ErrNotLeader)) {
			}
		}
	}
	w.epoch++
	w.c = New(w.cfg, w.log, w.mk, w.pids)
	for p := int32(0); p < w.cfg.NumPartitions; p++ {
		if err := w.c.LoadPartition(p, w.epoch); err != nil {
			w.fatalf("load: %v", err)
		}
	}
}

func retriable(code int16) bool {
	switch code {
	case kerr.ConcurrentTransactions.Code, kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code:
		return true
	}
	return false
}

// restart drops the client's producer: its open transaction is abandoned
// (never asked to commit unless it was).
func (c *simClient) restart() {
	c.pid, c.txn, c.ending = -1, nil, nil
}

func (c *simClient) act() {
	w := c.w
	if c.busy || w.clock.Now().Before(c.sleepUntil) {
		return
	}
	if c.ending != nil {
		c.end(*c.ending)
		return
	}
	if c.pid < 0 {
		c.init()
		return
	}
	if c.txn == nil {
		if w.quiet {
			return
		}
		c.txn = &simTxn{id: c.id, pid: c.pid, epoch: c.epoch}
		w.txns = append(w.txns, c.txn)
		c.added = map[TopicPartition]bool{}
	}
	r := w.rng.Intn(100)
	switch {
	case w.quiet:
		c.end(w.rng.Intn(2) == 0)
	case r < 50:
		tp := w.tps[w.rng.Intn(len(w.tps))]
		if c.added[tp] {
			c.produce(tp)
		} else {
			c.add(tp)
		}
	case r < 70 && len(c.txn.batches) > 0:
		c.end(true)
	case r < 80:
		c.end(false)
	case r < 84:
		w.note("%s restarts", c.id)
		c.restart()
	case r < 87:
		w.note("%s stalls", c.id)
		c.sleepUntil = w.clock.Now().Add(12 * time.Second)
	}
}

func (c *simClient) init() {
	w := c.w
	c.busy = true
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version, req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = 4, &c.id, 10_000, -1, -1
	w.c.InitProducerID(req, func(r *kmsg.InitProducerIDResponse) {
		c.busy = false
		w.note("%s init: %v %d/%d", c.id, kerr.ErrorForCode(r.ErrorCode), r.ProducerID, r.ProducerEpoch)
		if r.ErrorCode != 0 {
			if !retriable(r.ErrorCode) {
				w.fatalf("%s: InitProducerId %v", c.id, kerr.ErrorForCode(r.ErrorCode))
			}
			return
		}
		if r.ProducerID < c.lastInit[0] || r.ProducerID == c.lastInit[0] && int64(r.ProducerEpoch) <= c.lastInit[1] {
			w.fatalf("%s: InitProducerId gave %d/%d after %d/%d", c.id, r.ProducerID, r.ProducerEpoch, c.lastInit[0], c.lastInit[1])
		}
		c.lastInit = [2]int64{r.ProducerID, int64(r.ProducerEpoch)}
		c.pid, c.epoch, c.txn = r.ProducerID, r.ProducerEpoch, nil
		c.seq = map[TopicPartition]int32{}
	})
}

func (c *simClient) add(tp TopicPartition) {
	w := c.w
	c.busy = true
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch = 3, c.id, c.pid, c.epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = tp.Topic, []int32{tp.Partition}
	req.Topics = append(req.Topics, rt)
	txn := c.txn
	w.c.AddPartitionsToTxn(req, nil, func(r *kmsg.AddPartitionsToTxnResponse) {
		c.busy = false
		code := r.Topics[0].Partitions[0].ErrorCode
		w.note("%s add %v: %v", c.id, tp, kerr.ErrorForCode(code))
		if c.txn != txn {
			return
		}
		switch {
		case code == 0:
			c.added[tp] = true
			c.produce(tp)
		case retriable(code):
		default:
			c.restart() // fenced: the transaction is gone
		}
	})
}

// produce writes a transactional batch as the partition leader would:
// KIP-890's verification first when the producer has no transaction open
// there.
func (c *simClient) produce(tp TopicPartition) {
	w := c.w
	l := w.data[tp]
	seq := c.seq[tp]
	g, needed := l.StartTxnVerification(c.pid, c.epoch, seq)
	if needed {
		codes := w.c.VerifyPartitions(c.id, c.pid, c.epoch, []TopicPartition{tp})
		if code := codes[tp]; code != 0 {
			w.note("%s produce to %v: verification %v", c.id, tp, kerr.ErrorForCode(code))
			c.fail()
			return
		}
		l.CompleteTxnVerification(c.pid, g)
	}
	n := 1 + w.rng.Intn(3)
	recs := make([]engine.Record, n)
	for i := range recs {
		recs[i] = engine.Record{Timestamp: w.clock.Now().UnixMilli(), Key: []byte(c.id), Value: []byte(fmt.Sprint(seq + int32(i)))}
	}
	b, err := engine.AppendProducerRecords(nil, engine.BatchProducer{ID: c.pid, Epoch: c.epoch, BaseSequence: seq, Transactional: true}, recs)
	if err != nil {
		w.fatalf("batch: %v", err)
	}
	res, err := l.Append(b, engine.AppendOptions{})
	w.note("%s produce %d/%d seq %d to %v: %d..%d %v", c.id, c.pid, c.epoch, seq, tp, res.BaseOffset, res.LastOffset, err)
	if err != nil {
		c.fail()
		return
	}
	l.SetHighWatermark(l.LogEndOffset())
	c.seq[tp] = seq + int32(n)
	c.txn.batches = append(c.txn.batches, simBatch{tp, res.BaseOffset, res.LastOffset})
}

// fail is a produce error: the client aborts its transaction.
func (c *simClient) fail() {
	abort := false
	c.ending = &abort
}

func (c *simClient) end(commit bool) {
	w := c.w
	c.busy = true
	c.ending = &commit
	txn := c.txn
	if commit && txn != nil {
		txn.commitAsked = true
	}
	req := kmsg.NewPtrEndTxnRequest()
	req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = c.endVersion, c.id, c.pid, c.epoch, commit
	w.c.EndTxn(req, func(r *kmsg.EndTxnResponse) {
		c.busy = false
		w.note("%s end commit=%v %d/%d: %v -> %d/%d", c.id, commit, c.pid, c.epoch, kerr.ErrorForCode(r.ErrorCode), r.ProducerID, r.ProducerEpoch)
		switch {
		case r.ErrorCode == 0:
			if txn != nil {
				txn.committed, txn.aborted = commit, !commit
			}
			if c.endVersion >= 5 {
				if r.ProducerID != c.pid || r.ProducerEpoch != c.epoch+1 {
					if r.ProducerEpoch != 0 {
						w.fatalf("%s: EndTxn v5 gave %d/%d after %d/%d", c.id, r.ProducerID, r.ProducerEpoch, c.pid, c.epoch)
					}
				}
				c.pid, c.epoch, c.seq = r.ProducerID, r.ProducerEpoch, map[TopicPartition]int32{}
			}
			c.txn, c.ending = nil, nil
		case retriable(r.ErrorCode):
		case r.ErrorCode == kerr.InvalidTxnState.Code && !commit:
			// An abort of a transaction that was aborted for us (and, with
			// version 1, the epoch not moved): start over.
			c.restart()
		default:
			c.restart() // fenced (timed out, or restarted elsewhere)
		}
	})
}

func (w *simWorld) pendingEvents() int { return w.log.pending() + len(w.mk.queue) }

// event runs one seeded event.
func (w *simWorld) event() {
	w.step++
	r := w.rng.Intn(100)
	switch {
	case r < 25 && w.log.pending() > 0:
		p := int32(w.rng.Intn(int(w.cfg.NumPartitions)))
		for w.log.pending() > 0 && !w.log.complete(p, true, nil) {
			p = (p + 1) % w.cfg.NumPartitions
		}
	case r < 27 && w.log.pending() > 0 && !w.quiet:
		p := int32(w.rng.Intn(int(w.cfg.NumPartitions)))
		if w.log.complete(p, false, fmt.Errorf("not enough replicas")) {
			w.note("append to %d fails", p)
		}
	case r < 45 && len(w.mk.queue) > 0:
		w.mk.deliver(w.rng.Intn(len(w.mk.queue)))
	case r < 47 && !w.quiet:
		tp := w.tps[w.rng.Intn(len(w.tps))]
		w.mk.down[tp] = !w.mk.down[tp]
		w.note("leader of %v down: %v", tp, w.mk.down[tp])
	case r < 48 && !w.quiet:
		w.failover()
	case r < 70:
		w.clock.advance(time.Duration(1+w.rng.Intn(400)) * time.Millisecond)
	default:
		w.clients[w.rng.Intn(len(w.clients))].act()
	}
}

// settle lets every client end what it has, then runs until nothing is
// pending and the clock has passed every timeout.
func (w *simWorld) settle() {
	w.quiet = true
	clear(w.mk.down)
	for i := 0; i < 20000; i++ {
		w.step++
		for w.log.pending() > 0 {
			w.log.completeAll()
		}
		for len(w.mk.queue) > 0 {
			w.mk.deliver(0)
		}
		for _, c := range w.clients {
			c.act()
		}
		idle := w.pendingEvents() == 0
		for _, c := range w.clients {
			idle = idle && !c.busy && c.ending == nil && c.txn == nil
		}
		if idle && i > 100 {
			return
		}
		w.clock.advance(500 * time.Millisecond)
	}
	w.fatalf("the simulation does not settle: %d events pending", w.pendingEvents())
}

// aborted reports whether the batch lies in an aborted transaction of pid.
func (w *simWorld) aborted(b simBatch, pid int64) bool {
	for _, a := range w.data[b.tp].AbortedTransactions(b.first, b.last+1, nil) {
		if a.ProducerID == pid && a.FirstOffset <= b.first && b.last < a.LastOffset {
			return true
		}
	}
	return false
}

func (w *simWorld) check() {
	for _, txn := range w.txns {
		if len(txn.batches) == 0 {
			continue
		}
		n := 0
		for _, b := range txn.batches {
			if w.aborted(b, txn.pid) {
				n++
			}
		}
		all, none := n == len(txn.batches), n == 0
		switch {
		case txn.committed && !none:
			w.fatalf("%s %d/%d: commit acknowledged, %d of %d batches aborted: %+v", txn.id, txn.pid, txn.epoch, n, len(txn.batches), txn.batches)
		case (txn.aborted || !txn.commitAsked) && !all:
			w.fatalf("%s %d/%d: never committed (commit asked %v), %d of %d batches aborted: %+v", txn.id, txn.pid, txn.epoch,
				txn.commitAsked, n, len(txn.batches), txn.batches)
		case !all && !none:
			w.fatalf("%s %d/%d: torn: %d of %d batches aborted: %+v", txn.id, txn.pid, txn.epoch, n, len(txn.batches), txn.batches)
		}
	}
	for tp, l := range w.data {
		if lso, end := l.LastStableOffset(), l.LogEndOffset(); lso != end {
			w.fatalf("%v: last stable offset %d below the end %d: a transaction left open", tp, lso, end)
		}
	}
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	for _, part := range w.c.mu.parts {
		for id, m := range part.txns {
			if m.pending != noState || !m.state.expirable() {
				w.fatalf("%s left %s (pending %s)", id, m.state, m.pending)
			}
		}
	}
}

// TestCoordinatorSimulation runs the simulation for a few seeds
// (SAMSA_LONG=1: many, longer; SAMSA_TXN_SEED=n: that seed).
func TestCoordinatorSimulation(t *testing.T) {
	seeds, steps := []int64{1, 2, 3, 4}, 3000
	if os.Getenv("SAMSA_LONG") != "" {
		seeds, steps = nil, 30000
		for s := int64(1); s <= 60; s++ {
			seeds = append(seeds, s)
		}
	}
	if s := os.Getenv("SAMSA_TXN_SEED"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seeds = []int64{n}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			w := newSimWorld(t, seed)
			for i := 0; i < steps; i++ {
				w.event()
			}
			w.settle()
			w.check()
			committed, aborted := 0, 0
			for _, txn := range w.txns {
				if txn.committed {
					committed++
				} else if len(txn.batches) > 0 {
					aborted++
				}
			}
			if committed == 0 || aborted == 0 {
				t.Fatalf("seed %d: %d committed, %d aborted: the workload does not exercise both", seed, committed, aborted)
			}
			t.Logf("seed %d: %d transactions, %d committed, %d not, coordinator epoch %d", seed, len(w.txns), committed, aborted, w.epoch)
		})
	}
}
