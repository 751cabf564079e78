package connauth

import (
	"log/slog"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/authz"
	"github.com/samsa-broker/samsa/net/request"
)

// The authorisation of a secured listener's requests is net/authz's decision; what a
// listener hands it of a request and a connection, and the carrying out of its
// decision on the request, are here, shared by the broker's and the controller's
// listeners.

// Caller is cs's principal before its listener's authorizer, under the ACLs of im.
func (cs *Conn) Caller(im *metadata.Image) authz.Caller {
	return authz.Caller{Authorizer: cs.Authorizer(), Principal: cs.Principal(), Image: im}
}

// AuthzRequest is what net/authz reads of r.
func AuthzRequest(r *request.Request) authz.Request {
	return authz.Request{Key: r.Header.Key, Version: r.Header.Version, Body: r.Body, Raw: r.Raw}
}

// Apply carries out an authorisation decision on r; it reports whether r's
// handler is to run.
func Apply(r *request.Request, d authz.Decision, log *slog.Logger) bool {
	principal := ""
	if cs := Of(r); cs != nil {
		principal = cs.Principal().Principal
	}
	switch d.Outcome {
	case authz.Run:
		if d.Raw != nil {
			r.Raw = d.Raw
		}
		r.AmendWith(d.Amend)
		return true
	case authz.Answered:
		if d.Reason != "" {
			log.Info("refusing request: "+d.Reason, "api", r.APIName(), "principal", principal)
		}
		r.Respond(d.Response)
	case authz.Unanswered:
		r.NoResponse()
	default:
		log.Warn("closing connection: request refused, "+d.Reason, "api", r.APIName(), "principal", principal)
		r.CloseConn()
	}
	return false
}
