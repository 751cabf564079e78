// CreateAcls (key 30), versions 0-3.
//
// Forwarded to the active controller, which validates each binding and writes an
// AccessControlEntryRecord for each new one, the request's records as one entry; the
// answer waits until this broker's image has them, so the client's next request here
// is decided by them. Needs ALTER on the cluster (its row, net/authz). Without an
// authorizer: SECURITY_DISABLED on every creation.

package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/controller"
)

func init() {
	register(API{Key: 30, MinVersion: 0, MaxVersion: 3, Handle: handleCreateACLs})
}

func handleCreateACLs(b *Broker, r *Request) {
	if securityDisabled(r) {
		r.Respond(controller.ErrorResponse(r.Body, kerr.SecurityDisabled.Code, "no authorizer is configured on the broker"))
		return
	}
	v := r.Header.Version
	req := r.Body.(*kmsg.CreateACLsRequest)
	if v == 0 {
		for i := range req.Creations {
			req.Creations[i].ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
		}
	}
	b.forward(r, forwarded{write: true})
}
