package kafka

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/group"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/coordinator/txn"
)

// routing is what answers tell clients about the cluster, from the published image:
// which broker leads a coordinator's partition and at what address on the listener a
// request came in on (Metadata, FindCoordinator, DescribeCluster, KIP-951's
// NodeEndpoints), and which broker to call the controller. Safe from any goroutine.
type routing struct {
	listener     string // the broker's advertised listener (Config.Listener)
	meta         *View
	controllerID func() int32 // the active controller (Deps.ControllerID)
}

// endpoint is the address a client is told for broker bi: its endpoint of the
// advertised listener, else its first.
func (rt routing) endpoint(bi metadata.BrokerImage) (string, int32) {
	if e, ok := bi.Endpoint(rt.listener); ok {
		return e.Host, e.Port
	}
	return bi.Host, bi.Port
}

// advertisedController is the ControllerID clients are told: the active controller if
// it is a live broker, else the lowest live broker (which forwards), else -1.
func (rt routing) advertisedController(im *metadata.Image) int32 {
	live := im.UnfencedBrokers()
	if id := rt.controllerID(); id >= 0 && slices.Contains(live, id) {
		return id
	}
	if len(live) > 0 {
		return live[0]
	}
	return -1
}

// advertiseListener makes FindCoordinator's answer name the coordinators' endpoints
// of r's listener (Metadata and DescribeCluster call endpointFor themselves).
func (rt routing) advertiseListener(r *Request) {
	r.AmendWith(func(resp kmsg.Response) {
		im := rt.meta.Image()
		fc := resp.(*kmsg.FindCoordinatorResponse)
		if bi, ok := im.Broker(fc.NodeID); ok && fc.ErrorCode == 0 {
			fc.Host, fc.Port = rt.endpointFor(r, bi)
		}
		for i := range fc.Coordinators {
			c := &fc.Coordinators[i]
			if bi, ok := im.Broker(c.NodeID); ok && c.ErrorCode == 0 {
				c.Host, c.Port = rt.endpointFor(r, bi)
			}
		}
	})
}

// endpointFor is the address a client of r's listener is told for broker bi: bi's
// endpoint of that listener (Kafka advertises the listener a request arrived on), else
// the broker's configured one (endpoint).
func (rt routing) endpointFor(r *Request, bi metadata.BrokerImage) (string, int32) {
	if name := listenerOf(r); name != "" {
		if e, ok := bi.Endpoint(name); ok {
			return e.Host, e.Port
		}
	}
	return rt.endpoint(bi)
}

// LeaderEndpoint returns the address of broker id that a client of r's listener is
// told (endpointFor: Metadata's), from the published image, for KIP-951's
// NodeEndpoints in Produce and share answers. A fenced or unknown broker has none.
func (rt routing) LeaderEndpoint(r *Request, id int32) (host string, port int32, rack *string, ok bool) {
	bi, ok := rt.meta.Image().Broker(id)
	if !ok || bi.Fenced {
		return "", 0, nil, false
	}
	host, port = rt.endpointFor(r, bi)
	return host, port, bi.Rack, true
}

func (rt routing) findCoordinatorResponse(req *kmsg.FindCoordinatorRequest, keys []string) *kmsg.FindCoordinatorResponse {
	resp := kmsg.NewPtrFindCoordinatorResponse()
	resp.Version = req.Version
	im := rt.meta.Image()
	for _, key := range keys {
		rc := kmsg.NewFindCoordinatorResponseCoordinator()
		rc.Key, rc.NodeID, rc.Port = key, -1, -1
		id, host, port, code := rt.findCoordinator(im, req.CoordinatorType, key)
		if code == 0 {
			rc.NodeID, rc.Host, rc.Port = id, host, port
		} else {
			rc.ErrorCode = code
			msg := kerr.ErrorForCode(code).Error()
			rc.ErrorMessage = &msg
		}
		resp.Coordinators = append(resp.Coordinators, rc)
	}
	if req.Version < 4 && len(resp.Coordinators) == 1 {
		rc := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage = rc.ErrorCode, rc.ErrorMessage
		resp.NodeID, resp.Host, resp.Port = rc.NodeID, rc.Host, rc.Port
		resp.Coordinators = nil
	}
	return resp
}

// findCoordinator returns the broker coordinating key, or the error code.
func (rt routing) findCoordinator(im *metadata.Image, keyType int8, key string) (int32, string, int32, int16) {
	switch keyType {
	case 0: // group
		return rt.leaderOfKey(im, group.OffsetsTopic, key, group.PartitionFor)
	case 1: // transaction (txns.go)
		return rt.findTxnCoordinator(im, key)
	}
	return -1, "", -1, kerr.InvalidRequest.Code
}

// leaderOfKey returns the leader of key's partition of the internal topic (the
// coordinator of key), with its endpoint, or the error code: INVALID_REQUEST for an
// empty key, COORDINATOR_NOT_AVAILABLE while the topic or a live leader is missing.
func (rt routing) leaderOfKey(im *metadata.Image, topic, key string, partitionFor func(string, int32) int32) (int32, string, int32, int16) {
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
	host, port := rt.endpoint(bi)
	return leader, host, port, 0
}

// findTxnCoordinator returns the broker coordinating transactional id key: the
// leader of its __transaction_state partition in im, or the error code.
func (rt routing) findTxnCoordinator(im *metadata.Image, key string) (int32, string, int32, int16) {
	return rt.leaderOfKey(im, txn.StateTopic, key, txn.PartitionFor)
}
