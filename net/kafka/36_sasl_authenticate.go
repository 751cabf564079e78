// SaslAuthenticate (key 36), versions 0-2.
//
// Carries the SASL tokens after a v1 SaslHandshake (17): each request's auth bytes go
// to the connection's net/auth session, its answer is the server's next message. v1+
// answers session_lifetime_ms once authenticated (connections.max.reauth.ms, KIP-368;
// 0 when sessions do not expire). A refused authentication is answered
// SASL_AUTHENTICATION_FAILED with a message that never says whether the user exists,
// after connection.failed.authentication.delay.ms (KIP-306), and the connection is
// closed; a SaslAuthenticate without a handshake is ILLEGAL_SASL_STATE and closes it
// too.
//
// Difference from Apache Kafka: the connection is closed a short grace period (1 s)
// after the failure's answer is handed to the transport, so the answer can leave first;
// Kafka closes as soon as it is written.

package kafka

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/auth"
	"github.com/samsa-broker/samsa/net/transport"
)

func init() {
	register(API{Key: 36, MinVersion: 0, MaxVersion: 2, Handle: handleSaslAuthenticate})
	registerController(API{Key: 36, MinVersion: 0, MaxVersion: 2, Control: func(_ *ControllerHandler, r *Request) { handleSaslAuthenticate(nil, r) }})
}

// saslCloseGrace is how long after a refusal's answer its connection is closed.
const saslCloseGrace = time.Second

func handleSaslAuthenticate(b *Broker, r *Request) {
	req := r.Body.(*kmsg.SASLAuthenticateRequest)
	resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	if secOf(r) == nil || !secOf(r).session.Protocol().SASL() {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate on a listener without SASL"
		resp.ErrorMessage = &msg
		r.Respond(resp)
		return
	}
	cs := secOf(r)
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

// closeSoon closes c after saslCloseGrace (its last answer leaves first).
func (l *SecureListener) closeSoon(c transport.Conn) {
	time.AfterFunc(saslCloseGrace, func() { c.Close() })
}
