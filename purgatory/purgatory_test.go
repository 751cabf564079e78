package purgatory

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testOp completes when ready is set; it records its callbacks and checks their order.
type testOp struct {
	Delayed
	ready       atomic.Bool
	completions atomic.Int32
	expirations atomic.Int32
	badOrder    atomic.Bool
	firedAt     atomic.Int64 // clock value seen by OnExpiration
	clock       *atomic.Int64
}

func newOp(timeout time.Duration) *testOp {
	o := &testOp{}
	o.Init(o, timeout)
	o.firedAt.Store(-1)
	return o
}

func (o *testOp) TryComplete() bool {
	if o.ready.Load() {
		return o.ForceComplete()
	}
	return false
}

func (o *testOp) OnComplete() {
	if o.completions.Add(1) != 1 {
		o.badOrder.Store(true)
	}
}

func (o *testOp) OnExpiration() {
	if o.completions.Load() != 0 || o.expirations.Add(1) != 1 {
		o.badOrder.Store(true)
	}
	if o.clock != nil {
		o.firedAt.Store(o.clock.Load())
	}
}

// finished reports whether OnComplete has returned. IsCompleted turns true before the
// callbacks run, so tests that wait for another goroutine's completion wait for this.
func (o *testOp) finished() bool { return o.completions.Load() != 0 }

func (o *testOp) check(t *testing.T, wantExpired bool) {
	t.Helper()
	if o.badOrder.Load() {
		t.Fatalf("callbacks out of order or repeated: completions=%d expirations=%d", o.completions.Load(), o.expirations.Load())
	}
	if c := o.completions.Load(); c != 1 {
		t.Fatalf("completions = %d, want 1", c)
	}
	if e := o.expirations.Load(); (e == 1) != wantExpired {
		t.Fatalf("expirations = %d, want expired=%v", e, wantExpired)
	}
}

// fakeClock is a manual clock for deterministic tests.
type fakeClock struct{ now atomic.Int64 }

func (c *fakeClock) ms() int64 { return c.now.Load() }

func newManual(t *testing.T, opts Options) (*Purgatory[string], *fakeClock) {
	t.Helper()
	c := &fakeClock{}
	opts.Clock = c.ms
	p := New[string]("test", opts)
	t.Cleanup(p.Close)
	return p, c
}

func (c *fakeClock) advance(p *Purgatory[string], to int64) int {
	c.now.Store(to)
	return p.AdvanceClock(to)
}

func TestCompletesAtOnce(t *testing.T) {
	p, _ := newManual(t, Options{})
	o := newOp(time.Second)
	o.ready.Store(true)
	if !p.TryCompleteElseWatch(o, "a") {
		t.Fatal("ready op not completed at once")
	}
	o.check(t, false)
	if p.Watched() != 0 || p.Delayed() != 0 {
		t.Fatalf("watched=%d delayed=%d, want 0 0", p.Watched(), p.Delayed())
	}
}

func TestCheckAndComplete(t *testing.T) {
	p, c := newManual(t, Options{})
	a1, a2, b := newOp(time.Second), newOp(time.Second), newOp(time.Second)
	for _, tc := range []struct {
		op   *testOp
		keys []string
	}{{a1, []string{"a"}}, {a2, []string{"a", "b"}}, {b, []string{"b"}}} {
		if p.TryCompleteElseWatch(tc.op, tc.keys...) {
			t.Fatal("completed early")
		}
	}
	if p.Watched() != 4 || p.Delayed() != 3 {
		t.Fatalf("watched=%d delayed=%d, want 4 3", p.Watched(), p.Delayed())
	}
	if n := p.CheckAndComplete("a"); n != 0 {
		t.Fatalf("completed %d with nothing ready", n)
	}
	a1.ready.Store(true)
	a2.ready.Store(true)
	if n := p.CheckAndComplete("a"); n != 2 {
		t.Fatalf("CheckAndComplete(a) = %d, want 2", n)
	}
	if n := p.CheckAndComplete("a"); n != 0 {
		t.Fatalf("second CheckAndComplete(a) = %d, want 0", n)
	}
	if p.Delayed() != 1 {
		t.Fatalf("delayed = %d, want 1 (completion must cancel the timeout)", p.Delayed())
	}
	// b's list still holds the completed a2 until b is checked or purged.
	if n := p.CheckAndComplete("b"); n != 0 {
		t.Fatalf("CheckAndComplete(b) = %d, want 0", n)
	}
	if p.Watched() != 1 || p.Keys() != 1 {
		t.Fatalf("watched=%d keys=%d, want 1 1", p.Watched(), p.Keys())
	}
	if n := c.advance(p, 1000); n != 1 {
		t.Fatalf("expired %d at 1000 ms, want 1", n)
	}
	a1.check(t, false)
	a2.check(t, false)
	b.check(t, true)
	if p.Delayed() != 0 {
		t.Fatalf("delayed = %d after expiry", p.Delayed())
	}
	if p.CheckAndComplete("b") != 0 || p.Watched() != 0 || p.Keys() != 0 {
		t.Fatalf("watched=%d keys=%d after final check", p.Watched(), p.Keys())
	}
	if p.CheckAndComplete("nobody") != 0 {
		t.Fatal("unknown key completed something")
	}
}

// TestConditionRacesWatch covers the window between the first TryComplete and the watch:
// the second TryComplete must catch a condition that became true there.
type flipOp struct {
	testOp
	tries int
}

func (o *flipOp) TryComplete() bool {
	o.tries++
	if o.tries == 2 {
		return o.ForceComplete()
	}
	return false
}

func TestConditionRacesWatch(t *testing.T) {
	p, _ := newManual(t, Options{})
	o := &flipOp{}
	o.Init(o, time.Second)
	if !p.TryCompleteElseWatch(o, "k") {
		t.Fatal("second try did not complete")
	}
	if p.Delayed() != 0 {
		t.Fatal("completed op armed in the wheel")
	}
	o.testOp.check(t, false)
}

func TestExpiresExactlyAtDeadline(t *testing.T) {
	p, c := newManual(t, Options{})
	c.now.Store(7) // start off a tick boundary of every level
	p.AdvanceClock(7)
	timeouts := []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 19 * time.Millisecond,
		20 * time.Millisecond, 21 * time.Millisecond, 399 * time.Millisecond, 400 * time.Millisecond,
		8 * time.Second, 3 * time.Hour, 49 * time.Hour}
	ops := make([]*testOp, len(timeouts))
	for i, d := range timeouts {
		ops[i] = newOp(d)
		ops[i].clock = &c.now
		p.TryCompleteElseWatch(ops[i], "k")
	}
	// Step through every deadline: nothing fires one ms early, each fires at its deadline.
	for i, d := range timeouts {
		deadline := 7 + int64(d/time.Millisecond)
		if deadline-1 > c.now.Load() {
			c.advance(p, deadline-1)
		}
		for j := i; j < len(ops); j++ {
			if ops[j].IsCompleted() && int64(timeouts[j]/time.Millisecond)+7 > c.now.Load() {
				t.Fatalf("op %d (timeout %v) fired early at %d", j, timeouts[j], c.now.Load())
			}
		}
		if deadline > c.now.Load() {
			c.advance(p, deadline)
		} else {
			p.AdvanceClock(c.now.Load())
		}
		if !ops[i].IsCompleted() {
			t.Fatalf("op %d (timeout %v) not fired at %d", i, d, deadline)
		}
		if got := ops[i].firedAt.Load(); got != deadline && !(d == 0 && got == 7) {
			t.Fatalf("op %d fired at %d, want %d", i, got, deadline)
		}
		ops[i].check(t, true)
	}
	if p.Delayed() != 0 {
		t.Fatalf("delayed = %d", p.Delayed())
	}
	if lv := p.timer.wheel.levels(); lv < 5 {
		t.Fatalf("levels = %d, want overflow wheels for hour timeouts", lv)
	}
}

// TestWheelMatchesModel drives random operations and random clock steps and checks each
// op fires at the first advance whose time reaches its deadline.
func TestWheelMatchesModel(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, seed*7))
		tick := int64(1 + rng.IntN(3))
		size := 2 + rng.IntN(30)
		p, c := newManual(t, Options{Tick: time.Duration(tick) * time.Millisecond, WheelSize: size})
		start := rng.Int64N(1 << 30)
		c.advance(p, start)
		type rec struct {
			op       *testOp
			deadline int64
			cancel   bool
		}
		var recs []rec
		for step := 0; step < 400; step++ {
			switch r := rng.IntN(10); {
			case r < 6:
				var ms int64
				switch rng.IntN(3) {
				case 0:
					ms = rng.Int64N(50)
				case 1:
					ms = rng.Int64N(5000)
				default:
					ms = rng.Int64N(10_000_000)
				}
				o := newOp(time.Duration(ms) * time.Millisecond)
				o.clock = &c.now
				p.TryCompleteElseWatch(o)
				recs = append(recs, rec{op: o, deadline: c.now.Load() + ms})
			case r < 7 && len(recs) > 0:
				i := rng.IntN(len(recs))
				if recs[i].op.ForceComplete() {
					recs[i].cancel = true
				}
			default:
				var to int64
				if rng.IntN(4) == 0 {
					to = c.now.Load() + rng.Int64N(3_000_000)
				} else {
					to = c.now.Load() + rng.Int64N(40)
				}
				c.advance(p, to)
				now := c.now.Load()
				for i, r := range recs {
					fired := r.op.expirations.Load() == 1
					// A deadline falls somewhere in its tick; the wheel may fire up
					// to tick-1 ms early, never late.
					due := r.deadline - r.deadline%tick
					if due <= now {
						if !r.cancel && !fired {
							t.Fatalf("seed %d: op %d deadline %d not fired at %d", seed, i, r.deadline, now)
						}
					} else if fired {
						t.Fatalf("seed %d: op %d deadline %d fired at %d", seed, i, r.deadline, r.op.firedAt.Load())
					}
					if fired && r.cancel {
						t.Fatalf("seed %d: cancelled op %d expired", seed, i)
					}
				}
			}
		}
		c.advance(p, c.now.Load()+20_000_000)
		for i, r := range recs {
			r.op.check(t, !r.cancel)
			_ = i
		}
		if p.Delayed() != 0 {
			t.Fatalf("seed %d: delayed = %d at the end", seed, p.Delayed())
		}
	}
}

func TestCancelRemovesFromWheel(t *testing.T) {
	p, c := newManual(t, Options{})
	ops := make([]*testOp, 100)
	for i := range ops {
		ops[i] = newOp(time.Duration(i+1) * time.Minute)
		p.TryCompleteElseWatch(ops[i])
	}
	if p.Delayed() != 100 {
		t.Fatalf("delayed = %d", p.Delayed())
	}
	for i := 0; i < 100; i += 2 {
		if !ops[i].ForceComplete() {
			t.Fatal("ForceComplete on a pending op returned false")
		}
		if ops[i].ForceComplete() {
			t.Fatal("second ForceComplete returned true")
		}
	}
	if p.Delayed() != 50 {
		t.Fatalf("delayed = %d after cancelling half", p.Delayed())
	}
	if n := c.advance(p, int64(101*time.Minute/time.Millisecond)); n != 50 {
		t.Fatalf("expired %d, want 50", n)
	}
	for i, o := range ops {
		o.check(t, i%2 == 1)
	}
}

func TestStaleWheelAfterIdle(t *testing.T) {
	// The wheel's time moves only when buckets fire; after a long idle spell a short
	// timeout lands in a high level first and must still fire on time.
	p, c := newManual(t, Options{})
	c.now.Store(36_000_000) // ten hours later, no AdvanceClock in between
	o := newOp(15 * time.Millisecond)
	o.clock = &c.now
	p.TryCompleteElseWatch(o, "k")
	c.advance(p, 36_000_014)
	if o.IsCompleted() {
		t.Fatal("fired early")
	}
	c.advance(p, 36_000_015)
	o.check(t, true)
}

func TestPurgeBoundsWatchLists(t *testing.T) {
	p, c := newManual(t, Options{PurgeInterval: 100})
	// Each op is watched on its own key and on a shared key nobody checks. Completing
	// through the own key leaves a completed entry behind on the shared key.
	maxWatched := 0
	for i := 0; i < 5000; i++ {
		o := newOp(time.Hour)
		own := string(rune('a'+i%26)) + string(rune('0'+i%10))
		p.TryCompleteElseWatch(o, own, "shared")
		o.ready.Store(true)
		p.CheckAndComplete(own)
		maxWatched = max(maxWatched, p.Watched())
	}
	if maxWatched > 400 {
		t.Fatalf("watch lists grew to %d entries with purge interval 100", maxWatched)
	}
	// Expired ops are purged too.
	for i := 0; i < 500; i++ {
		p.TryCompleteElseWatch(newOp(time.Millisecond), "shared")
	}
	c.advance(p, 10)
	p.Purge()
	if p.Watched() != 0 || p.Keys() != 0 {
		t.Fatalf("after expiry and purge watched=%d keys=%d", p.Watched(), p.Keys())
	}
}

func TestCloseExpiresPending(t *testing.T) {
	c := &fakeClock{}
	p := New[int]("close", Options{Clock: c.ms})
	ops := []*testOp{newOp(0), newOp(time.Second), newOp(10 * time.Hour)}
	for i, o := range ops {
		p.TryCompleteElseWatch(o, i)
	}
	p.Close()
	for _, o := range ops {
		o.check(t, true)
	}
	late := newOp(time.Second)
	if p.TryCompleteElseWatch(late, 1) {
		t.Fatal("late op completed")
	}
	late.check(t, true)
	ready := newOp(time.Second)
	ready.ready.Store(true)
	if !p.TryCompleteElseWatch(ready, 1) {
		t.Fatal("ready op after close not completed")
	}
	if p.Watched() != 0 || p.Delayed() != 0 {
		t.Fatalf("watched=%d delayed=%d after close", p.Watched(), p.Delayed())
	}
	p.Close()
}

func TestUninitialisedPanics(t *testing.T) {
	p, _ := newManual(t, Options{})
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for an op without Init")
		}
	}()
	p.TryCompleteElseWatch(&testOp{}, "k")
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestReaperExpiresWithRealClock(t *testing.T) {
	p := New[string]("reaper", Options{})
	defer p.Close()
	start := time.Now()
	long := newOp(time.Hour)
	p.TryCompleteElseWatch(long, "k")
	o := newOp(30 * time.Millisecond)
	p.TryCompleteElseWatch(o, "k") // an earlier head must wake the sleeping reaper
	waitFor(t, "expiry", o.finished)
	if el := time.Since(start); el < 29*time.Millisecond {
		t.Fatalf("expired after %v, want >= 29ms", el)
	}
	o.check(t, true)
	if long.IsCompleted() {
		t.Fatal("hour-long op expired")
	}
	z := newOp(0)
	p.TryCompleteElseWatch(z, "k")
	waitFor(t, "zero-timeout expiry", z.finished)
	z.check(t, true)
}

// TestCompletionRacesExpiry completes ops from several goroutines while the reaper
// expires them: every op must see exactly one OnComplete.
func TestCompletionRacesExpiry(t *testing.T) {
	p := New[int]("race", Options{PurgeInterval: 50})
	defer p.Close()
	const workers, perWorker, keys = 4, 2000, 16
	all := make([][]*testOp, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(2)
		ops := make([]*testOp, perWorker)
		all[w] = ops
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := range ops {
				o := newOp(time.Duration(rng.IntN(4)) * time.Millisecond)
				ops[i] = o
				p.TryCompleteElseWatch(o, rng.IntN(keys), rng.IntN(keys))
				if rng.IntN(3) == 0 {
					o.ready.Store(true)
				}
				if rng.IntN(5) == 0 {
					o.ForceComplete()
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				p.CheckAndComplete(i % keys)
			}
		}()
	}
	wg.Wait()
	waitFor(t, "all ops done", func() bool {
		for _, ops := range all {
			for _, o := range ops {
				if !o.finished() {
					return false
				}
			}
		}
		return true
	})
	for _, ops := range all {
		for _, o := range ops {
			if o.badOrder.Load() || o.completions.Load() != 1 {
				t.Fatalf("completions=%d expirations=%d", o.completions.Load(), o.expirations.Load())
			}
		}
	}
	waitFor(t, "wheel empty", func() bool { return p.Delayed() == 0 })
	for k := 0; k < keys; k++ {
		p.CheckAndComplete(k)
	}
	if p.Watched() != 0 {
		t.Fatalf("watched = %d after checking every key", p.Watched())
	}
}

// TestReaperSleepsWhenIdle checks the reaper does not tick every millisecond: a single
// op 200 ms out costs a handful of wake-ups, not 200.
func TestReaperSleepsWhenIdle(t *testing.T) {
	p := New[string]("idle", Options{})
	defer p.Close()
	o := newOp(200 * time.Millisecond)
	p.TryCompleteElseWatch(o, "k")
	waitFor(t, "expiry", o.finished)
	if n := p.reaperLoops.Load(); n > 20 {
		t.Fatalf("reaper looped %d times for one 200 ms timeout", n)
	}
}

// chainOp's OnComplete checks its own key again, as a completion that unblocks other
// waiters would: it must not deadlock on its own lock.
type chainOp struct {
	testOp
	p   *Purgatory[string]
	key string
}

func (o *chainOp) TryComplete() bool {
	if o.ready.Load() {
		return o.ForceComplete()
	}
	return false
}

func (o *chainOp) OnComplete() {
	o.testOp.OnComplete()
	o.p.CheckAndComplete(o.key)
}

func TestOnCompleteMayCheckAgain(t *testing.T) {
	p, _ := newManual(t, Options{})
	ops := make([]*chainOp, 3)
	for i := range ops {
		ops[i] = &chainOp{p: p, key: "k"}
		ops[i].Init(ops[i], time.Second)
		p.TryCompleteElseWatch(ops[i], "k")
	}
	for _, o := range ops {
		o.ready.Store(true)
	}
	done := make(chan int)
	go func() { done <- p.CheckAndComplete("k") }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("CheckAndComplete from OnComplete deadlocked")
	}
	for _, o := range ops {
		o.testOp.check(t, false)
	}
	// A ready op whose first TryComplete completes it also re-enters safely.
	o := &chainOp{p: p, key: "k"}
	o.Init(o, time.Second)
	o.ready.Store(true)
	if !p.TryCompleteElseWatch(o, "k") {
		t.Fatal("ready chain op not completed")
	}
}

// TestCloseRacesAdds closes the purgatory while operations are being added, some due at
// once: every operation must still complete exactly once.
func TestCloseRacesAdds(t *testing.T) {
	for round := 0; round < 20; round++ {
		p := New[int]("close-race", Options{})
		const workers, per = 3, 300
		ops := make([][]*testOp, workers)
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			ops[w] = make([]*testOp, per)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range ops[w] {
					o := newOp(time.Duration(i%3) * time.Millisecond)
					ops[w][i] = o
					p.TryCompleteElseWatch(o, i%7)
				}
			}()
		}
		p.Close()
		wg.Wait()
		for _, list := range ops {
			for _, o := range list {
				if o.completions.Load() != 1 || o.badOrder.Load() {
					t.Fatalf("round %d: completions=%d expirations=%d", round, o.completions.Load(), o.expirations.Load())
				}
			}
		}
	}
}

// TestReaperPurges checks that with a reaper the sweep happens off the caller's path and
// still bounds the watch lists.
func TestReaperPurges(t *testing.T) {
	p := New[string]("purge", Options{PurgeInterval: 100})
	defer p.Close()
	for i := 0; i < 3000; i++ {
		o := newOp(time.Hour)
		own := string(rune('a' + i%26))
		p.TryCompleteElseWatch(o, own, "shared")
		o.ready.Store(true)
		p.CheckAndComplete(own)
	}
	waitFor(t, "the reaper's sweep", func() bool { return p.Watched() <= 250 })
	if p.Delayed() != 0 {
		t.Fatalf("delayed = %d, every op completed", p.Delayed())
	}
}
