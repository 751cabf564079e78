package connauth

import (
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/auth"
	"github.com/samsa-broker/samsa/net/request"
)

// SaslHandshake answers a SaslHandshake request (key 17) on r's connection: the
// mechanisms the listener offers, UNSUPPORTED_SASL_MECHANISM for another one or on a
// listener without SASL, ILLEGAL_SASL_STATE out of order (the connection is then
// closed soon after the answer).
func SaslHandshake(r *request.Request) {
	req := r.Body.(*kmsg.SASLHandshakeRequest)
	resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
	if Of(r) == nil || !Of(r).session.Protocol().SASL() {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		r.Respond(resp)
		return
	}
	cs := Of(r)
	mechs, err := cs.session.Handshake(r.Header.Version, req.Mechanism, cs.l.sec.Now())
	resp.SupportedMechanisms = slices.Clone(mechs)
	if err != nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		if errors.Is(err, auth.ErrUnsupportedMechanism) {
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		}
		cs.l.log.Info("SASL handshake refused", "remote", r.Conn.RemoteAddr(), "mechanism", req.Mechanism, "err", err)
		r.Respond(resp)
		cs.l.closeSoon(r.Conn)
		return
	}
	r.Respond(resp)
}

// SaslAuthenticate answers a SaslAuthenticate request (key 36) on r's connection: the
// mechanism's next challenge, the session's lifetime once it is done (KIP-368), or
// SASL_AUTHENTICATION_FAILED (answered after the failure delay, KIP-306, the
// connection then closed soon after), ILLEGAL_SASL_STATE out of order or on a
// listener without SASL.
func SaslAuthenticate(r *request.Request) {
	req := r.Body.(*kmsg.SASLAuthenticateRequest)
	resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	if Of(r) == nil || !Of(r).session.Protocol().SASL() {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate on a listener without SASL"
		resp.ErrorMessage = &msg
		r.Respond(resp)
		return
	}
	cs := Of(r)
	res, err := cs.session.Authenticate(r.Header.Version, req.SASLAuthBytes, cs.l.sec.Now())
	if err != nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		if errors.Is(err, auth.ErrAuthenticationFailed) {
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		}
		msg := err.Error()
		resp.ErrorMessage = &msg
		cs.l.log.Info("SASL authentication failed", "remote", r.Conn.RemoteAddr(), "mechanism", cs.session.Mechanism(), "reason", failureReason(err))
		d := cs.l.sec.Auth.FailureDelay()
		if d <= 0 {
			r.Respond(resp)
			cs.l.closeSoon(r.Conn)
			return
		}
		time.AfterFunc(d, func() {
			r.Respond(resp)
			cs.l.closeSoon(r.Conn)
		})
		return
	}
	resp.SASLAuthBytes = append([]byte(nil), res.Challenge...)
	if res.Done {
		cs.authenticated()
		resp.SessionLifetimeMillis = res.SessionLifetime.Milliseconds()
	}
	r.Respond(resp)
}
