package audit

import (
	"fmt"
	"time"
)

// owedUnread reports whether a reader is owed e and has not returned it.
func (c *Checker) owedUnread(e *entry) bool {
	if e.lost {
		return false
	}
	for r := range numReaders {
		if e.owed[r] != notOwed && !e.read[r] {
			return true
		}
	}
	return false
}

// resolved reports whether reader r is done with e, a record of producer p: it
// returned it, or e is lost, or r is not owed e (and will not be: e is no longer in
// flight, its transaction ended) and either passed its offset or, offset unknown, the
// horizon passed since it was sent.
func (c *Checker) resolved(ps *partState, p Producer, e *entry, r Reader, now time.Duration) bool {
	switch {
	case e.read[r] || e.lost:
		return true
	case e.owed[r] != notOwed, e.state == stInFlight:
		return false
	case p == Transactional && e.txn == txnOpen && r == CommittedReader:
		return false
	case e.off >= 0:
		return ps.reads[r].max > e.off
	}
	return now-e.sent > c.opt.Horizon
}

func (c *Checker) lose(ps *partState, id ID, e *entry, r Reader, now time.Duration, final bool) {
	e.lost = true
	when := fmt.Sprintf("within %s of being owed it", c.opt.Horizon)
	if final {
		when = "by the end of the drain"
	}
	c.add(KLost, id, e.off, now, fmt.Sprintf("acknowledged at offset %d; the %s reader did not return it %s, though it returned offset %d of the partition", e.off, r, when, ps.reads[r].max))
}

// Tick judges the window at now: a record owed to a reader for longer than the
// horizon is lost if the reader returned a later offset of its partition, else it
// counts as unseen; resolved records older than the horizon leave the window.
func (c *Checker) Tick(now time.Duration) {
	c.judge(now, false)
}

// Finish judges what is left at the end of the run (after the drain): every record
// still owed is lost if its reader passed it, else unseen, whatever its age. After it
// the report is final.
func (c *Checker) Finish(now time.Duration) {
	c.StopProducing(now)
	c.judge(now, true)
	c.finished = true
}

func (c *Checker) judge(now time.Duration, final bool) {
	var unseen int64
	for _, p := range c.order {
		ps := c.parts[p]
		for pi := range ps.streams {
			st := &ps.streams[pi]
			for i := range st.entries {
				e := &st.entries[i]
				if e.lost {
					continue
				}
				overdue := false
				for r := range numReaders {
					if e.owed[r] == notOwed || e.read[r] || e.lost {
						continue
					}
					if !final && now-e.owed[r] < c.opt.Horizon {
						continue
					}
					if ps.reads[r].max > e.off {
						c.lose(ps, ID{Producer: Producer(pi), P: p, Seq: st.base + int64(i)}, e, r, now, final)
						continue
					}
					overdue = true
				}
				if overdue && !e.lost {
					unseen++
				}
			}
			c.evict(ps, Producer(pi), st, now)
		}
	}
	c.unseen = unseen
	for k, t := range c.reported {
		if now-t > 2*c.opt.Horizon {
			delete(c.reported, k)
		}
	}
}

// evict drops, from the front of st, the records every reader is done with that are
// older than the horizon.
func (c *Checker) evict(ps *partState, p Producer, st *stream, now time.Duration) {
	n := 0
	for n < len(st.entries) {
		e := &st.entries[n]
		if now-e.sent <= c.opt.Horizon {
			break
		}
		done := true
		for r := range numReaders {
			if !c.resolved(ps, p, e, r, now) {
				done = false
				break
			}
		}
		if !done {
			break
		}
		n++
	}
	if n == 0 {
		return
	}
	st.entries = st.entries[n:]
	st.base += int64(n)
	if len(st.entries) == 0 {
		st.entries = nil // let the old array go
	}
}

// StartProducing restarts the no-ack windows at now: the time before production began
// (the readers' set-up) is no partition's unavailability. Reports count their elapsed
// time from it.
func (c *Checker) StartProducing(now time.Duration) {
	c.producing = true
	c.began = now
	for _, ps := range c.parts {
		ps.lastAck = now
	}
}

// StopProducing marks the end of production: the no-ack windows stop growing.
func (c *Checker) StopProducing(now time.Duration) {
	if !c.producing {
		return
	}
	c.producing = false
	for _, ps := range c.parts {
		if g := now - ps.lastAck; g > ps.longest {
			ps.longest = g
		}
	}
}

// Outstanding is the number of records some reader is owed and has not returned (not
// yet judged lost): the drain waits for it to reach 0.
func (c *Checker) Outstanding() int {
	n := 0
	for _, ps := range c.parts {
		for pi := range ps.streams {
			for i := range ps.streams[pi].entries {
				if c.owedUnread(&ps.streams[pi].entries[i]) {
					n++
				}
			}
		}
	}
	return n
}

// Window is the number of records the checker holds: its memory.
func (c *Checker) Window() int {
	n := 0
	for _, ps := range c.parts {
		for pi := range ps.streams {
			n += len(ps.streams[pi].entries)
		}
	}
	return n
}
