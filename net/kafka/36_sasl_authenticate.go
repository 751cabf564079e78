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
	"github.com/samsa-broker/samsa/net/connauth"
)

func init() {
	register(API{Key: 36, MinVersion: 0, MaxVersion: 2, Handle: func(_ *Broker, r *Request) { connauth.SaslAuthenticate(r) }})
}
