package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// ScrubReport is what a scrub checked and found.
type ScrubReport struct {
	Logs     int
	Segments int
	Bytes    int64    // bytes of batches whose CRCs were checked
	Damage   []Damage // damage found by this scrub (recorded in the logs)
}

// Scrub checks the CRC and record framing of every batch of every log now,
// without a rate limit, and records what it finds as damage (see Damage). It
// returns the first I/O error met (after going on with the other segments)
// or ctx's error.
//
// For an operator's "samsa scrub": offline, open the log directories with
// engine.Open (the broker must be stopped: the directories are locked),
// call Scrub and Close, and print the report (exit non-zero when Damage is
// not empty); online, the broker runs Scrub on its own Manager from an
// admin endpoint, or sets Options.ScrubBytesPerSecond for the background
// scrubber.
func (m *Manager) Scrub(ctx context.Context) (ScrubReport, error) {
	var rep ScrubReport
	var first error
	buf := make([]byte, scrubBufSize)
	for _, l := range m.Logs() {
		r, err := l.scrub(ctx, nil, buf)
		rep.add(r)
		if err != nil {
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			if first == nil && !errors.Is(err, ErrClosed) {
				first = err
			}
		}
	}
	return rep, first
}

// Scrub checks every batch of this log (as Manager.Scrub).
func (l *Log) Scrub(ctx context.Context) (ScrubReport, error) {
	return l.scrub(ctx, nil, make([]byte, scrubBufSize))
}

// scrubBufSize is the scrub's read size.
const scrubBufSize = 256 << 10

func (r *ScrubReport) add(o ScrubReport) {
	r.Logs += o.Logs
	r.Segments += o.Segments
	r.Bytes += o.Bytes
	r.Damage = append(r.Damage, o.Damage...)
}

// scrub checks every segment of the log up to its size when the scrub
// reaches it, reading through buf. pace (nil: none) is called before each
// batch is read.
func (l *Log) scrub(ctx context.Context, pace func(int64) error, buf []byte) (ScrubReport, error) {
	rep := ScrubReport{Logs: 1}
	segs := l.pinAll()
	defer releaseAll(segs)
	if len(segs) == 0 {
		return rep, ErrClosed
	}
	var first error
	for i, s := range segs {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		end := int64(math.MaxInt64)
		if i+1 < len(segs) {
			end = segs[i+1].base
		}
		p := func(n int64) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if pace != nil {
				return pace(n)
			}
			return nil
		}
		res, err := verifyBatches(s, 0, s.size.Load(), s.base, end, buf, p)
		rep.Segments++
		rep.Bytes += res.checked
		l.m.fail.scrubbed.Add(res.checked)
		if err != nil {
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			l.m.reportIO(l.tp.String(), err, "op", "scrub", "segment", s.base)
			if first == nil {
				first = ioFailure(fmt.Sprintf("scrub %s segment %d", l.tp, s.base), err)
			}
			continue
		}
		for _, d := range res.damage {
			if l.confirmDamage(s, d, buf) {
				d.FoundBy = foundByScrub
				d.TP = l.tp
				l.recordDamage(d)
				rep.Damage = append(rep.Damage, d)
			}
		}
	}
	return rep, first
}

// confirmDamage checks again, under appendMu (so that no truncation or
// append runs), that the range is still in the log and still bad: a scrub
// racing a truncation reads bytes that were being cut, which is no damage.
func (l *Log) confirmDamage(s *segment, d Damage, buf []byte) bool {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed || !l.hasSegment(s) || d.Pos >= s.size.Load() {
		return false
	}
	size := s.size.Load()
	end := int64(math.MaxInt64)
	if nb, ok := l.nextSegmentBase(s.base); ok {
		end = nb
	}
	// Walk one batch from d.Pos (the offsets check needs only a lower bound).
	res, err := verifyBatches(s, d.Pos, min(size, d.Pos+max(d.Size, BatchHeaderSize)), min(d.FirstOffset, s.base), end, buf, nil)
	if err != nil {
		return false
	}
	return len(res.damage) > 0 && res.damage[0].Pos == d.Pos
}

// scrubber is the background scrub: passes over every log at
// Options.ScrubBytesPerSecond, one every Options.ScrubInterval.
func (m *Manager) scrubber() {
	rate := m.opts.ScrubBytesPerSecond
	every := m.opts.ScrubInterval
	if every <= 0 {
		every = time.Hour
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-m.stop
		cancel()
	}()
	tb := newTokenBucket(rate)
	buf := make([]byte, scrubBufSize)
	pace := tb.take(ctx)
	for {
		for _, l := range m.Logs() {
			if _, err := l.scrub(ctx, pace, buf); ctx.Err() != nil {
				return
			} else if err != nil && !errors.Is(err, ErrClosed) {
				m.logger.Warn("scrub", "tp", l.tp, "err", err)
			}
		}
		m.fail.scrubPasses.Add(1)
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// tokenBucket paces reads at rate bytes/s with a burst of one second's
// worth (at least 1 MiB).
type tokenBucket struct {
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

func newTokenBucket(rate int64) *tokenBucket {
	b := max(float64(rate), 1<<20)
	return &tokenBucket{rate: float64(rate), burst: b, tokens: b, last: time.Now()}
}

func (tb *tokenBucket) take(ctx context.Context) func(int64) error {
	return func(n int64) error {
		now := time.Now()
		tb.tokens = min(tb.burst, tb.tokens+now.Sub(tb.last).Seconds()*tb.rate)
		tb.last = now
		tb.tokens -= float64(n)
		if tb.tokens >= 0 {
			return nil
		}
		wait := time.Duration(-tb.tokens / tb.rate * float64(time.Second))
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
}
