package peer

import (
	"context"
	"errors"
	"io"
	"sync"
	"syscall"
	"time"
)

// Brokers and voters this node has lost: a connection to a broker's inter-broker
// listener (or a voter's CONTROLLER listener) that the peer closed (end of stream,
// reset), or a dial it refused, marks the node lost in that role from that moment,
// until a dial to it in that role succeeds (its connection set up: TCP, TLS, SASL,
// ApiVersions), of any purpose. A connection closed that way is followed at once by
// a probe, a dial of a connection of its own, which clears the mark when the peer
// answers. When a leader's process dies, each follower of its partitions marks it at
// once (the kernel closes the dead process's sockets, then refuses the dials), and
// so does each voter that followed it when it led the controller quorum. A node that
// answers nothing (stopped, cut off) is not marked; one that closed an idle
// connection is marked for as long as the probe takes.
//
// The broker's Metadata answers use the broker marks (net/kafka, Deps.Unreachable):
// an answer that would name such a broker as a partition's leader waits a moment for
// the controller to fence it. The controller quorum uses the voter marks
// (coordinator/controller/quorum, Config.LeaderLost): a voter whose leader is lost
// starts the election without waiting out the whole election timeout.

// lostSet is the lost nodes of one role. Safe for concurrent use.
type lostSet struct {
	mu sync.Mutex
	m  map[int32]time.Time // node id -> since when it is lost
}

// mark records broker id lost at at, unless it already is.
func (l *lostSet) mark(id int32, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[int32]time.Time{}
	}
	if _, ok := l.m[id]; !ok {
		l.m[id] = at
	}
}

// clear forgets that broker id was lost.
func (l *lostSet) clear(id int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, id)
}

// Unreachable reports whether this node has lost broker id (see lostSet), and since
// when. A broker not marked yet is marked now when the kernel already holds its close
// of one of this node's connections to it, not yet read (closedByPeer): a client
// that saw a leader's process die asks for metadata as fast as this node's reader
// learns of it.
func (c *Client) Unreachable(id int32) (since time.Time, ok bool) {
	return c.lostSince(Broker(id))
}

// VoterLost is Unreachable for voter id, reached on its CONTROLLER listener: whether
// this node has lost it, and since when.
func (c *Client) VoterLost(id int32) (since time.Time, ok bool) {
	return c.lostSince(Voter(id))
}

// lostOf returns the lost set of role.
func (c *Client) lostOf(role Role) *lostSet {
	if role == RoleVoter {
		return &c.lostV
	}
	return &c.lost
}

func (c *Client) lostSince(t Target) (since time.Time, ok bool) {
	lost := c.lostOf(t.Role)
	lost.mu.Lock()
	since, ok = lost.m[t.Node]
	lost.mu.Unlock()
	if ok {
		return since, true
	}
	var conns []*conn
	c.mu.Lock()
	for k, s := range c.mu.slots {
		if k.to == t {
			s.mu.Lock()
			if cn := s.mu.conn; cn != nil && cn.alive() {
				conns = append(conns, cn)
			}
			s.mu.Unlock()
		}
	}
	c.mu.Unlock()
	for _, cn := range conns {
		if closedByPeer(cn.nc) {
			now := time.Now()
			lost.mark(t.Node, now)
			return now, true
		}
	}
	return time.Time{}, false
}

// noteDial records the outcome of a dial of s: a refused one marks its node lost in
// its role, a successful one clears the mark.
func (s *slot) noteDial(err error) {
	lost := s.c.lostOf(s.key.to.Role)
	switch {
	case err == nil:
		lost.clear(s.key.to.Node)
	case errors.Is(err, syscall.ECONNREFUSED):
		lost.mark(s.key.to.Node, time.Now())
	}
}

// noteBroken records that a connection of s failed with err: the peer's close (end
// of stream, reset) marks its node lost in its role and probes its listener.
func (s *slot) noteBroken(err error) {
	if s.c.ctx.Err() != nil {
		return
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, syscall.ECONNRESET) {
		return
	}
	s.c.lostOf(s.key.to.Role).mark(s.key.to.Node, time.Now())
	go func() {
		// A dial of a connection of its own, with the handshake: the listener of a
		// process being killed may still accept, but it answers no ApiVersions.
		ctx, cancel := context.WithTimeout(s.c.ctx, probeTimeout)
		defer cancel()
		s.c.conn(ctx, s.key.to, purposeProbe) // its dial clears the mark (noteDial)
	}()
}

// purposeProbe is the connection of the probes: it stays open, idle, once made.
const purposeProbe Purpose = "probe"

// probeTimeout bounds the probe after a broken connection; a probe without an
// answer leaves the mark.
const probeTimeout = time.Second
