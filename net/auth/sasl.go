package auth

import (
	"errors"
	"fmt"
	"strings"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// Mechanism names (sasl.enabled.mechanisms, SaslHandshake).
const (
	MechPlain       = "PLAIN"
	MechScramSHA256 = "SCRAM-SHA-256"
	MechScramSHA512 = "SCRAM-SHA-512"
)

// Sentinel errors. Check with errors.Is; the protocol layer maps them to Kafka's codes.
var (
	// ErrAuthenticationFailed: the client's credentials or messages were refused
	// (SASL_AUTHENTICATION_FAILED, 58). The error's text is safe to send to the client.
	ErrAuthenticationFailed = errors.New("auth: authentication failed")
	// ErrUnsupportedMechanism: SaslHandshake named a mechanism that is not enabled
	// (UNSUPPORTED_SASL_MECHANISM, 33).
	ErrUnsupportedMechanism = errors.New("auth: unsupported SASL mechanism")
	// ErrIllegalState: a SASL request out of order (ILLEGAL_SASL_STATE, 34).
	ErrIllegalState = errors.New("auth: illegal SASL state")
	// ErrNotAuthenticated: a request other than ApiVersions and the SASL ones before
	// authentication, or after the session expired. Kafka closes the connection.
	ErrNotAuthenticated = errors.New("auth: not authenticated")
)

// Failure is an authentication failure: Message is what the client is told (it never
// says whether the user exists); Reason is for the broker's log only.
type Failure struct {
	Message string
	Reason  string
}

func (f *Failure) Error() string { return f.Message }

// Is makes a Failure match ErrAuthenticationFailed.
func (f *Failure) Is(target error) bool { return target == ErrAuthenticationFailed }

// fail returns a Failure with Kafka's wording for mechanism mech.
func fail(mech, reason string) *Failure {
	return &Failure{Message: "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mech, Reason: reason}
}

// failf is fail with a client-visible message of its own (malformed messages, refused
// authorization ids: nothing secret).
func failf(format string, args ...any) *Failure {
	m := fmt.Sprintf(format, args...)
	return &Failure{Message: "Authentication failed: " + m, Reason: m}
}

// Mechanism is one SASL mechanism of the server. Safe for concurrent use.
type Mechanism interface {
	Name() string
	// Start begins one exchange.
	Start() Exchange
}

// Exchange is one server-side SASL exchange: a state machine with no I/O, used by one
// goroutine at a time.
type Exchange interface {
	// Next consumes the client's next message and returns the server's answer (the
	// auth bytes of the SaslAuthenticate response). done is true once the client is
	// authenticated; the answer may then still carry the server's final message. After
	// an error the exchange is over: errors wrap ErrAuthenticationFailed (a *Failure).
	// Next does not keep msg.
	Next(msg []byte) (answer []byte, done bool, err error)
	// AuthorizationID is the authenticated identity, once done.
	AuthorizationID() string
}

// CredentialStore looks up SCRAM credentials (salted; never passwords). The metadata
// image implements it through ImageCredentials. Safe for concurrent use.
type CredentialStore interface {
	ScramCredential(user string, m metadata.ScramMechanism) (metadata.ScramCredential, bool)
}

// ImageCredentials reads credentials from the current image: func returns the image
// the broker serves from (its published metadata image).
type ImageCredentials func() *metadata.Image

// ScramCredential implements CredentialStore.
func (f ImageCredentials) ScramCredential(user string, m metadata.ScramMechanism) (metadata.ScramCredential, bool) {
	im := f()
	if im == nil {
		return metadata.ScramCredential{}, false
	}
	return im.ScramCredential(user, m)
}

// Mechanisms builds the enabled mechanisms from sasl.enabled.mechanisms' names (case
// and spaces ignored): SCRAM mechanisms read store; PLAIN checks passwords with plain
// (nil: PLAIN is verified against the SCRAM credentials of store, ScramPlain).
// GSSAPI, OAUTHBEARER and others are refused.
func Mechanisms(names []string, store CredentialStore, plain PlainAuthenticator) ([]Mechanism, error) {
	var out []Mechanism
	seen := map[string]bool{}
	for _, n := range names {
		n = strings.ToUpper(strings.TrimSpace(n))
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		switch n {
		case MechPlain:
			if plain == nil {
				plain = NewScramPlain(store, 0)
			}
			out = append(out, NewPlain(plain))
		case MechScramSHA256:
			out = append(out, NewScram(metadata.ScramSHA256, store))
		case MechScramSHA512:
			out = append(out, NewScram(metadata.ScramSHA512, store))
		default:
			return nil, fmt.Errorf("%w: %s is not served (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", ErrUnsupportedMechanism, n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no mechanism enabled", ErrUnsupportedMechanism)
	}
	return out, nil
}
