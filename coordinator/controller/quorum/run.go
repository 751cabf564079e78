package quorum

import (
	"context"
	"errors"
	"time"
)

// errRunEnded is why a voter whose Run returned refuses proposals.
var errRunEnded = errors.New("its Run loop ended")

// Run is the voter's loop in a real process: it handles what Step and Propose queued
// as it arrives, handles every Ready, and ticks raft every NextTick. The Clock's
// ticker fires every TickInterval/FastTickDivisor, and each firing asks NextTick
// again, so a leader found lost (Config.LeaderLost) shortens the ticks within a
// sub-tick of its loss. It returns nil when ctx ends, or the fatal error that
// stopped the voter; either way the voter is stopped: pending and later proposals
// fail with ErrStopped. Run owns the core: nothing else may call Tick or
// HandleReady while it runs, and it must not be called twice.
func (q *Quorum) Run(ctx context.Context) error {
	sub := max(q.cfg.TickInterval/FastTickDivisor, time.Millisecond)
	t := q.cfg.Clock.NewTicker(sub)
	defer t.Stop()
	var since time.Duration // since the last tick, in sub-ticks' nominal time
	for {
		if err := q.HandleReady(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			q.stop(errRunEnded)
			return nil
		case <-t.C():
			if since += sub; since >= q.NextTick() {
				since = 0
				q.Tick()
			}
		case <-q.notify:
		}
	}
}
