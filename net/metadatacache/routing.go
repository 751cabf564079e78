package metadatacache

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-broker/samsa/coordinator/group"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/coordinator/txn"
)

// Routing is what answers tell clients about the cluster, from the published image:
// which broker leads a coordinator's partition and at what address on the listener a
// request came in on (Metadata, FindCoordinator, DescribeCluster, KIP-951's
// NodeEndpoints), and which broker to call the controller. Safe from any goroutine.
type Routing struct {
	Listener     string // the broker's advertised listener
	View         *View
	ControllerID func() int32 // the active controller (-1: none known)
}

// Endpoint is the address a client is told for broker bi: its endpoint of the
// advertised listener, else its first.
func (rt Routing) Endpoint(bi metadata.BrokerImage) (string, int32) {
	if e, ok := bi.Endpoint(rt.Listener); ok {
		return e.Host, e.Port
	}
	return bi.Host, bi.Port
}

// AdvertisedController is the ControllerID clients are told: the active controller if
// it is a live broker, else the lowest live broker (which forwards), else -1.
func (rt Routing) AdvertisedController(im *metadata.Image) int32 {
	live := im.UnfencedBrokers()
	if id := rt.ControllerID(); id >= 0 && slices.Contains(live, id) {
		return id
	}
	if len(live) > 0 {
		return live[0]
	}
	return -1
}

// EndpointFor is the address a client of r's listener is told for broker bi: bi's
// Endpoint of that listener (Kafka advertises the listener a request arrived on), else
// the broker's configured one (endpoint).
func (rt Routing) EndpointFor(listener string, bi metadata.BrokerImage) (string, int32) {
	if name := listener; name != "" {
		if e, ok := bi.Endpoint(name); ok {
			return e.Host, e.Port
		}
	}
	return rt.Endpoint(bi)
}

// LeaderEndpoint returns the address of broker id that a client of r's listener is
// told (endpointFor: Metadata's), from the published image, for KIP-951's
// NodeEndpoints in Produce and share answers. A fenced or unknown broker has none.
func (rt Routing) LeaderEndpoint(listener string, id int32) (host string, port int32, rack *string, ok bool) {
	bi, ok := rt.View.Image().Broker(id)
	if !ok || bi.Fenced {
		return "", 0, nil, false
	}
	host, port = rt.EndpointFor(listener, bi)
	return host, port, bi.Rack, true
}

// FindCoordinator returns the broker coordinating key, or the error code.
func (rt Routing) FindCoordinator(im *metadata.Image, keyType int8, key string) (int32, string, int32, int16) {
	switch keyType {
	case 0: // group
		return rt.LeaderOfKey(im, group.OffsetsTopic, key, group.PartitionFor)
	case 1: // transaction (txns.go)
		return rt.findTxnCoordinator(im, key)
	}
	return -1, "", -1, kerr.InvalidRequest.Code
}

// LeaderOfKey returns the leader of key's partition of the internal topic (the
// coordinator of key), with its endpoint, or the error code: INVALID_REQUEST for an
// empty key, COORDINATOR_NOT_AVAILABLE while the topic or a live leader is missing.
func (rt Routing) LeaderOfKey(im *metadata.Image, topic, key string, partitionFor func(string, int32) int32) (int32, string, int32, int16) {
	if key == "" {
		return -1, "", -1, kerr.InvalidRequest.Code
	}
	t, ok := im.Topic(topic)
	if !ok || len(t.Partitions) == 0 {
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code
	}
	leader := t.Partitions[partitionFor(key, int32(len(t.Partitions)))].Leader
	bi, ok := im.Broker(leader)
	if leader < 0 || !ok || bi.Fenced {
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code
	}
	host, port := rt.Endpoint(bi)
	return leader, host, port, 0
}

// findTxnCoordinator returns the broker coordinating transactional id key: the
// leader of its __transaction_state partition in im, or the error code.
func (rt Routing) findTxnCoordinator(im *metadata.Image, key string) (int32, string, int32, int16) {
	return rt.LeaderOfKey(im, txn.StateTopic, key, txn.PartitionFor)
}
