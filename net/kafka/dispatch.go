package kafka

import (
	"fmt"
	"log/slog"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
	"github.com/samsa-broker/samsa/net/peer"
	"github.com/samsa-broker/samsa/net/request"
	"github.com/samsa-broker/samsa/net/transport"
	"github.com/samsa-broker/samsa/net/wire"
)

// Errors of request framing. They never reach a client as codes: a request whose
// header or body cannot be parsed, or whose key or version is not served, gets its
// connection closed (see doc.go, "Bad requests").
var (
	ErrMalformedHeader    = wire.ErrMalformedHeader
	ErrUnknownAPIKey      = request.ErrUnknownAPIKey
	ErrUnsupportedVersion = request.ErrUnsupportedVersion
	ErrMalformedBody      = request.ErrMalformedBody
)

// Header is a parsed request header (net/wire).
type Header = wire.Header

// Request is one decoded request as a handler sees it, and what answers it
// (net/request). Handlers may keep it until they answer it; Raw (and anything
// aliasing the frame) is invalid after the answer.
type Request = request.Request

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

// brokerAPIs is the broker listeners' table (the controller listener's is
// net/controllerapi's).
var brokerAPIs = &apiTable{name: "broker"}

// register adds api to the broker listener's table. Called once per API from its
// file's init; a duplicate or out-of-range key is a programming error and panics at
// start-up.
func register(api API) {
	if api.Handle == nil {
		panic(fmt.Sprintf("kafka: api key %d registered without Handle", api.Key))
	}
	brokerAPIs.add(api)
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

// keys lists the table's keys.
func (t *apiTable) keys() []int16 {
	var out []int16
	for _, a := range t.served() {
		out = append(out, a.Key)
	}
	return out
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

// Serve implements transport.Handler: it parses the header, checks the key and version
// against the broker listener's table, decodes the body and calls the API's handler,
// inline.
func (b *Broker) Serve(tr transport.Request) {
	api, r := parseRequest(tr, brokerAPIs, b.metrics, b.log, b.apiVersions)
	if r == nil {
		return
	}
	defer request.Recover(r, b.log, &b.panics)
	if r.Header.Key == findCoordinatorKey && b.cfg.Listener != "" {
		if name := listenerOf(r); name != "" && name != b.cfg.Listener {
			advertiseListener(b.route, r)
		}
	}
	b.handle(api, r) // quotas.go
}

// parseRequest parses one frame against table t (request.Parse): it returns the API
// and request to call, or a nil request when the frame was answered there (its
// connection closed as a bad request, or an ApiVersions at an unsupported version
// answered with the table, av).
func parseRequest(tr transport.Request, t *apiTable, m *metrics, log *slog.Logger, av []apiKeyEntry) (*API, *Request) {
	r := request.Parse(tr, t.spec, m.Metrics, log, av)
	if r == nil {
		return nil, nil
	}
	return t.lookup(r.Header.Key), r
}

// spec is the table's API of key as request.Parse reads it.
func (t *apiTable) spec(key int16) (request.Spec, bool) {
	a := t.lookup(key)
	if a == nil {
		return request.Spec{}, false
	}
	return request.Spec{Key: a.Key, MinVersion: a.MinVersion, MaxVersion: a.MaxVersion, Raw: a.Raw, Decode: a.Decode}, true
}

// apiName is kmsg's name of key, or the private API's.
func apiName(key int16) string {
	if key == peer.SamsaRaftKey {
		return "SamsaRaft"
	}
	return kmsg.NameForKey(key)
}
