package peer

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// conn is one connection to a peer, after its ApiVersions handshake. Writes happen on
// callers' goroutines under wmu; one reader goroutine (readLoop) reads responses.
//
// Invariants (see the package doc): correlation ids are assigned and written under wmu,
// so write order is id order, and a call enters mu.pending before its bytes are
// written, so the reader always finds it; responses are matched against the head of
// mu.pending only.
type conn struct {
	s        *slot
	nc       net.Conn
	versions map[int16]versionRange
	slots    chan struct{} // a token per unanswered request (MaxInFlight)
	dead     chan struct{} // closed by fail

	wmu  sync.Mutex
	corr int32
	wbuf []byte
	// reauthing is closed when the running re-authentication ends; nil: none runs.
	// Guarded by wmu.
	reauthing chan struct{}

	mu struct {
		sync.Mutex
		pending []*call
		err     error
		reauth  *time.Timer // the next re-authentication (security.go); nil: none
	}
}

// versionRange is what the peer serves of one API.
type versionRange struct{ min, max int16 }

// call is one request waiting for its response.
type call struct {
	corr int32
	key  int16
	flex bool        // the response header has tagged fields
	done chan result // buffered: the reader never blocks on it
}

type result struct {
	body []byte // the response body, after the response header
	err  error
}

func newConn(s *slot, nc net.Conn) *conn {
	return &conn{s: s, nc: nc, slots: make(chan struct{}, s.c.cfg.MaxInFlight), dead: make(chan struct{})}
}

func (cn *conn) alive() bool {
	select {
	case <-cn.dead:
		return false
	default:
		return true
	}
}

func (cn *conn) err() error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.mu.err
}

// fail closes the connection once with err and fails every unanswered request.
func (cn *conn) fail(err error) {
	cn.mu.Lock()
	if cn.mu.err != nil {
		cn.mu.Unlock()
		return
	}
	cn.mu.err = err
	pending := cn.mu.pending
	cn.mu.pending = nil
	if cn.mu.reauth != nil {
		cn.mu.reauth.Stop()
	}
	close(cn.dead)
	cn.mu.Unlock()
	cn.nc.Close()
	// The peer's close marks it lost before the requests waiting on it fail, so a
	// caller that sees its request fail for it finds the peer lost (reach.go).
	cn.s.noteBroken(err)
	for _, c := range pending {
		c.done <- result{err: err}
	}
	cn.s.connBroke(cn)
}

// handshake sends ApiVersions and records the peer's version ranges. It runs before
// the reader starts, on the dialing goroutine.
func (cn *conn) handshake(ctx context.Context) error {
	if dl, ok := ctx.Deadline(); ok {
		cn.nc.SetDeadline(dl)
		defer cn.nc.SetDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { cn.nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	cfg := &cn.s.c.cfg
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = min(req.MaxVersion(), 5)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "samsa", "1"
	req.NodeID = -1
	if cfg.ClusterID != "" && req.Version >= 5 && cn.s.key.to.Role != roleBootstrap {
		// A bootstrap server's id is not known yet: its answer names its cluster.
		req.ClusterID, req.NodeID = &cfg.ClusterID, cn.s.key.to.Node
	}
	br := bufio.NewReaderSize(cn.nc, 4096)
	for attempt := 0; ; attempt++ {
		cn.corr++
		buf := cn.s.c.fmt.AppendRequest(nil, req, cn.corr)
		if _, err := cn.nc.Write(buf); err != nil {
			return fmt.Errorf("%w: ApiVersions: %w", ErrConnection, err)
		}
		frame, err := readFrame(br, cfg.MaxResponseBytes)
		if err != nil {
			return err
		}
		if len(frame) < 4 || int32(binary.BigEndian.Uint32(frame)) != cn.corr {
			return fmt.Errorf("%w: ApiVersions: correlation id", ErrMalformedResponse)
		}
		resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
		resp.Version = req.Version
		if err := resp.ReadFrom(frame[4:]); err != nil {
			// An UNSUPPORTED_VERSION answer comes in the v0 body (KIP-511).
			resp = kmsg.NewPtrApiVersionsResponse()
			if err0 := resp.ReadFrom(frame[4:]); err0 != nil || resp.ErrorCode != kerr.UnsupportedVersion.Code {
				return fmt.Errorf("%w: ApiVersions v%d: %w", ErrMalformedResponse, req.Version, err)
			}
		}
		switch resp.ErrorCode {
		case 0:
		case kerr.UnsupportedVersion.Code:
			v := int16(-1)
			for _, k := range resp.ApiKeys {
				if k.ApiKey == 18 {
					v = k.MaxVersion
				}
			}
			if attempt > 0 || v < 0 || v >= req.Version {
				return fmt.Errorf("%w: ApiVersions v%d refused", ErrUnsupportedVersion, req.Version)
			}
			req.Version = v
			if v < 5 {
				req.ClusterID, req.NodeID = nil, -1
			}
			continue
		case kerr.RebootstrapRequired.Code:
			return fmt.Errorf("%w: %s is not node %d of cluster %q", ErrWrongNode, cn.nc.RemoteAddr(), cn.s.key.to.Node, cfg.ClusterID)
		default:
			return fmt.Errorf("%w: ApiVersions: %w", ErrConnection, kerr.ErrorForCode(resp.ErrorCode))
		}
		cn.versions = make(map[int16]versionRange, len(resp.ApiKeys))
		for _, k := range resp.ApiKeys {
			cn.versions[k.ApiKey] = versionRange{k.MinVersion, k.MaxVersion}
		}
		if br.Buffered() > 0 {
			return fmt.Errorf("%w: bytes after the ApiVersions response", ErrMalformedResponse)
		}
		return nil
	}
}

// version picks the version to send key at: the highest that kmsg (kmax) and the peer
// both serve.
func (cn *conn) version(key, kmax int16) (int16, error) {
	r, ok := cn.versions[key]
	if !ok {
		return 0, fmt.Errorf("%w: key %d (%s)", ErrUnsupportedVersion, key, kmsg.NameForKey(key))
	}
	v := min(r.max, kmax)
	if v < r.min || v < 0 {
		return 0, fmt.Errorf("%w: key %d: peer serves v%d-%d, kmsg knows up to v%d", ErrUnsupportedVersion, key, r.min, r.max, kmax)
	}
	return v, nil
}

// send writes req (its version already set) with a fresh correlation id; with
// wantResponse it queues a call for the answer, waiting for an in-flight slot first.
//
// While the connection re-authenticates (KIP-368), only the SASL requests are
// written; the others wait for its end, so none reaches the peer between the expiry
// of the old session and the start of the new one (which the peer would answer by
// closing the connection).
func (cn *conn) send(ctx context.Context, req kmsg.Request, wantResponse bool) (*call, error) {
	sasl := req.Key() == 17 || req.Key() == 36
	for {
		if wantResponse {
			select {
			case cn.slots <- struct{}{}:
			case <-cn.dead:
				return nil, cn.err()
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		cn.wmu.Lock()
		g := cn.reauthing
		if g == nil || sasl {
			break
		}
		cn.wmu.Unlock()
		if wantResponse {
			<-cn.slots
		}
		select {
		case <-g:
		case <-cn.dead:
			return nil, cn.err()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	defer cn.wmu.Unlock()
	cn.corr++
	var c *call
	if wantResponse {
		c = &call{corr: cn.corr, key: req.Key(), flex: req.IsFlexible() && req.Key() != 18, done: make(chan result, 1)}
	}
	cn.mu.Lock()
	if err := cn.mu.err; err != nil {
		cn.mu.Unlock()
		if wantResponse {
			<-cn.slots
		}
		return nil, err
	}
	if c != nil {
		cn.mu.pending = append(cn.mu.pending, c)
	}
	cn.mu.Unlock()
	buf := cn.s.c.fmt.AppendRequest(cn.wbuf[:0], req, cn.corr)
	cn.nc.SetWriteDeadline(time.Now().Add(cn.s.c.cfg.WriteTimeout))
	_, err := cn.nc.Write(buf)
	if cap(buf) <= 1<<20 {
		cn.wbuf = buf[:0]
	} else {
		cn.wbuf = nil // do not keep a snapshot-sized buffer per connection
	}
	if err != nil {
		cn.fail(fmt.Errorf("%w: write to %s: %w", ErrConnection, cn.s.key.to, err))
		if c == nil {
			return nil, cn.err()
		}
	}
	return c, nil // a failed write reaches c through fail
}

// roundTrip sends req at the highest version both sides serve and decodes its
// response.
func (cn *conn) roundTrip(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	v, err := cn.version(req.Key(), req.MaxVersion())
	if err != nil {
		return nil, err
	}
	return cn.roundTripAt(ctx, req, v)
}

// roundTripAt sends req at version v, which the peer must serve.
func (cn *conn) roundTripAt(ctx context.Context, req kmsg.Request, v int16) (kmsg.Response, error) {
	if r, ok := cn.versions[req.Key()]; !ok || v < r.min || v > r.max || v > req.MaxVersion() {
		return nil, fmt.Errorf("%w: %s v%d", ErrUnsupportedVersion, kmsg.NameForKey(req.Key()), v)
	}
	req.SetVersion(v)
	c, err := cn.send(ctx, req, true)
	if err != nil {
		return nil, err
	}
	timeout := cn.s.c.cfg.RequestTimeout + longPoll(req)
	// The timeout holds whether or not the caller waits that long (invariant 3): an
	// abandoned call still unanswered then fails the connection, so a peer that
	// answers nothing is not kept as if it were alive.
	t := time.AfterFunc(timeout, func() {
		if cn.isPending(c) {
			cn.fail(fmt.Errorf("%w: %s did not answer %s within %v", ErrTimeout, cn.s.key.to, kmsg.NameForKey(req.Key()), timeout))
		}
	})
	var res result
	select {
	case res = <-c.done:
		t.Stop()
	case <-ctx.Done():
		return nil, ctx.Err() // abandoned: the late response is dropped
	}
	if res.err != nil {
		return nil, res.err
	}
	resp := req.ResponseKind()
	resp.SetVersion(v)
	if err := resp.ReadFrom(res.body); err != nil {
		err = fmt.Errorf("%w: %s v%d from %s: %w", ErrMalformedResponse, kmsg.NameForKey(req.Key()), v, cn.s.key.to, err)
		cn.fail(err)
		return nil, err
	}
	return resp, nil
}

// isPending reports whether c still waits for its response on cn.
func (cn *conn) isPending(c *call) bool {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return slices.Contains(cn.mu.pending, c)
}

// longPoll is the wait a request asks the peer for, added to its timeout.
func longPoll(req kmsg.Request) time.Duration {
	if f, ok := req.(*kmsg.FetchRequest); ok && f.MaxWaitMillis > 0 {
		return time.Duration(f.MaxWaitMillis) * time.Millisecond
	}
	return 0
}

// readLoop reads responses until the connection fails, matching each with the oldest
// unanswered call.
func (cn *conn) readLoop() {
	br := bufio.NewReaderSize(cn.nc, 64<<10)
	max := cn.s.c.cfg.MaxResponseBytes
	for {
		frame, err := readFrame(br, max)
		if err != nil {
			cn.fail(err)
			return
		}
		if len(frame) < 4 {
			cn.fail(fmt.Errorf("%w: %d-byte response from %s", ErrMalformedResponse, len(frame), cn.s.key.to))
			return
		}
		corr := int32(binary.BigEndian.Uint32(frame))
		cn.mu.Lock()
		if len(cn.mu.pending) == 0 || cn.mu.pending[0].corr != corr {
			want := int32(-1)
			if len(cn.mu.pending) > 0 {
				want = cn.mu.pending[0].corr
			}
			cn.mu.Unlock()
			cn.fail(fmt.Errorf("%w: correlation id %d from %s, expected %d", ErrMalformedResponse, corr, cn.s.key.to, want))
			return
		}
		c := cn.mu.pending[0]
		cn.mu.pending[0] = nil
		cn.mu.pending = cn.mu.pending[1:]
		cn.mu.Unlock()
		<-cn.slots
		body := frame[4:]
		if c.flex {
			if body, err = skipTags(body); err != nil {
				c.done <- result{err: err}
				cn.fail(err)
				return
			}
		}
		c.done <- result{body: body}
	}
}

// readFrame reads one size-prefixed frame, refusing sizes above max before
// allocating.
func readFrame(r io.Reader, max int32) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("%w: read: %w", ErrConnection, err)
	}
	n := int32(binary.BigEndian.Uint32(hdr[:]))
	if n < 0 || n > max {
		return nil, fmt.Errorf("%w: response of %d bytes (limit %d)", ErrMalformedResponse, n, max)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("%w: read: %w", ErrConnection, err)
	}
	return b, nil
}

// skipTags skips a response header's tagged-field section, bounds-checked.
func skipTags(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b)) {
		return nil, fmt.Errorf("%w: response header tags", ErrMalformedResponse)
	}
	b = b[n:]
	for range count {
		if _, n = binary.Uvarint(b); n <= 0 {
			return nil, fmt.Errorf("%w: response header tag", ErrMalformedResponse)
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, fmt.Errorf("%w: response header tag size", ErrMalformedResponse)
		}
		b = b[n+int(size):]
	}
	return b, nil
}
