package transport

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/valyala/bytebufferpool"
	"golang.org/x/sys/unix"
)

// rslot is one request of a reactor connection, in the ring at seq % len(ring).
type rslot struct {
	state    slotState
	how      Outcome
	resp     Response
	frame    *bytebufferpool.ByteBuffer
	received time.Time
	prefix   [4]byte
}

// rconn is one connection of a Reactor.
//
// Request seq moves through the ring: read by the loop (next++), served by a worker or
// the loop (served++), answered by anyone (Complete: slotDone), written and retired by
// the loop (head++). Always head <= served <= next and next-head <= len(ring) <=
// MaxInFlight. The socket is read, written and closed by the loop only; other
// goroutines may shut it down (Close) while holding mu and fdOpen.
type rconn struct {
	r      *Reactor
	loop   *loop
	fd     int
	id     uint64
	local  net.Addr
	remote net.Addr
	// listener is the name of the listener that accepted it (NamedListener).
	listener string

	inReady  atomic.Bool  // queued on loop.ready
	warmDone atomic.Bool  // the warmer finished: writing may resume
	queued   atomic.Int64 // answered, unwritten response bytes (changed under mu)
	maxReq   atomic.Int32 // SetMaxRequestBytes; 0: Config.MaxRequestBytes
	muted    atomic.Int64 // Mute: no request is read before this (unix ns)
	release  func()       // the Limiter's slot

	mu struct {
		sync.Mutex
		ring     []rslot
		head     uint64
		served   uint64
		next     uint64
		serving  bool // on the run queue or being served by a worker
		closed   bool // no more writes; answers are released
		readDone bool // no more requests are read (draining)
		fdOpen   bool
	}

	// Loop-owned.
	hdr        [4]byte
	hdrN       int
	cur        *bytebufferpool.ByteBuffer // frame being read
	curSize    int
	stash      *bytebufferpool.ByteBuffer // read, unparsed bytes held back by back-pressure
	paused     bool                       // reading stopped by back-pressure (or a Mute)
	inMuted    bool                       // on loop.muted
	watching   bool                       // drained: the socket is read only to see the peer go
	inRewatch  bool                       // on loop.rewatch
	finalized  bool
	wantWrite  bool // a write hit EAGAIN: continue on EPOLLOUT
	stallSince time.Time
	lastActive time.Time
	wend       uint64 // [head, wend) are answered and owned by the writer
	wpart      int    // head's part being written: 0 the prefix, k chunk k-1
	woff       int64  // bytes of that part already written
	sfOff      int64
	warming    bool
	warmed     bool // the range at the cursor was just warmed: skip the probe
	warm       struct {
		file *os.File
		off  int64
		n    int64
	}
}

func (c *rconn) listenerName() string { return c.listener }

func newRconn(r *Reactor, l *loop, fd int, local, remote net.Addr) *rconn {
	c := &rconn{r: r, loop: l, fd: fd, id: r.nextID.Add(1), local: local, remote: remote}
	c.mu.ring = make([]rslot, min(4, r.cfg.MaxInFlight))
	c.mu.fdOpen = true
	return c
}

func (c *rconn) setMaxRequestBytes(n int32) { c.maxReq.Store(n) }

func (c *rconn) mute(until int64) { extendMute(&c.muted, until) }

// mutedNow: is reading muted (Mute)? A muted connection goes on the loop's muted list,
// which the loop wakes up for when the earliest mute ends. Loop only.
func (c *rconn) mutedNow() bool {
	u := c.muted.Load()
	if u == 0 || c.loop.now.UnixNano() >= u {
		return false
	}
	l := c.loop
	if !c.inMuted {
		c.inMuted = true
		l.muted = append(l.muted, c)
	}
	if t := time.Unix(0, u); l.nextUnmute.IsZero() || t.Before(l.nextUnmute) {
		l.nextUnmute = t
	}
	return true
}

func (c *rconn) ID() uint64           { return c.id }
func (c *rconn) LocalAddr() net.Addr  { return c.local }
func (c *rconn) RemoteAddr() net.Addr { return c.remote }

// Close shuts the socket down at once and has the loop drop unwritten answers.
func (c *rconn) Close() error {
	c.mu.Lock()
	first := !c.mu.closed && c.mu.fdOpen
	if first {
		c.mu.closed, c.mu.readDone = true, true
		unix.Shutdown(c.fd, unix.SHUT_RDWR)
	}
	c.mu.Unlock()
	if first {
		c.loop.ready(c)
	}
	return nil
}

func (c *rconn) slotLocked(seq uint64) *rslot { return &c.mu.ring[seq%uint64(len(c.mu.ring))] }

// Complete implements Responder.
func (c *rconn) Complete(seq uint64, how Outcome, resp Response) {
	c.mu.Lock()
	if seq < c.mu.head || seq >= c.mu.served || c.slotLocked(seq).state != slotPending {
		c.mu.Unlock()
		resp.release() // unknown or double answer
		return
	}
	s := c.slotLocked(seq)
	frame := s.frame
	s.frame = nil
	if c.mu.closed {
		s.state = slotFree
		c.mu.Unlock()
		resp.release()
		bytebufferpool.Put(frame)
		return
	}
	if how == Respond {
		size := resp.Size()
		if size > math.MaxInt32 {
			resp.release()
			how, resp = CloseConn, Response{}
		} else {
			binary.BigEndian.PutUint32(s.prefix[:], uint32(size))
			c.queued.Add(size + 4)
		}
	}
	s.state, s.how, s.resp = slotDone, how, resp
	wake := seq == c.mu.head
	c.mu.Unlock()
	bytebufferpool.Put(frame)
	if wake {
		c.loop.ready(c)
	}
}

// serveQueued runs on a worker: Serve every read, unserved request, in order.
func (c *rconn) serveQueued() {
	for {
		c.mu.Lock()
		if c.mu.closed || c.mu.served == c.mu.next {
			c.mu.serving = false
			c.mu.Unlock()
			return
		}
		if u := c.muted.Load(); u != 0 && time.Now().UnixNano() < u {
			// Requests read before the Mute wait for it too: the loop puts the
			// connection back on the run queue when the mute ends.
			c.mu.serving = false
			c.mu.Unlock()
			c.loop.post(func(p *loopInbox) { p.muted = append(p.muted, c) })
			return
		}
		seq := c.mu.served
		c.mu.served++
		s := c.slotLocked(seq)
		frame, received := s.frame.B, s.received
		c.mu.Unlock()
		c.r.h.Serve(Request{Conn: c, Ticket: NewTicket(c, seq), Frame: frame, Received: received})
	}
}

// hasRoom: may another request be read (invariant 6)? Loop only.
func (c *rconn) hasRoom() bool {
	return c.mu.next-c.mu.head < uint64(c.r.cfg.MaxInFlight) && c.queued.Load() <= c.r.cfg.MaxQueuedBytes && !c.mutedNow()
}

// partial: is a frame half read? Loop only.
func (c *rconn) partial() bool { return c.hdrN > 0 || c.cur != nil }

// idle: is nothing owed to the client? Loop only (head and next change on the loop).
func (c *rconn) idle() bool { return c.mu.head == c.mu.next }

// onReadable reads until EAGAIN, cutting frames, unless back-pressure or draining
// stops reading first.
func (c *rconn) onReadable() {
	if c.finalized {
		return
	}
	if c.watching {
		c.watchPeer()
		return
	}
	if c.paused || c.readStopped() {
		return
	}
	l := c.loop
	for {
		if !c.partial() && !c.hasRoom() {
			c.paused = true
			return
		}
		direct := c.cur != nil && c.curSize-len(c.cur.B) >= loopReadBuf
		var buf []byte
		if direct {
			c.growCur(loopReadBuf)
			buf = c.cur.B[len(c.cur.B):min(cap(c.cur.B), c.curSize)]
		} else {
			buf = l.scratch
		}
		n, err := unix.Read(c.fd, buf)
		switch {
		case n > 0:
			c.lastActive = l.now
			if direct {
				c.cur.B = c.cur.B[:len(c.cur.B)+n]
				if len(c.cur.B) == c.curSize {
					c.dispatch()
				}
			} else if !c.consume(buf[:n]) {
				return
			}
			if c.finalized || c.paused || c.readStopped() {
				return
			}
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			return
		case err == nil: // EOF: the peer closed (or half-closed) its side
			c.finalize("peer closed")
			return
		default:
			c.finalize("read error")
			return
		}
	}
}

func (c *rconn) readStopped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.readDone
}

// consume cuts data into frames; bytes beyond what back-pressure allows are stashed
// and reading pauses. False when the connection was closed (bad size).
func (c *rconn) consume(data []byte) bool {
	i := 0
	for i < len(data) {
		if c.cur == nil {
			if c.hdrN == 0 && !c.hasRoom() {
				c.stashBytes(data[i:])
				c.paused = true
				return true
			}
			n := copy(c.hdr[c.hdrN:], data[i:])
			c.hdrN += n
			i += n
			if c.hdrN < 4 {
				return true
			}
			c.hdrN = 0
			size := int32(binary.BigEndian.Uint32(c.hdr[:]))
			limit := c.r.cfg.MaxRequestBytes
			if n := c.maxReq.Load(); n > 0 {
				limit = n
			}
			if size < 0 || size > limit {
				c.r.log.Debug("closing connection: bad request size", "remote", c.remote, "size", size)
				c.finalize("bad size")
				return false
			}
			c.startFrame(int(size))
			if size == 0 {
				c.dispatch()
				continue
			}
		}
		n := min(c.curSize-len(c.cur.B), len(data)-i)
		c.growCur(n)
		c.cur.B = append(c.cur.B, data[i:i+n]...)
		i += n
		if len(c.cur.B) == c.curSize {
			c.dispatch()
		}
	}
	return true
}

// startFrame takes a pooled buffer for a frame of size bytes; it grows only as bytes
// arrive, so a claimed size allocates nothing until it is sent (invariant 5's spirit).
func (c *rconn) startFrame(size int) {
	b := bytebufferpool.Get()
	b.B = b.B[:0]
	if cap(b.B) < size && cap(b.B) < firstBodyAlloc {
		b.B = make([]byte, 0, min(size, firstBodyAlloc))
	}
	c.cur, c.curSize = b, size
}

// growCur makes room for n more bytes of the current frame (never beyond its size).
func (c *rconn) growCur(n int) {
	b := c.cur.B
	if cap(b)-len(b) >= n {
		return
	}
	nc := min(c.curSize, max(2*cap(b), len(b)+n))
	nb := make([]byte, len(b), nc)
	copy(nb, b)
	c.cur.B = nb
}

func (c *rconn) stashBytes(b []byte) {
	if c.stash == nil {
		c.stash = bytebufferpool.Get()
		c.stash.B = c.stash.B[:0]
	}
	c.stash.B = append(c.stash.B, b...)
}

// dispatch hands the completed frame to the handler: on the loop (ServeOnLoop) or by
// putting the connection on the run queue.
func (c *rconn) dispatch() {
	frame := c.cur
	c.cur, c.curSize = nil, 0
	c.mu.Lock()
	if c.mu.next-c.mu.head == uint64(len(c.mu.ring)) {
		c.growRingLocked()
	}
	seq := c.mu.next
	c.mu.next++
	s := c.slotLocked(seq)
	recv := c.loop.now
	s.state, s.frame, s.received = slotPending, frame, recv
	inline := c.r.cfg.ServeOnLoop
	schedule := false
	if inline {
		c.mu.served++
	} else if !c.mu.serving {
		c.mu.serving, schedule = true, true
	}
	c.mu.Unlock()
	if inline {
		c.r.h.Serve(Request{Conn: c, Ticket: NewTicket(c, seq), Frame: frame.B, Received: recv})
	} else if schedule {
		c.r.serveQ.push(c)
	}
}

// growRingLocked doubles the ring (up to MaxInFlight), keeping each seq's slot.
func (c *rconn) growRingLocked() {
	old := c.mu.ring
	ring := make([]rslot, min(2*len(old), c.r.cfg.MaxInFlight))
	for seq := c.mu.head; seq < c.mu.next; seq++ {
		ring[seq%uint64(len(ring))] = old[seq%uint64(len(old))]
	}
	c.mu.ring = ring
}

// serveUnserved puts a connection with read, unserved requests back on the run
// queue (after a Mute held them). Loop only.
func (c *rconn) serveUnserved() {
	c.mu.Lock()
	schedule := !c.mu.closed && !c.mu.serving && c.mu.served < c.mu.next
	if schedule {
		c.mu.serving = true
	}
	c.mu.Unlock()
	if schedule {
		c.r.serveQ.push(c)
	}
}

// resume restarts reading after back-pressure eased: the stash first, then the socket.
func (c *rconn) resume() {
	if c.readStopped() {
		return // draining or closed: held-back requests are not read
	}
	c.paused = false
	if c.stash != nil {
		st := c.stash
		c.stash = nil
		ok := c.consume(st.B) // re-stashes the rest if room runs out again
		bytebufferpool.Put(st)
		if !ok || c.paused {
			return
		}
	}
	c.onReadable()
}

// startDrain stops reading requests (Shutdown): answers already owed are still
// written, then the connection closes. Until then the socket is watched for the peer's
// close (watchPeer). Loop only.
func (c *rconn) startDrain() {
	c.mu.Lock()
	c.mu.readDone = true
	c.mu.Unlock()
	c.watching = true
	c.flush()
	c.watchPeer() // bytes, or the peer's close, may be waiting already
}

// watchBudget bounds the bytes one watchPeer call discards, so a client sending
// without pause during a drain cannot hold its loop: the rest waits for the loop's
// next turn (loop.rewatch).
const watchBudget = 16 * loopReadBuf

// watchPeer reads a draining connection's socket, discarding, only to see the peer go
// (EOF, or an error): the connection is then finalized at once, dropping the answers
// still owed to it, so a client that closes during the drain does not hold it until
// those come due (a parked long poll: up to its max wait). Std's reader does the same
// (stdConn.watchPeer). The socket stays registered for EPOLLIN and EPOLLRDHUP, edge-
// triggered, for the connection's life, so the loop calls this on each readable edge;
// it reads until EAGAIN, or up to watchBudget and then again on the loop's next turn
// (the peer's close may be queued behind the unread bytes, with no edge to come).
// Loop only.
func (c *rconn) watchPeer() {
	if c.finalized {
		return
	}
	l := c.loop
	for read := 0; ; {
		if read >= watchBudget {
			if !c.inRewatch {
				c.inRewatch = true
				l.rewatch = append(l.rewatch, c)
			}
			return
		}
		n, err := unix.Read(c.fd, l.scratch)
		switch {
		case n > 0:
			read += n // discarded: requests sent after the drain began are not read
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			return
		case err == nil:
			c.finalize("peer closed during drain")
			return
		default:
			c.finalize("read error")
			return
		}
	}
}

// maxIov bounds the iovecs of one writev.
const maxIov = 64

// flush writes answered responses in ticket order until none is ready or the socket
// is full, then closes the connection if it must. Loop only.
func (c *rconn) flush() {
	if c.finalized {
		return
	}
	if c.warming {
		if !c.warmDone.Swap(false) {
			return
		}
		c.warming, c.warmed = false, true
	}
	for {
		c.mu.Lock()
		if c.mu.closed {
			c.mu.Unlock()
			c.finalize("closed")
			return
		}
		for c.wend < c.mu.next && c.slotLocked(c.wend).state == slotDone {
			c.wend++
		}
		head, wend, readDone := c.mu.head, c.wend, c.mu.readDone
		c.mu.Unlock()
		if head == wend {
			if readDone && head == c.mu.next {
				c.finalize("drained")
				return
			}
			break
		}
		n, closeNow, err := c.writeSome(head, wend)
		if err != nil {
			c.r.log.Debug("closing connection: write failed", "remote", c.remote, "err", err)
			c.finalize("write error")
			return
		}
		c.retire(n)
		if closeNow {
			c.finalize("close answer")
			return
		}
		if c.wantWrite || c.warming {
			break
		}
	}
	if c.paused && c.hasRoom() {
		c.resume()
	}
}

// writeSome writes from the cursor (head, wpart, woff) through answered slots before
// wend: one writev of prefixes and byte chunks, or one sendfile when the cursor is at a
// file chunk. It returns how many slots are now fully written (to retire), and whether
// the cursor reached a CloseConn answer.
func (c *rconn) writeSome(head, wend uint64) (done int, closeNow bool, err error) {
	l := c.loop
	iov := l.iov[:0]
	// Gather. Slots in [head, wend) are owned by the loop: no lock needed to read them.
	seq, part, off := head, c.wpart, c.woff
	var file *Chunk
gather:
	for ; seq < wend && len(iov) < maxIov; seq, part, off = seq+1, 0, 0 {
		s := &c.mu.ring[seq%uint64(len(c.mu.ring))]
		switch s.how {
		case NoResponse:
			continue
		case CloseConn:
			if len(iov) == 0 {
				return int(seq - head), true, nil
			}
			break gather
		}
		if part == 0 {
			iov = appendIov(iov, s.prefix[off:])
			part, off = 1, 0
		}
		for ; part <= len(s.resp.Chunks) && len(iov) < maxIov; part, off = part+1, 0 {
			ch := &s.resp.Chunks[part-1]
			if ch.File != nil {
				if len(iov) == 0 && seq == head {
					file = ch
				}
				break gather
			}
			if int(off) < len(ch.Bytes) {
				iov = appendIov(iov, ch.Bytes[off:])
			}
		}
		if part <= len(s.resp.Chunks) {
			break // iovecs ran out mid-response
		}
	}
	var n int64
	switch {
	case len(iov) > 0:
		m, e := writev(c.fd, iov)
		clear(iov)
		if e == unix.EAGAIN {
			c.blocked()
			return c.advance(head, wend, 0), false, nil
		}
		if e != nil {
			return 0, false, e
		}
		c.wantWrite = false
		n = int64(m)
	case file != nil:
		m, e := c.sendChunk(file)
		if e != nil {
			return 0, false, e
		}
		n = m
	default:
		// Only NoResponse answers (or empty responses) were gathered: retire them.
	}
	return c.advance(head, wend, n), false, nil
}

// advance moves the cursor n bytes on, skipping NoResponse slots and zero-length parts,
// and returns how many slots from head are now fully written. Loop only.
func (c *rconn) advance(head, wend uint64, n int64) int {
	seq := head
	for seq < wend {
		s := &c.mu.ring[seq%uint64(len(c.mu.ring))]
		if s.how == NoResponse {
			seq++
			continue
		}
		if s.how == CloseConn {
			break
		}
		for c.wpart <= len(s.resp.Chunks) {
			plen := int64(4)
			if c.wpart > 0 {
				plen = s.resp.Chunks[c.wpart-1].Len()
			}
			rest := plen - c.woff
			if n < rest {
				c.woff += n
				return int(seq - head)
			}
			n -= rest
			c.wpart, c.woff = c.wpart+1, 0
		}
		c.wpart, c.woff = 0, 0
		seq++
	}
	return int(seq - head)
}

// retire frees the first done slots from head: written or silent answers.
func (c *rconn) retire(done int) {
	if done == 0 {
		return
	}
	l := c.loop
	c.mu.Lock()
	var written int64
	for range done {
		s := c.slotLocked(c.mu.head)
		if s.how == Respond {
			written += s.resp.Size() + 4
		}
		if s.resp.Release != nil {
			l.rels = append(l.rels, s.resp.Release)
		}
		s.resp, s.state = Response{}, slotFree
		c.mu.head++
	}
	c.queued.Add(-written)
	c.mu.Unlock()
	c.lastActive = l.now
	for i, r := range l.rels {
		r.Release()
		l.rels[i] = nil
	}
	l.rels = l.rels[:0]
}

func (c *rconn) blocked() {
	if !c.wantWrite {
		c.wantWrite, c.stallSince = true, c.loop.now
	}
}

// sendChunk sends the rest of the file chunk at the cursor with sendfile at an explicit
// offset, after checking that the bytes are in the page cache (else the warmer reads
// them first and the loop comes back later).
func (c *rconn) sendChunk(ch *Chunk) (int64, error) {
	off := ch.Offset + c.woff
	n := min(ch.Length-c.woff, maxSendfile)
	if n <= 0 {
		return 0, nil
	}
	step := min(n, warmStep)
	if c.warmed {
		c.warmed = false // sent once without probing: the warmer just read it
	} else if !c.loop.cached(ch.File, off, step) {
		c.warming = true
		c.warm.file, c.warm.off, c.warm.n = ch.File, off, step
		c.r.warmQ.push(c)
		return 0, nil
	}
	c.sfOff = off
	m, err := unix.Sendfile(c.fd, int(ch.File.Fd()), &c.sfOff, int(step))
	if m > 0 {
		c.wantWrite = false
		return int64(m), nil
	}
	switch {
	case err == unix.EAGAIN:
		c.blocked()
		return 0, nil
	case err == unix.EINTR:
		return 0, nil
	case err != nil:
		return 0, err
	default:
		return 0, errShortFile
	}
}

var errShortFile = fmt.Errorf("transport: sendfile: file shorter than the response promised: %w", io.ErrUnexpectedEOF)

// warmStep is how much of a cold range one warm read covers.
const warmStep = 4 << 20

// cached probes whether the first and last byte of [off, off+n) are in the page
// cache, with preadv2(RWF_NOWAIT) into a one-byte buffer. A heuristic: pages in
// between are assumed to follow their ends (segments are written and read in order).
func (l *loop) cached(f *os.File, off, n int64) bool {
	if l.noProbe {
		return true
	}
	fd := int(f.Fd())
	if !l.probe(fd, off) {
		return false
	}
	last := off + n - 1
	if last/4096 != off/4096 && !l.probe(fd, last) {
		return false
	}
	return true
}

func (l *loop) probe(fd int, off int64) bool {
	iov := unix.Iovec{Base: &l.probeBuf[0]}
	iov.SetLen(1)
	_, _, e := unix.Syscall6(unix.SYS_PREADV2, uintptr(fd), uintptr(unsafe.Pointer(&iov)), 1, uintptr(off), 0, unix.RWF_NOWAIT)
	switch e {
	case 0:
		return true
	case unix.EAGAIN:
		return false
	case unix.EINTR:
		return true
	default: // EOPNOTSUPP, ENOSYS, EINVAL: no probing here
		l.noProbe = true
		return true
	}
}

func appendIov(iov []unix.Iovec, b []byte) []unix.Iovec {
	if len(b) == 0 {
		return iov
	}
	v := unix.Iovec{Base: &b[0]}
	v.SetLen(len(b))
	return append(iov, v)
}

// writev is writev(2) over prepared iovecs, without allocating.
func writev(fd int, iov []unix.Iovec) (int, error) {
	n, _, e := unix.Syscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// finalize closes the socket and releases everything the connection holds: unwritten
// answers, unserved frames, partial frames. Loop only; idempotent. While the warmer
// reads for this connection, closing waits for it (the file must stay pinned).
func (c *rconn) finalize(why string) {
	if c.finalized {
		return
	}
	l := c.loop
	c.mu.Lock()
	c.mu.closed, c.mu.readDone = true, true
	if c.warming && !c.warmDone.Load() {
		if c.mu.fdOpen {
			unix.Shutdown(c.fd, unix.SHUT_RDWR)
		}
		c.mu.Unlock()
		return // the warmer's hand-back calls flush, which finalizes
	}
	c.finalized = true
	for seq := c.mu.head; seq < c.mu.next; seq++ {
		s := c.slotLocked(seq)
		if s.state == slotDone && s.resp.Release != nil {
			l.rels = append(l.rels, s.resp.Release)
		}
		if s.state == slotDone || seq >= c.mu.served {
			if s.frame != nil {
				bytebufferpool.Put(s.frame)
			}
			*s = rslot{}
		}
	}
	c.mu.served = c.mu.next
	c.queued.Store(0)
	c.mu.fdOpen = false
	unix.Close(c.fd)
	c.mu.Unlock()
	delete(l.conns, int32(c.fd))
	l.nconns.Add(-1)
	for i, r := range l.rels {
		r.Release()
		l.rels[i] = nil
	}
	l.rels = l.rels[:0]
	if c.cur != nil {
		bytebufferpool.Put(c.cur)
		c.cur = nil
	}
	if c.stash != nil {
		bytebufferpool.Put(c.stash)
		c.stash = nil
	}
	c.r.log.Debug("connection closed", "remote", c.remote, "why", why)
	if c.r.obs != nil {
		c.r.obs.ConnClosed(c)
	}
	if c.release != nil {
		c.release()
	}
	c.r.conns.Done()
}
