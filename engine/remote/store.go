package remote

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// objectStore is the little of S3 the storage manager uses. Keys are full
// object keys (prefix included). Errors carry the S3 error code (codeOf).
type objectStore interface {
	// put stores size bytes of r under key (one PUT, or a multipart upload
	// of partSize parts for a larger r).
	put(ctx context.Context, key string, r io.ReaderAt, size int64) error
	// get opens bytes [start, end] of key (end inclusive; end < 0: to the
	// object's end). The body is read under ctx.
	get(ctx context.Context, key string, start, end int64) (io.ReadCloser, error)
	// remove deletes key; a key that does not exist is no error (S3's
	// DeleteObject answers 204 for it).
	remove(ctx context.Context, key string) error
	// codeOf is the S3 error code an error of this client carries, or "".
	codeOf(err error) string
}

// newTransport is the client's HTTP transport: connections reused across
// calls, and no wait for a dial or an answer's headers longer than the
// attempt timeout (a body's progress is watched by idleBody; uploads lift
// the wait for headers, see awsStore.uploads).
func newTransport(cfg *Config) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: cfg.AttemptTimeout, KeepAlive: 30 * time.Second}).DialContext
	if strings.HasPrefix(strings.ToLower(cfg.Endpoint), "http://") {
		t.DialContext = lowWaterDial(t.DialContext)
	}
	t.ResponseHeaderTimeout = cfg.AttemptTimeout
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 64
	// Segments are mostly compressed by their producers; a gzip layer would
	// cost CPU for nothing and hide the body's length.
	t.DisableCompression = true
	return t
}

// Reading a large object body, the client is woken for every few dozen KiB
// the store has sent (versitygw writes 32 KiB at a time): a 4 MiB chunk
// took about 100 reads, 70 more that found nothing and as many waits in
// epoll (strace of BenchmarkRemoteFetch/store). A connection of plain HTTP
// therefore asks the kernel (SO_RCVLOWAT, lowWaterConn) to wake its reader
// only once lowWater bytes are there, for a read of at least lowWaterFrom
// bytes, which net/http makes only into a body whose bytes are on their
// way: a read into a body with a length is cut to the bytes left of it (or
// of a chunk), a read of the headers goes into a 4 KiB buffer (its
// ReadBufferSize, which must stay under lowWaterFrom) and asks for no more
// than one byte. Over TLS a read's
// size is the record buffer's, not the bytes to come: left as it is.
const (
	lowWaterFrom = 64 << 10
	lowWater     = 256 << 10
)

// lowWaterDial wraps dial's TCP connections in lowWaterConn.
func lowWaterDial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		tc, ok := c.(*net.TCPConn)
		if err != nil || !ok {
			return c, err
		}
		raw, err := tc.SyscallConn()
		if err != nil {
			return c, nil
		}
		return &lowWaterConn{TCPConn: tc, raw: raw, low: 1}, nil
	}
}

// lowWaterConn is a TCP connection whose reads of at least lowWaterFrom
// bytes wait for min(lowWater, the read's size) bytes to be there: a
// store that sends fewer and stops still ends the read, by closing the
// connection or by the attempt timeout (idleBody). One goroutine reads it
// at a time (net/http's).
type lowWaterConn struct {
	*net.TCPConn
	raw syscall.RawConn
	low int // SO_RCVLOWAT as set
}

func (c *lowWaterConn) Read(p []byte) (int, error) {
	low := 1
	if len(p) >= lowWaterFrom {
		low = min(len(p), lowWater)
	}
	if low != c.low {
		c.low = low
		_ = c.raw.Control(func(fd uintptr) { _ = setRcvLowat(int(fd), low) }) // unset: reads wake as before
	}
	return c.TCPConn.Read(p)
}
