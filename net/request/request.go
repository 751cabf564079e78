package request

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/valyala/bytebufferpool"

	"github.com/samsa-broker/samsa/net/transport"
	"github.com/samsa-broker/samsa/net/wire"
)

// Errors of request framing. They never reach a client as codes: a request whose
// header or body cannot be parsed, or whose key or version is not served, gets its
// connection closed (net/kafka's doc, "Bad requests").
var (
	ErrUnknownAPIKey      = errors.New("kafka: unknown api key")
	ErrUnsupportedVersion = errors.New("kafka: unsupported api version")
	ErrMalformedBody      = errors.New("kafka: malformed request body")
)

// Spec is a served API as Parse needs it: its versions and how its body is decoded.
type Spec struct {
	Key        int16
	MinVersion int16
	MaxVersion int16
	// Raw APIs get Request.Body == nil and decode Request.Raw themselves.
	Raw bool
	// Decode decodes the body of an API kmsg does not know (a private key); it must
	// not keep body and returns an error, never panics, on bad input.
	Decode func(version int16, body []byte) (kmsg.Request, error)
}

// Lookup returns the listener's API of key; false: not served.
type Lookup func(key int16) (Spec, bool)

// Request is one decoded request as a handler sees it. Handlers may keep it until they
// answer it; Raw (and anything aliasing the frame) is invalid after the answer.
type Request struct {
	Header wire.Header
	// Body is the kmsg-decoded body (its strings are copies), nil for Raw APIs.
	Body kmsg.Request
	// Raw is the body's bytes, aliasing the transport's pooled frame.
	Raw      []byte
	Conn     transport.Conn
	Ticket   transport.Ticket
	Received time.Time
	// Sec is the connection's security state, set by the listener that admitted the
	// request (net/kafka's SecureListener); nil on a listener without one.
	Sec any

	m       *Metrics
	started time.Time
	// local is how long the handler ran (ns since started) once it returned with
	// the answer still to come, or -1 once the answer left inside it; the first of
	// the two to happen sets it (observe).
	local atomic.Int64

	// amend edits the handler's answer before it is encoded (AmendWith adds to it):
	// an authorisation's (refused items added back with their error, items the
	// principal may not see removed), a listener's endpoints, a mutation quota's
	// refusals.
	amend func(kmsg.Response)

	// throttle is the request quota's throttle time for the answer; quotaExempt, set
	// by a handler, keeps the request's time out of the request quota.
	throttle    int32
	quotaExempt bool
}

// Parse parses one frame against a listener's APIs: header, key and version, body. It
// returns the request to hand to the API's handler, or nil when the frame was answered
// here (its connection closed as a bad request, or an ApiVersions at an unsupported
// version answered with the listener's keys, av). Counted in m.
func Parse(tr transport.Request, lookup Lookup, m *Metrics, log *slog.Logger, av []kmsg.ApiVersionsResponseApiKey) *Request {
	m.bytesIn.Add(float64(len(tr.Frame) + 4))
	h, err := wire.ParseFixedHeader(tr.Frame)
	if err != nil {
		Reject(tr, &h, m, log, err)
		return nil
	}
	api, ok := lookup(h.Key)
	if !ok {
		Reject(tr, &h, m, log, fmt.Errorf("%w %d", ErrUnknownAPIKey, h.Key))
		return nil
	}
	if h.Version < api.MinVersion || h.Version > api.MaxVersion {
		if h.Key == apiVersionsKey {
			answerUnsupportedApiVersions(tr, &h, m, av)
			return nil
		}
		Reject(tr, &h, m, log, fmt.Errorf("%w: key %d version %d (serving %d..%d)", ErrUnsupportedVersion, h.Key, h.Version, api.MinVersion, api.MaxVersion))
		return nil
	}
	body, err := wire.ParseHeaderRest(&h, tr.Frame, wire.IsFlexible(h.Key, h.Version))
	if err != nil {
		Reject(tr, &h, m, log, err)
		return nil
	}
	r := &Request{Header: h, Raw: body, Conn: tr.Conn, Ticket: tr.Ticket, Received: tr.Received, m: m, started: time.Now()}
	switch {
	case api.Raw:
	case api.Decode != nil:
		req, err := api.Decode(h.Version, body)
		if err != nil {
			Reject(tr, &h, m, log, fmt.Errorf("%w: key %d v%d: %v", ErrMalformedBody, h.Key, h.Version, err))
			return nil
		}
		r.Body = req
	default:
		req := kmsg.RequestForKey(h.Key)
		req.SetVersion(h.Version)
		if err := req.ReadFrom(body); err != nil {
			Reject(tr, &h, m, log, fmt.Errorf("%w: %s v%d: %v", ErrMalformedBody, kmsg.NameForKey(h.Key), h.Version, err))
			return nil
		}
		r.Body = req
	}
	m.lookup(h.Key).requests.Inc()
	return r
}

// apiVersionsKey is ApiVersions' key: a version it does not serve is answered, not
// refused (KIP-511).
const apiVersionsKey = 18

// answerUnsupportedApiVersions answers an ApiVersions request at a version outside the
// served range: v0 body, UNSUPPORTED_VERSION, and the keys served (keys).
func answerUnsupportedApiVersions(tr transport.Request, h *wire.Header, m *Metrics, keys []kmsg.ApiVersionsResponseApiKey) {
	m.rejected.Inc()
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = keys
	v0 := wire.Header{Key: h.Key, Version: 0, CorrelationID: h.CorrelationID}
	out := Encode(&v0, resp)
	m.bytesOut.Add(float64(out.Size() + 4))
	tr.Ticket.Respond(out)
}

// Recover turns a handler panic (a bug) into a closed connection and an error log
// instead of a dead node, counted in panics. Deferred around every handler call.
func Recover(r *Request, log *slog.Logger, panics *atomic.Int64) {
	r.handlerReturned()
	if p := recover(); p != nil {
		panics.Add(1)
		log.Error("handler panicked; closing connection", "api", r.m.lookup(r.Header.Key).name,
			"version", r.Header.Version, "client", r.Header.ClientID, "panic", p)
		r.Conn.Close()
		r.Ticket.CloseConn()
	}
}

// Reject closes the connection of a request that cannot be answered in its own schema.
func Reject(tr transport.Request, h *wire.Header, m *Metrics, log *slog.Logger, err error) {
	m.rejected.Inc()
	log.Debug("closing connection: bad request", "remote", tr.Conn.RemoteAddr(), "key", h.Key,
		"version", h.Version, "err", err)
	tr.Ticket.CloseConn()
}

// respBuf is a pooled response buffer and its one-chunk list; it releases itself.
type respBuf struct {
	bb     *bytebufferpool.ByteBuffer
	chunks [1]transport.Chunk
}

var respBufs = sync.Pool{New: func() any { return new(respBuf) }}

// Release implements transport.Releaser.
func (rb *respBuf) Release() {
	bytebufferpool.Put(rb.bb)
	rb.bb = nil
	rb.chunks[0] = transport.Chunk{}
	respBufs.Put(rb)
}

// Encode encodes header + resp (at version h.Version) into a pooled buffer.
func Encode(h *wire.Header, resp kmsg.Response) transport.Response {
	rb := respBufs.Get().(*respBuf)
	rb.bb = bytebufferpool.Get()
	resp.SetVersion(h.Version)
	buf := wire.AppendResponseHeader(rb.bb.B[:0], h)
	buf = resp.AppendTo(buf)
	rb.bb.B = buf
	rb.chunks[0] = transport.Chunk{Bytes: buf}
	return transport.Response{Chunks: rb.chunks[:], Release: rb}
}

// Respond encodes resp at the request's version with the right response header into a
// pooled buffer and answers the ticket, after the request's amendments and with its
// throttle time.
func (r *Request) Respond(resp kmsg.Response) {
	if r.amend != nil {
		r.amend(resp)
	}
	if r.throttle > 0 {
		raiseThrottle(resp, r.throttle)
	}
	r.m.lookup(r.Header.Key).countErrors(resp)
	r.RespondEncoded(Encode(&r.Header, resp))
}

// RespondRaw answers with a hand-framed response (for example Fetch: header and
// framing bytes plus file ranges); it must begin with the response header
// (wire.AppendResponseHeader). An amended request's answer is decoded, amended and
// encoded again; one that does not read back closes the connection.
func (r *Request) RespondRaw(resp transport.Response) {
	if r.amend != nil {
		var ok bool
		if resp, ok = r.amendRaw(resp); !ok {
			r.CloseConn()
			return
		}
	}
	r.RespondEncoded(resp)
}

// RespondEncoded answers with resp as it is: no amendment, no error count (the caller
// counts them; a cached answer, for one).
func (r *Request) RespondEncoded(resp transport.Response) {
	r.m.bytesOut.Add(float64(resp.Size() + 4))
	r.observe()
	r.Ticket.Respond(resp)
}

// NoResponse answers with nothing on the wire (acks=0 produce).
func (r *Request) NoResponse() {
	r.observe()
	r.Ticket.NoResponse()
}

// CloseConn answers by closing the connection after the earlier answers left.
func (r *Request) CloseConn() {
	r.observe()
	r.Ticket.CloseConn()
}

// observe records the request's times, as Kafka's RequestMetrics split them: queue
// (last byte read to the handler's start), local (the handler's own run) and remote
// (parked after the handler returned: waiting for replicas, for data, for a
// controller or coordinator), and the total.
func (r *Request) observe() {
	a := r.m.lookup(r.Header.Key)
	now := time.Now()
	a.latency.Observe(now.Sub(r.Received).Seconds())
	a.queue.Observe(r.started.Sub(r.Received).Seconds())
	ran := now.Sub(r.started)
	if r.local.CompareAndSwap(0, -1) { // answered inside the handler
		a.local.Observe(ran.Seconds())
		a.remote.Observe(0)
		return
	}
	local := time.Duration(r.local.Load())
	a.local.Observe(local.Seconds())
	a.remote.Observe((ran - local).Seconds())
}

// handlerReturned marks the end of the handler's run (deferred with Recover), unless
// the answer already left.
func (r *Request) handlerReturned() {
	d := int64(time.Since(r.started))
	if d <= 0 {
		d = 1
	}
	r.local.CompareAndSwap(0, d)
}

// ResponseKind returns a new, empty response of the request's kind at its version.
func (r *Request) ResponseKind() kmsg.Response {
	resp := kmsg.ResponseForKey(r.Header.Key)
	resp.SetVersion(r.Header.Version)
	return resp
}

// CountError adds code, n times, to the errors of the request's API (for answers
// framed or cached by hand); NONE is not counted.
func (r *Request) CountError(code int16, n int) {
	if code == 0 || n <= 0 {
		return
	}
	a := r.m.lookup(r.Header.Key)
	a.errors.WithLabelValues(a.name, wire.ErrorName(code)).Add(float64(n))
}

// AmendWith adds f (nil: nothing) to the edits of r's answer, after those already
// there.
func (r *Request) AmendWith(f func(kmsg.Response)) {
	prev := r.amend
	switch {
	case f == nil:
		return
	case prev == nil:
		r.amend = f
		return
	}
	r.amend = func(resp kmsg.Response) {
		prev(resp)
		f(resp)
	}
}

// Amended reports whether r's answer is to be edited before it is sent.
func (r *Request) Amended() bool { return r.amend != nil }

// amendRaw applies r.amend to a hand-framed answer (Fetch's: bytes and file ranges):
// it reads the answer into memory, decodes it, amends it and encodes it again. Only a
// split request (some of its items refused) takes this path.
// It reports false when the answer does not read back (the connection is then closed).
func (r *Request) amendRaw(raw transport.Response) (transport.Response, bool) {
	if raw.Release != nil {
		defer raw.Release.Release()
	}
	buf := make([]byte, 0, raw.Size())
	for _, ch := range raw.Chunks {
		if ch.File == nil {
			buf = append(buf, ch.Bytes...)
			continue
		}
		n := len(buf)
		buf = buf[:n+int(ch.Length)]
		if _, err := ch.File.ReadAt(buf[n:], ch.Offset); err != nil {
			return transport.Response{}, false
		}
	}
	hdr := len(wire.AppendResponseHeader(nil, &r.Header))
	resp := r.ResponseKind()
	if len(buf) < hdr || resp.ReadFrom(buf[hdr:]) != nil {
		return transport.Response{}, false
	}
	r.amend(resp)
	return Encode(&r.Header, resp), true
}

// Throttle is the throttle time (ms) r's answer carries.
func (r *Request) Throttle() int32 { return r.throttle }

// Mute holds back r's connection for a throttle time t (nothing when t is 0) and
// raises the throttle time r's answer carries to it.
func (r *Request) Mute(t time.Duration) {
	if t <= 0 {
		return
	}
	transport.Mute(r.Conn, t)
	r.throttle = max(r.throttle, int32(min(t.Milliseconds(), math.MaxInt32)))
}

// MuteFor holds back r's connection for a throttle time t and returns t in ms, for a
// handler that sets its answer's throttle_time_ms itself.
func (r *Request) MuteFor(t time.Duration) int32 {
	if t <= 0 {
		return 0
	}
	transport.Mute(r.Conn, t)
	return int32(min(t.Milliseconds(), math.MaxInt32))
}

// ExemptFromQuota keeps r's time out of the request quota (a follower's fetch).
func (r *Request) ExemptFromQuota(exempt bool) { r.quotaExempt = exempt }

// QuotaExempt reports whether r's time stays out of the request quota.
func (r *Request) QuotaExempt() bool { return r.quotaExempt }

// raiseThrottle sets resp's throttle time to t unless it is higher already.
func raiseThrottle(resp kmsg.Response, t int32) {
	tr, ok := resp.(interface {
		kmsg.ThrottleResponse
		SetThrottle(int32)
	})
	if ok {
		if cur, _ := tr.Throttle(); cur < t {
			tr.SetThrottle(t)
		}
	}
}

// APIName is the name of r's API, as its listener's metrics label it.
func (r *Request) APIName() string { return r.m.lookup(r.Header.Key).name }
