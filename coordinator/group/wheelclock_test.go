package group

import (
	"testing"
	"time"
)

func TestWheelClockFiresAndStops(t *testing.T) {
	c := NewWheelClock()
	defer c.Close()
	fired := make(chan int, 3)
	c.AfterFunc(5*time.Millisecond, func() { fired <- 1 })
	stopped := c.AfterFunc(10*time.Millisecond, func() { fired <- 2 })
	c.AfterFunc(20*time.Millisecond, func() { fired <- 3 })
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	if stopped.Stop() {
		t.Fatal("second Stop reported true")
	}
	deadline := time.After(5 * time.Second)
	var got []int
	for len(got) < 2 {
		select {
		case v := <-fired:
			got = append(got, v)
		case <-deadline:
			t.Fatalf("timers fired: %v", got)
		}
	}
	if got[0] != 1 || got[1] != 3 {
		t.Fatalf("fired %v, want [1 3]", got)
	}
}

// TestSessionExpiryOnTheWheel runs a member's session timeout on the real wheel.
func TestSessionExpiryOnTheWheel(t *testing.T) {
	log := newMemLog()
	c := New(Config{Logger: quietLogger(), InitialRebalanceDelay: -1, MinSessionTimeout: time.Millisecond}, log)
	defer c.Close()
	if err := c.LoadPartition(c.PartitionFor("g")); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, clock: newFakeClock(), log: log, c: c}
	j := h.join("g", joinOpts{version: 3, session: 30 * time.Millisecond})
	if r := j.get(); r == nil || r.ErrorCode != 0 {
		t.Fatalf("join: %+v", r)
	}
	deadline := time.Now().Add(5 * time.Second)
	for h.describe("g").State != "Empty" {
		if time.Now().After(deadline) {
			t.Fatalf("session never expired: %+v", h.describe("g"))
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
}
