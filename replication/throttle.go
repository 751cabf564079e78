package replication

import (
	"sync"
	"time"
)

// Throttle is a bytes-per-second limit (Kafka's replication quotas,
// follower.replication.throttled.rate): a token bucket holding at most one second of
// bytes. Recording may drive it below zero; it allows again once refilled above zero.
// Safe for concurrent use; time comes from the caller.
type Throttle struct {
	mu     sync.Mutex
	rate   float64 // bytes per second
	tokens float64
	last   time.Time
}

// NewThrottle returns a throttle of rate bytes/s (> 0), full.
func NewThrottle(rate int64) *Throttle {
	return &Throttle{rate: float64(rate), tokens: float64(rate)}
}

func (t *Throttle) refillLocked(now time.Time) {
	if !t.last.IsZero() && now.After(t.last) {
		t.tokens = min(t.rate, t.tokens+now.Sub(t.last).Seconds()*t.rate)
	}
	if t.last.IsZero() || now.After(t.last) {
		t.last = now
	}
}

// Allow reports whether more may be copied now; when not, it also returns when.
func (t *Throttle) Allow(now time.Time) (bool, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refillLocked(now)
	if t.tokens > 0 {
		return true, time.Time{}
	}
	wait := time.Duration((-t.tokens + 1) / t.rate * float64(time.Second))
	return false, now.Add(max(wait, time.Millisecond))
}

// Record counts n bytes copied.
func (t *Throttle) Record(now time.Time, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refillLocked(now)
	t.tokens -= float64(n)
}
