package kafka

import (
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/authz"
	"github.com/samsa-broker/samsa/net/connauth"
)

// Authorisation of the requests of a SecureListener with an authorizer, and of the
// controller listener's (net/controllerapi's security.go), is net/authz's: before a
// handler runs, the listener hands it the request's key, version and body, the
// principal and the image, with the rule the API's registration names (API.Authz),
// and net/connauth carries out its decision: run the handler (on a narrowed body, its
// answer amended by Request.AmendWith), answer without it, or close the connection.
// Handlers know nothing of it, except StreamsGroupHeartbeat's, which asks
// createDenied before it creates topics.

// authorize decides r under api's rule on a listener with an authorizer; it reports
// whether r's handler is to run.
func (l *SecureListener) authorize(r *Request, api *API) bool {
	if l.sessions.Security().Authorizer == nil {
		return true
	}
	_, im := l.b.Image()
	return connauth.Apply(r, authz.Broker(secOf(r).Caller(im), connauth.AuthzRequest(r), api.Authz), l.sessions.Log())
}

// createDenied returns the topics of topics r's principal may not create
// (authz.CreateDenied): none without an authorizer.
func createDenied(r *Request, im *metadata.Image, topics []string) []string {
	cs := secOf(r)
	if cs == nil || cs.Authorizer() == nil {
		return nil
	}
	return authz.CreateDenied(cs.Caller(im), topics)
}

// AuthzRule is the authorisation rule the broker table's registration of key names
// (API.Authz; nil: none, or a key not served), which the controller listener applies
// too (net/controllerapi's Config.Rules).
func AuthzRule(key int16) authz.Rule {
	if api := lookupAPI(key); api != nil {
		return api.Authz
	}
	return nil
}
