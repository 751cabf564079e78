package auth

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
)

// Principal is Kafka's KafkaPrincipal: a type ("User") and a name. ACLs name principals
// by String ("User:alice").
type Principal struct {
	Type string
	Name string
}

// UserType is the type of every principal Samsa builds (Kafka's KafkaPrincipal.USER_TYPE).
const UserType = "User"

// Anonymous is the principal of PLAINTEXT connections and of TLS connections without a
// client certificate (Kafka's KafkaPrincipal.ANONYMOUS).
var Anonymous = Principal{Type: UserType, Name: "ANONYMOUS"}

// User returns the User principal called name.
func User(name string) Principal { return Principal{Type: UserType, Name: name} }

// String is type:name.
func (p Principal) String() string { return p.Type + ":" + p.Name }

// ErrInvalidPrincipal is returned by ParsePrincipal.
var ErrInvalidPrincipal = errors.New("auth: invalid principal")

// ParsePrincipal parses type:name (Kafka's SecurityUtils.parseKafkaPrincipal: split at
// the first ':'); both parts must be non-empty.
func ParsePrincipal(s string) (Principal, error) {
	typ, name, ok := strings.Cut(s, ":")
	if !ok || typ == "" || name == "" {
		return Principal{}, fmt.Errorf("%w: %q: want type:name (User:alice)", ErrInvalidPrincipal, s)
	}
	return Principal{Type: typ, Name: name}, nil
}

// PrincipalBuilder builds a connection's principal the way Kafka's
// DefaultKafkaPrincipalBuilder does:
//
//	PLAINTEXT         User:ANONYMOUS
//	SSL               User:<ssl.principal.mapping.rules applied to the client
//	                  certificate's subject, RFC 2253>, or User:ANONYMOUS without one
//	SASL_PLAINTEXT,   User:<the SASL authorization id> (for PLAIN and SCRAM, the
//	SASL_SSL          user name); the TLS certificate, if any, plays no part
type PrincipalBuilder struct {
	// Rules are ssl.principal.mapping.rules (nil: DEFAULT).
	Rules *MappingRules
}

// FromTLS returns the principal of a TLS connection (listener SSL) from its handshake
// state: the leaf client certificate's subject mapped by the rules, or Anonymous when
// the client sent no certificate. A subject no rule maps is an error (Kafka fails the
// connection's authentication).
func (b PrincipalBuilder) FromTLS(state *tls.ConnectionState) (Principal, error) {
	if state == nil || len(state.PeerCertificates) == 0 {
		return Anonymous, nil
	}
	dn, err := DistinguishedName(state.PeerCertificates[0].RawSubject)
	if err != nil {
		return Principal{}, err
	}
	name, err := b.Rules.Map(dn)
	if err != nil {
		return Principal{}, err
	}
	return User(name), nil
}

// FromSASL returns the principal of a SASL connection whose authentication named
// authorizationID.
func (PrincipalBuilder) FromSASL(authorizationID string) Principal { return User(authorizationID) }
