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
// (net/controllerapi's security.go).

package kafka

import (
	"github.com/samsa-broker/samsa/net/connauth"
)

func init() {
	register(API{Key: 17, MinVersion: 0, MaxVersion: 1, Handle: func(_ *Broker, r *Request) { connauth.SaslHandshake(r) }})
}
