// DeleteAcls (key 31), versions 0-3.
//
// Forwarded to the active controller, which removes every ACL a filter matches
// (RemoveAccessControlEntryRecords, the request's as one entry) and reports each
// filter's matches; answered once this broker's image has the change. Version 0
// filters are LITERAL. Needs ALTER on the cluster (its row, net/authz). Without an
// authorizer: SECURITY_DISABLED on every filter.

package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/controller"
)

func init() {
	register(API{Key: 31, MinVersion: 0, MaxVersion: 3, Handle: handleDeleteACLs})
}

func handleDeleteACLs(b *Broker, r *Request) {
	if securityDisabled(r) {
		r.Respond(controller.ErrorResponse(r.Body, kerr.SecurityDisabled.Code, "no authorizer is configured on the broker"))
		return
	}
	req := r.Body.(*kmsg.DeleteACLsRequest)
	if r.Header.Version == 0 {
		for i := range req.Filters {
			req.Filters[i].ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
		}
	}
	b.forward(r, forwarded{write: true})
}
