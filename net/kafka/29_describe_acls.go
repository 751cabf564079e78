// DescribeAcls (key 29), versions 0-3.
//
// Answered from this broker's image (its ACLs, replicated as AccessControlEntryRecords
// by the controller quorum), as Kafka's brokers answer it from their authorizer: the
// ACLs matching the request's filter, grouped by resource pattern. Version 0 filters
// are LITERAL. Needs DESCRIBE on the cluster (its row, net/authz). A broker without an
// authorizer (authorizer.class.name unset) answers SECURITY_DISABLED, as Kafka does.

package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/acl"
)

func init() {
	register(API{Key: 29, MinVersion: 0, MaxVersion: 3, Handle: handleDescribeACLs})
}

// securityDisabled reports whether r arrived on a listener without an authorizer.
func securityDisabled(r *Request) bool { return secOf(r) == nil || secOf(r).Authorizer() == nil }

func handleDescribeACLs(b *Broker, r *Request) {
	req := r.Body.(*kmsg.DescribeACLsRequest)
	if securityDisabled(r) {
		resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
		resp.ErrorCode = kerr.SecurityDisabled.Code
		msg := "no authorizer is configured on the broker"
		resp.ErrorMessage = &msg
		r.Respond(resp)
		return
	}
	_, im := b.Image()
	r.Respond(acl.DescribeResponse(im.ACLs(), req))
}
