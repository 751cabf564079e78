package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrProtocol is wrapped when a broker's answer does not parse or match.
var ErrProtocol = errors.New("bench: protocol error")

// maxResponseSize bounds a response the raw client will read (a length field larger
// than this is an error, not an allocation).
const maxResponseSize = 256 << 20

// rawConn is one Kafka connection without a client library's machinery: requests are
// framed with kmsg and written by one goroutine, responses read by another, so any
// number may be in flight (Kafka answers in order per connection).
//
//	request:  int32 size | int16 key | int16 version | int32 correlation | client id | [tags] | body
//	response: int32 size | int32 correlation | [tags, flexible and not ApiVersions] | body
type rawConn struct {
	c   net.Conn
	br  *bufio.Reader
	fmt *kmsg.RequestFormatter
	buf []byte // response buffer, reused
}

func dialRaw(ctx context.Context, addr string) (*rawConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	return &rawConn{c: c, br: bufio.NewReaderSize(c, 1<<20), fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("samsa-bench"))}, nil
}

func (rc *rawConn) Close() error { return rc.c.Close() }

// appendRequest frames req onto dst.
func (rc *rawConn) appendRequest(dst []byte, req kmsg.Request, corr int32) []byte {
	return rc.fmt.AppendRequest(dst, req, corr)
}

// readResponse reads one response frame and checks its correlation id. It returns the
// body (after any header tags); the slice is valid until the next call.
func (rc *rawConn) readResponse(key int16, flexible bool, corr int32) ([]byte, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(rc.br, hdr[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(hdr[:4]))
	if size < 4 || size > maxResponseSize {
		return nil, fmt.Errorf("%w: response size %d", ErrProtocol, size)
	}
	if got := int32(binary.BigEndian.Uint32(hdr[4:])); got != corr {
		return nil, fmt.Errorf("%w: correlation id %d, want %d", ErrProtocol, got, corr)
	}
	n := int(size) - 4
	if cap(rc.buf) < n {
		rc.buf = make([]byte, n)
	}
	body := rc.buf[:n]
	if _, err := io.ReadFull(rc.br, body); err != nil {
		return nil, err
	}
	if flexible && key != 18 {
		r := kbin.Reader{Src: body}
		kmsg.SkipTags(&r)
		if !r.Ok() {
			return nil, fmt.Errorf("%w: response header tags", ErrProtocol)
		}
		body = r.Src
	}
	return body, nil
}

// roundTrip sends one request and decodes its response into resp.
func (rc *rawConn) roundTrip(req kmsg.Request, resp kmsg.Response, corr int32, timeout time.Duration) error {
	_ = rc.c.SetDeadline(time.Now().Add(timeout))
	defer rc.c.SetDeadline(time.Time{})
	if _, err := rc.c.Write(rc.appendRequest(nil, req, corr)); err != nil {
		return err
	}
	resp.SetVersion(req.GetVersion())
	body, err := rc.readResponse(req.Key(), req.IsFlexible(), corr)
	if err != nil {
		return err
	}
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	return nil
}

// apiVersions asks the broker which versions it serves (v0, understood by all).
func apiVersions(ctx context.Context, addr string, timeout time.Duration) (map[int16][2]int16, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rc, err := dialRaw(cctx, addr)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	resp := kmsg.NewPtrApiVersionsResponse()
	if err := rc.roundTrip(req, resp, 1, timeout); err != nil {
		return nil, err
	}
	if resp.ErrorCode != 0 {
		return nil, fmt.Errorf("%w: ApiVersions error code %d", ErrProtocol, resp.ErrorCode)
	}
	out := make(map[int16][2]int16, len(resp.ApiKeys))
	for _, k := range resp.ApiKeys {
		out[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	return out, nil
}
