package request

import (
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// softwareName is the pattern ClientSoftwareName and ClientSoftwareVersion must match
// (KIP-511).
var softwareName = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

// ApiVersionsResponse answers an ApiVersions request of a listener advertising keys,
// on node nodeID of cluster clusterID.
func ApiVersionsResponse(r *Request, keys []kmsg.ApiVersionsResponseApiKey, clusterID string, nodeID int32) *kmsg.ApiVersionsResponse {
	req := r.Body.(*kmsg.ApiVersionsRequest)
	resp := r.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = keys
	resp.FinalizedFeaturesEpoch = -1
	v := r.Header.Version
	switch {
	case v >= 3 && (!softwareName.MatchString(req.ClientSoftwareName) || !softwareName.MatchString(req.ClientSoftwareVersion)):
		resp.ErrorCode = kerr.InvalidRequest.Code
	case v >= 5 && (req.ClusterID == nil) != (req.NodeID == -1):
		resp.ErrorCode = kerr.InvalidRequest.Code
	case v >= 5 && req.ClusterID != nil && (*req.ClusterID != clusterID || req.NodeID != nodeID):
		resp.ErrorCode = kerr.RebootstrapRequired.Code
	}
	return resp
}
