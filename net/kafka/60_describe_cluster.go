// DescribeCluster (key 60), versions 0-2.
//
// This node is the only broker and the controller. EndpointType (v1+): 1 (brokers) and
// 2 (controllers, KIP-919) both answer with this node, since it plays both roles; other
// values answer UNSUPPORTED_ENDPOINT_TYPE. v2 reports IsFenced false.
//
// Differences from Apache Kafka: cluster authorized operations are never computed
// (INT32_MIN), as there is no authorizer.
package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(API{Key: 60, MinVersion: 0, MaxVersion: 2, Handle: handleDescribeCluster})
}

func handleDescribeCluster(b *Broker, r *Request) {
	req := r.Body.(*kmsg.DescribeClusterRequest)
	resp := r.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.ClusterAuthorizedOperations = authorizedOpsUnknown
	resp.EndpointType = req.EndpointType
	if r.Header.Version >= 1 && req.EndpointType != 1 && req.EndpointType != 2 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		r.Respond(resp)
		return
	}
	resp.ClusterID = b.cfg.ClusterID
	resp.ControllerID = b.cfg.NodeID
	resp.Brokers = []kmsg.DescribeClusterResponseBroker{{NodeID: b.cfg.NodeID, Host: b.cfg.Host, Port: b.cfg.Port, Rack: b.cfg.Rack}}
	r.Respond(resp)
}
