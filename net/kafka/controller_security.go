package kafka

import (
	"errors"
	"time"

	"github.com/samsa-broker/samsa/net/transport"
)

// The security of the CONTROLLER listener (ControllerConfig.Security): the same
// per-connection auth.Session as a broker's SecureListener (admit, the SaslHandshake
// and SaslAuthenticate handlers of 17_sasl_handshake.go and 36_sasl_authenticate.go,
// registered in the controller table too), so a SASL_SSL, SASL_PLAINTEXT or SSL
// controller listener serves nothing but ApiVersions and the SASL exchange before a
// connection authenticates, and closes a connection whose authentication fails or
// whose session expired without re-authentication (KIP-368). TLS itself is the
// transport's (transport.TLS.Listener on the Std transport).
//
// Not done: authorization on the controller listener. Every authenticated principal
// may send every controller API (Kafka asks CLUSTER_ACTION of brokers' requests
// there); restrict who authenticates with the listener's credentials.

// newControllerSessions returns the session keeper of a secured controller listener:
// a SecureListener without a broker, whose admit and session handlers only are used.
func newControllerSessions(h *ControllerHandler, sec ListenerSecurity) (*SecureListener, error) {
	if sec.Auth == nil {
		return nil, errors.New("kafka: a secured controller listener needs an auth server")
	}
	if sec.Authorizer != nil {
		return nil, errors.New("kafka: the controller listener does not authorize requests (an authorizer was given)")
	}
	if sec.Now == nil {
		sec.Now = time.Now
	}
	if sec.Name == "" {
		sec.Name = h.cfg.Listener
	}
	return &SecureListener{sec: sec, log: h.log.With("listener", sec.Name)}, nil
}

// secureConnOpened starts c's session; a connection the session refuses (an SSL
// client certificate no mapping rule maps) is closed.
func (h *ControllerHandler) secureConnOpened(c transport.Conn) {
	if _, err := h.sec.state(c); err != nil {
		h.sec.log.Info("refusing connection", "remote", c.RemoteAddr(), "err", err)
		c.Close()
	}
}
