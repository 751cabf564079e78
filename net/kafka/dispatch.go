package kafka

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/valyala/bytebufferpool"

	"github.com/samsa-broker/samsa/net/authz"
	"github.com/samsa-broker/samsa/net/peer"
	"github.com/samsa-broker/samsa/net/transport"
	"github.com/samsa-broker/samsa/net/wire"
)

// Errors of request framing. They never reach a client as codes: a request whose
// header or body cannot be parsed, or whose key or version is not served, gets its
// connection closed (see doc.go, "Bad requests").
var (
	ErrMalformedHeader    = wire.ErrMalformedHeader
	ErrUnknownAPIKey      = errors.New("kafka: unknown api key")
	ErrUnsupportedVersion = errors.New("kafka: unsupported api version")
	ErrMalformedBody      = errors.New("kafka: malformed request body")
)

// Header is a parsed request header (net/wire).
type Header = wire.Header

// maxAPIKey bounds the dense part of a handler table; Kafka's keys are small and
// dense. Private keys (SamsaRaft, 10000) live in the table's short private list.
const maxAPIKey = 127

// API is one served Kafka API: a handler table's entry.
type API struct {
	Key        int16
	MinVersion int16
	MaxVersion int16 // capped at what kmsg knows
	// Raw APIs get Request.Body == nil and decode Request.Raw themselves (hand-written
	// hot-path decoders); the others get the body decoded by kmsg, or by Decode.
	Raw bool
	// Decode decodes the body of an API kmsg does not know (a private key such as
	// SamsaRaft); required for those, unused for the others. It must not keep body
	// (the frame is recycled once the request is answered) and returns an error, never
	// panics, on bad input.
	Decode func(version int16, body []byte) (kmsg.Request, error)
	// Handle serves one request of the broker listener on the connection's read path
	// and must answer it exactly once, now or later, with one of Request's answer
	// methods.
	Handle func(b *Broker, r *Request)
	// Control is Handle for the controller listener's table.
	Control func(h *ControllerHandler, r *Request)
	// Authz is the API's authorisation rule on a listener with an authorizer
	// (net/authz), in the broker's table; the controller listener applies the broker
	// table's rule of the same key. nil when the API's row of acl.APIs decides it
	// alone (authz.RowAlone: no check, or the cluster's only).
	// TestAuthzEveryServedAPIHasARule holds the registrations and the rows together.
	Authz authz.Rule
}

// apiTable is a listener's handler table, filled by init functions (one file per API)
// and read-only afterwards.
type apiTable struct {
	name    string
	dense   [maxAPIKey + 1]*API
	private []*API // keys above maxAPIKey, sorted
}

// The two tables: the broker's client listeners and the controller listener.
var (
	brokerAPIs     = &apiTable{name: "broker"}
	controllerAPIs = &apiTable{name: "controller"}
)

// register adds api to the broker listener's table. Called once per API from its
// file's init; a duplicate or out-of-range key is a programming error and panics at
// start-up.
func register(api API) {
	if api.Handle == nil {
		panic(fmt.Sprintf("kafka: api key %d registered without Handle", api.Key))
	}
	brokerAPIs.add(api)
}

// registerController adds api to the controller listener's table.
func registerController(api API) {
	if api.Control == nil {
		panic(fmt.Sprintf("kafka: controller api key %d registered without Control", api.Key))
	}
	controllerAPIs.add(api)
}

func (t *apiTable) add(api API) {
	if api.Key < 0 {
		panic(fmt.Sprintf("kafka: bad api registration for key %d", api.Key))
	}
	if t.lookup(api.Key) != nil {
		panic(fmt.Sprintf("kafka: api key %d registered twice in the %s table", api.Key, t.name))
	}
	proto := kmsg.RequestForKey(api.Key)
	switch {
	case proto == nil && api.Decode == nil:
		panic(fmt.Sprintf("kafka: api key %d unknown to kmsg and without a decoder", api.Key))
	case proto != nil && api.MaxVersion > proto.MaxVersion():
		api.MaxVersion = proto.MaxVersion()
	}
	if api.MinVersion < 0 || api.MinVersion > api.MaxVersion {
		panic(fmt.Sprintf("kafka: api key %d: bad version range %d..%d", api.Key, api.MinVersion, api.MaxVersion))
	}
	if api.Key <= maxAPIKey {
		t.dense[api.Key] = &api
		return
	}
	t.private = append(t.private, &api)
	sort.Slice(t.private, func(i, j int) bool { return t.private[i].Key < t.private[j].Key })
}

// lookup returns the served API for key, or nil.
func (t *apiTable) lookup(key int16) *API {
	if key < 0 {
		return nil
	}
	if key <= maxAPIKey {
		return t.dense[key]
	}
	for _, a := range t.private {
		if a.Key == key {
			return a
		}
	}
	return nil
}

// served lists the table sorted by key.
func (t *apiTable) served() []API {
	var out []API
	for _, a := range t.dense {
		if a != nil {
			out = append(out, *a)
		}
	}
	for _, a := range t.private {
		out = append(out, *a)
	}
	return out
}

// lookupAPI returns the broker listener's API for key, or nil.
func lookupAPI(key int16) *API { return brokerAPIs.lookup(key) }

// servedAPIs lists the broker listener's table sorted by key.
func servedAPIs() []API { return brokerAPIs.served() }

// Request is one decoded request as a handler sees it. Handlers may keep it until they
// answer it; Raw (and anything aliasing the frame) is invalid after the answer.
type Request struct {
	Header Header
	// Body is the kmsg-decoded body (its strings are copies), nil for Raw APIs.
	Body kmsg.Request
	// Raw is the body's bytes, aliasing the transport's pooled frame.
	Raw      []byte
	Conn     transport.Conn
	Ticket   transport.Ticket
	Received time.Time

	m       *metrics
	api     *API
	started time.Time
	// local is how long the handler ran (ns since started) once it returned with
	// the answer still to come, or -1 once the answer left inside it; the first of
	// the two to happen sets it (observe).
	local atomic.Int64

	// sec is the connection's security (authz_listener.go); nil on a listener served
	// by the Broker itself (no authentication, no authorizer).
	sec *connSecurity
	// amend edits the handler's answer before it is encoded (amendWith adds to it):
	// the authorisation's (authz.Decision.Amend: refused items added back with their
	// error, items the principal may not see removed), a listener's endpoints, a
	// mutation quota's refusals.
	amend func(kmsg.Response)

	// throttle is the request quota's throttle time for the answer (quotas.go);
	// quotaExempt, set by a handler, keeps the request's time out of the request quota.
	throttle    int32
	quotaExempt bool
}

// Serve implements transport.Handler: it parses the header, checks the key and version
// against the broker listener's table, decodes the body and calls the API's handler,
// inline.
func (b *Broker) Serve(tr transport.Request) {
	api, r := parseRequest(tr, brokerAPIs, b.metrics, b.log, b.apiVersions)
	if r == nil {
		return
	}
	defer recoverHandler(r, b.log, &b.panics)
	if r.Header.Key == findCoordinatorKey && b.cfg.Listener != "" {
		if name := listenerOf(r); name != "" && name != b.cfg.Listener {
			b.route.advertiseListener(r)
		}
	}
	b.handle(api, r) // quotas.go
}

// parseRequest parses one frame against table t: header, key and version, body. It
// returns the API and request to call, or a nil request when the frame was answered
// here (its connection closed as a bad request, or an ApiVersions at an unsupported
// version answered with the table, av).
func parseRequest(tr transport.Request, t *apiTable, m *metrics, log *slog.Logger, av []apiKeyEntry) (*API, *Request) {
	m.bytesIn.Add(float64(len(tr.Frame) + 4))
	h, err := wire.ParseFixedHeader(tr.Frame)
	if err != nil {
		reject(tr, &h, m, log, err)
		return nil, nil
	}
	api := t.lookup(h.Key)
	if api == nil {
		reject(tr, &h, m, log, fmt.Errorf("%w %d", ErrUnknownAPIKey, h.Key))
		return nil, nil
	}
	if h.Version < api.MinVersion || h.Version > api.MaxVersion {
		if h.Key == apiVersionsKey {
			answerUnsupportedApiVersions(tr, &h, m, av)
			return nil, nil
		}
		reject(tr, &h, m, log, fmt.Errorf("%w: key %d version %d (serving %d..%d)", ErrUnsupportedVersion, h.Key, h.Version, api.MinVersion, api.MaxVersion))
		return nil, nil
	}
	body, err := wire.ParseHeaderRest(&h, tr.Frame, wire.IsFlexible(h.Key, h.Version))
	if err != nil {
		reject(tr, &h, m, log, err)
		return nil, nil
	}
	r := &Request{Header: h, Raw: body, Conn: tr.Conn, Ticket: tr.Ticket, Received: tr.Received, m: m, api: api, started: time.Now()}
	switch {
	case api.Raw:
	case api.Decode != nil:
		req, err := api.Decode(h.Version, body)
		if err != nil {
			reject(tr, &h, m, log, fmt.Errorf("%w: key %d v%d: %v", ErrMalformedBody, h.Key, h.Version, err))
			return nil, nil
		}
		r.Body = req
	default:
		req := kmsg.RequestForKey(h.Key)
		req.SetVersion(h.Version)
		if err := req.ReadFrom(body); err != nil {
			reject(tr, &h, m, log, fmt.Errorf("%w: %s v%d: %v", ErrMalformedBody, kmsg.NameForKey(h.Key), h.Version, err))
			return nil, nil
		}
		r.Body = req
	}
	m.requests(h.Key).Inc()
	return api, r
}

// recoverHandler turns a handler panic (a bug) into a closed connection and an error
// log instead of a dead node. Deferred around every handler call.
func recoverHandler(r *Request, log *slog.Logger, panics *atomic.Int64) {
	r.handlerReturned()
	if p := recover(); p != nil {
		panics.Add(1)
		log.Error("handler panicked; closing connection", "api", apiName(r.Header.Key),
			"version", r.Header.Version, "client", r.Header.ClientID, "panic", p)
		r.Conn.Close()
		r.Ticket.CloseConn()
	}
}

// apiName is kmsg's name of key, or the private API's.
func apiName(key int16) string {
	if key == peer.SamsaRaftKey {
		return "SamsaRaft"
	}
	return kmsg.NameForKey(key)
}

// reject closes the connection of a request that cannot be answered in its own schema.
func reject(tr transport.Request, h *Header, m *metrics, log *slog.Logger, err error) {
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

// encodeResponse encodes header + resp (at version h.Version) into a pooled buffer.
func encodeResponse(h *Header, resp kmsg.Response) transport.Response {
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
// pooled buffer and answers the ticket.
func (r *Request) Respond(resp kmsg.Response) {
	if r.amend != nil {
		r.amend(resp)
	}
	if r.throttle > 0 {
		raiseThrottle(resp, r.throttle) // quotas.go
	}
	r.m.lookup(r.Header.Key).countErrors(resp)
	r.respondEncoded(encodeResponse(&r.Header, resp))
}

// RespondRaw answers with a hand-framed response (for example Fetch: header and
// framing bytes plus file ranges); it must begin with the response header
// (AppendResponseHeader).
func (r *Request) RespondRaw(resp transport.Response) {
	if r.amend != nil {
		var ok bool
		if resp, ok = r.amendRaw(resp); !ok {
			r.CloseConn()
			return
		}
	}
	r.respondEncoded(resp)
}

func (r *Request) respondEncoded(resp transport.Response) {
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

// handlerReturned marks the end of the handler's run (deferred with recoverHandler),
// unless the answer already left.
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
