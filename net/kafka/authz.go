package kafka

import (
	"log/slog"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/authz"
	"github.com/samsa-broker/samsa/net/connauth"
)

// Authorisation of the requests of a SecureListener with an authorizer, and of the
// controller listener's (controller_security.go), is net/authz's: before a handler
// runs, the listener hands it the request's key, version and body, the principal and
// the image, with the rule the API's registration names (API.Authz), and carries out
// its decision here: run the handler (on a narrowed body, its answer amended by
// Request.AmendWith), answer without it, or close the connection. Handlers know nothing
// of it, except StreamsGroupHeartbeat's, which asks createDenied before it creates
// topics.

// authorize decides r under api's rule on a listener with an authorizer; it reports
// whether r's handler is to run.
func (l *SecureListener) authorize(r *Request, api *API) bool {
	if l.sessions.Security().Authorizer == nil {
		return true
	}
	_, im := l.b.Image()
	return applyAuthz(r, authz.Broker(caller(secOf(r), im), authzRequest(r), api.Authz), l.sessions.Log())
}

// caller is cs's principal before its listener's authorizer, under the ACLs of im.
func caller(cs *connauth.Conn, im *metadata.Image) authz.Caller {
	return authz.Caller{Authorizer: cs.Authorizer(), Principal: cs.Principal(), Image: im}
}

// authzRequest is what net/authz reads of r.
func authzRequest(r *Request) authz.Request {
	return authz.Request{Key: r.Header.Key, Version: r.Header.Version, Body: r.Body, Raw: r.Raw}
}

// applyAuthz carries out an authorisation decision on r; it reports whether r's
// handler is to run.
func applyAuthz(r *Request, d authz.Decision, log *slog.Logger) bool {
	principal := ""
	if cs := secOf(r); cs != nil {
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
			log.Info("refusing request: "+d.Reason, "api", apiName(r.Header.Key), "principal", principal)
		}
		r.Respond(d.Response)
	case authz.Unanswered:
		r.NoResponse()
	default:
		log.Warn("closing connection: request refused, "+d.Reason, "api", apiName(r.Header.Key), "principal", principal)
		r.CloseConn()
	}
	return false
}

// createDenied returns the topics of topics r's principal may not create
// (authz.CreateDenied): none without an authorizer.
func createDenied(r *Request, im *metadata.Image, topics []string) []string {
	cs := secOf(r)
	if cs == nil || cs.Authorizer() == nil {
		return nil
	}
	return authz.CreateDenied(caller(cs, im), topics)
}
