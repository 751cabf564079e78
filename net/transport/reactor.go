package transport

import (
	"errors"
	"fmt"
	"log/slog"
)

// The reactor (Linux only) is the second Transport: a few event loops, each a goroutine
// locked to an OS thread with its own edge-triggered epoll instance, own every client
// socket. It keeps the same contract as Std (see the package doc); what differs is who
// runs what:
//
//	acceptor (per listener) ── dup'd non-blocking fd ──▶ least-loaded loop
//
//	loop (one OS thread, epoll ET):
//	  EPOLLIN  ─▶ read until EAGAIN into a 64 KiB loop buffer ─▶ cut frames into pooled
//	             buffers ─▶ slot ring (seq) ─▶ run queue ─▶ worker: Serve(#n), Serve(#n+1)..
//	  eventfd  ─▶ connections whose head answer arrived (Complete, from any goroutine)
//	  write    ─▶ writev(size prefixes + byte chunks) / sendfile(file, &off, n)
//	             EAGAIN ─▶ wait for EPOLLOUT (registered once, edge-triggered)
//	  tick     ─▶ idle, stalled-writer and half-frame connections are closed
//	  drain    ─▶ requests are no longer read; the socket is read, discarding, until the
//	             owed answers are written or the peer goes (which closes it at once)
//
// Serve runs on a worker pool, not on the loop, because the broker's Serve can block:
// Produce takes the partition's lock and pwrites; CreateTopics, DeleteTopics,
// CreatePartitions and the config APIs append to the metadata log under a mutex and
// fdatasync it. A connection is on the run queue at most once, and the worker that
// takes it serves its read requests one at a time, in order, so invariant 1 holds; other
// connections are served by other workers meanwhile. ServeOnLoop runs Serve inline on
// the loop instead, for handlers that never block.
//
// Cold file ranges are warmed, not sent, off the loop: before each sendfile the loop
// probes the first and last byte of the range it is about to send with
// preadv2(RWF_NOWAIT); when either is not in the page cache the connection's writing is
// parked, a warmer goroutine reads the range (up to 4 MiB) into the page cache, and the
// loop resumes with a sendfile that no longer waits for the disk. This keeps one writer
// per socket (the loop) and never hands a socket to another thread; the cost is a copy
// of the cold bytes into a scratch buffer, small beside the disk read itself.

// ErrReactorUnsupported is returned by NewReactor where epoll is not available.
var ErrReactorUnsupported = errors.New("transport: the reactor needs Linux (epoll)")

// ErrUnsupportedConn is returned by Reactor.Serve when its listener yields connections
// that are not plain sockets (a TLS listener): serve those with Std.
var ErrUnsupportedConn = errors.New("transport: the reactor serves plain TCP sockets only; use Std for TLS")

// ReactorConfig configures a Reactor. Zero fields take defaults.
type ReactorConfig struct {
	Config
	// Loops is the number of event loops (default: runtime.NumCPU()).
	Loops int
	// Workers is the number of goroutines that run Handler.Serve (default 8, Kafka's
	// num.io.threads). Ignored with ServeOnLoop.
	Workers int
	// ServeOnLoop calls Handler.Serve on the event loop itself. Only for handlers that
	// never block: a blocked Serve stalls every connection of its loop.
	ServeOnLoop bool
	// UnlockedLoops runs the event loops as ordinary goroutines instead of locking each
	// to an OS thread. An idle loop parks in Go's poller either way; a locked one costs
	// two OS thread switches per wake-up (the runtime hands its P to the locked thread
	// and back), an unlocked one a goroutine switch. Measured on the transport
	// benchmarks, unlocked loops answered one pipelined connection of 100-byte requests
	// 2.1x faster (worker pool) at less than half the CPU per request.
	UnlockedLoops bool
}

// DefaultWorkers is ReactorConfig.Workers' default.
const DefaultWorkers = 8

// Transport kinds accepted by New (the --transport flag and the transport properties
// key).
const (
	KindStd     = "std"
	KindReactor = "reactor"
)

// New returns the transport of the given kind ("std" or "reactor") serving h. For "std",
// cfg.Loops, cfg.Workers and cfg.ServeOnLoop are ignored. log may be nil.
func New(kind string, cfg ReactorConfig, h Handler, log *slog.Logger) (Transport, error) {
	switch kind {
	case KindStd, "":
		return NewStd(cfg.Config, h, log), nil
	case KindReactor:
		r, err := NewReactor(cfg, h, log)
		if err != nil {
			return nil, err
		}
		return r, nil
	default:
		return nil, fmt.Errorf("transport: unknown kind %q (want %q or %q)", kind, KindStd, KindReactor)
	}
}
