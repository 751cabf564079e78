package purgatory

import (
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"
)

// TestStressReaper arms operations with timeouts across several wheel levels from
// several goroutines, cancels some, completes some through keys, and checks every one
// completes exactly once. Set PURGATORY_STRESS=1 for a longer run.
func TestStressReaper(t *testing.T) {
	rounds := 2
	if os.Getenv("PURGATORY_STRESS") != "" {
		rounds = 200
	}
	for r := 0; r < rounds; r++ {
		p := New[int]("stress", Options{PurgeInterval: 20})
		var wg sync.WaitGroup
		all := make([][]*testOp, 4)
		for w := range all {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(r), uint64(w)))
				for i := 0; i < 500; i++ {
					var d time.Duration
					switch rng.IntN(4) {
					case 0:
						d = time.Duration(rng.IntN(3)) * time.Millisecond
					case 1:
						d = time.Duration(rng.IntN(25)) * time.Millisecond
					default:
						d = time.Duration(rng.IntN(450)) * time.Millisecond
					}
					o := newOp(d)
					all[w] = append(all[w], o)
					p.TryCompleteElseWatch(o, rng.IntN(8))
					switch rng.IntN(6) {
					case 0:
						o.ForceComplete()
					case 1:
						o.ready.Store(true)
						p.CheckAndComplete(rng.IntN(8))
					}
				}
			}()
		}
		wg.Wait()
		deadline := time.Now().Add(20 * time.Second)
		for _, ops := range all {
			for i, o := range ops {
				for !o.finished() {
					if time.Now().After(deadline) {
						t.Fatalf("round %d: op %d (timeout %v) never completed; delayed=%d", r, i, o.Timeout(), p.Delayed())
					}
					time.Sleep(time.Millisecond)
				}
				if o.completions.Load() != 1 || o.badOrder.Load() {
					t.Fatalf("round %d: completions=%d", r, o.completions.Load())
				}
			}
		}
		waitFor(t, "wheel empty", func() bool { return p.Delayed() == 0 })
		p.Close()
	}
}
