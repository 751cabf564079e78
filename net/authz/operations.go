package authz

import (
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/acl"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// OperationsUnknown is KIP-430's value of an authorized-operations field that was not
// asked for or not computed (Java's Integer.MIN_VALUE): what handlers answer, and
// what a refused item keeps.
const OperationsUnknown int32 = math.MinInt32

// operations returns the amendment filling KIP-430's authorized-operations fields of
// Metadata, DescribeCluster and DescribeGroups when req asks for them: the operations
// the principal may perform, from the authorizer (Authorizer.AuthorizedOperations).
// Refused items (TOPIC_AUTHORIZATION_FAILED, ...) keep OperationsUnknown. nil when
// there is nothing to fill. StreamsGroupDescribe's rule fills its own.
func operations(a *acl.Authorizer, ctx acl.Context, req kmsg.Request) func(kmsg.Response) {
	switch req := req.(type) {
	case *kmsg.MetadataRequest:
		if !req.IncludeClusterAuthorizedOperations && !req.IncludeTopicAuthorizedOperations {
			return nil
		}
		return func(resp kmsg.Response) {
			m := resp.(*kmsg.MetadataResponse)
			if req.IncludeClusterAuthorizedOperations {
				m.AuthorizedOperations = a.AuthorizedOperations(ctx, metadata.ACLResourceCluster, acl.ClusterName)
			}
			if req.IncludeTopicAuthorizedOperations {
				for i := range m.Topics {
					if t := &m.Topics[i]; t.ErrorCode == 0 && t.Topic != nil {
						t.AuthorizedOperations = a.AuthorizedOperations(ctx, metadata.ACLResourceTopic, *t.Topic)
					}
				}
			}
		}
	case *kmsg.DescribeClusterRequest:
		if !req.IncludeClusterAuthorizedOperations {
			return nil
		}
		return func(resp kmsg.Response) {
			d := resp.(*kmsg.DescribeClusterResponse)
			if d.ErrorCode == 0 {
				d.ClusterAuthorizedOperations = a.AuthorizedOperations(ctx, metadata.ACLResourceCluster, acl.ClusterName)
			}
		}
	case *kmsg.DescribeGroupsRequest:
		if !req.IncludeAuthorizedOperations {
			return nil
		}
		return func(resp kmsg.Response) {
			d := resp.(*kmsg.DescribeGroupsResponse)
			for i := range d.Groups {
				if g := &d.Groups[i]; g.ErrorCode == 0 {
					g.AuthorizedOperations = a.AuthorizedOperations(ctx, metadata.ACLResourceGroup, g.Group)
				}
			}
		}
	}
	return nil
}
