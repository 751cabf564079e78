package share

import (
	"errors"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/samsa-broker/samsa/coordinator/group"
)

// memLog is a group.Log in memory: appends are durable at once unless held.
type memLog struct {
	mu    sync.Mutex
	parts map[int32][]group.Record
	hold  bool
	held  []func()
	fail  error
}

func (l *memLog) Append(p int32, recs []group.Record, done func(error)) {
	l.mu.Lock()
	if l.fail != nil {
		err := l.fail
		l.mu.Unlock()
		done(err)
		return
	}
	for _, r := range recs {
		r.Key, r.Value = slices.Clone(r.Key), slices.Clone(r.Value)
		if l.parts == nil {
			l.parts = map[int32][]group.Record{}
		}
		r.Offset = int64(len(l.parts[p]))
		l.parts[p] = append(l.parts[p], r)
	}
	if l.hold {
		l.held = append(l.held, func() { done(nil) })
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	done(nil)
}

func (l *memLog) release() {
	l.mu.Lock()
	h := l.held
	l.held, l.hold = nil, false
	l.mu.Unlock()
	for _, f := range h {
		f()
	}
}

func (l *memLog) Replay(p int32, fn func(group.Record) error) error {
	l.mu.Lock()
	recs := slices.Clone(l.parts[p])
	l.mu.Unlock()
	for _, r := range recs {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// eventually polls cond until it holds, failing the test after 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // polling interval of a deadline-bounded wait
	}
}

// fakeClock fires timers only when advanced.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	at      time.Time
	f       func()
	stopped bool
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Stopper {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	keep := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			t.stopped = true
			due = append(due, t)
		default:
			keep = append(keep, t)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, t := range due {
		t.f()
	}
}

// localPersister is the Persister over a Store on the same broker.
type localPersister struct{ s *Store }

func (p localPersister) Read(k Key, done func(Snapshot, bool, error)) {
	snap, found, err := p.s.Read(k)
	done(snap, found, err)
}

func (p localPersister) Write(k Key, snap *Snapshot, done func(error)) { p.s.Write(k, snap, done) }

func (p localPersister) Initialize(k Key, stateEpoch int32, start int64, done func(error)) {
	p.s.Initialize(k, stateEpoch, start, done)
}

type harness struct {
	t     *testing.T
	log   *memLog
	store *Store
	clock *fakeClock
	m     *Manager
	avail chan Key
}

func newHarness(t *testing.T, log *memLog) *harness {
	h := &harness{t: t, log: log, clock: &fakeClock{now: t0}, avail: make(chan Key, 100)}
	h.store = NewStore(log, 4, h.clock.Now)
	for p := int32(0); p < 4; p++ {
		if err := h.store.Load(p); err != nil {
			t.Fatal(err)
		}
	}
	h.m = NewManager(ManagerConfig{Partition: testCfg(), Persister: localPersister{h.store}, Clock: h.clock,
		Available: func(k Key) {
			select {
			case h.avail <- k:
			default:
			}
		}})
	return h
}

// ready loads k (the persister answers synchronously, so the load ends on its
// goroutine soon): it polls NextFetchOffset until k is ready.
func (h *harness) ready(k Key, epoch int32, initial int64) int64 {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		off, err := h.m.NextFetchOffset(k, epoch, func() (int64, error) { return initial, nil })
		if err == nil {
			return off
		}
		if !errors.Is(err, ErrNotReady) || time.Now().After(deadline) {
			h.t.Fatalf("share partition %s never ready: %v", k, err)
		}
		select {
		case <-h.avail:
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (h *harness) ack(k Key, epoch int32, member string, b AckBatch) error {
	h.t.Helper()
	ch := make(chan error, 1)
	h.m.Acknowledge(k, epoch, member, []AckBatch{b}, false, func(err error) { ch <- err })
	return <-ch
}

func TestManagerDurableAcrossReload(t *testing.T) {
	log := &memLog{}
	h := newHarness(t, log)
	k := Key{Group: "g", TopicID: [16]byte{9}, Partition: 0}
	if off := h.ready(k, 1, 10); off != 10 {
		t.Fatalf("initial fetch offset %d, want 10", off)
	}
	got, err := h.m.Acquire(k, 1, "m1", 10, 16, 0)
	if err != nil || !slices.Equal(got, []Range{{10, 15, 1}}) {
		t.Fatalf("acquire %v %v", got, err)
	}
	if err := h.ack(k, 1, "m1", AckBatch{10, 12, []AckType{AckAccept}}); err != nil {
		t.Fatal(err)
	}
	if err := h.ack(k, 1, "m1", AckBatch{13, 13, []AckType{AckReject}}); err != nil {
		t.Fatal(err)
	}
	if err := h.ack(k, 1, "m2", AckBatch{14, 14, []AckType{AckAccept}}); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("foreign ack: %v", err)
	}
	// A new leader (another broker's Manager over the replayed store) sees the
	// acknowledged state; what was acquired is available again.
	h2 := newHarness(t, log)
	if off := h2.ready(k, 2, 0); off != 14 {
		t.Fatalf("after reload the fetch offset is %d, want 14", off)
	}
	got, _ = h2.m.Acquire(k, 2, "m3", 14, 20, 0)
	if !slices.Equal(got, []Range{{14, 15, 2}, {16, 19, 1}}) {
		t.Fatalf("after reload acquired %v", got)
	}
	// A write of an older leader epoch than the store's is fenced.
	ch := make(chan error, 1)
	h2.store.Write(k, &Snapshot{LeaderEpoch: 0, StartOffset: 99}, func(err error) { ch <- err })
	if err := <-ch; !errors.Is(err, ErrFenced) {
		t.Fatalf("stale write: %v", err)
	}
}

func TestManagerLockExpiryWithFakeClock(t *testing.T) {
	h := newHarness(t, &memLog{})
	k := Key{Group: "g", Partition: 1}
	h.ready(k, 0, 0)
	if _, err := h.m.Acquire(k, 0, "m1", 0, 2, 0); err != nil {
		t.Fatal(err)
	}
	for len(h.avail) > 0 {
		<-h.avail
	}
	h.clock.advance(testCfg().LockDuration - time.Millisecond)
	if off, _ := h.m.NextFetchOffset(k, 0, nil); off != 2 {
		t.Fatalf("before the deadline the fetch offset is %d, want 2", off)
	}
	h.clock.advance(time.Millisecond)
	if off, _ := h.m.NextFetchOffset(k, 0, nil); off != 0 {
		t.Fatalf("after the deadline the fetch offset is %d, want 0", off)
	}
	select {
	case <-h.avail:
	default:
		t.Fatal("no availability notice after the locks expired")
	}
	// Up to the delivery limit, then archived, written and the start moved.
	for i := 2; i <= testCfg().DeliveryLimit; i++ {
		got, _ := h.m.Acquire(k, 0, "m1", 0, 2, 0)
		if !slices.Equal(got, []Range{{0, 1, int16(i)}}) {
			t.Fatalf("delivery %d: %v", i, got)
		}
		h.clock.advance(testCfg().LockDuration)
	}
	if start, _, ok := h.m.Describe(k); !ok || start != 2 {
		t.Fatalf("start after the delivery limit: %d %v", start, ok)
	}
	eventually(t, "the archived records' state written", func() bool {
		snap, found, err := h.store.Read(k)
		return err == nil && found && snap.StartOffset == 2
	})
}

func TestManagerWritesCoalesceAndFailuresReload(t *testing.T) {
	log := &memLog{}
	h := newHarness(t, log)
	k := Key{Group: "g", Partition: 2}
	h.ready(k, 0, 0)
	h.m.Acquire(k, 0, "m1", 0, 10, 0)
	log.mu.Lock()
	log.hold = true
	log.mu.Unlock()
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := 0; i < 3; i++ {
		wg.Add(1)
		h.m.Acknowledge(k, 0, "m1", []AckBatch{{int64(i), int64(i), []AckType{AckAccept}}}, false, func(err error) {
			errs[i] = err
			wg.Done()
		})
	}
	eventually(t, "one write in flight", func() bool {
		log.mu.Lock()
		defer log.mu.Unlock()
		return len(log.held) == 1
	})
	log.mu.Lock()
	if n := len(log.held); n != 1 {
		t.Fatalf("%d writes in flight, want 1", n)
	}
	log.mu.Unlock()
	log.release() // the first write completes; the other two go as one
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("ack %d: %v", i, err)
		}
	}
	if snap, _, _ := h.store.Read(k); snap.StartOffset != 3 {
		t.Fatalf("stored start %d, want 3", snap.StartOffset)
	}
	// A failed write fails the ack and forgets the state: the next use reloads it
	// from the store (acquisitions lost, acknowledgements kept).
	log.mu.Lock()
	log.fail = errors.New("disk gone")
	log.mu.Unlock()
	if err := h.ack(k, 0, "m1", AckBatch{3, 3, []AckType{AckAccept}}); err == nil {
		t.Fatal("ack with a failing log succeeded")
	}
	log.mu.Lock()
	log.fail = nil
	log.mu.Unlock()
	if off := h.ready(k, 0, 0); off != 3 {
		t.Fatalf("after the failed write the fetch offset is %d, want 3", off)
	}
}

// A reset of the state (a higher state epoch, as AlterShareGroupOffsets writes) fences
// the writes of a leader still holding the older state: its acknowledgement fails, it
// reads the new state, and a start of -1 (DeleteShareGroupOffsets) is initialized
// afresh; an evicted share partition is read again.
func TestManagerStateEpochFencingAndEvict(t *testing.T) {
	h := newHarness(t, &memLog{})
	k := Key{Group: "g", Partition: 3}
	h.ready(k, 0, 0)
	h.m.Acquire(k, 0, "m1", 0, 4, 0)
	write := func(s *Snapshot) error {
		ch := make(chan error, 1)
		h.store.Write(k, s, func(err error) { ch <- err })
		return <-ch
	}
	if err := write(&Snapshot{StateEpoch: 1, StartOffset: 2}); err != nil {
		t.Fatal(err)
	}
	if err := h.ack(k, 0, "m1", AckBatch{0, 0, []AckType{AckAccept}}); err == nil {
		t.Fatal("an ack of the older state epoch was written")
	}
	if err := write(&Snapshot{StateEpoch: 0, StartOffset: 9}); !errors.Is(err, ErrFencedState) {
		t.Fatalf("a write of an older state epoch: %v", err)
	}
	if off := h.ready(k, 0, 0); off != 2 {
		t.Fatalf("after the reset the fetch offset is %d, want 2", off)
	}
	// Deleted (start -1): initialized from initial() at the stored state epoch.
	if err := write(&Snapshot{StateEpoch: 2, StartOffset: -1}); err != nil {
		t.Fatal(err)
	}
	h.m.Evict(k)
	if _, _, ok := h.m.Describe(k); ok {
		t.Fatal("still held after Evict")
	}
	if off := h.ready(k, 0, 7); off != 7 {
		t.Fatalf("after the delete the fetch offset is %d, want 7", off)
	}
	eventually(t, "the initialized state written", func() bool {
		snap, _, _ := h.store.Read(k)
		return snap.StateEpoch == 2 && snap.StartOffset == 7
	})
	// Evict keeps a share partition with records acquired.
	h.m.Acquire(k, 0, "m2", 7, 8, 0)
	h.m.Evict(k)
	if _, _, ok := h.m.Describe(k); !ok {
		t.Fatal("evicted with a record acquired")
	}
}

// TestManagerGroupConfig: a group's own limits (ForGroup) apply from the next decision:
// the next lock's duration, a lowered delivery limit archiving what reached it; other
// groups keep the Manager's.
func TestManagerGroupConfig(t *testing.T) {
	h := newHarness(t, &memLog{})
	var mu sync.Mutex
	own := map[string]Config{"a": {LockDuration: 2 * time.Second}}
	h.m = NewManager(ManagerConfig{Partition: testCfg(), Persister: localPersister{h.store}, Clock: h.clock,
		ForGroup: func(g string) Config {
			mu.Lock()
			defer mu.Unlock()
			return own[g]
		}})
	set := func(g string, c Config) {
		mu.Lock()
		own[g] = c
		mu.Unlock()
	}
	a, b := Key{Group: "a", Partition: 0}, Key{Group: "b", Partition: 0}
	h.ready(a, 0, 0)
	h.ready(b, 0, 0)
	if d := h.m.LockDuration("a"); d != 2*time.Second {
		t.Fatalf("group a's lock duration %v", d)
	}
	if d := h.m.LockDuration("b"); d != testCfg().LockDuration {
		t.Fatalf("group b's lock duration %v, want the Manager's", d)
	}
	for _, k := range []Key{a, b} {
		if got, err := h.m.Acquire(k, 0, "m1", 0, 1, 0); err != nil || len(got) != 1 {
			t.Fatalf("%s: acquire %v %v", k, got, err)
		}
	}
	h.clock.advance(2 * time.Second)
	if off, _ := h.m.NextFetchOffset(a, 0, nil); off != 0 {
		t.Fatalf("group a's 2 s lock did not expire: fetch offset %d", off)
	}
	if off, _ := h.m.NextFetchOffset(b, 0, nil); off != 1 {
		t.Fatalf("group b's 10 s lock expired after 2 s: fetch offset %d", off)
	}
	// A longer lock for the next acquisition of a.
	set("a", Config{LockDuration: 5 * time.Second})
	if got, _ := h.m.Acquire(a, 0, "m1", 0, 1, 0); len(got) != 1 || got[0].DeliveryCount != 2 {
		t.Fatalf("second acquisition %v", got)
	}
	h.clock.advance(4 * time.Second)
	if off, _ := h.m.NextFetchOffset(a, 0, nil); off != 1 {
		t.Fatalf("the 5 s lock expired after 4 s: fetch offset %d", off)
	}
	h.clock.advance(time.Second)
	if off, _ := h.m.NextFetchOffset(a, 0, nil); off != 0 {
		t.Fatalf("the 5 s lock did not expire: fetch offset %d", off)
	}
	// Offset 0 was delivered twice: a delivery limit of 2 archives it at once.
	set("a", Config{LockDuration: 5 * time.Second, DeliveryLimit: 2})
	if off, _ := h.m.NextFetchOffset(a, 0, nil); off != 1 {
		t.Fatalf("after lowering the delivery limit the fetch offset is %d, want 1", off)
	}
	if start, _, ok := h.m.Describe(a); !ok || start != 1 {
		t.Fatalf("start %d, want 1 (offset 0 archived)", start)
	}
	// ArchiveAcquired: records acquired and then found aborted are archived.
	got, _ := h.m.Acquire(a, 0, "m1", 1, 4, 0)
	if !slices.Equal(got, []Range{{1, 3, 1}}) {
		t.Fatalf("acquire %v", got)
	}
	h.m.ArchiveAcquired(a, 0, "m2", []Range{{1, 3, 1}}) // not m2's: nothing
	h.m.ArchiveAcquired(a, 0, "m1", []Range{{1, 2, 1}})
	if start, inflight, _ := h.m.Describe(a); start != 3 || inflight != 1 {
		t.Fatalf("after archiving 1-2: start %d, in flight %d", start, inflight)
	}
}
