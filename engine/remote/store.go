package remote

import (
	"context"
	"io"
	"net"
	"net/http"
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
	t.ResponseHeaderTimeout = cfg.AttemptTimeout
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 64
	// Segments are mostly compressed by their producers; a gzip layer would
	// cost CPU for nothing and hide the body's length.
	t.DisableCompression = true
	return t
}
