package txn

import (
	"bytes"
	"container/heap"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeClock's timers fire, on the caller's goroutine, when the test
// advances it, in deadline order (then creation order).
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers timerHeap
	seq    int
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.UnixMilli(1_700_000_000_000)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f, seq: c.seq}
	heap.Push(&c.timers, t)
	return t
}

// advance moves the clock by d, firing every timer due on the way.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		if len(c.timers) == 0 || c.timers[0].at.After(end) {
			c.now = end
			c.mu.Unlock()
			return
		}
		t := heap.Pop(&c.timers).(*fakeTimer)
		if t.at.After(c.now) {
			c.now = t.at
		}
		stopped := t.stopped
		t.fired = true
		c.mu.Unlock()
		if !stopped {
			t.f()
		}
	}
}

type fakeTimer struct {
	c              *fakeClock
	at             time.Time
	f              func()
	seq            int
	stopped, fired bool
	idx            int
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped && !t.fired
	t.stopped = true
	return was
}

type timerHeap []*fakeTimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)   { *h = append(*h, x.(*fakeTimer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}

// memLog is an in-memory Log. With manual set, appends wait in a queue
// per partition until the test completes them (in order); otherwise they
// are durable at once (done runs inline). fail, when set, is the error of
// every append.
type memLog struct {
	mu      sync.Mutex
	records map[int32][]Record
	manual  bool
	queue   map[int32][]*memAppend
	fail    error
	appends int
}

type memAppend struct {
	recs []Record
	done func(error)
}

func newMemLog() *memLog {
	return &memLog{records: map[int32][]Record{}, queue: map[int32][]*memAppend{}}
}

func cloneRecs(recs []Record) []Record {
	out := make([]Record, len(recs))
	for i, r := range recs {
		out[i] = Record{Timestamp: r.Timestamp, Key: bytes.Clone(r.Key)}
		if r.Value != nil {
			out[i].Value = bytes.Clone(r.Value)
		}
	}
	return out
}

func (l *memLog) Append(p int32, recs []Record, done func(error)) {
	l.mu.Lock()
	l.appends++
	if l.fail != nil {
		err := l.fail
		l.mu.Unlock()
		done(err)
		return
	}
	if l.manual {
		l.queue[p] = append(l.queue[p], &memAppend{recs: cloneRecs(recs), done: done})
		l.mu.Unlock()
		return
	}
	l.records[p] = append(l.records[p], cloneRecs(recs)...)
	l.mu.Unlock()
	done(nil)
}

func (l *memLog) Replay(p int32, fn func(Record) error) error {
	l.mu.Lock()
	recs := append([]Record(nil), l.records[p]...)
	l.mu.Unlock()
	for i, r := range recs {
		r.Offset = int64(i)
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// pending is the number of appends waiting.
func (l *memLog) pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, q := range l.queue {
		n += len(q)
	}
	return n
}

// complete finishes the oldest waiting append of p: durable (kept) or
// not, answered with err.
func (l *memLog) complete(p int32, durable bool, err error) bool {
	l.mu.Lock()
	q := l.queue[p]
	if len(q) == 0 {
		l.mu.Unlock()
		return false
	}
	a := q[0]
	l.queue[p] = q[1:]
	if durable {
		l.records[p] = append(l.records[p], a.recs...)
	}
	l.mu.Unlock()
	a.done(err)
	return true
}

// completeAll makes every waiting append durable, in order.
func (l *memLog) completeAll() {
	for {
		l.mu.Lock()
		var p int32 = -1
		for k, q := range l.queue {
			if len(q) > 0 && (p < 0 || k < p) {
				p = k
			}
		}
		l.mu.Unlock()
		if p < 0 {
			return
		}
		l.complete(p, true, nil)
	}
}

// states returns the last logged value of each id of p (tombstones remove).
func (l *memLog) states(t *testing.T, p int32) map[string]Value {
	t.Helper()
	out := map[string]Value{}
	l.Replay(p, func(r Record) error {
		id, err := DecodeKey(r.Key)
		if err != nil {
			t.Fatalf("key: %v", err)
		}
		if r.Value == nil {
			delete(out, id)
			return nil
		}
		v, err := DecodeValue(r.Value)
		if err != nil {
			t.Fatalf("value of %s: %v", id, err)
		}
		out[id] = v
		return nil
	})
	return out
}

// counterPIDs hands out 1000, 1001, ...
type counterPIDs struct {
	mu   sync.Mutex
	next int64
	fail error
}

func (c *counterPIDs) NextProducerID() (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail != nil {
		return -1, c.fail
	}
	if c.next == 0 {
		c.next = 1000
	}
	c.next++
	return c.next - 1, nil
}

// fakeMarkers records the markers sent; every partition exists and is led
// by broker 1 unless set otherwise. With manual set the sends wait until
// the test answers them.
type fakeMarkers struct {
	mu      sync.Mutex
	leaders map[TopicPartition]int32 // -1: no leader; absent: broker 1
	gone    map[TopicPartition]bool
	codes   map[TopicPartition]int16 // the code a partition answers (0 by default)
	written []writtenMarker
	manual  bool
	queue   []*markerSend
	sends   int
}

type writtenMarker struct {
	tp         TopicPartition
	pid        int64
	epoch      int16
	commit     bool
	coordEpoch int32
}

type markerSend struct {
	broker int32
	req    *kmsg.WriteTxnMarkersRequest
	done   func(*kmsg.WriteTxnMarkersResponse, error)
}

func newFakeMarkers() *fakeMarkers {
	return &fakeMarkers{leaders: map[TopicPartition]int32{}, gone: map[TopicPartition]bool{}, codes: map[TopicPartition]int16{}}
}

func (f *fakeMarkers) Leader(tp TopicPartition) (int32, bool, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone[tp] {
		return -1, false, false
	}
	b, ok := f.leaders[tp]
	if !ok {
		return 1, true, true
	}
	return b, b >= 0, true
}

func (f *fakeMarkers) Send(broker int32, req *kmsg.WriteTxnMarkersRequest, done func(*kmsg.WriteTxnMarkersResponse, error)) {
	f.mu.Lock()
	f.sends++
	s := &markerSend{broker: broker, req: req, done: done}
	if f.manual {
		f.queue = append(f.queue, s)
		f.mu.Unlock()
		return
	}
	f.mu.Unlock()
	f.answer(s, nil)
}

// answer writes s's markers (those whose partition answers 0) and answers
// it, or fails it with err (nothing written).
func (f *fakeMarkers) answer(s *markerSend, err error) {
	if err != nil {
		s.done(nil, err)
		return
	}
	resp := s.req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	f.mu.Lock()
	for _, mk := range s.req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = mk.ProducerID
		for _, t := range mk.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				tp := TopicPartition{t.Topic, p}
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition, rp.ErrorCode = p, f.codes[tp]
				if rp.ErrorCode == 0 {
					f.written = append(f.written, writtenMarker{tp, mk.ProducerID, mk.ProducerEpoch, mk.Committed, mk.CoordinatorEpoch})
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	f.mu.Unlock()
	s.done(resp, nil)
}

func (f *fakeMarkers) take() *markerSend {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.queue) == 0 {
		return nil
	}
	s := f.queue[0]
	f.queue = f.queue[1:]
	return s
}

func (f *fakeMarkers) markers() []writtenMarker {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]writtenMarker(nil), f.written...)
}

var errNetwork = errors.New("connection reset")

// harness is a coordinator over the fakes, owning every state partition.
type harness struct {
	t       *testing.T
	clock   *fakeClock
	log     *memLog
	markers *fakeMarkers
	pids    *counterPIDs
	cfg     Config
	c       *Coordinator
	epoch   int32
}

func newHarness(t *testing.T, mod func(*Config)) *harness {
	h := &harness{t: t, clock: newFakeClock(), log: newMemLog(), markers: newFakeMarkers(), pids: &counterPIDs{}}
	h.cfg = Config{NumPartitions: 4, Clock: h.clock, MaxTimeout: time.Minute, RetryBackoff: 100 * time.Millisecond,
		AbortInterval: time.Second, ExpirationInterval: time.Hour, IDExpiration: 7 * 24 * time.Hour, Logger: quietLogger()}
	if mod != nil {
		mod(&h.cfg)
	}
	h.start()
	return h
}

// start makes a coordinator that loads every partition at the next epoch
// (a failover when one ran before).
func (h *harness) start() {
	if h.c != nil {
		h.c.Close()
	}
	h.epoch++
	h.c = New(h.cfg, h.log, h.markers, h.pids)
	for p := int32(0); p < h.cfg.NumPartitions; p++ {
		if err := h.c.LoadPartition(p, h.epoch); err != nil {
			h.t.Fatalf("load %d: %v", p, err)
		}
	}
}

// call runs a request whose answer is expected at once (nothing manual).
func call[T any](t *testing.T, f func(func(T))) T {
	t.Helper()
	var got T
	answered := false
	f(func(r T) { got, answered = r, true })
	if !answered {
		t.Fatal("no answer")
	}
	return got
}

func (h *harness) init(id string, timeoutMs int32, pid int64, epoch int16) *kmsg.InitProducerIDResponse {
	h.t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version, req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = 4, &id, timeoutMs, pid, epoch
	return call(h.t, func(done func(*kmsg.InitProducerIDResponse)) { h.c.InitProducerID(req, done) })
}

func (h *harness) add(id string, pid int64, epoch int16, tps ...TopicPartition) int16 {
	h.t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch = 3, id, pid, epoch
	for _, g := range groupByTopic(tps) {
		t := kmsg.NewAddPartitionsToTxnRequestTopic()
		t.Topic, t.Partitions = g.topic, g.parts
		req.Topics = append(req.Topics, t)
	}
	resp := call(h.t, func(done func(*kmsg.AddPartitionsToTxnResponse)) { h.c.AddPartitionsToTxn(req, nil, done) })
	code := int16(0)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				code = p.ErrorCode
			}
		}
	}
	return code
}

func (h *harness) end(id string, pid int64, epoch int16, commit bool, version int16) *kmsg.EndTxnResponse {
	h.t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = version, id, pid, epoch, commit
	return call(h.t, func(done func(*kmsg.EndTxnResponse)) { h.c.EndTxn(req, done) })
}

func (h *harness) describe(id string) kmsg.DescribeTransactionsResponseTransactionState {
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	return h.c.DescribeTransactions(req).TransactionStates[0]
}

// quietLogger discards the coordinator's log unless SAMSA_TEST_LOG is set.
func quietLogger() *slog.Logger {
	if os.Getenv("SAMSA_TEST_LOG") != "" {
		return slog.Default()
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
