package auth

import (
	"crypto/tls"
	"fmt"
	"slices"
	"strings"
	"time"
)

// SecurityProtocol is a listener's security protocol (listener.security.protocol.map);
// the values are Kafka's ids, as metadata.Endpoint carries them.
type SecurityProtocol int16

// The protocols.
const (
	Plaintext     SecurityProtocol = 0
	SSL           SecurityProtocol = 1
	SASLPlaintext SecurityProtocol = 2
	SASLSSL       SecurityProtocol = 3
)

// ParseSecurityProtocol reads PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (any case).
func ParseSecurityProtocol(s string) (SecurityProtocol, bool) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "PLAINTEXT":
		return Plaintext, true
	case "SSL":
		return SSL, true
	case "SASL_PLAINTEXT":
		return SASLPlaintext, true
	case "SASL_SSL":
		return SASLSSL, true
	}
	return 0, false
}

func (p SecurityProtocol) String() string {
	switch p {
	case Plaintext:
		return "PLAINTEXT"
	case SSL:
		return "SSL"
	case SASLPlaintext:
		return "SASL_PLAINTEXT"
	case SASLSSL:
		return "SASL_SSL"
	}
	return fmt.Sprintf("SecurityProtocol(%d)", int16(p))
}

// SASL reports whether connections of p authenticate with SASL.
func (p SecurityProtocol) SASL() bool { return p == SASLPlaintext || p == SASLSSL }

// TLS reports whether connections of p are TLS.
func (p SecurityProtocol) TLS() bool { return p == SSL || p == SASLSSL }

// Kafka API keys the session handles (kmsg's values).
const (
	keySASLHandshake    int16 = 17
	keyApiVersions      int16 = 18
	keySASLAuthenticate int16 = 36
)

// Defaults of ServerConfig (Kafka's).
const (
	DefaultFailureDelay   = 100 * time.Millisecond // connection.failed.authentication.delay.ms
	DefaultMaxReceiveSize = 524288                 // sasl.server.max.receive.size
)

// ServerConfig configures the authentication of a listener.
type ServerConfig struct {
	// Mechanisms are the enabled SASL mechanisms (sasl.enabled.mechanisms), in the
	// order SaslHandshake lists them. Needed for SASL listeners only.
	Mechanisms []Mechanism
	// MaxReauth is connections.max.reauth.ms: a SASL session's lifetime (KIP-368). 0:
	// sessions never expire and re-authentication is refused.
	MaxReauth time.Duration
	// FailureDelay is connection.failed.authentication.delay.ms (KIP-306): how long the
	// answer to a failed authentication is held before it is sent and the connection
	// closed. 0: none (Kafka's default, DefaultFailureDelay, is the config key's).
	FailureDelay time.Duration
	// MaxReceiveSize is sasl.server.max.receive.size: the largest request accepted
	// before authentication (default DefaultMaxReceiveSize).
	MaxReceiveSize int
	// Principals builds principals (ssl.principal.mapping.rules).
	Principals PrincipalBuilder
}

// Server holds a listener's authentication configuration and starts one Session per
// connection. Safe for concurrent use.
type Server struct {
	cfg   ServerConfig
	mechs map[string]Mechanism
	names []string
}

// NewServer checks cfg and returns its server.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.FailureDelay < 0 {
		return nil, fmt.Errorf("auth: connection.failed.authentication.delay.ms %v is negative", cfg.FailureDelay)
	}
	if cfg.MaxReceiveSize <= 0 {
		cfg.MaxReceiveSize = DefaultMaxReceiveSize
	}
	if cfg.MaxReauth < 0 {
		return nil, fmt.Errorf("auth: connections.max.reauth.ms %v is negative", cfg.MaxReauth)
	}
	s := &Server{cfg: cfg, mechs: map[string]Mechanism{}}
	for _, m := range cfg.Mechanisms {
		if _, dup := s.mechs[m.Name()]; dup {
			return nil, fmt.Errorf("auth: mechanism %s listed twice", m.Name())
		}
		s.mechs[m.Name()] = m
		s.names = append(s.names, m.Name())
	}
	return s, nil
}

// EnabledMechanisms lists the mechanisms SaslHandshake answers with. Shared: do not
// modify.
func (s *Server) EnabledMechanisms() []string { return s.names }

// FailureDelay is how long a failed authentication's answer waits (KIP-306).
func (s *Server) FailureDelay() time.Duration { return s.cfg.FailureDelay }

// MaxReceiveSize is the request size limit before authentication: the handler sets it
// on SASL connections when they open (transport.SetMaxRequestBytes) and lifts it once
// they authenticate.
func (s *Server) MaxReceiveSize() int { return s.cfg.MaxReceiveSize }

// NewSession starts the authentication state of a connection of protocol p. tlsState
// is the connection's TLS state (SSL: the principal comes from it; nil on plaintext
// connections). A PLAINTEXT or SSL session is authenticated at once; an SSL client
// certificate no mapping rule maps is an error (close the connection, as Kafka does).
func (s *Server) NewSession(p SecurityProtocol, tlsState *tls.ConnectionState, now time.Time) (*Session, error) {
	ses := &Session{srv: s, proto: p}
	switch p {
	case Plaintext:
		ses.state, ses.principal = stateAuthenticated, Anonymous
	case SSL:
		pr, err := s.cfg.Principals.FromTLS(tlsState)
		if err != nil {
			return nil, err
		}
		ses.state, ses.principal = stateAuthenticated, pr
	case SASLPlaintext, SASLSSL:
		if len(s.names) == 0 {
			return nil, fmt.Errorf("%w: listener %s has no SASL mechanism enabled", ErrUnsupportedMechanism, p)
		}
		ses.state = stateInitial
	default:
		return nil, fmt.Errorf("auth: unknown security protocol %d", p)
	}
	return ses, nil
}

type sessionState uint8

const (
	stateInitial       sessionState = iota // SASL: ApiVersions or SaslHandshake expected
	stateHandshaken                        // SASL: SaslAuthenticate (or a raw token) expected
	stateAuthenticated                     // requests are served
	stateFailed                            // authentication failed: the connection closes
)

// Session is one connection's authentication state, Kafka's SaslServerAuthenticator
// and the re-authentication rules of KIP-368, with no I/O. The protocol layer calls
// Admit before serving any request, Handshake for SaslHandshake (17), Authenticate for
// SaslAuthenticate (36), RawToken for the frames that follow a version-0 handshake.
// Used by one goroutine at a time (the connection's Serve).
//
//	        ApiVersions
//	         ┌──┐
//	         ▼  │    SaslHandshake        SaslAuthenticate*
//	SASL ─▶ initial ──────────────▶ handshaken ────────────▶ authenticated ◀─ PLAINTEXT, SSL
//	                                  ▲   │ failure            │
//	                                  │   ▼                    │ SaslHandshake (KIP-368:
//	                                  │ failed (closes)        │ same mechanism, v1+,
//	                                  └────────────────────────┘ connections.max.reauth.ms)
type Session struct {
	srv   *Server
	proto SecurityProtocol
	state sessionState

	mech      Mechanism
	exchange  Exchange
	raw       bool // the handshake was version 0: tokens come as raw frames
	reauth    bool // re-authenticating an authenticated session
	reauthOK  bool // the client authenticated with SaslAuthenticate v1+ (it can re-authenticate)
	principal Principal
	expiry    time.Time // zero: never
}

// Protocol is the session's security protocol.
func (s *Session) Protocol() SecurityProtocol { return s.proto }

// Authenticated reports whether requests may be served (and the principal is set).
func (s *Session) Authenticated() bool {
	return s.state == stateAuthenticated || (s.reauth && s.state == stateHandshaken)
}

// Principal is the authenticated principal (valid once Authenticated).
func (s *Session) Principal() Principal { return s.principal }

// Mechanism is the SASL mechanism of the session ("" for PLAINTEXT and SSL).
func (s *Session) Mechanism() string {
	if s.mech == nil {
		return ""
	}
	return s.mech.Name()
}

// Expiry is when the session expires (zero: never).
func (s *Session) Expiry() time.Time { return s.expiry }

// ExpectsRawToken reports whether the next frame is a raw SASL token (after a
// version-0 SaslHandshake) rather than a Kafka request.
func (s *Session) ExpectsRawToken() bool { return s.state == stateHandshaken && s.raw }

func (s *Session) expired(now time.Time) bool { return !s.expiry.IsZero() && !now.Before(s.expiry) }

// Admit reports whether a request of API key may be served now. An error means the
// connection must be closed without an answer (Kafka's behaviour): before
// authentication only ApiVersions and the SASL requests come (ErrNotAuthenticated);
// after the session expired only SaslHandshake (to re-authenticate) and SaslAuthenticate
// of that re-authentication; nothing after a failure.
func (s *Session) Admit(key int16, now time.Time) error {
	sasl := key == keySASLHandshake || key == keySASLAuthenticate
	switch {
	case s.state == stateFailed:
		return fmt.Errorf("%w: authentication failed", ErrNotAuthenticated)
	case !s.proto.SASL():
		return nil
	case s.state == stateInitial:
		if sasl || key == keyApiVersions {
			return nil
		}
		return fmt.Errorf("%w: unexpected request of API key %d during SASL handshake", ErrNotAuthenticated, key)
	case s.state == stateHandshaken && s.raw:
		return fmt.Errorf("%w: a raw SASL token was expected (version 0 handshake), got a request of API key %d", ErrNotAuthenticated, key)
	case s.state == stateHandshaken && !s.reauth:
		if key == keySASLAuthenticate {
			return nil
		}
		return fmt.Errorf("%w: unexpected request of API key %d during SASL authentication", ErrNotAuthenticated, key)
	}
	// Authenticated, or re-authenticating an authenticated session.
	if s.expired(now) && !(sasl && s.reauthOK) {
		return fmt.Errorf("%w: session expired at %s and was not re-authenticated", ErrNotAuthenticated, s.expiry.Format(time.RFC3339Nano))
	}
	return nil
}

// HandshakeError carries the answer of a refused SaslHandshake: the protocol layer
// sends the error code (UNSUPPORTED_SASL_MECHANISM or ILLEGAL_SASL_STATE) with the
// enabled mechanisms, then closes the connection.
type HandshakeError struct {
	Err     error // ErrUnsupportedMechanism or ErrIllegalState
	Message string
}

func (e *HandshakeError) Error() string { return e.Message }
func (e *HandshakeError) Unwrap() error { return e.Err }

// Handshake handles SaslHandshake (17) of version: the mechanism must be enabled;
// version 0 means the tokens follow as raw frames. On an authenticated SASL session
// with connections.max.reauth.ms set and a client that authenticated with
// SaslAuthenticate v1+, it begins a re-authentication, which must use the same
// mechanism; also after the session expired, as Kafka's
// KafkaChannel.maybeBeginServerReauthentication (only other requests are refused then,
// by Admit). It returns the enabled mechanisms (the response's list) and, on refusal, a
// *HandshakeError: answer it, then close.
func (s *Session) Handshake(version int16, mechanism string, now time.Time) ([]string, error) {
	enabled := s.srv.names
	refuse := func(err error, format string, args ...any) ([]string, error) {
		s.state = stateFailed
		return enabled, &HandshakeError{Err: err, Message: fmt.Sprintf(format, args...)}
	}
	if !s.proto.SASL() {
		return enabled, &HandshakeError{Err: ErrIllegalState, Message: "SaslHandshake on a listener without SASL (" + s.proto.String() + ")"}
	}
	m, ok := s.srv.mechs[mechanism]
	switch {
	case s.state == stateInitial:
		if !ok {
			return refuse(ErrUnsupportedMechanism, "unsupported SASL mechanism %q (enabled: %s)", mechanism, strings.Join(enabled, ", "))
		}
		s.mech, s.exchange, s.raw = m, m.Start(), version == 0
		s.state = stateHandshaken
		return enabled, nil
	case s.state == stateAuthenticated:
		if s.srv.cfg.MaxReauth <= 0 || !s.reauthOK || version == 0 {
			return refuse(ErrIllegalState, "Unexpected SaslHandshake request received after successful authentication")
		}
		if !ok || m.Name() != s.mech.Name() {
			return refuse(ErrUnsupportedMechanism, "re-authentication failure: SASL mechanism change (%s -> %s) not allowed", s.mech.Name(), mechanism)
		}
		s.exchange, s.reauth = m.Start(), true
		s.state = stateHandshaken
		return enabled, nil
	}
	return refuse(ErrIllegalState, "unexpected SaslHandshake request")
}

// AuthResult is the answer to one SaslAuthenticate request or raw token.
type AuthResult struct {
	// Challenge is the server's message (the response's auth_bytes, or the raw frame).
	Challenge []byte
	// Done: the session is authenticated (or re-authenticated).
	Done bool
	// SessionLifetime is the response's session_lifetime_ms once Done (SaslAuthenticate
	// v1+): the time left until the session expires, 0 if it never does.
	SessionLifetime time.Duration
}

// Authenticate handles SaslAuthenticate (36) of version with the client's auth bytes.
// Errors: ErrIllegalState when no SASL authentication is under way (answer
// ILLEGAL_SASL_STATE and close); a *Failure (ErrAuthenticationFailed) when the
// credentials or messages are refused: answer SASL_AUTHENTICATION_FAILED with its
// Message after FailureDelay, then close.
func (s *Session) Authenticate(version int16, token []byte, now time.Time) (AuthResult, error) {
	if s.state != stateHandshaken || s.raw {
		s.state = stateFailed
		return AuthResult{}, fmt.Errorf("%w: SaslAuthenticate without a SaslHandshake (v1+) before it", ErrIllegalState)
	}
	if !s.reauth {
		s.reauthOK = version >= 1
	}
	return s.step(token, now)
}

// RawToken handles a raw SASL token frame after a version-0 SaslHandshake (the answer
// is sent as a raw frame too). A failure closes the connection without an answer.
func (s *Session) RawToken(token []byte, now time.Time) (AuthResult, error) {
	if s.state != stateHandshaken || !s.raw {
		s.state = stateFailed
		return AuthResult{}, fmt.Errorf("%w: no raw SASL token expected", ErrIllegalState)
	}
	return s.step(token, now)
}

func (s *Session) step(token []byte, now time.Time) (AuthResult, error) {
	if len(token) > s.srv.cfg.MaxReceiveSize {
		s.state = stateFailed
		return AuthResult{}, failf("SASL token of %d bytes exceeds sasl.server.max.receive.size %d", len(token), s.srv.cfg.MaxReceiveSize)
	}
	answer, done, err := s.exchange.Next(token)
	if err != nil {
		s.state = stateFailed
		return AuthResult{}, err
	}
	if !done {
		return AuthResult{Challenge: answer}, nil
	}
	p := s.srv.cfg.Principals.FromSASL(s.exchange.AuthorizationID())
	if s.reauth && p != s.principal {
		s.state = stateFailed
		return AuthResult{}, failf("Cannot change principals during re-authentication from %s: %s", s.principal, p)
	}
	s.principal, s.state, s.reauth, s.exchange = p, stateAuthenticated, false, nil
	res := AuthResult{Challenge: answer, Done: true}
	if d := s.srv.cfg.MaxReauth; d > 0 {
		s.expiry = now.Add(d)
		res.SessionLifetime = d
	}
	return res, nil
}

// Mechanism returns the enabled mechanism called name.
func (s *Server) Mechanism(name string) (Mechanism, bool) {
	m, ok := s.mechs[name]
	return m, ok
}

// Enabled reports whether name is an enabled mechanism.
func (s *Server) Enabled(name string) bool { return slices.Contains(s.names, name) }
