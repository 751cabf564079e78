package latch

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestLatch: done runs once, after the creator's Done and every part's, whatever
// order they come in, and the parts' records are serialized.
func TestLatch(t *testing.T) {
	var runs atomic.Int32
	sum := 0
	l := New(func() { runs.Add(1) })
	var wg sync.WaitGroup
	for i := 1; i <= 100; i++ {
		l.Add()
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.Done(func() { sum += i })
		}()
	}
	wg.Wait()
	if runs.Load() != 0 {
		t.Fatal("done ran before the creator's Done")
	}
	l.Done(nil)
	if runs.Load() != 1 || sum != 5050 {
		t.Fatalf("done ran %d times, sum %d", runs.Load(), sum)
	}

	// Nothing added: the creator's Done alone completes it.
	empty := New(func() { runs.Add(1) })
	empty.Done(nil)
	if runs.Load() != 2 {
		t.Fatal("an empty latch did not complete")
	}
}
