package quota

import "time"

// rateSensor is Kafka's Rate over a SampledStat: samples of one window each, the
// oldest reused when the newest is complete; samples older than the whole window are
// reset before measuring. Guarded by Manager.mu.
type rateSensor struct {
	window  time.Duration
	samples []rateSample
	cur     int
	last    time.Time // last record
}

type rateSample struct {
	start time.Time
	v     float64
}

func newRateSensor(n int, window time.Duration, now time.Time) *rateSensor {
	s := &rateSensor{window: window, samples: make([]rateSample, n), last: now}
	for i := range s.samples {
		s.samples[i].start = now
	}
	return s
}

func (s *rateSensor) record(now time.Time, v float64) {
	s.last = now
	c := &s.samples[s.cur]
	if now.Sub(c.start) >= s.window {
		s.cur = (s.cur + 1) % len(s.samples)
		c = &s.samples[s.cur]
		c.start, c.v = now, 0
	}
	c.v += v
}

// windowSize is Kafka's Rate.windowSize: the time since the oldest sample began, at
// least len(samples)-1 whole windows (so a new sensor does not see a burst as a huge
// rate).
func (s *rateSensor) windowSize(now time.Time) time.Duration {
	expire := time.Duration(len(s.samples)) * s.window
	oldest := now
	for i := range s.samples {
		p := &s.samples[i]
		if now.Sub(p.start) >= expire {
			p.start, p.v = now, 0
		}
		if p.start.Before(oldest) {
			oldest = p.start
		}
	}
	elapsed := now.Sub(oldest)
	if full, minFull := int(elapsed/s.window), len(s.samples)-1; full < minFull {
		elapsed += time.Duration(minFull-full) * s.window
	}
	return elapsed
}

// rate is the measured rate per second.
func (s *rateSensor) rate(now time.Time) float64 {
	w := s.windowSize(now)
	total := 0.0
	for _, p := range s.samples {
		total += p.v
	}
	return total / w.Seconds()
}

// throttle is Kafka's QuotaUtils.boundedThrottleTime: how long the client must wait
// for its rate to fall back to limit, at most one sample window.
func (s *rateSensor) throttle(now time.Time, limit float64) time.Duration {
	r := s.rate(now)
	if r <= limit || limit <= 0 {
		return 0
	}
	w := s.windowSize(now)
	t := time.Duration((r - limit) / limit * float64(w))
	return min(t, s.window)
}
