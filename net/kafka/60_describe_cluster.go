// DescribeCluster (key 60), versions 0-2.
//
// On a broker listener (EndpointType 1, the only type before v1): the registered
// brokers that are not fenced (v2 with IncludeFencedBrokers: the fenced ones too,
// IsFenced set), each at its endpoint of the advertised listener, and as ControllerID
// the active controller when it is one of them, else the lowest live broker (which
// forwards controller-bound requests), as Metadata does. EndpointType 2 (controllers,
// KIP-919) is answered by the controller listener (v1-2): every voter at its controller
// listener (controller.quorum.voters; a dynamic quorum's members as its log records
// them, KIP-853) and as ControllerID the quorum's leader (-1
// while there is none). Each listener answers the other's type, and any other type,
// UNSUPPORTED_ENDPOINT_TYPE.
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
	if r.Header.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		resp.ErrorMessage = kmsg.StringPtr("a broker listener describes brokers (endpoint type 1); ask a controller listener for controllers")
		r.Respond(resp)
		return
	}
	im := b.meta.Image()
	resp.ClusterID = b.cfg.ClusterID
	resp.ControllerID = b.route.AdvertisedController(im)
	for _, bi := range im.Brokers() {
		if bi.Fenced && !(r.Header.Version >= 2 && req.IncludeFencedBrokers) {
			continue
		}
		host, port := b.route.EndpointFor(listenerOf(r), bi)
		resp.Brokers = append(resp.Brokers, kmsg.DescribeClusterResponseBroker{NodeID: bi.ID, Host: host, Port: port, Rack: bi.Rack, IsFenced: bi.Fenced})
	}
	r.Respond(resp)
}
