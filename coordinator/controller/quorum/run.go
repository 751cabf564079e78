package quorum

import (
	"context"
	"errors"
)

// errRunEnded is why a voter whose Run returned refuses proposals.
var errRunEnded = errors.New("its Run loop ended")

// Run is the voter's loop in a real process: it ticks every NextTick (TickInterval,
// shorter while the leader is lost; from the Clock), handles what Step and Propose
// queued as it arrives, and handles every Ready. It returns nil when ctx ends, or the fatal error that stopped the voter;
// either way the voter is stopped: pending and later proposals fail with
// ErrStopped. Run owns the core: nothing else may call Tick or HandleReady while it
// runs, and it must not be called twice.
func (q *Quorum) Run(ctx context.Context) error {
	interval := q.cfg.TickInterval
	t := q.cfg.Clock.NewTicker(interval)
	defer func() { t.Stop() }()
	for {
		if err := q.HandleReady(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			q.stop(errRunEnded)
			return nil
		case <-t.C():
			q.Tick()
			if next := q.NextTick(); next != interval {
				t.Stop()
				interval, t = next, q.cfg.Clock.NewTicker(next)
			}
		case <-q.notify:
		}
	}
}
