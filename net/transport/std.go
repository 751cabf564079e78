package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/bytebufferpool"
)

// Std is the Transport on Go's standard net package: per connection, one goroutine
// reads frames into pooled buffers and calls the Handler inline, and one goroutine
// writes the answers in ticket order (writev for bytes, sendfile for file ranges).
//
// Std also serves TLS listeners (TLS.Listener): the reader completes the handshake
// within HandshakeTimeout before anything else, and only then does the Handler hear of
// the connection (ConnOpened), so TLSState is complete from the first call on; a
// connection whose handshake fails is closed without the Handler ever seeing it. Over
// TLS the writer gathers each batch of answers (bytes and file ranges alike, read with
// pread) into 64 KiB buffers, so a response's size prefix, header and records leave in
// full TLS records rather than one record per piece.
//
// Lock order: Std.mu before stdConn.mu; neither is held while calling the Handler,
// a Releaser or a blocking syscall.
type Std struct {
	cfg Config
	h   Handler
	obs ConnObserver
	log *slog.Logger

	draining atomic.Bool
	nextID   atomic.Uint64
	wg       sync.WaitGroup // one per live connection
	closing  chan struct{}

	mu struct {
		sync.Mutex
		lns   map[net.Listener]struct{}
		conns map[*stdConn]struct{}
	}
}

var _ Transport = (*Std)(nil)

// NewStd returns a standard-net transport serving h. If h implements ConnObserver it
// hears of connections opening and closing. log may be nil.
func NewStd(cfg Config, h Handler, log *slog.Logger) *Std {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Std{cfg: cfg.withDefaults(), h: h, log: log, closing: make(chan struct{})}
	s.obs, _ = h.(ConnObserver)
	s.mu.lns = make(map[net.Listener]struct{})
	s.mu.conns = make(map[*stdConn]struct{})
	return s
}

// Serve accepts connections on ln until Shutdown (then it returns ErrClosed) or until
// ln fails permanently.
func (s *Std) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.draining.Load() {
		s.mu.Unlock()
		ln.Close()
		return ErrClosed
	}
	s.mu.lns[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.mu.lns, ln)
		s.mu.Unlock()
	}()
	return acceptLoop(ln, &s.draining, s.closing, s.log, s.cfg.Limiter,
		func(nc net.Conn, listener string, release func()) error {
			s.startConn(nc, listener, release)
			return nil
		},
		func(error) bool { return false })
}

func (s *Std) startConn(nc net.Conn, listener string, release func()) {
	c := &stdConn{srv: s, nc: nc, id: s.nextID.Add(1), slots: make([]slot, s.cfg.MaxInFlight), release: release, listener: listener}
	c.tls, _ = nc.(*tls.Conn)
	c.cond.L = &c.mu
	c.inlineInit()
	s.mu.Lock()
	if s.draining.Load() {
		s.mu.Unlock()
		nc.Close()
		release()
		return
	}
	s.mu.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	if c.tls == nil {
		c.opened()
	}
	go c.readLoop()
	go c.writeLoop()
}

// Shutdown implements Transport.
func (s *Std) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.draining.Swap(true) {
		close(s.closing)
	}
	for ln := range s.mu.lns {
		ln.Close()
	}
	conns := s.connsLocked()
	s.mu.Unlock()
	for _, c := range conns {
		c.wakeReader()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		conns = s.connsLocked()
		s.mu.Unlock()
		for _, c := range conns {
			c.close()
		}
		<-done
		return ctx.Err()
	}
}

func (s *Std) connsLocked() []*stdConn {
	out := make([]*stdConn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		out = append(out, c)
	}
	return out
}

// NumConns is the number of open connections.
func (s *Std) NumConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.conns)
}

type slotState uint8

const (
	slotFree    slotState = iota
	slotPending           // read, handed to the handler, not answered
	slotDone              // answered, waiting for the writer
	slotWriting           // taken by the writer
)

type slot struct {
	state  slotState
	how    Outcome
	resp   Response
	frame  *bytebufferpool.ByteBuffer
	prefix [4]byte
	sent   int // bytes of the answer an inline write wrote (std_inline.go)
}

// stdConn is one connection of Std. Request seq lives in slots[seq%len(slots)]; seqs in
// [head, next) are in flight, and next-head <= len(slots) always.
type stdConn struct {
	srv      *Std
	nc       net.Conn
	tls      *tls.Conn // nc, when the listener is TLS
	id       uint64
	exits    atomic.Int32
	open     atomic.Bool  // the Handler heard ConnOpened
	maxReq   atomic.Int32 // SetMaxRequestBytes; 0: Config.MaxRequestBytes
	muted    atomic.Int64 // Mute: no request is read before this (unix ns)
	release  func()       // the Limiter's slot
	listener string       // the name of the listener that accepted it (NamedListener)

	mu       sync.Mutex
	cond     sync.Cond // on mu: wakes the writer (head answered) and the reader (room)
	slots    []slot
	head     uint64 // next seq the writer writes
	next     uint64 // seq of the next request read
	queued   int64  // answered, unwritten response bytes
	closed   bool   // socket closed: nothing more is written; answers are released
	readDone bool   // no more requests will be read

	// writer-goroutine scratch
	bufs []([]byte)
	nb   net.Buffers // flush's view of bufs while writev consumes it
	rels []Releaser

	roomWaits int // on mu: the reader waits in waitRoom

	iw inlineWriter // std_inline.go; owned by the goroutine completing the head ticket

	// reader-goroutine state: the bytes read and not yet framed, rbuf[rpos:rend]
	rbuf       []byte
	rpos, rend int
}

// opened tells the observer of the connection.
func (c *stdConn) opened() {
	c.open.Store(true)
	if c.srv.obs != nil {
		c.srv.obs.ConnOpened(c)
	}
}

func (c *stdConn) setMaxRequestBytes(n int32) { c.maxReq.Store(n) }

func (c *stdConn) mute(until int64) { extendMute(&c.muted, until) }

// waitMuted waits out a Mute; false when the transport is draining or the connection
// closed meanwhile.
func (c *stdConn) waitMuted() bool {
	if c.muted.Load() == 0 {
		return true // never muted
	}
	for {
		d := time.Until(time.Unix(0, c.muted.Load()))
		if d <= 0 {
			return true
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-c.srv.closing:
			t.Stop()
			return false
		}
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return false
		}
	}
}

func (c *stdConn) maxRequestBytes() int32 {
	if n := c.maxReq.Load(); n > 0 {
		return n
	}
	return c.srv.cfg.MaxRequestBytes
}

func (c *stdConn) ID() uint64           { return c.id }
func (c *stdConn) LocalAddr() net.Addr  { return c.nc.LocalAddr() }
func (c *stdConn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }
func (c *stdConn) Close() error         { c.close(); return nil }

// Complete implements Responder.
func (c *stdConn) Complete(seq uint64, how Outcome, resp Response) {
	c.mu.Lock()
	if seq < c.head || seq >= c.next || c.slots[seq%uint64(len(c.slots))].state != slotPending {
		c.mu.Unlock()
		resp.release() // unknown or double answer
		return
	}
	s := &c.slots[seq%uint64(len(c.slots))]
	frame := s.frame
	s.frame = nil
	if c.closed {
		s.state = slotFree
		c.mu.Unlock()
		resp.release()
		bytebufferpool.Put(frame)
		return
	}
	s.state, s.how, s.resp = slotDone, how, resp
	if how == Respond {
		c.queued += resp.Size() + 4
	}
	if seq == c.head {
		// Nothing before seq is unwritten, so the writer is not writing: this
		// goroutine may write the answer itself.
		if c.iw.rc != nil && inlineable(how, &s.resp) {
			s.state = slotWriting
			c.mu.Unlock()
			if frame != nil {
				bytebufferpool.Put(frame)
			}
			c.writeInline(seq)
			return
		}
		c.cond.Broadcast()
	}
	c.mu.Unlock()
	if frame != nil {
		bytebufferpool.Put(frame)
	}
}

func (c *stdConn) wakeReader() {
	c.nc.SetReadDeadline(time.Now())
	c.mu.Lock()
	c.cond.Broadcast()
	c.mu.Unlock()
}

// close closes the socket and drops answered, unwritten responses. Idempotent.
func (c *stdConn) close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed, c.readDone = true, true
	var rels []Releaser
	for seq := c.head; seq < c.next; seq++ {
		s := &c.slots[seq%uint64(len(c.slots))]
		if s.state == slotDone {
			if s.resp.Release != nil {
				rels = append(rels, s.resp.Release)
			}
			s.resp, s.state = Response{}, slotFree
		}
	}
	c.queued = 0
	c.cond.Broadcast()
	c.mu.Unlock()
	for _, r := range rels {
		r.Release()
	}
	c.nc.Close()
}

// exit is called by each of the connection's two goroutines as it ends.
func (c *stdConn) exit() {
	if c.exits.Add(1) != 2 {
		return
	}
	s := c.srv
	s.mu.Lock()
	delete(s.mu.conns, c)
	s.mu.Unlock()
	if s.obs != nil && c.open.Load() {
		s.obs.ConnClosed(c)
	}
	if c.release != nil {
		c.release()
	}
	s.wg.Done()
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// handshake completes a TLS connection's handshake within HandshakeTimeout; false
// when it failed (the connection is closed).
func (c *stdConn) handshake() bool {
	ctx, cancel := context.WithTimeout(context.Background(), c.srv.cfg.HandshakeTimeout)
	defer cancel()
	done := make(chan struct{})
	defer close(done)
	go func() { // Shutdown aborts handshakes under way
		select {
		case <-c.srv.closing:
			cancel()
		case <-done:
		}
	}()
	c.nc.SetDeadline(time.Now().Add(c.srv.cfg.HandshakeTimeout))
	err := c.tls.HandshakeContext(ctx)
	c.nc.SetDeadline(time.Time{})
	if err != nil || c.srv.draining.Load() {
		c.srv.log.Debug("closing connection: TLS handshake failed", "remote", c.nc.RemoteAddr(), "err", err)
		c.close()
		return false
	}
	c.opened()
	return true
}

// readLoop reads frames and serves them inline, in order.
func (c *stdConn) readLoop() {
	defer c.exit()
	if c.tls != nil && !c.handshake() {
		c.stopReading()
		return
	}
	for {
		if !c.waitRoom() || !c.waitMuted() {
			c.stopReading()
			c.watchPeer()
			return
		}
		size, ok := c.readSize()
		if !ok {
			return
		}
		if size < 0 || size > c.maxRequestBytes() {
			c.srv.log.Debug("closing connection: bad request size", "remote", c.nc.RemoteAddr(), "size", size)
			c.close()
			return
		}
		buf, ok := c.readBody(int(size))
		if !ok {
			return
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			bytebufferpool.Put(buf)
			return
		}
		seq := c.next
		c.next++
		s := &c.slots[seq%uint64(len(c.slots))]
		s.state, s.frame = slotPending, buf
		c.mu.Unlock()
		c.srv.h.Serve(Request{Conn: c, Ticket: Ticket{r: c, seq: seq}, Frame: buf.B, Received: time.Now()})
	}
}

// watchPeer runs on the reader once reading stopped for a drain: it goes on reading,
// discarding, only to see the peer go. A client that closes its connection during the
// drain then drops the answers still owed to it at once, instead of holding the drain
// until they come due (a parked long poll: up to its max wait). It returns when the
// connection closes: the peer's close, or the writer's once everything is written.
func (c *stdConn) watchPeer() {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return
	}
	c.nc.SetReadDeadline(time.Time{})
	var scratch [512]byte
	for {
		if _, err := c.nc.Read(scratch[:]); err != nil {
			c.close()
			return
		}
	}
}

// stopReading ends reading gracefully: the writer writes what is answered and closes.
func (c *stdConn) stopReading() {
	c.mu.Lock()
	c.readDone = true
	c.cond.Broadcast()
	c.mu.Unlock()
}

// waitRoom blocks while back-pressure applies; false when reading must stop.
func (c *stdConn) waitRoom() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for !c.closed && !c.srv.draining.Load() &&
		(c.next-c.head >= uint64(len(c.slots)) || c.queued > c.srv.cfg.MaxQueuedBytes) {
		c.roomWaits++
		c.cond.Wait()
		c.roomWaits--
	}
	return !c.closed && !c.srv.draining.Load()
}

func (c *stdConn) inFlight() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.next > c.head
}

// readBufSize is a connection's read buffer: a read takes a request's size prefix
// with its body, and the prefixes and bodies of the requests behind it, in one
// system call, where reading the prefix and then the body cost two (and a
// pipelining client's requests one read each). Bodies whose rest is at least half
// of it are read straight into their frame, not copied through it.
const readBufSize = 16 << 10

// fill reads once from the connection into the read buffer, after what it holds.
func (c *stdConn) fill() (int, error) {
	if c.rbuf == nil {
		c.rbuf = make([]byte, readBufSize)
	}
	if c.rpos > 0 {
		c.rend = copy(c.rbuf, c.rbuf[c.rpos:c.rend])
		c.rpos = 0
	}
	n, err := c.nc.Read(c.rbuf[c.rend:])
	c.rend += n
	return n, err
}

// readSize reads a size prefix, waiting through idle periods while answers are owed.
func (c *stdConn) readSize() (int32, bool) {
	for c.rend-c.rpos < 4 {
		c.nc.SetReadDeadline(time.Now().Add(c.srv.cfg.IdleTimeout))
		if c.srv.draining.Load() {
			c.stopReading()
			c.watchPeer()
			return 0, false
		}
		n, err := c.fill()
		if n > 0 || err == nil {
			continue // an error with bytes comes back on the next read
		}
		if isTimeout(err) {
			if c.srv.draining.Load() {
				c.stopReading()
				c.watchPeer()
				return 0, false
			}
			if c.rend == c.rpos && c.inFlight() {
				continue // not idle: an answer is owed (long poll, fsync)
			}
			c.srv.log.Debug("closing idle connection", "remote", c.nc.RemoteAddr())
		}
		c.close()
		return 0, false
	}
	h := c.rbuf[c.rpos : c.rpos+4]
	c.rpos += 4
	return int32(uint32(h[0])<<24 | uint32(h[1])<<16 | uint32(h[2])<<8 | uint32(h[3])), true
}

// firstBodyAlloc bounds the first allocation for a frame: a client that claims a large
// size must send the bytes before the buffer grows to hold them (it doubles as they
// arrive, so a frame holds at most twice what was received, or firstBodyAlloc). A
// connection that sends a size prefix and stalls costs this much until the idle
// timeout closes it.
const firstBodyAlloc = 64 << 10

// readBody reads size bytes into a pooled buffer, growing it as bytes arrive: first
// what the read buffer holds, then small rests through the read buffer (with what
// follows them) and large ones straight into the frame.
func (c *stdConn) readBody(size int) (*bytebufferpool.ByteBuffer, bool) {
	buf := bytebufferpool.Get()
	b := buf.B[:0]
	if cap(b) < size && cap(b) < firstBodyAlloc {
		b = make([]byte, 0, min(size, firstBodyAlloc))
	}
	// room makes b's capacity at least n (n ≤ size), doubling it at least.
	room := func(n int) {
		if n > cap(b) {
			nb := make([]byte, len(b), max(n, min(size, 2*cap(b))))
			copy(nb, b)
			b = nb
		}
	}
	for len(b) < size {
		if c.rpos < c.rend {
			k := min(c.rend-c.rpos, size-len(b))
			room(len(b) + k)
			b = append(b, c.rbuf[c.rpos:c.rpos+k]...)
			c.rpos += k
			continue
		}
		c.rpos, c.rend = 0, 0
		var n int
		var err error
		if size-len(b) < readBufSize/2 {
			n, err = c.fill()
		} else {
			room(len(b) + 1)
			n, err = c.nc.Read(b[len(b):min(cap(b), size)])
			b = b[:len(b)+n]
		}
		if n == 0 && err != nil {
			buf.B = b[:0]
			bytebufferpool.Put(buf)
			if isTimeout(err) && c.srv.draining.Load() {
				c.stopReading()
				c.watchPeer()
			} else {
				c.close()
			}
			return nil, false
		}
	}
	buf.B = b
	return buf, true
}

// maxBatch bounds how many answers one writev gathers.
const maxBatch = 64

// writeLoop writes answers in ticket order.
func (c *stdConn) writeLoop() {
	defer c.exit()
	L := uint64(len(c.slots))
	for {
		c.mu.Lock()
		for !c.closed && !(c.head < c.next && c.slots[c.head%L].state == slotDone) &&
			!(c.readDone && c.head == c.next) {
			c.cond.Wait()
		}
		if c.closed {
			c.mu.Unlock()
			return
		}
		if c.head == c.next { // reading stopped and everything was written
			c.mu.Unlock()
			c.close()
			return
		}
		start, end := c.head, c.head
		for end < c.next && end-start < maxBatch && c.slots[end%L].state == slotDone {
			c.slots[end%L].state = slotWriting
			end++
		}
		c.mu.Unlock()

		closeAfter, err := c.writeBatch(start, end)

		c.mu.Lock()
		var written int64
		for seq := start; seq < end; seq++ {
			s := &c.slots[seq%L]
			if s.how == Respond {
				written += s.resp.Size() + 4
			}
			if s.resp.Release != nil {
				c.rels = append(c.rels, s.resp.Release)
			}
			s.resp, s.state, s.sent = Response{}, slotFree, 0
		}
		c.head = end
		if !c.closed {
			c.queued -= written
		}
		c.cond.Broadcast()
		c.mu.Unlock()
		for i, r := range c.rels {
			r.Release()
			c.rels[i] = nil
		}
		c.rels = c.rels[:0]
		if err != nil || closeAfter {
			if err != nil {
				c.srv.log.Debug("closing connection: write failed", "remote", c.nc.RemoteAddr(), "err", err)
			}
			c.close()
			return
		}
	}
}

// writeBatch writes the answers of seqs [start, end), which the writer owns.
func (c *stdConn) writeBatch(start, end uint64) (closeAfter bool, err error) {
	if c.tls != nil {
		return c.writeBatchTLS(start, end)
	}
	L := uint64(len(c.slots))
	c.nc.SetWriteDeadline(time.Now().Add(c.srv.cfg.WriteTimeout))
	for seq := start; seq < end; seq++ {
		s := &c.slots[seq%L]
		switch s.how {
		case NoResponse:
			continue
		case CloseConn:
			return true, c.flush()
		}
		size := s.resp.Size()
		if size > math.MaxInt32 {
			return true, c.flush()
		}
		s.prefix = [4]byte{byte(size >> 24), byte(size >> 16), byte(size >> 8), byte(size)}
		first := len(c.bufs)
		c.bufs = append(c.bufs, s.prefix[:])
		for _, ch := range s.resp.Chunks {
			if ch.File == nil {
				if len(ch.Bytes) > 0 {
					c.bufs = append(c.bufs, ch.Bytes)
				}
				continue
			}
			if err := c.flush(); err != nil {
				return false, err
			}
			if err := sendFile(c.nc, ch.File, ch.Offset, ch.Length); err != nil {
				return false, err
			}
		}
		if s.sent > 0 { // an inline write wrote its start (std_inline.go): only bytes
			c.skipSent(first, s.sent)
		}
	}
	return false, c.flush()
}

// skipSent drops the first n bytes of c.bufs[first:], an answer's byte chunks of
// which an inline write wrote n (fewer than all).
func (c *stdConn) skipSent(first, n int) {
	k := first
	for n > 0 && n >= len(c.bufs[k]) {
		n -= len(c.bufs[k])
		k++
	}
	if n > 0 {
		c.bufs[k] = c.bufs[k][n:]
	}
	m := copy(c.bufs[first:], c.bufs[k:])
	clear(c.bufs[first+m:])
	c.bufs = c.bufs[:first+m]
}

// flush writes the gathered byte chunks with writev.
func (c *stdConn) flush() error {
	if len(c.bufs) == 0 {
		return nil
	}
	// WriteTo consumes the slice header it is called on; a field's address does not
	// escape to the heap per call as a local's would.
	c.nb = c.bufs
	_, err := c.nb.WriteTo(c.nc)
	c.nb = nil
	clear(c.bufs)
	c.bufs = c.bufs[:0]
	return err
}

// copyFileRange is the portable path: read the range at explicit offsets and write it.
func copyFileRange(w io.Writer, f *os.File, off, n int64) error {
	m, err := io.Copy(w, io.NewSectionReader(f, off, n))
	if err == nil && m < n {
		err = io.ErrUnexpectedEOF
	}
	return err
}
