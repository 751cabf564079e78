// SaslHandshake (key 17), versions 0-1.
//
// Served on every client listener before authentication. On a SASL listener the
// mechanism must be one of sasl.enabled.mechanisms: the answer lists them, and v1 makes
// the client send its tokens in SaslAuthenticate (36); v0 (legacy) makes it send them
// as raw frames, which the listener (authz_listener.go) answers as raw frames. A
// mechanism not enabled is answered UNSUPPORTED_SASL_MECHANISM, a handshake out of
// order ILLEGAL_SASL_STATE, and the connection is then closed, as Kafka does. On an
// authenticated connection with connections.max.reauth.ms set, a v1 handshake of the
// same mechanism begins a re-authentication (KIP-368). On a listener without SASL (or
// a broker served without a SecureListener) it is UNSUPPORTED_SASL_MECHANISM with no
// mechanisms listed. The controller listener serves it the same way
// (controller_security.go).

package kafka

import (
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/auth"
)

func init() {
	register(API{Key: 17, MinVersion: 0, MaxVersion: 1, Handle: handleSaslHandshake})
	registerController(API{Key: 17, MinVersion: 0, MaxVersion: 1, Control: func(_ *ControllerHandler, r *Request) { handleSaslHandshake(nil, r) }})
}

func handleSaslHandshake(b *Broker, r *Request) {
	req := r.Body.(*kmsg.SASLHandshakeRequest)
	resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
	if secOf(r) == nil || !secOf(r).session.Protocol().SASL() {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		r.Respond(resp)
		return
	}
	cs := secOf(r)
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
