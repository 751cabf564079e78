package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Reactor is the epoll Transport (see ReactorConfig and the overview in reactor.go).
//
// Goroutines: one acceptor per Serve call, Loops event loops (each locked to an OS
// thread unless UnlockedLoops, owning its connections' sockets: only a loop reads, writes or closes them),
// Workers serve goroutines, and warmers that read cold file ranges into the page cache.
//
// Lock order: Reactor.mu, then loop.mu or rconn.mu (never both of those), then
// connQueue.mu. None is held while calling the Handler, a Releaser or a blocking
// syscall.
type Reactor struct {
	cfg ReactorConfig
	h   Handler
	obs ConnObserver
	log *slog.Logger

	loops   []*loop
	serveQ  connQueue // connections with requests to Serve (unless ServeOnLoop)
	warmQ   connQueue // connections waiting for a cold file range to be read
	workers sync.WaitGroup

	draining atomic.Bool
	closing  chan struct{}
	nextID   atomic.Uint64
	rr       atomic.Uint32
	conns    sync.WaitGroup // one per live connection
	loopsWG  sync.WaitGroup
	warms    atomic.Uint64 // cold ranges read by the warmers

	mu struct {
		sync.Mutex
		lns     map[net.Listener]struct{}
		stopped bool
	}
}

var _ Transport = (*Reactor)(nil)

// warmers is the number of goroutines reading cold file ranges.
const warmers = 2

// NewReactor starts the event loops and workers of a reactor serving h. If h
// implements ConnObserver it hears of connections opening and closing (called on the
// connection's loop). log may be nil. Shutdown stops every goroutine it started.
func NewReactor(cfg ReactorConfig, h Handler, log *slog.Logger) (*Reactor, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.Config = cfg.Config.withDefaults()
	if cfg.Loops <= 0 {
		cfg.Loops = runtime.NumCPU()
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	r := &Reactor{cfg: cfg, h: h, log: log, closing: make(chan struct{})}
	r.obs, _ = h.(ConnObserver)
	r.mu.lns = make(map[net.Listener]struct{})
	r.serveQ.init()
	r.warmQ.init()
	for i := 0; i < cfg.Loops; i++ {
		l, err := newLoop(r, i)
		if err != nil {
			for _, l := range r.loops {
				l.closeFDs()
			}
			return nil, err
		}
		r.loops = append(r.loops, l)
	}
	for _, l := range r.loops {
		r.loopsWG.Add(1)
		go l.run()
	}
	if !cfg.ServeOnLoop {
		for range cfg.Workers {
			r.workers.Add(1)
			go r.serveWorker()
		}
	}
	for range warmers {
		r.workers.Add(1)
		go r.warmWorker()
	}
	return r, nil
}

// Serve accepts connections on ln until Shutdown (then it returns ErrClosed) or until
// ln fails permanently. Connections that are not plain sockets end it with
// ErrUnsupportedConn.
func (r *Reactor) Serve(ln net.Listener) error {
	r.mu.Lock()
	if r.draining.Load() {
		r.mu.Unlock()
		ln.Close()
		return ErrClosed
	}
	r.mu.lns[ln] = struct{}{}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.mu.lns, ln)
		r.mu.Unlock()
	}()
	return acceptLoop(ln, &r.draining, r.closing, r.log, r.cfg.Limiter, r.adopt, func(err error) bool {
		if errors.Is(err, ErrUnsupportedConn) {
			ln.Close()
			return true
		}
		return false
	})
}

// adopt moves an accepted connection's socket out of Go's poller onto a loop.
// release is the Limiter's slot; it is called once the connection ends (or here, when
// it is not adopted after all: a nil error without adoption releases it too).
func (r *Reactor) adopt(nc net.Conn, listener string, release func()) error {
	defer nc.Close()
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return fmt.Errorf("%w (got %T)", ErrUnsupportedConn, nc)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnsupportedConn, err)
	}
	fd := -1
	var derr error
	if err := raw.Control(func(s uintptr) {
		fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return fmt.Errorf("transport: reactor: %w", err)
	}
	if derr != nil {
		return fmt.Errorf("transport: reactor: dup: %w", derr)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return fmt.Errorf("transport: reactor: %w", err)
	}
	l := r.pickLoop()
	c := newRconn(r, l, fd, nc.LocalAddr(), nc.RemoteAddr())
	c.release, c.listener = release, listener
	r.mu.Lock()
	if r.draining.Load() {
		r.mu.Unlock()
		unix.Close(fd)
		release()
		return nil
	}
	r.conns.Add(1)
	l.nconns.Add(1)
	r.mu.Unlock()
	l.post(func(p *loopInbox) { p.conns = append(p.conns, c) })
	return nil
}

// pickLoop returns the loop with the fewest connections, starting the scan at a
// rotating index so ties spread round-robin.
func (r *Reactor) pickLoop() *loop {
	n := len(r.loops)
	start := int(r.rr.Add(1)) % n
	best := r.loops[start]
	for i := 1; i < n; i++ {
		l := r.loops[(start+i)%n]
		if l.nconns.Load() < best.nconns.Load() {
			best = l
		}
	}
	return best
}

// Shutdown implements Transport.
func (r *Reactor) Shutdown(ctx context.Context) error {
	r.mu.Lock()
	if !r.draining.Swap(true) {
		close(r.closing)
	}
	for ln := range r.mu.lns {
		ln.Close()
	}
	r.mu.Unlock()
	for _, l := range r.loops {
		l.post(func(p *loopInbox) { p.drain = true })
	}
	done := make(chan struct{})
	go func() { r.conns.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		for _, l := range r.loops {
			l.post(func(p *loopInbox) { p.closeAll = true })
		}
		<-done
		err = ctx.Err()
	}
	r.mu.Lock()
	stop := !r.mu.stopped
	r.mu.stopped = true
	r.mu.Unlock()
	if stop {
		for _, l := range r.loops {
			l.post(func(p *loopInbox) { p.stop = true })
		}
		r.serveQ.close()
		r.warmQ.close()
	}
	r.loopsWG.Wait()
	r.workers.Wait()
	return err
}

// NumConns is the number of open connections.
func (r *Reactor) NumConns() int {
	n := 0
	for _, l := range r.loops {
		n += int(l.nconns.Load())
	}
	return n
}

// serveWorker serves connections taken from the run queue.
func (r *Reactor) serveWorker() {
	defer r.workers.Done()
	for {
		c, ok := r.serveQ.pop()
		if !ok {
			return
		}
		c.serveQueued()
	}
}

// warmWorker reads cold file ranges into the page cache, then hands the connection
// back to its loop.
func (r *Reactor) warmWorker() {
	defer r.workers.Done()
	buf := make([]byte, 256<<10)
	for {
		c, ok := r.warmQ.pop()
		if !ok {
			return
		}
		f, off, n := c.warm.file, c.warm.off, c.warm.n
		r.warms.Add(1)
		for n > 0 {
			m, err := f.ReadAt(buf[:min(n, int64(len(buf)))], off)
			if m <= 0 || err != nil {
				break // the loop's sendfile reports the error
			}
			off += int64(m)
			n -= int64(m)
		}
		c.warmDone.Store(true)
		c.loop.ready(c)
	}
}

// connQueue is an unbounded FIFO of connections (a growing ring), for workers.
type connQueue struct {
	mu     sync.Mutex
	cond   sync.Cond
	buf    []*rconn
	head   int
	n      int
	closed bool
}

func (q *connQueue) init() {
	q.cond.L = &q.mu
	q.buf = make([]*rconn, 64)
}

func (q *connQueue) push(c *rconn) {
	q.mu.Lock()
	if q.n == len(q.buf) {
		nb := make([]*rconn, 2*len(q.buf))
		for i := 0; i < q.n; i++ {
			nb[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = nb, 0
	}
	q.buf[(q.head+q.n)%len(q.buf)] = c
	q.n++
	q.mu.Unlock()
	q.cond.Signal()
}

// pop waits for a connection; false once the queue is closed and empty.
func (q *connQueue) pop() (*rconn, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.n == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.n == 0 {
		return nil, false
	}
	c := q.buf[q.head]
	q.buf[q.head] = nil
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return c, true
}

func (q *connQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

// Loop states, for waking a loop with at most one eventfd write per sleep.
const (
	loopAwake int32 = iota
	loopSleeping
	loopNotified
	loopStopped
)

// loopInbox is what other goroutines hand a loop.
type loopInbox struct {
	conns    []*rconn // new connections to register
	ready    []*rconn // connections to write (head answered), close or resume
	muted    []*rconn // connections whose worker stopped serving for a Mute
	drain    bool     // Shutdown began
	closeAll bool     // Shutdown's deadline passed
	stop     bool     // every connection is gone: exit
}

// loop is one event loop. Fields below mu belong to the loop goroutine.
type loop struct {
	r      *Reactor
	id     int
	epfd   int
	pf     *os.File        // epfd, registered with Go's poller
	rc     syscall.RawConn // of pf
	pollFn func(fd uintptr) bool
	n      int   // pollFn's results
	werr   error // pollFn's results
	efd    int   // eventfd: wakes epoll_wait
	state  atomic.Int32
	nconns atomic.Int32

	mu struct {
		sync.Mutex
		loopInbox
	}

	conns    map[int32]*rconn
	inbox    loopInbox // swapped with mu.loopInbox each turn
	draining bool
	events   []unix.EpollEvent
	scratch  []byte // read buffer shared by the loop's connections
	iov      []unix.Iovec
	rels     []Releaser
	efdBuf   [8]byte
	noProbe  bool // preadv2(RWF_NOWAIT) unsupported: treat every range as cached
	probeBuf [1]byte
	now      time.Time
	// muted are the connections whose reading a Mute paused; nextUnmute is the
	// earliest end of their mutes (zero: none).
	muted      []*rconn
	nextUnmute time.Time
	// rewatch are the draining connections whose watchPeer stopped at its budget with
	// bytes left unread; rewatching is the list being worked through.
	rewatch, rewatching []*rconn
}

// loopReadBuf is the size of a loop's read buffer; frames left to read beyond it go
// straight into their own buffer.
const loopReadBuf = 64 << 10

func newLoop(r *Reactor, id int) (*loop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("transport: epoll_create1: %w", err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("transport: eventfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: int32(efd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, efd, &ev); err == nil {
		err = unix.SetNonblock(epfd, true)
	}
	if err != nil {
		unix.Close(epfd)
		unix.Close(efd)
		return nil, fmt.Errorf("transport: epoll setup: %w", err)
	}
	l := &loop{
		r: r, id: id, epfd: epfd, efd: efd,
		conns:   make(map[int32]*rconn),
		events:  make([]unix.EpollEvent, 256),
		scratch: make([]byte, loopReadBuf),
		iov:     make([]unix.Iovec, 0, maxIov),
	}
	// The epoll fd is itself pollable: Go's poller watches it, so an idle loop parks
	// like any goroutine and gives its P back at once (see park).
	l.pf = os.NewFile(uintptr(epfd), "epoll")
	rc, err := l.pf.SyscallConn()
	if err != nil {
		l.closeFDs()
		return nil, fmt.Errorf("transport: epoll fd: %w", err)
	}
	l.rc = rc
	l.pollFn = func(fd uintptr) bool {
		l.n, l.werr = unix.EpollWait(int(fd), l.events, 0)
		return l.n != 0 || (l.werr != nil && l.werr != unix.EINTR)
	}
	return l, nil
}

func (l *loop) closeFDs() {
	if l.pf != nil {
		l.pf.Close()
	} else {
		unix.Close(l.epfd)
	}
	unix.Close(l.efd)
}

// park waits for events until the deadline. Blocking in epoll_wait itself would keep
// this thread's P in a system call until the runtime's monitor retakes it (20 µs to
// 10 ms later), stranding the goroutines the loop just woke (workers, the handler's
// waiters, local clients); parked in Go's poller, the P is handed off at once.
func (l *loop) park(until time.Time) (int, error) {
	l.n, l.werr = 0, nil
	l.pf.SetReadDeadline(until)
	err := l.rc.Read(l.pollFn)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		// Not pollable here: block in the kernel instead.
		return unix.EpollWait(l.epfd, l.events, max(0, int(time.Until(until)/time.Millisecond)+1))
	}
	return l.n, l.werr
}

// post changes the loop's inbox and wakes it.
func (l *loop) post(f func(*loopInbox)) {
	l.mu.Lock()
	f(&l.mu.loopInbox)
	l.mu.Unlock()
	l.wake()
}

// ready queues c for the loop's attention (its head answer arrived, it was closed, or
// its warm read finished). Any goroutine; never blocks; queues c at most once.
func (l *loop) ready(c *rconn) {
	if !c.inReady.CompareAndSwap(false, true) {
		return
	}
	l.mu.Lock()
	l.mu.ready = append(l.mu.ready, c)
	l.mu.Unlock()
	l.wake()
}

func (l *loop) wake() {
	if l.state.CompareAndSwap(loopSleeping, loopNotified) {
		var one = [8]byte{1}
		unix.Write(l.efd, one[:])
	}
}

// tick is how often the loop looks for idle and stalled connections.
func (l *loop) tick() time.Duration {
	t := min(l.r.cfg.IdleTimeout, l.r.cfg.WriteTimeout) / 4
	return max(10*time.Millisecond, min(t, time.Second))
}

func (l *loop) run() {
	if !l.r.cfg.UnlockedLoops {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	defer l.r.loopsWG.Done()
	defer func() {
		l.state.Store(loopStopped)
		l.closeFDs()
	}()
	tick := l.tick()
	l.now = time.Now()
	nextSweep := l.now.Add(tick)
	for {
		l.state.Store(loopSleeping)
		l.mu.Lock()
		pending := len(l.mu.conns) > 0 || len(l.mu.ready) > 0 || l.mu.drain || l.mu.closeAll || l.mu.stop ||
			len(l.rewatch) > 0
		l.mu.Unlock()
		var n int
		var err error
		if pending {
			n, err = unix.EpollWait(l.epfd, l.events, 0)
		} else {
			until := nextSweep
			if !l.nextUnmute.IsZero() && l.nextUnmute.Before(until) {
				until = l.nextUnmute
			}
			n, err = l.park(until)
		}
		l.state.Store(loopAwake)
		l.now = time.Now()
		if err != nil && err != unix.EINTR {
			l.r.log.Error("epoll_wait failed; loop stops", "loop", l.id, "err", err)
			l.closeAll()
			return
		}
		for i := 0; i < n; i++ {
			ev := &l.events[i]
			if ev.Fd == int32(l.efd) {
				unix.Read(l.efd, l.efdBuf[:])
				continue
			}
			c := l.conns[ev.Fd]
			if c == nil {
				continue
			}
			if ev.Events&unix.EPOLLERR != 0 {
				c.finalize("socket error")
				continue
			}
			if ev.Events&unix.EPOLLOUT != 0 && c.wantWrite {
				c.flush()
			}
			if ev.Events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP) != 0 {
				c.onReadable()
			}
		}
		if len(l.rewatch) > 0 {
			l.watchAgain()
		}
		if l.runInbox() {
			return
		}
		if !l.nextUnmute.IsZero() && !l.now.Before(l.nextUnmute) {
			l.unmute()
		}
		if !l.now.Before(nextSweep) {
			l.sweep()
			nextSweep = l.now.Add(tick)
		}
	}
}

// runInbox handles what other goroutines posted; true when the loop must exit.
func (l *loop) runInbox() bool {
	l.mu.Lock()
	l.inbox, l.mu.loopInbox = l.mu.loopInbox, loopInbox{conns: l.inbox.conns[:0], ready: l.inbox.ready[:0], muted: l.inbox.muted[:0]}
	l.mu.Unlock()
	in := &l.inbox
	for i, c := range in.muted {
		in.muted[i] = nil
		if !c.finalized && !c.mutedNow() {
			c.serveUnserved()
		}
	}
	for i, c := range in.conns {
		l.register(c)
		in.conns[i] = nil
	}
	for i, c := range in.ready {
		in.ready[i] = nil
		c.inReady.Store(false)
		c.flush()
	}
	if in.drain && !l.draining {
		l.draining = true
		for _, c := range l.conns {
			c.startDrain()
		}
	}
	if in.closeAll {
		l.closeAll()
	}
	if in.stop {
		l.closeAll()
		return true
	}
	return false
}

// watchAgain goes on reading the draining connections whose watchPeer stopped at its
// budget (see rconn.watchPeer).
func (l *loop) watchAgain() {
	list := l.rewatch
	l.rewatch, l.rewatching = l.rewatching[:0], list
	for i, c := range list {
		list[i] = nil
		c.inRewatch = false
		c.watchPeer()
	}
}

// unmute resumes the muted connections whose mute ended.
func (l *loop) unmute() {
	list := l.muted
	l.muted, l.nextUnmute = nil, time.Time{}
	for _, c := range list {
		c.inMuted = false
	}
	for _, c := range list {
		if c.finalized || c.mutedNow() { // mutedNow puts a still muted c back on the list
			continue
		}
		c.serveUnserved()
		if c.paused && c.hasRoom() {
			c.resume()
		}
	}
}

func (l *loop) closeAll() {
	for _, c := range l.conns {
		c.finalize("shutdown")
	}
}

// register adds a new connection to epoll: readable, writable, peer-closed, all
// edge-triggered, once for the connection's life.
func (l *loop) register(c *rconn) {
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(c.fd)}
	l.conns[int32(c.fd)] = c
	c.lastActive = l.now
	if l.r.obs != nil {
		l.r.obs.ConnOpened(c)
	}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, c.fd, &ev); err != nil {
		l.r.log.Warn("epoll_ctl add failed", "err", err)
		c.finalize("epoll_ctl")
		return
	}
	if l.draining {
		c.startDrain()
		return
	}
	c.onReadable() // bytes may have arrived before registration
}

// sweep closes connections idle for IdleTimeout (nothing owed, nothing sent), stalled
// in the middle of a frame for IdleTimeout, or unable to write for WriteTimeout.
func (l *loop) sweep() {
	cfg := &l.r.cfg
	for _, c := range l.conns {
		switch {
		case c.wantWrite && l.now.Sub(c.stallSince) > cfg.WriteTimeout:
			c.finalize("write timeout")
		case l.now.Sub(c.lastActive) > cfg.IdleTimeout && (c.partial() || c.idle()):
			c.finalize("idle")
		}
	}
}
