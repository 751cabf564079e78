package transport

import (
	"errors"
	"log/slog"
	"net"
	"sync/atomic"
	"time"
)

// acceptLoop accepts connections on ln and hands each to take, with ln's name
// (NamedListener; "" for none), for both transports, after the connection limits of
// lim (nil: none) admitted it; take must call release
// once the connection has ended (acceptLoop calls it when take fails).
// It returns ErrClosed once draining is set (or closing is closed while it backs off),
// and ln's error when ln was closed. Other accept errors (EMFILE, ECONNABORTED, ...)
// are transient: it backs off like net/http does, 5 ms doubling to 1 s. A take error
// that stop reports as fatal ends the loop with that error; others are logged.
func acceptLoop(ln net.Listener, draining *atomic.Bool, closing <-chan struct{}, log *slog.Logger, lim *Limiter,
	take func(nc net.Conn, listener string, release func()) error, stop func(error) bool) error {
	var backoff time.Duration
	name := listenerName(ln)
	for {
		nc, err := ln.Accept()
		if err != nil {
			if draining.Load() {
				return ErrClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			if backoff == 0 {
				backoff = 5 * time.Millisecond
			} else if backoff *= 2; backoff > time.Second {
				backoff = time.Second
			}
			log.Warn("accept failed; retrying", "err", err, "backoff", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-closing:
				t.Stop()
				return ErrClosed
			}
			continue
		}
		backoff = 0
		release, ok := admit(lim, name, nc, closing)
		if !ok {
			continue
		}
		if err := take(nc, name, release); err != nil {
			release()
			if stop(err) {
				return err
			}
			log.Warn("dropping accepted connection", "err", err)
		}
	}
}
