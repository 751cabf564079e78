package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"runtime"
	"unicode/utf8"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// PlainAuthenticator checks a PLAIN user name and password. It must take the same time
// whether the user exists or not, compare secrets in constant time, and be safe for
// concurrent use.
type PlainAuthenticator interface {
	AuthenticatePlain(user, password string) bool
}

// maxPlainMessage bounds a PLAIN message: RFC 4616 asks servers to accept 255 octets
// for each of its three parts.
const maxPlainMessage = 4096

// NewPlain returns the PLAIN mechanism (RFC 4616) checking passwords with a.
//
// The client's one message is authzid NUL authcid NUL passwd. As Kafka's
// PlainSaslServer: exactly three parts, a non-empty user name and password; unlike
// Kafka, Samsa also refuses invalid UTF-8 and messages above 4 KiB. An authorization
// id that is not empty and differs from the user name is refused before the password
// is checked (CVE-2017-12610 class).
func NewPlain(a PlainAuthenticator) Mechanism { return plainMech{a} }

type plainMech struct{ a PlainAuthenticator }

func (plainMech) Name() string      { return MechPlain }
func (m plainMech) Start() Exchange { return &plainExchange{a: m.a} }

type plainExchange struct {
	a    PlainAuthenticator
	user string
	over bool
}

func (e *plainExchange) AuthorizationID() string { return e.user }

func (e *plainExchange) Next(msg []byte) ([]byte, bool, error) {
	if e.over {
		return nil, false, failf("PLAIN exchange is over")
	}
	e.over = true
	if len(msg) > maxPlainMessage {
		return nil, false, failf("SASL/PLAIN message of %d bytes (at most %d)", len(msg), maxPlainMessage)
	}
	if !utf8.Valid(msg) {
		return nil, false, failf("SASL/PLAIN message is not UTF-8")
	}
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return nil, false, failf("Invalid SASL/PLAIN response: expected 3 tokens, got %d", len(parts))
	}
	authzid, user, pass := string(parts[0]), string(parts[1]), string(parts[2])
	if user == "" {
		return nil, false, failf("username not specified")
	}
	if pass == "" {
		return nil, false, failf("password not specified")
	}
	if authzid != "" && authzid != user {
		return nil, false, failf("Client requested an authorization id that is different from username")
	}
	if !e.a.AuthenticatePlain(user, pass) {
		return nil, false, &Failure{Message: "Authentication failed: Invalid username or password", Reason: "PLAIN: invalid username or password for " + user}
	}
	e.user = user
	return nil, true, nil
}

// ScramPlain checks PLAIN passwords against SCRAM credentials: it salts the password
// with the user's SCRAM-SHA-512 credential (else its SCRAM-SHA-256 one) and compares the
// derived StoredKey with the stored one in constant time. A user without credentials
// costs a salting of the same work and fails. Salting is PBKDF2 (4096 to 16384
// iterations): to keep a storm of PLAIN attempts from taking every CPU, at most
// maxConcurrent saltings run at once (0: half of GOMAXPROCS, at least 1); the others
// wait their turn.
//
// Kafka has no such mode (its PLAIN reads passwords from the JAAS configuration); it
// lets a Samsa cluster keep one credential store, SCRAM records, for both mechanisms.
type ScramPlain struct {
	store  CredentialStore
	sem    chan struct{}
	secret [32]byte
}

// NewScramPlain returns a PLAIN authenticator over store.
func NewScramPlain(store CredentialStore, maxConcurrent int) *ScramPlain {
	if maxConcurrent <= 0 {
		maxConcurrent = max(1, runtime.GOMAXPROCS(0)/2)
	}
	p := &ScramPlain{store: store, sem: make(chan struct{}, maxConcurrent)}
	_, _ = rand.Read(p.secret[:])
	return p
}

// AuthenticatePlain implements PlainAuthenticator.
func (p *ScramPlain) AuthenticatePlain(user, password string) bool {
	c, ok := p.store.ScramCredential(user, metadata.ScramSHA512)
	if !ok {
		c, ok = p.store.ScramCredential(user, metadata.ScramSHA256)
	}
	if !ok {
		c = fakeCredential(p.secret[:], user, metadata.ScramSHA512)
	}
	p.sem <- struct{}{}
	salted, err := c.Mechanism.SaltPassword(password, c.Salt, int(c.Iterations))
	<-p.sem
	if err != nil {
		return false
	}
	stored, _ := c.Mechanism.Keys(salted)
	return subtle.ConstantTimeCompare(stored, c.StoredKey) == 1 && ok
}

// StaticPlain checks PLAIN passwords against a fixed table, the user_<name>="password"
// options of a PlainLoginModule JAAS configuration (Kafka's
// PlainServerCallbackHandler). It keeps an HMAC-SHA256 of each password under a random
// per-process key, not the password, and compares digests in constant time.
type StaticPlain struct {
	key     [32]byte
	digests map[string][]byte
}

// NewStaticPlain returns an authenticator for users (name → password).
func NewStaticPlain(users map[string]string) *StaticPlain {
	s := &StaticPlain{digests: make(map[string][]byte, len(users))}
	_, _ = rand.Read(s.key[:])
	for u, pw := range users {
		s.digests[u] = s.digest(pw)
	}
	return s
}

func (s *StaticPlain) digest(pw string) []byte {
	m := hmac.New(sha256.New, s.key[:])
	m.Write([]byte(pw))
	return m.Sum(nil)
}

// AuthenticatePlain implements PlainAuthenticator.
func (s *StaticPlain) AuthenticatePlain(user, password string) bool {
	want, ok := s.digests[user]
	got := s.digest(password)
	if !ok {
		want = make([]byte, len(got))
	}
	return subtle.ConstantTimeCompare(got, want) == 1 && ok
}

// StaticPlainFromJAAS builds a StaticPlain from a PlainLoginModule sasl.jaas.config
// (its user_<name> options).
func StaticPlainFromJAAS(j JAAS) (*StaticPlain, error) {
	if j.LoginModule != PlainLoginModule {
		return nil, fmt.Errorf("%w: login module %s is not %s", ErrInvalidJAAS, j.LoginModule, PlainLoginModule)
	}
	return NewStaticPlain(j.Users()), nil
}
