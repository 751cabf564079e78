package kafka

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/valyala/bytebufferpool"

	"github.com/samsa-broker/samsa/net/transport"
)

// maxAPIKey bounds the handler table; Kafka's keys are small and dense.
const maxAPIKey = 127

// API is one served Kafka API: the handler table's entry.
type API struct {
	Key        int16
	MinVersion int16
	MaxVersion int16 // capped at what kmsg knows
	// Raw APIs get Request.Body == nil and decode Request.Raw themselves (hand-written
	// hot-path decoders); the others get the body decoded by kmsg.
	Raw bool
	// Handle serves one request on the connection's read path and must answer it exactly
	// once, now or later, with one of Request's answer methods.
	Handle func(b *Broker, r *Request)
}

// apis is the handler table, filled by init functions (one file per API) and read-only
// afterwards.
var apis [maxAPIKey + 1]*API

// register adds api to the table. Called once per API from its file's init; a
// duplicate or out-of-range key is a programming error and panics at start-up.
func register(api API) {
	if api.Key < 0 || api.Key > maxAPIKey || api.Handle == nil {
		panic(fmt.Sprintf("kafka: bad api registration for key %d", api.Key))
	}
	if apis[api.Key] != nil {
		panic(fmt.Sprintf("kafka: api key %d registered twice", api.Key))
	}
	proto := kmsg.RequestForKey(api.Key)
	if proto == nil {
		panic(fmt.Sprintf("kafka: api key %d unknown to kmsg", api.Key))
	}
	if api.MaxVersion > proto.MaxVersion() {
		api.MaxVersion = proto.MaxVersion()
	}
	if api.MinVersion < 0 || api.MinVersion > api.MaxVersion {
		panic(fmt.Sprintf("kafka: api key %d: bad version range %d..%d", api.Key, api.MinVersion, api.MaxVersion))
	}
	apis[api.Key] = &api
}

// lookupAPI returns the served API for key, or nil.
func lookupAPI(key int16) *API {
	if key < 0 || key > maxAPIKey {
		return nil
	}
	return apis[key]
}

// servedAPIs lists the table sorted by key.
func servedAPIs() []API {
	var out []API
	for _, a := range apis {
		if a != nil {
			out = append(out, *a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

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

	b       *Broker
	api     *API
	started time.Time
}

// Serve implements transport.Handler: it parses the header, checks the key and version
// against the table, decodes the body and calls the API's handler, inline.
func (b *Broker) Serve(tr transport.Request) {
	b.metrics.bytesIn.Add(float64(len(tr.Frame) + 4))
	h, err := parseFixedHeader(tr.Frame)
	if err != nil {
		b.reject(tr, &h, err)
		return
	}
	api := lookupAPI(h.Key)
	if api == nil {
		b.reject(tr, &h, fmt.Errorf("%w %d", ErrUnknownAPIKey, h.Key))
		return
	}
	if h.Version < api.MinVersion || h.Version > api.MaxVersion {
		if h.Key == apiVersionsKey {
			b.answerUnsupportedApiVersions(tr, &h)
			return
		}
		b.reject(tr, &h, fmt.Errorf("%w: key %d version %d (serving %d..%d)", ErrUnsupportedVersion, h.Key, h.Version, api.MinVersion, api.MaxVersion))
		return
	}
	body, err := parseHeaderRest(&h, tr.Frame, isFlexible(h.Key, h.Version))
	if err != nil {
		b.reject(tr, &h, err)
		return
	}
	r := &Request{Header: h, Raw: body, Conn: tr.Conn, Ticket: tr.Ticket, Received: tr.Received, b: b, api: api, started: time.Now()}
	if !api.Raw {
		req := kmsg.RequestForKey(h.Key)
		req.SetVersion(h.Version)
		if err := req.ReadFrom(body); err != nil {
			b.reject(tr, &h, fmt.Errorf("%w: %s v%d: %v", ErrMalformedBody, kmsg.NameForKey(h.Key), h.Version, err))
			return
		}
		r.Body = req
	}
	b.metrics.api[h.Key].requests.Inc()
	b.call(api, r)
}

// call runs the handler, turning a handler panic (a bug) into a closed connection and
// an error log instead of a dead broker.
func (b *Broker) call(api *API, r *Request) {
	defer func() {
		if p := recover(); p != nil {
			b.panics.Add(1)
			b.log.Error("handler panicked; closing connection", "api", kmsg.NameForKey(api.Key),
				"version", r.Header.Version, "client", r.Header.ClientID, "panic", p)
			r.Conn.Close()
			r.Ticket.CloseConn()
		}
	}()
	api.Handle(b, r)
}

// reject closes the connection of a request that cannot be answered in its own schema.
func (b *Broker) reject(tr transport.Request, h *Header, err error) {
	b.metrics.rejected.Inc()
	b.log.Debug("closing connection: bad request", "remote", tr.Conn.RemoteAddr(), "key", h.Key,
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
	buf := AppendResponseHeader(rb.bb.B[:0], h)
	buf = resp.AppendTo(buf)
	rb.bb.B = buf
	rb.chunks[0] = transport.Chunk{Bytes: buf}
	return transport.Response{Chunks: rb.chunks[:], Release: rb}
}

// Respond encodes resp at the request's version with the right response header into a
// pooled buffer and answers the ticket.
func (r *Request) Respond(resp kmsg.Response) {
	r.RespondRaw(encodeResponse(&r.Header, resp))
}

// RespondRaw answers with a hand-framed response (for example Fetch: header and
// framing bytes plus file ranges); it must begin with the response header
// (AppendResponseHeader).
func (r *Request) RespondRaw(resp transport.Response) {
	m := r.b.metrics
	m.bytesOut.Add(float64(resp.Size() + 4))
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

func (r *Request) observe() {
	r.b.metrics.api[r.Header.Key].latency.Observe(time.Since(r.Received).Seconds())
}

// ResponseKind returns a new, empty response of the request's kind at its version.
func (r *Request) ResponseKind() kmsg.Response {
	resp := kmsg.ResponseForKey(r.Header.Key)
	resp.SetVersion(r.Header.Version)
	return resp
}
