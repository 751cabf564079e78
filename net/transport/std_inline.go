package transport

import (
	"math"
	"syscall"
)

// Inline writes. An answer that completes the connection's head ticket (every
// earlier answer written) is written by the goroutine that completes it, with one
// writev that does not wait for room in the socket, instead of by waking the
// writer goroutine to write it: one goroutine switch (and on an idle machine a
// thread wake-up) less per answer, where a client waits for each answer before its
// next request. Only answers of bytes (no file range) on a plain socket are written
// inline; what the socket does not take at once is left to the writer, which
// writes the rest. The completing goroutine may be the log flusher releasing its
// waiters, so the write must never block: a slow reader's answer costs it one
// failed writev.
type inlineWriter struct {
	rc   syscall.RawConn       // nil: inline writes are off for this connection
	fn   func(fd uintptr) bool // c.writevOnce, bound once
	bufs [][]byte              // the answer's prefix and chunks, for fn
	n    int                   // fn's result: bytes written (0 on any error)
}

// inlineable: resp can be written inline.
func inlineable(how Outcome, resp *Response) bool {
	if how != Respond {
		return false
	}
	for _, ch := range resp.Chunks {
		if ch.File != nil {
			return false
		}
	}
	return resp.Size() <= math.MaxInt32
}

// writeInline writes the answer of seq, the head ticket, which Complete marked
// slotWriting for this goroutine. Written whole, the ticket is finished here as
// the writer would; otherwise (a partial write, a full socket, an error) the
// slot returns to the writer with the count of bytes already written.
func (c *stdConn) writeInline(seq uint64) {
	L := uint64(len(c.slots))
	s := &c.slots[seq%L]
	size := s.resp.Size()
	s.prefix = [4]byte{byte(size >> 24), byte(size >> 16), byte(size >> 8), byte(size)}
	c.iw.bufs = append(c.iw.bufs[:0], s.prefix[:])
	for _, ch := range s.resp.Chunks {
		if len(ch.Bytes) > 0 {
			c.iw.bufs = append(c.iw.bufs, ch.Bytes)
		}
	}
	// A write error (or a closed socket) leaves n short: the writer, given the
	// slot back, meets the error itself and closes.
	c.iw.n = 0
	c.iw.rc.Write(c.iw.fn)
	n := c.iw.n
	clear(c.iw.bufs)

	c.mu.Lock()
	if int64(n) < size+4 {
		s.sent = n
		if c.closed { // close() released the done slots, not this one
			rel := s.resp.Release
			s.resp, s.state, s.sent = Response{}, slotFree, 0
			c.mu.Unlock()
			if rel != nil {
				rel.Release()
			}
			return
		}
		// The writer writes the rest (or meets the error and closes).
		s.state = slotDone
		c.cond.Broadcast()
		c.mu.Unlock()
		return
	}
	rel := s.resp.Release
	s.resp, s.state, s.sent = Response{}, slotFree, 0
	c.head++
	if !c.closed {
		c.queued -= size + 4
	}
	// Wake only whoever has something to do: the writer for the answers done
	// meanwhile or the end of a drain, the reader for room.
	if (c.head < c.next && c.slots[c.head%L].state == slotDone) || (c.readDone && c.head == c.next) || c.roomWaits > 0 {
		c.cond.Broadcast()
	}
	c.mu.Unlock()
	if rel != nil {
		rel.Release()
	}
}
