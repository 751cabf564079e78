package kafka

import (
	"log/slog"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/authz"
	"github.com/samsa-broker/samsa/net/transport"
	"github.com/samsa-broker/samsa/net/wire"
)

// Authorisation of the requests of a SecureListener with an authorizer, and of the
// controller listener's (controller_security.go), is net/authz's: before a handler
// runs, the listener hands it the request's key, version and body, the principal and
// the image, with the rule the API's registration names (API.Authz), and carries out
// its decision here: run the handler (on a narrowed body, its answer amended by
// Request.amend), answer without it, or close the connection. Handlers know nothing
// of it, except StreamsGroupHeartbeat's, which asks createDenied before it creates
// topics.

// authorize decides r under api's rule on a listener with an authorizer; it reports
// whether r's handler is to run.
func (l *SecureListener) authorize(r *Request, api *API) bool {
	if l.sec.Authorizer == nil {
		return true
	}
	_, im := l.b.Image()
	return r.applyAuthz(authz.Broker(r.sec.caller(im), r.authzRequest(), api.Authz), l.log)
}

// caller is cs's principal before its listener's authorizer, under the ACLs of im.
func (cs *connSecurity) caller(im *metadata.Image) authz.Caller {
	return authz.Caller{Authorizer: cs.l.sec.Authorizer, Principal: cs.ctx, Image: im}
}

// authzRequest is what net/authz reads of r.
func (r *Request) authzRequest() authz.Request {
	return authz.Request{Key: r.Header.Key, Version: r.Header.Version, Body: r.Body, Raw: r.Raw}
}

// applyAuthz carries out an authorisation decision on r; it reports whether r's
// handler is to run.
func (r *Request) applyAuthz(d authz.Decision, log *slog.Logger) bool {
	principal := ""
	if r.sec != nil {
		principal = r.sec.ctx.Principal
	}
	switch d.Outcome {
	case authz.Run:
		if d.Raw != nil {
			r.Raw = d.Raw
		}
		r.amendWith(d.Amend)
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

// amendWith adds f (nil: nothing) to the edits of r's answer, after those already
// there.
func (r *Request) amendWith(f func(kmsg.Response)) {
	prev := r.amend
	switch {
	case f == nil:
		return
	case prev == nil:
		r.amend = f
		return
	}
	r.amend = func(resp kmsg.Response) {
		prev(resp)
		f(resp)
	}
}

// createDenied returns the topics of topics r's principal may not create
// (authz.CreateDenied): none without an authorizer.
func createDenied(r *Request, im *metadata.Image, topics []string) []string {
	cs := r.sec
	if cs == nil || cs.l.sec.Authorizer == nil {
		return nil
	}
	return authz.CreateDenied(cs.caller(im), topics)
}

// amendRaw applies r.amend to a hand-framed answer (Fetch's: bytes and file ranges):
// it reads the answer into memory, decodes it, amends it and encodes it again. Only a
// split request (some of its items refused) takes this path.
// It reports false when the answer does not read back (the connection is then closed).
func (r *Request) amendRaw(raw transport.Response) (transport.Response, bool) {
	if raw.Release != nil {
		defer raw.Release.Release()
	}
	buf := make([]byte, 0, raw.Size())
	for _, ch := range raw.Chunks {
		if ch.File == nil {
			buf = append(buf, ch.Bytes...)
			continue
		}
		n := len(buf)
		buf = buf[:n+int(ch.Length)]
		if _, err := ch.File.ReadAt(buf[n:], ch.Offset); err != nil {
			return transport.Response{}, false
		}
	}
	hdr := len(wire.AppendResponseHeader(nil, &r.Header))
	resp := r.ResponseKind()
	if len(buf) < hdr || resp.ReadFrom(buf[hdr:]) != nil {
		return transport.Response{}, false
	}
	r.amend(resp)
	return encodeResponse(&r.Header, resp), true
}
