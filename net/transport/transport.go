// Package transport owns the broker's client connections: it frames Kafka requests and
// responses on a byte stream, hands requests to a Handler in order, writes the answers
// back in the same order (bytes with writev, file ranges with sendfile), applies
// back-pressure, closes idle connections and shuts down gracefully.
//
// It knows nothing about the Kafka schema beyond the length prefix. Two implementations
// sit behind Transport: Std (Go's net package, a reader and a writer goroutine per
// connection) and the epoll reactor. Both obey the same contract, below.
//
// Framing, both directions (every integer big-endian):
//
//	+---------------+------------------------------------------+
//	| size: int32   | payload: size bytes                       |
//	+---------------+------------------------------------------+
//	  request payload  = request header + body   (decoded by net/kafka)
//	  response payload = response header + body  (written by net/kafka as Chunks;
//	                                              the transport writes the size)
//
// Ordering, per connection:
//
//	reader:  frame#1 ─▶ Serve(#1) ─▶ frame#2 ─▶ Serve(#2) ─▶ frame#3 ─▶ Serve(#3)
//	         (inline on the read path: request n+1 is not read before Serve(n) returns)
//	handler: answers tickets #1..#3 in any order, now or later, from any goroutine
//	writer:  resp#1 ─▶ resp#2 ─▶ resp#3            (always in ticket order)
//
// Invariants every transport keeps:
//  1. Serve is called for the requests of one connection one at a time, in arrival order.
//  2. Responses leave in ticket order; a ticket answered with NoResponse leaves nothing,
//     one answered with CloseConn closes the connection once every earlier answer left.
//  3. Every Response handed to a ticket has its Releaser run exactly once: after its
//     bytes were written, or when it is dropped (connection closed, double answer).
//  4. A request frame (Request.Frame) stays valid until its ticket is answered; the
//     transport then recycles it. Handlers copy what they keep.
//  5. A size prefix < 0 or > MaxRequestBytes closes the connection before any allocation.
//  6. While a connection's answered-but-unwritten bytes exceed MaxQueuedBytes, or it has
//     MaxInFlight unanswered tickets, its next request is not read.
//  7. A connection a Limiter refuses (Config.Limiter: max.connections, per listener, per
//     IP, an IP's creation rate) is closed at accept, before the Handler hears of it;
//     an admitted connection's slot is returned exactly once, when it has ended.
//  8. After Mute(c, d), no request of c is handed to Serve before d has passed (the
//     reactor holds back requests it had already read, too); answers still leave.
//
// TLS (SSL and SASL_SSL listeners) is served by Std only: TLS (tls.go) builds Go's
// crypto/tls configuration from Kafka's ssl.* keys (PEM stores, ssl.client.auth,
// protocols, cipher suites), reloads its files without a restart, and wraps a listener;
// Std completes the handshake before the handler hears of a connection and exposes the
// peer's certificates (TLSState). The conformance suite runs against Std over TLS too.
//
// What TLS costs on Std, measured on the 2-core development machine (AMD EPYC,
// loopback, BenchmarkTransport with 5 requests in flight per connection, std and
// std-tls run alternately A B A B, 2 s each, client and server in one process so the
// CPU figure counts both ends' encryption; figures are the two runs of each):
//
//	workload                     plaintext Std                  TLS 1.3 (AES-128-GCM)
//	echo 16 KiB, 1 conn          79k, 76k req/s; 12.7, 13.5 µs  33k, 34k req/s; 32.9, 33.2 µs CPU/req
//	echo 16 KiB, 16 conns        143k, 127k; 10.8, 10.4 µs      67k, 66k; 28.3, 27.5 µs
//	file 16 KiB, 16 conns        104k, 90k; 18.0, 17.9 µs       62k, 65k; 28.9, 28.1 µs
//	echo 100 B, 16 conns         207k, 214k; 7.7, 7.8 µs        221k, 242k; 6.8, 6.8 µs
//	file 100 B, 16 conns         120k, 71k; 15.8, 16.9 µs       201k, 242k; 7.4, 7.3 µs
//
// For large answers TLS halves throughput and adds about 17 µs of CPU per 16 KiB
// request (both ends' AES-GCM and record framing); file ranges lose sendfile and are
// copied through user space. For small answers TLS is no slower in this benchmark: its
// writer sends a batch of answers, file ranges included (pread), in one write where the
// plaintext path makes a sendfile per file range, and the benchmark's TLS client reads
// many answers per record where the plaintext client makes a read per answer.
//
// Decision: the reactor stays plaintext. TLS there needs either a non-blocking TLS
// record layer (crypto/tls wants a blocking net.Conn, so a goroutine per connection,
// which is what the reactor exists to avoid) or kernel TLS (crypto/tls does not export
// the session's traffic keys); and the cost above is the cipher's, which a reactor would
// pay as well. Std serves TLS listeners; the reactor refuses them (ErrUnsupportedConn).
// Reproduce:
//
//	go test -c -o /tmp/transport.test ./net/transport && cd net/transport && for i in 1 2; do
//	  for k in 'std$' 'std-tls$'; do /tmp/transport.test -test.run '^$' -test.benchmem \
//	    -test.bench "Transport/(echo|sendfile)/(100|16384)/conns=(1|16)/$k" -test.benchtime 2s; done; done
package transport

import (
	"context"
	"errors"
	"net"
	"os"
	"time"
)

// Errors returned by transports.
var (
	// ErrClosed is returned by Serve after Shutdown.
	ErrClosed = errors.New("transport: closed")
)

// Chunk is one piece of a response: either Bytes, or Length bytes of File starting at
// Offset (sent with sendfile at that explicit offset; the file's own position is never
// used or moved).
type Chunk struct {
	Bytes  []byte
	File   *os.File
	Offset int64
	Length int64
}

// Len is the number of bytes the chunk puts on the wire.
func (c Chunk) Len() int64 {
	if c.File != nil {
		return c.Length
	}
	return int64(len(c.Bytes))
}

// Releaser is run once after a response was written or dropped. It is how pooled
// response buffers return to their pool and pinned segment slices are released.
type Releaser interface{ Release() }

// ReleaseFunc adapts a function to Releaser.
type ReleaseFunc func()

// Release calls f.
func (f ReleaseFunc) Release() { f() }

// Response is an answer: the payload is the concatenation of Chunks (the transport
// writes the 4-byte size prefix in front of it). Release, if set, runs exactly once.
type Response struct {
	Chunks  []Chunk
	Release Releaser
}

// Size is the payload size, known before anything is written.
func (r *Response) Size() int64 {
	var n int64
	for i := range r.Chunks {
		n += r.Chunks[i].Len()
	}
	return n
}

// release runs the Releaser if any.
func (r *Response) release() {
	if r.Release != nil {
		r.Release.Release()
		r.Release = nil
	}
}

// Outcome says how a ticket was answered.
type Outcome uint8

const (
	// Respond: write the Response.
	Respond Outcome = iota + 1
	// NoResponse: nothing is written (acks=0 produce); later answers still leave in order.
	NoResponse
	// CloseConn: close the connection after every earlier answer was written.
	CloseConn
)

// Responder is implemented by a transport's connection. Complete delivers the answer to
// request number seq; it may be called from any goroutine, exactly once per seq (a
// second answer is released and ignored). It never blocks on the network.
type Responder interface {
	Complete(seq uint64, how Outcome, resp Response)
}

// Ticket is the handle of one request, answered exactly once with Respond, NoResponse
// or CloseConn, now or later, from any goroutine. The zero Ticket discards answers.
type Ticket struct {
	r   Responder
	seq uint64
}

// NewTicket returns the ticket of request seq on r (for transports and tests).
func NewTicket(r Responder, seq uint64) Ticket { return Ticket{r: r, seq: seq} }

// Seq is the request's number on its connection (0, 1, 2, ...).
func (t Ticket) Seq() uint64 { return t.seq }

// Respond answers with resp.
func (t Ticket) Respond(resp Response) {
	if t.r == nil {
		resp.release()
		return
	}
	t.r.Complete(t.seq, Respond, resp)
}

// NoResponse answers with nothing on the wire.
func (t Ticket) NoResponse() {
	if t.r != nil {
		t.r.Complete(t.seq, NoResponse, Response{})
	}
}

// CloseConn answers by closing the connection once earlier answers left.
func (t Ticket) CloseConn() {
	if t.r != nil {
		t.r.Complete(t.seq, CloseConn, Response{})
	}
}

// SetMaxRequestBytes changes the largest request size prefix c accepts from now on
// (invariant 5 with n instead of MaxRequestBytes; n <= 0 restores MaxRequestBytes). The
// SASL handler lowers it to sasl.server.max.receive.size when a connection opens and
// restores it once the connection authenticated, so an unauthenticated client cannot
// make the broker buffer a 100 MiB frame. It applies to size prefixes read after the
// call (the reactor may already have read the next frame of a pipelining client). It
// reports false for connections of other Conn implementations.
func SetMaxRequestBytes(c Conn, n int32) bool {
	if l, ok := c.(interface{ setMaxRequestBytes(int32) }); ok {
		l.setMaxRequestBytes(n)
		return true
	}
	return false
}

// Conn is what a handler sees of a connection.
type Conn interface {
	// ID is unique among the transport's connections for its lifetime.
	ID() uint64
	LocalAddr() net.Addr
	RemoteAddr() net.Addr
	// Close closes the connection at once; unwritten answers are dropped (released).
	Close() error
}

// Request is one framed request, handed to Handler.Serve.
type Request struct {
	Conn   Conn
	Ticket Ticket
	// Frame is the payload after the size prefix. Valid until Ticket is answered.
	Frame []byte
	// Received is when the frame's last byte was read.
	Received time.Time
}

// Handler serves requests. Serve runs on the connection's read path (invariant 1), so
// it must not block for long: work that waits (fsync, long poll) answers the ticket
// later from another goroutine.
type Handler interface {
	Serve(req Request)
}

// ConnObserver may be implemented by a Handler to hear of connections opening and
// closing (metrics, per-connection state). Called from the connection's goroutines.
type ConnObserver interface {
	ConnOpened(c Conn)
	ConnClosed(c Conn)
}

// Transport accepts connections on a listener and serves them with a Handler.
type Transport interface {
	// Serve accepts on ln until Shutdown; it returns ErrClosed after Shutdown, or the
	// listener's error.
	Serve(ln net.Listener) error
	// Shutdown stops accepting, stops reading new requests, lets requests already read
	// be answered and their answers leave, then closes every connection. When ctx ends
	// first, remaining connections are closed at once. It waits for every connection
	// goroutine to exit.
	Shutdown(ctx context.Context) error
}

// Config bounds a transport. Zero fields take the defaults below (Kafka's names).
type Config struct {
	// MaxRequestBytes is socket.request.max.bytes (default 100 MiB).
	MaxRequestBytes int32
	// IdleTimeout is connections.max.idle.ms (default 10 minutes): a connection that
	// has no unanswered request and sends nothing for this long is closed.
	IdleTimeout time.Duration
	// MaxQueuedBytes: reading pauses while answered-but-unwritten bytes exceed it
	// (default 16 MiB).
	MaxQueuedBytes int64
	// MaxInFlight: reading pauses while this many tickets are unanswered or unwritten
	// (default 128).
	MaxInFlight int
	// WriteTimeout bounds one write to a client that does not read (default 60s).
	WriteTimeout time.Duration
	// HandshakeTimeout bounds a TLS handshake (Std over a TLS listener; default 10s).
	HandshakeTimeout time.Duration
	// InlineWrites (Std on a plain socket): an answer completing the connection's
	// oldest unwritten ticket is written by the goroutine completing it, with a
	// writev that does not wait, not by waking the connection's writer
	// (std_inline.go).
	InlineWrites bool
	// Limiter, if set, applies connection limits at accept (limits.go); one Limiter
	// may be shared by several transports. Name listeners with NamedListener for its
	// per-listener limits.
	Limiter *Limiter
}

// Defaults of Config.
const (
	DefaultMaxRequestBytes  = 100 << 20
	DefaultIdleTimeout      = 10 * time.Minute
	DefaultMaxQueuedBytes   = 16 << 20
	DefaultMaxInFlight      = 128
	DefaultWriteTimeout     = 60 * time.Second
	DefaultHandshakeTimeout = 10 * time.Second
)

func (c Config) withDefaults() Config {
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxQueuedBytes <= 0 {
		c.MaxQueuedBytes = DefaultMaxQueuedBytes
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	return c
}
