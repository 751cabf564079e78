package auth

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

const (
	keyProduce  int16 = 0
	keyMetadata int16 = 3
)

func testServer(t *testing.T, reauth time.Duration) *Server {
	t.Helper()
	store := storeOf(credImage(t, 4096, [2]string{"alice", "alice-secret"}, [2]string{"bob", "bob-secret"}))
	ms, err := Mechanisms([]string{MechScramSHA256, MechScramSHA512, MechPlain}, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(ServerConfig{Mechanisms: ms, MaxReauth: reauth})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// login runs a franz-go client mechanism through a session: SaslHandshake of version
// hv, then SaslAuthenticate (v1) requests, or raw tokens after a v0 handshake.
func login(t *testing.T, s *Session, client sasl.Mechanism, hv int16, now time.Time) (AuthResult, error) {
	t.Helper()
	if err := s.Admit(keySASLHandshake, now); err != nil {
		return AuthResult{}, err
	}
	if _, err := s.Handshake(hv, client.Name(), now); err != nil {
		return AuthResult{}, err
	}
	cs, msg, err := client.Authenticate(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for {
		var res AuthResult
		if s.ExpectsRawToken() {
			res, err = s.RawToken(msg, now)
		} else {
			if aerr := s.Admit(keySASLAuthenticate, now); aerr != nil {
				return AuthResult{}, aerr
			}
			res, err = s.Authenticate(1, msg, now)
		}
		if err != nil {
			return res, err
		}
		done, next, cerr := cs.Challenge(res.Challenge)
		if cerr != nil {
			t.Fatalf("client: %v", cerr)
		}
		if res.Done {
			if !done {
				t.Fatal("server done, client not")
			}
			return res, nil
		}
		msg = next
	}
}

func TestSessionPlaintextAndSSL(t *testing.T) {
	srv := testServer(t, 0)
	now := time.Unix(1000, 0)
	s, err := srv.NewSession(Plaintext, nil, now)
	if err != nil || !s.Authenticated() || s.Principal() != Anonymous || s.Admit(keyProduce, now) != nil {
		t.Fatalf("plaintext session: %v", err)
	}
	if _, err := s.Handshake(1, MechPlain, now); !errors.Is(err, ErrIllegalState) {
		t.Fatalf("SaslHandshake on PLAINTEXT: %v", err)
	}
	if _, err := s.Authenticate(1, nil, now); !errors.Is(err, ErrIllegalState) {
		t.Fatalf("SaslAuthenticate on PLAINTEXT: %v", err)
	}
	ssl, err := srv.NewSession(SSL, &tls.ConnectionState{}, now)
	if err != nil || ssl.Principal() != Anonymous || ssl.Protocol() != SSL || ssl.Mechanism() != "" {
		t.Fatalf("SSL session without a client certificate: %v %v", ssl, err)
	}
	if _, err := (&Server{}).NewSession(SASLSSL, nil, now); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Fatalf("SASL listener without mechanisms: %v", err)
	}
}

func TestSessionPreAuthGate(t *testing.T) {
	srv := testServer(t, 0)
	now := time.Unix(1000, 0)
	s, _ := srv.NewSession(SASLPlaintext, nil, now)
	if s.Authenticated() {
		t.Fatal("a SASL session starts authenticated")
	}
	for _, k := range []int16{keyApiVersions, keySASLHandshake, keySASLAuthenticate} {
		if err := s.Admit(k, now); err != nil {
			t.Fatalf("key %d refused before authentication: %v", k, err)
		}
	}
	for k := int16(0); k < 100; k++ {
		if k == keyApiVersions || k == keySASLHandshake || k == keySASLAuthenticate {
			continue
		}
		if err := s.Admit(k, now); !errors.Is(err, ErrNotAuthenticated) {
			t.Fatalf("key %d admitted before authentication", k)
		}
	}
	// Between handshake and authentication only SaslAuthenticate.
	if _, err := s.Handshake(1, MechScramSHA256, now); err != nil {
		t.Fatal(err)
	}
	if err := s.Admit(keyApiVersions, now); !errors.Is(err, ErrNotAuthenticated) {
		t.Fatalf("ApiVersions between handshake and authentication: %v", err)
	}
	if err := s.Admit(keySASLAuthenticate, now); err != nil {
		t.Fatal(err)
	}
}

func TestSessionLogin(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, c := range []struct {
		name   string
		client sasl.Mechanism
		hv     int16
		user   string
	}{
		{"scram-256 v1", scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism(), 1, "alice"},
		{"scram-512 v1", scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism(), 1, "bob"},
		{"plain v1", plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(), 1, "alice"},
		{"scram-256 raw tokens (v0)", scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism(), 0, "alice"},
		{"plain raw token (v0)", plain.Auth{User: "bob", Pass: "bob-secret"}.AsMechanism(), 0, "bob"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _ := testServer(t, 0).NewSession(SASLSSL, nil, now)
			res, err := login(t, s, c.client, c.hv, now)
			if err != nil || !res.Done || res.SessionLifetime != 0 {
				t.Fatalf("login = %+v, %v", res, err)
			}
			if !s.Authenticated() || s.Principal() != User(c.user) || s.Mechanism() != c.client.Name() {
				t.Fatalf("after login: %v %v %s", s.Authenticated(), s.Principal(), s.Mechanism())
			}
			if err := s.Admit(keyProduce, now.Add(24*time.Hour)); err != nil {
				t.Fatalf("a session without connections.max.reauth.ms expired: %v", err)
			}
			if _, err := s.Handshake(1, c.client.Name(), now); !errors.Is(err, ErrIllegalState) {
				t.Fatalf("re-authentication without connections.max.reauth.ms: %v", err)
			}
		})
	}
}

func TestSessionFailures(t *testing.T) {
	now := time.Unix(1000, 0)
	srv := testServer(t, 0)

	s, _ := srv.NewSession(SASLPlaintext, nil, now)
	enabled, err := s.Handshake(1, "GSSAPI", now)
	var he *HandshakeError
	if !errors.As(err, &he) || !errors.Is(err, ErrUnsupportedMechanism) || len(enabled) != 3 {
		t.Fatalf("unsupported mechanism: %v %v", enabled, err)
	}
	if err := s.Admit(keyApiVersions, now); !errors.Is(err, ErrNotAuthenticated) {
		t.Fatal("a session refused a mechanism and still admits requests")
	}

	s, _ = srv.NewSession(SASLPlaintext, nil, now)
	if _, err := s.Authenticate(1, []byte("x"), now); !errors.Is(err, ErrIllegalState) {
		t.Fatalf("SaslAuthenticate before SaslHandshake: %v", err)
	}

	s, _ = srv.NewSession(SASLPlaintext, nil, now)
	_, err = login(t, s, scram.Auth{User: "alice", Pass: "wrong"}.AsSha256Mechanism(), 1, now)
	var f *Failure
	if !errors.Is(err, ErrAuthenticationFailed) || !errors.As(err, &f) || f.Reason == "" {
		t.Fatalf("wrong password: %v", err)
	}
	if err := s.Admit(keyMetadata, now); !errors.Is(err, ErrNotAuthenticated) || s.Authenticated() {
		t.Fatal("a failed session admits requests")
	}
	if srv.FailureDelay() != 0 || srv.MaxReceiveSize() != DefaultMaxReceiveSize {
		t.Fatal("defaults")
	}
	if s, _ := NewServer(ServerConfig{FailureDelay: DefaultFailureDelay}); s.FailureDelay() != 100*time.Millisecond {
		t.Fatal("FailureDelay")
	}
	if _, err := NewServer(ServerConfig{FailureDelay: -1}); err == nil {
		t.Fatal("negative connection.failed.authentication.delay.ms accepted")
	}

	// Tokens beyond sasl.server.max.receive.size.
	small, _ := NewServer(ServerConfig{Mechanisms: srv.cfg.Mechanisms, MaxReceiveSize: 16})
	s, _ = small.NewSession(SASLPlaintext, nil, now)
	s.Handshake(1, MechPlain, now)
	if _, err := s.Authenticate(1, make([]byte, 17), now); !errors.Is(err, ErrAuthenticationFailed) {
		t.Fatalf("oversized token: %v", err)
	}

	// A raw token where a request was expected, and the reverse.
	s, _ = srv.NewSession(SASLPlaintext, nil, now)
	if _, err := s.RawToken([]byte("x"), now); !errors.Is(err, ErrIllegalState) {
		t.Fatalf("raw token before a v0 handshake: %v", err)
	}
	s, _ = srv.NewSession(SASLPlaintext, nil, now)
	s.Handshake(0, MechPlain, now)
	if err := s.Admit(keySASLAuthenticate, now); !errors.Is(err, ErrNotAuthenticated) {
		t.Fatalf("a request after a v0 handshake: %v", err)
	}
	// Two handshakes.
	s, _ = srv.NewSession(SASLPlaintext, nil, now)
	s.Handshake(1, MechPlain, now)
	if _, err := s.Handshake(1, MechPlain, now); !errors.Is(err, ErrIllegalState) {
		t.Fatalf("second handshake: %v", err)
	}
	if _, err := NewServer(ServerConfig{MaxReauth: -1}); err == nil {
		t.Fatal("negative connections.max.reauth.ms accepted")
	}
	if _, err := NewServer(ServerConfig{Mechanisms: []Mechanism{srv.cfg.Mechanisms[0], srv.cfg.Mechanisms[0]}}); err == nil {
		t.Fatal("a mechanism listed twice accepted")
	}
}

// TestSessionReauthentication follows KIP-368 with a fake clock.
func TestSessionReauthentication(t *testing.T) {
	const life = time.Hour
	t0 := time.Unix(1000, 0)
	alice := scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()

	newSession := func() *Session {
		s, _ := testServer(t, life).NewSession(SASLSSL, nil, t0)
		res, err := login(t, s, alice, 1, t0)
		if err != nil || res.SessionLifetime != life || !s.Expiry().Equal(t0.Add(life)) {
			t.Fatalf("login = %+v, %v", res, err)
		}
		return s
	}

	s := newSession()
	if err := s.Admit(keyProduce, t0.Add(life-time.Millisecond)); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	if err := s.Admit(keyProduce, t0.Add(life)); !errors.Is(err, ErrNotAuthenticated) {
		t.Fatalf("after expiry a request is admitted: %v", err)
	}
	// Re-authentication before expiry renews the session; requests flow meanwhile.
	t1 := t0.Add(50 * time.Minute)
	if err := s.Admit(keySASLHandshake, t1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Handshake(1, MechScramSHA512, t1); err != nil {
		t.Fatalf("re-authentication handshake: %v", err)
	}
	if err := s.Admit(keyProduce, t1); err != nil || !s.Authenticated() {
		t.Fatalf("requests during re-authentication: %v", err)
	}
	cs, msg, _ := alice.Authenticate(context.Background(), "")
	res, err := s.Authenticate(1, msg, t1)
	if err != nil {
		t.Fatal(err)
	}
	_, msg, _ = cs.Challenge(res.Challenge)
	if res, err = s.Authenticate(1, msg, t1); err != nil || !res.Done || !s.Expiry().Equal(t1.Add(life)) {
		t.Fatalf("re-authentication = %+v, %v", res, err)
	}
	if err := s.Admit(keyProduce, t0.Add(life+time.Minute)); err != nil {
		t.Fatalf("the renewed session expired early: %v", err)
	}

	// A re-authentication that begins after the session expired is accepted, as
	// Kafka's (a client idle past its session re-authenticates before its next
	// request); any other request after expiry is refused.
	s = newSession()
	late := t0.Add(life + time.Second)
	if err := s.Admit(keySASLHandshake, late); err != nil {
		t.Fatalf("SaslHandshake after expiry not admitted: %v", err)
	}
	if _, err := s.Handshake(1, MechScramSHA512, late); err != nil {
		t.Fatalf("re-authentication after expiry: %v", err)
	}
	if err := s.Admit(keyProduce, late); !errors.Is(err, ErrNotAuthenticated) {
		t.Fatalf("a request of an expired session admitted during its re-authentication: %v", err)
	}
	cs, msg, _ = alice.Authenticate(context.Background(), "")
	if res, err = s.Authenticate(1, msg, late); err != nil {
		t.Fatal(err)
	}
	_, msg, _ = cs.Challenge(res.Challenge)
	if res, err = s.Authenticate(1, msg, late); err != nil || !res.Done || !s.Expiry().Equal(late.Add(life)) {
		t.Fatalf("late re-authentication = %+v, %v", res, err)
	}
	if err := s.Admit(keyProduce, late); err != nil {
		t.Fatalf("after a late re-authentication: %v", err)
	}

	// Changing mechanism or principal is refused.
	s = newSession()
	if _, err := s.Handshake(1, MechScramSHA256, t1); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Fatalf("mechanism change: %v", err)
	}
	s = newSession()
	if _, err := s.Handshake(1, MechScramSHA512, t1); err != nil {
		t.Fatal(err)
	}
	bob := scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism()
	cs, msg, _ = bob.Authenticate(context.Background(), "")
	res, _ = s.Authenticate(1, msg, t1)
	_, msg, _ = cs.Challenge(res.Challenge)
	if _, err := s.Authenticate(1, msg, t1); !errors.Is(err, ErrAuthenticationFailed) {
		t.Fatalf("principal change: %v", err)
	}
	if err := s.Admit(keyProduce, t1); !errors.Is(err, ErrNotAuthenticated) {
		t.Fatal("a session whose re-authentication failed admits requests")
	}

	// A client that authenticated with SaslAuthenticate v0 cannot re-authenticate; its
	// session still expires.
	s, _ = testServer(t, life).NewSession(SASLSSL, nil, t0)
	s.Handshake(1, MechPlain, t0)
	if res, err := s.Authenticate(0, []byte("\x00alice\x00alice-secret"), t0); err != nil || !res.Done {
		t.Fatal(err)
	}
	if _, err := s.Handshake(1, MechPlain, t1); !errors.Is(err, ErrIllegalState) {
		t.Fatalf("re-authentication of a v0 client: %v", err)
	}
	if err := s.Admit(keyProduce, t0.Add(life)); !errors.Is(err, ErrNotAuthenticated) {
		t.Fatal("a v0 client's session did not expire")
	}
}

func TestParseSecurityProtocol(t *testing.T) {
	for s, want := range map[string]SecurityProtocol{"PLAINTEXT": Plaintext, "ssl": SSL, " SASL_PLAINTEXT": SASLPlaintext, "SASL_SSL": SASLSSL} {
		got, ok := ParseSecurityProtocol(s)
		if !ok || got != want || got.String() != want.String() {
			t.Errorf("ParseSecurityProtocol(%q) = %v, %v", s, got, ok)
		}
	}
	if _, ok := ParseSecurityProtocol("TLS"); ok {
		t.Error("TLS parsed")
	}
	if !SASLSSL.TLS() || !SASLSSL.SASL() || SSL.SASL() || Plaintext.TLS() || SecurityProtocol(9).String() == "" {
		t.Error("protocol predicates")
	}
	if int16(SASLSSL) != metadata.ProtocolSASLSSL || int16(SSL) != metadata.ProtocolSSL {
		t.Error("protocol ids differ from the metadata's")
	}
}
