package peer

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/auth"
	"github.com/samsa-broker/samsa/net/transport"
)

// testCA signs certificates for 127.0.0.1 usable by servers and clients.
type testCA struct {
	key  *ecdsa.PrivateKey
	cert *x509.Certificate
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "peer test CA"}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := &testCA{key: key, pool: x509.NewCertPool()}
	ca.cert, _ = x509.ParseCertificate(der)
	ca.pool.AddCert(ca.cert)
	return ca
}

func (ca *testCA) issue(t *testing.T, cn string) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// clientTLS is a Security.TLS that trusts ca and presents cert.
func (ca *testCA) clientTLS(cert tls.Certificate) func(string) (*tls.Config, error) {
	return func(host string) (*tls.Config, error) {
		return &tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{cert}, ServerName: host}, nil
	}
}

// credentials is a SCRAM credential store of passwords.
type credentials map[string]metadata.ScramCredential

func (c credentials) ScramCredential(user string, m metadata.ScramMechanism) (metadata.ScramCredential, bool) {
	cr, ok := c[user+"/"+m.String()]
	return cr, ok
}

func (c credentials) add(t *testing.T, user, password string, m metadata.ScramMechanism) {
	t.Helper()
	salt := []byte("salt-of-" + user)
	sp, err := m.SaltPassword(password, salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if c[user+"/"+m.String()], err = metadata.NewScramCredential(user, m, salt, sp, 4096); err != nil {
		t.Fatal(err)
	}
}

// saslServer answers SaslHandshake and SaslAuthenticate with net/auth's server
// sessions, one per connection, and admits other requests through them (a request
// the session refuses closes the connection without an answer, as a Kafka listener
// does); admitted requests get an empty response of their kind.
type saslServer struct {
	srv        *auth.Server
	handshakes atomic.Int64
	// dropReauth: a SaslHandshake on an authenticated connection closes it unanswered.
	dropReauth atomic.Bool
	failures   atomic.Int64
	served     atomic.Int64

	mu       sync.Mutex
	sessions map[uint64]*auth.Session
}

func (ss *saslServer) session(t *testing.T, c transport.Conn) *auth.Session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ses := ss.sessions[c.ID()]
	if ses == nil {
		var err error
		if ses, err = ss.srv.NewSession(auth.SASLSSL, nil, time.Now()); err != nil {
			t.Error(err)
		}
		ss.sessions[c.ID()] = ses
	}
	return ses
}

func (ss *saslServer) connections() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.sessions)
}

func (ss *saslServer) handle(t *testing.T) func(s *served) {
	return func(s *served) {
		ses := ss.session(t, s.tr.Conn)
		now := time.Now()
		if err := ses.Admit(s.key, now); err != nil {
			s.tr.Ticket.CloseConn()
			return
		}
		closeSoon := func() { time.AfterFunc(100*time.Millisecond, s.tr.Ticket.CloseConn) }
		switch req := s.req.(type) {
		case *kmsg.SASLHandshakeRequest:
			if ss.handshakes.Add(1) > 1 && ss.dropReauth.Load() {
				s.tr.Ticket.CloseConn()
				return
			}
			resp := kmsg.NewPtrSASLHandshakeResponse()
			mechs, err := ses.Handshake(s.version, req.Mechanism, now)
			resp.SupportedMechanisms = mechs
			if err != nil {
				resp.ErrorCode = kerr.IllegalSaslState.Code
				if errors.Is(err, auth.ErrUnsupportedMechanism) {
					resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
				}
				s.respond(resp)
				closeSoon()
				return
			}
			s.respond(resp)
		case *kmsg.SASLAuthenticateRequest:
			resp := kmsg.NewPtrSASLAuthenticateResponse()
			res, err := ses.Authenticate(s.version, req.SASLAuthBytes, now)
			if err != nil {
				ss.failures.Add(1)
				resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
				msg := err.Error()
				resp.ErrorMessage = &msg
				s.respond(resp)
				closeSoon()
				return
			}
			resp.SASLAuthBytes = res.Challenge
			resp.SessionLifetimeMillis = res.SessionLifetime.Milliseconds()
			s.respond(resp)
		default:
			ss.served.Add(1)
			s.respond(s.req.ResponseKind())
		}
	}
}

// startSASLServer serves TLS (serverTLS, when set) and SASL with mechs.
func startSASLServer(t *testing.T, serverTLS *tls.Config, cfg auth.ServerConfig) (*testServer, *saslServer) {
	t.Helper()
	srv, err := auth.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ss := &saslServer{srv: srv, sessions: map[uint64]*auth.Session{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, ln: ln, keys: defaultKeys(), handle: ss.handle(t), served: make(chan error, 1), conns: map[uint64]transport.Conn{}, node: -1}
	served := ln
	if serverTLS != nil {
		served = tls.NewListener(ln, serverTLS)
	}
	ts.tr = transport.NewStd(transport.Config{}, ts, testLogger())
	go func() { ts.served <- ts.tr.Serve(served) }()
	t.Cleanup(ts.stop)
	return ts, ss
}

func metadataRequest(ctx context.Context, c *Client) error {
	_, err := c.Request(ctx, Voter(1), PurposeMetadata, kmsg.NewPtrMetadataRequest())
	return err
}

// TestSecuritySCRAMOverMutualTLS: a voter reached over mutual TLS with SCRAM-SHA-512
// whose sessions last three seconds: the client authenticates after ApiVersions, renews
// the session on the same connection before each expiry (KIP-368) while requests keep
// flowing, and never reconnects. (Sessions of one second left the renewal, at 85-95%
// of the session, 50-150 ms: a loaded machine's SCRAM exchange under -race took longer,
// and the server rightly closed the expired session.)
func TestSecuritySCRAMOverMutualTLS(t *testing.T) {
	ca := newTestCA(t)
	creds := credentials{}
	creds.add(t, "node", "node-secret", metadata.ScramSHA512)
	serverTLS := &tls.Config{Certificates: []tls.Certificate{ca.issue(t, "server")}, ClientCAs: ca.pool, ClientAuth: tls.RequireAndVerifyClientCert}
	mechs, err := auth.Mechanisms([]string{auth.MechScramSHA512}, creds, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts, ss := startSASLServer(t, serverTLS, auth.ServerConfig{Mechanisms: mechs, MaxReauth: 3 * time.Second})
	c, err := New(Config{NodeID: 2, Voters: map[int32]string{1: ts.addr()}, Logger: testLogger(),
		VoterSecurity: Security{TLS: ca.clientTLS(ca.issue(t, "node")), SASL: scram.Auth{User: "node", Pass: "node-secret"}.AsSha512Mechanism()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for n := 0; c.Reauthentications() < 2; n++ {
		if err := metadataRequest(ctx, c); err != nil {
			t.Fatalf("request %d (after %d re-authentications): %v", n, c.Reauthentications(), err)
		}
		<-time.After(10 * time.Millisecond) // pacing, not a wait for a condition
	}
	if n := ss.connections(); n != 1 {
		t.Errorf("%d connections: the sessions were not renewed on the first", n)
	}
	if h := ss.handshakes.Load(); h < 3 {
		t.Errorf("%d SaslHandshakes for one authentication and two renewals", h)
	}
	if ss.served.Load() == 0 {
		t.Error("no request served")
	}
}

// TestSecurityReauthConnectionLost: a peer that closes the connection while it is
// re-authenticated (a node stopped past the session's expiry, then resumed) loses the
// connection, not an authentication: no authentication failure is counted or logged
// as one, and the next request dials and authenticates again.
func TestSecurityReauthConnectionLost(t *testing.T) {
	creds := credentials{}
	creds.add(t, "node", "node-secret", metadata.ScramSHA512)
	mechs, err := auth.Mechanisms([]string{auth.MechScramSHA512}, creds, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts, ss := startSASLServer(t, nil, auth.ServerConfig{Mechanisms: mechs, MaxReauth: time.Second})
	ss.dropReauth.Store(true)
	c, err := New(Config{NodeID: 2, Voters: map[int32]string{1: ts.addr()}, Logger: testLogger(),
		VoterSecurity: Security{SASL: scram.Auth{User: "node", Pass: "node-secret"}.AsSha512Mechanism()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := metadataRequest(ctx, c); err != nil {
		t.Fatal(err)
	}
	// The renewal starts 850-950 ms into the session; the server drops it.
	for ss.handshakes.Load() < 2 {
		select {
		case <-ctx.Done():
			t.Fatal("no re-authentication began")
		case <-time.After(20 * time.Millisecond):
		}
	}
	ss.dropReauth.Store(false)
	for {
		err := metadataRequest(ctx, c)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no request served after the lost re-authentication: %v", err)
		}
		<-time.After(50 * time.Millisecond) // the reconnect backoff
	}
	if n := c.AuthenticationFailures(); n != 0 {
		t.Errorf("%d authentication failures counted for a connection lost during re-authentication", n)
	}
	if n := ss.connections(); n < 2 {
		t.Errorf("%d connections: the request after the lost connection did not dial again", n)
	}
}

// TestSecurityRefused: a wrong password, a mechanism the listener does not enable and
// a server certificate the trust store does not know fail with ErrAuthentication,
// saying why, and no request reaches the peer.
func TestSecurityRefused(t *testing.T) {
	ca := newTestCA(t)
	serverTLS := &tls.Config{Certificates: []tls.Certificate{ca.issue(t, "server")}}
	plainUsers := auth.NewStaticPlain(map[string]string{"node": "node-secret"})
	mechs, err := auth.Mechanisms([]string{auth.MechPlain}, nil, plainUsers)
	if err != nil {
		t.Fatal(err)
	}
	ts, ss := startSASLServer(t, serverTLS, auth.ServerConfig{Mechanisms: mechs})
	cert := ca.issue(t, "node")
	for _, tc := range []struct {
		name string
		tls  func(string) (*tls.Config, error)
		mech sasl.Mechanism
		want string
	}{
		{"wrong password", ca.clientTLS(cert), plain.Auth{User: "node", Pass: "wrong"}.AsMechanism(), "SASL_AUTHENTICATION_FAILED"},
		{"mechanism not enabled", ca.clientTLS(cert), scram.Auth{User: "node", Pass: "node-secret"}.AsSha256Mechanism(), "the listener enables [PLAIN]"},
		{"untrusted server", newTestCA(t).clientTLS(cert), plain.Auth{User: "node", Pass: "node-secret"}.AsMechanism(), "certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(Config{NodeID: 2, Voters: map[int32]string{1: ts.addr()}, Logger: testLogger(),
				VoterSecurity: Security{TLS: tc.tls, SASL: tc.mech}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = metadataRequest(ctx, c)
			if !errors.Is(err, ErrAuthentication) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrAuthentication saying %q", err, tc.want)
			}
		})
	}
	if n := ss.served.Load(); n != 0 {
		t.Fatalf("%d requests served without authentication", n)
	}
	t.Run("untrusted client certificate", func(t *testing.T) {
		mtls := &tls.Config{Certificates: []tls.Certificate{ca.issue(t, "server")}, ClientCAs: newTestCA(t).pool, ClientAuth: tls.RequireAndVerifyClientCert}
		ts, _ := startSASLServer(t, mtls, auth.ServerConfig{Mechanisms: mechs})
		c, err := New(Config{NodeID: 2, Voters: map[int32]string{1: ts.addr()}, Logger: testLogger(),
			VoterSecurity: Security{TLS: ca.clientTLS(cert), SASL: plain.Auth{User: "node", Pass: "node-secret"}.AsMechanism()}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := metadataRequest(context.Background(), c); !errors.Is(err, ErrAuthentication) || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("err = %v, want ErrAuthentication naming the certificate", err)
		}
	})
	// The right credentials pass.
	c, err := New(Config{NodeID: 2, Voters: map[int32]string{1: ts.addr()}, Logger: testLogger(),
		VoterSecurity: Security{TLS: ca.clientTLS(cert), SASL: plain.Auth{User: "node", Pass: "node-secret"}.AsMechanism()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := metadataRequest(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}
