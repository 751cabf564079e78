package controllerapi

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
	"github.com/samsa-broker/samsa/net/connauth"
	"github.com/samsa-broker/samsa/net/peer"
	"github.com/samsa-broker/samsa/net/request"
)

// api is one entry of the controller listener's table.
type api struct {
	spec   request.Spec
	handle func(h *Handler, r *request.Request)
}

// apis is the controller listener's table, filled by init functions and read-only
// afterwards. An API it does not list closes the connection, as Kafka does for an API
// a listener does not serve.
var apis = map[int16]api{}

// register adds an API to the table; a key registered twice, or a version range kmsg
// does not know, is a programming error and panics at start-up.
func register(spec request.Spec, handle func(h *Handler, r *request.Request)) {
	if _, dup := apis[spec.Key]; dup {
		panic("controllerapi: api key registered twice")
	}
	if proto := kmsg.RequestForKey(spec.Key); proto != nil && spec.MaxVersion > proto.MaxVersion() {
		spec.MaxVersion = proto.MaxVersion()
	} else if proto == nil && spec.Decode == nil {
		panic("controllerapi: api key unknown to kmsg and without a decoder")
	}
	apis[spec.Key] = api{spec: spec, handle: handle}
}

// lookup is the table as request.Parse reads it.
func lookup(key int16) (request.Spec, bool) {
	a, ok := apis[key]
	return a.spec, ok
}

// APIs lists the APIs the controller listener serves, sorted by key.
func APIs() []request.Spec {
	out := make([]request.Spec, 0, len(apis))
	for _, a := range apis {
		out = append(out, a.spec)
	}
	slices.SortFunc(out, func(a, b request.Spec) int { return int(a.Key) - int(b.Key) })
	return out
}

// keys lists the served keys, sorted.
func keys() []int16 {
	var out []int16
	for _, s := range APIs() {
		out = append(out, s.Key)
	}
	return out
}

// apiVersions is what ApiVersions advertises: the table.
func apiVersions() []kmsg.ApiVersionsResponseApiKey {
	var out []kmsg.ApiVersionsResponseApiKey
	for _, s := range APIs() {
		out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: s.Key, MinVersion: s.MinVersion, MaxVersion: s.MaxVersion})
	}
	return out
}

// apiName is kmsg's name of key, or the private API's.
func apiName(key int16) string {
	if key == peer.SamsaRaftKey {
		return "SamsaRaft"
	}
	return kmsg.NameForKey(key)
}

func ptr(s string) *string { return &s }

func init() {
	register(request.Spec{Key: 18, MinVersion: 0, MaxVersion: 5}, handleApiVersions)
	register(request.Spec{Key: 60, MinVersion: 1, MaxVersion: 2}, handleDescribeControllers)
	register(request.Spec{Key: 17, MinVersion: 0, MaxVersion: 1}, func(_ *Handler, r *request.Request) { connauth.SaslHandshake(r) })
	register(request.Spec{Key: 36, MinVersion: 0, MaxVersion: 2}, func(_ *Handler, r *request.Request) { connauth.SaslAuthenticate(r) })
}

// handleApiVersions is ApiVersions on the controller listener: its own table
// (SamsaRaft included).
func handleApiVersions(h *Handler, r *request.Request) {
	r.Respond(request.ApiVersionsResponse(r, h.apiVersions, h.cfg.ClusterID, h.cfg.NodeID))
}

// handleDescribeControllers is DescribeCluster (key 60) on the controller listener,
// versions 1-2: the voters' controller listeners (EndpointType 2, KIP-919), the
// quorum's leader as ControllerID; another endpoint type is UNSUPPORTED_ENDPOINT_TYPE.
func handleDescribeControllers(h *Handler, r *request.Request) {
	req := r.Body.(*kmsg.DescribeClusterRequest)
	resp := r.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.ClusterAuthorizedOperations = authz.OperationsUnknown
	resp.EndpointType = req.EndpointType
	if req.EndpointType != 2 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		resp.ErrorMessage = ptr("a controller listener describes controllers (endpoint type 2); ask a broker listener for brokers")
		r.Respond(resp)
		return
	}
	resp.ClusterID = h.cfg.ClusterID
	resp.ControllerID, _ = h.voter.Leader()
	for _, v := range h.voterList() {
		resp.Brokers = append(resp.Brokers, kmsg.DescribeClusterResponseBroker{NodeID: v.ID, Host: v.Host, Port: v.Port})
	}
	r.Respond(resp)
}
