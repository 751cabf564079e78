package controller

import (
	"context"
	"time"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// Broker liveness beyond the session timeout (the package doc states the rules):
// the connection a broker heartbeats on, and what a connection attempt to its
// endpoint finds.

// ListenerState is what a listener check found at a broker's endpoint.
type ListenerState int8

// The states.
const (
	// ListenerUnknown: no verdict (a timeout, an unreachable network, a name that
	// does not resolve, the check cut short).
	ListenerUnknown ListenerState = iota
	// ListenerAccepts: the connection was accepted (a process listens there, even
	// one that is stopped: the kernel completes the handshake).
	ListenerAccepts
	// ListenerRefuses: the connection was refused (nothing listens there).
	ListenerRefuses
)

func (s ListenerState) String() string {
	switch s {
	case ListenerAccepts:
		return "accepts"
	case ListenerRefuses:
		return "refuses"
	}
	return "unknown"
}

const (
	// ListenerCheckTimeout bounds one listener check.
	ListenerCheckTimeout = time.Second
	// maxListenerChecks bounds the listener checks running at once.
	maxListenerChecks = 16
	// detachedCheckMax is the longest wait between two checks of a detached broker;
	// the first is at once, then detachedCheckFirst doubling up to it.
	detachedCheckMax = time.Second
	// detachedCheckFirst is the wait before the second check of a detached broker.
	// A killed process's sockets are closed one by one as it exits: the heartbeat
	// connection's close can arrive while its listener still accepts, and the
	// check made at once then finds it accepting. The checks that follow soon
	// (10, 20, 40, 80 ms: on their own timer, not the controller's tick) find it
	// refusing, so the broker is fenced within tens of milliseconds, before its
	// clients' first retries.
	detachedCheckFirst = 10 * time.Millisecond
	// reachRetryMax is the longest wait before a first check without a verdict is
	// tried again.
	reachRetryMax = 30 * time.Second
)

// CloseGrace is how long a broker whose heartbeat connection closed has to heartbeat
// on another before it is fenced, for brokers heartbeating every hb: one interval
// (the next heartbeat of a broker that heartbeats normally comes within it, on a
// new connection) and max(hb/2, 1 s) for the dial and the request.
func CloseGrace(hb time.Duration) time.Duration { return hb + max(hb/2, time.Second) }

// brokerKey names one registration of a broker.
type brokerKey struct {
	id    int32
	epoch int64
}

// reachState is what this controller's first listener check of a broker
// registration found: ListenerAccepts makes later refusals evidence that the
// broker is gone; ListenerRefuses (the endpoint refused this controller while the
// broker was registered and unfenced) makes them no evidence, for that epoch.
type reachState struct {
	state    ListenerState
	checking bool
	tries    int
	retryAt  time.Time
}

// ConnClosed reports that connection conn of the CONTROLLER listener closed (the
// id SubmitConn was given). A broker whose last heartbeat came on it is detached:
// it is checked at once (liveness rules, package doc) and fenced unless it
// heartbeats on another connection within CloseGrace. Safe from any goroutine.
func (c *Controller) ConnClosed(conn uint64) {
	if conn == 0 {
		return
	}
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return
	}
	now := c.clock.Now()
	c.mu.closedConns[conn] = now
	var out callbacks
	for _, id := range c.sessionIDsLocked() {
		s := c.mu.sessions[id]
		if s.conn != conn || !s.detached.IsZero() {
			continue
		}
		s.detached, s.closed, s.checked, s.nextCheck = now, true, 0, now
		c.log.Info("controller: the broker's heartbeat connection closed", "broker", id, "epoch", s.epoch, "conn", conn)
	}
	if c.mu.active && !c.mu.quiescing && !c.mu.draining {
		c.checkDetachedLocked(&out)
	}
	c.mu.Unlock()
	out.run()
}

// attachLocked ties session s to the connection its heartbeat (or registration)
// arrived on. A connection known closed leaves it detached, as closed.
func (c *Controller) attachLocked(s *session, conn uint64, now time.Time) {
	s.conn = conn
	if at, gone := c.mu.closedConns[conn]; gone && conn != 0 {
		if s.detached.IsZero() || !s.closed {
			s.detached, s.closed, s.checked, s.nextCheck = at, true, 0, now
		}
		return
	}
	s.detached, s.closed, s.checked = time.Time{}, false, 0
}

// checkEndpoint is the endpoint of b that listener checks try.
func (c *Controller) checkEndpoint(b metadata.BrokerImage) (metadata.Endpoint, bool) {
	if c.cfg.CheckListenerName != "" {
		return b.Endpoint(c.cfg.CheckListenerName)
	}
	if len(b.Endpoints) == 0 {
		return metadata.Endpoint{}, false
	}
	return b.Endpoints[0], true
}

// checkReachLocked starts the first listener check of every unfenced broker
// registration of the committed image that has none yet (every voter's controller
// does, active or not, so that a controller becoming active knows which brokers it
// could reach).
func (c *Controller) checkReachLocked(out *callbacks) {
	if c.cfg.CheckListener == nil || c.mu.closed {
		return
	}
	now := c.clock.Now()
	_, im := c.q.Committed()
	for _, b := range im.Brokers() {
		if b.Fenced {
			continue
		}
		e, ok := c.checkEndpoint(b)
		if !ok {
			continue
		}
		k := brokerKey{b.ID, b.Epoch}
		r := c.mu.reach[k]
		if r == nil {
			r = &reachState{}
			c.mu.reach[k] = r
		}
		if r.state != ListenerUnknown || r.checking || now.Before(r.retryAt) || c.mu.checks >= maxListenerChecks {
			continue
		}
		r.checking = true
		c.startCheckLocked(e, out, func(st ListenerState, _ *callbacks) {
			r.checking = false
			switch st {
			case ListenerAccepts:
				r.state = st
			case ListenerRefuses:
				r.state = st
				c.log.Warn("controller: a broker's endpoint refuses connections from this controller: it is fenced by its session timeout only",
					"broker", k.id, "epoch", k.epoch, "endpoint", e.Name, "host", e.Host, "port", e.Port)
			default:
				r.tries++
				r.retryAt = c.clock.Now().Add(min(time.Duration(r.tries)*time.Second, reachRetryMax))
			}
		})
	}
}

// checkDetachedLocked starts the due listener checks of detached unfenced brokers
// whose endpoint accepted this controller before. Active only.
func (c *Controller) checkDetachedLocked(out *callbacks) {
	if c.cfg.CheckListener == nil || !c.mu.active || c.mu.closed || c.mu.draining {
		return
	}
	now := c.clock.Now()
	for _, id := range c.sessionIDsLocked() {
		s := c.mu.sessions[id]
		if s.detached.IsZero() || s.checking || now.Before(s.nextCheck) || c.mu.checks >= maxListenerChecks {
			continue
		}
		b, ok := c.mu.pending.Broker(id)
		if !ok || b.Fenced || b.Epoch != s.epoch {
			continue
		}
		if r := c.mu.reach[brokerKey{id, b.Epoch}]; r == nil || r.state != ListenerAccepts {
			continue
		}
		e, ok := c.checkEndpoint(b)
		if !ok {
			continue
		}
		s.checking = true
		epoch := s.epoch
		c.startCheckLocked(e, out, func(st ListenerState, out *callbacks) {
			s.checking = false
			s.checked++
			now := c.clock.Now()
			wait := min(detachedCheckFirst<<min(s.checked-1, 10), detachedCheckMax)
			s.nextCheck = now.Add(wait)
			if st != ListenerRefuses || !c.mu.active || c.mu.quiescing || c.mu.draining || c.mu.sessions[id] != s || s.detached.IsZero() {
				if st == ListenerAccepts && wait < c.cfg.TickInterval && c.mu.active && c.mu.sessions[id] == s && !s.detached.IsZero() {
					c.clock.AfterFunc(wait, c.recheckDetached) // sooner than the next tick
				}
				return
			}
			if b, ok := c.mu.pending.Broker(id); !ok || b.Fenced || b.Epoch != epoch {
				return
			}
			why := "not heartbeated to this controller since it became active"
			if s.closed {
				why = "its heartbeat connection closed"
			}
			c.fenceLostLocked(id, s, out, "controller: the broker is gone ("+why+", and its endpoint, which accepted connections before, refuses them): fencing it",
				"endpoint", e.Name, "host", e.Host, "port", e.Port, "detached", now.Sub(s.detached))
		})
	}
}

// recheckDetached starts the due checks of detached brokers between two ticks.
func (c *Controller) recheckDetached() {
	c.mu.Lock()
	var out callbacks
	if c.mu.active && !c.mu.quiescing && !c.mu.draining {
		c.checkDetachedLocked(&out)
	}
	c.mu.Unlock()
	out.run()
}

// startCheckLocked runs CheckListener on e once c.mu is released, and calls done
// with its verdict with c.mu held (unless the controller closed meanwhile).
func (c *Controller) startCheckLocked(e metadata.Endpoint, out *callbacks, done func(ListenerState, *callbacks)) {
	c.mu.checks++
	run := func() {
		ctx, cancel := context.WithTimeout(c.checkCtx, ListenerCheckTimeout)
		st := c.cfg.CheckListener(ctx, e)
		cancel()
		c.mu.Lock()
		c.mu.checks--
		var out callbacks
		if !c.mu.closed {
			done(st, &out)
		}
		c.mu.Unlock()
		out.run()
	}
	if c.inlineChecks {
		out.add(run)
		return
	}
	out.add(func() { go run() })
}

// pruneLivenessLocked forgets closed connections older than a session timeout and
// the first checks of registrations the committed image no longer has unfenced.
func (c *Controller) pruneLivenessLocked() {
	now := c.clock.Now()
	for conn, at := range c.mu.closedConns {
		if now.Sub(at) > c.cfg.SessionTimeout {
			delete(c.mu.closedConns, conn)
		}
	}
	if len(c.mu.reach) == 0 {
		return
	}
	_, im := c.q.Committed()
	for k, r := range c.mu.reach {
		if b, ok := im.Broker(k.id); (!ok || b.Epoch != k.epoch || b.Fenced) && !r.checking {
			delete(c.mu.reach, k)
		}
	}
}
