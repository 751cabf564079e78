package tiered

import (
	"context"
	"sync"
	"time"
)

// limiter paces copies to a rate (remote.log.manager.copy.max.bytes.per.second):
// a copy of n bytes waits until the copies before it would have taken n / rate
// seconds more at that rate. Kafka's quota samples windows and makes the
// next copy wait while the rate is over; the effect on a stream of copies is
// the same average. Remote reads (remote.log.manager.fetch.max.bytes.per.second)
// do not wait: a read is recorded once done, and none starts while the
// reads recorded run past now at the rate (over).
type limiter struct {
	rate int64 // bytes per second; ≤ 0: unlimited
	mu   sync.Mutex
	next time.Time // when the next copy may start
}

func newLimiter(rate int64) *limiter { return &limiter{rate: rate} }

// wait blocks until n more bytes may be copied, or ctx ends.
func (l *limiter) wait(ctx context.Context, n int64) error {
	if l.rate <= 0 {
		return nil
	}
	if d := l.reserve(n); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// reserve counts n bytes at the rate and returns how long from now they may
// start.
func (l *limiter) reserve(n int64) time.Duration {
	if l.rate <= 0 {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	start := now
	if l.next.After(now) {
		start = l.next
	}
	l.next = start.Add(time.Duration(float64(n) / float64(l.rate) * float64(time.Second)))
	return start.Sub(now)
}

// record counts n bytes done.
func (l *limiter) record(n int64) { l.reserve(n) }

// over reports whether the bytes counted run past now at the rate.
func (l *limiter) over() bool {
	if l.rate <= 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next.After(time.Now())
}
