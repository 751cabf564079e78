package kafka

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/samsa-broker/samsa/coordinator/acl"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/auth"
	"github.com/samsa-broker/samsa/net/transport"
)

// testCA is a certificate authority and a server certificate for 127.0.0.1.
type testCA struct {
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey

	pool            *x509.CertPool
	certPEM, keyPEM string // the server's
	caPEM           string
}

func newTestCA(t testing.TB) testCA {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "samsa test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return testCA{caCert: caCert, caKey: caKey, pool: pool,
		certPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		keyPEM:  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})),
		caPEM:   string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))}
}

// secureListener serves tb's broker on a second listener of protocol p, TLS from ca
// when p is SSL or SASL_SSL, with authorizer az; it returns the listener's address.
func (tb *testBroker) secureListener(t testing.TB, p auth.SecurityProtocol, ca testCA, az *acl.Authorizer) string {
	t.Helper()
	_, addr := tb.secureListenerL(t, p, ca, az)
	return addr
}

// secureListenerL is secureListener that also returns the listener.
func (tb *testBroker) secureListenerL(t testing.TB, p auth.SecurityProtocol, ca testCA, az *acl.Authorizer) (*SecureListener, string) {
	t.Helper()
	return tb.secureListenerProps(t, p, ca, az, nil)
}

// clientCert issues a client certificate with common name cn.
func (ca testCA) clientCert(t testing.TB, cn string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn, Organization: []string{"samsa"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.caCert, &key.PublicKey, ca.caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// secureListenerProps is secureListenerL with more ssl.* keys and principal mapping
// rules (props["ssl.principal.mapping.rules"]).
func (tb *testBroker) secureListenerProps(t testing.TB, p auth.SecurityProtocol, ca testCA, az *acl.Authorizer, extra map[string]string) (*SecureListener, string) {
	t.Helper()
	rules, err := auth.ParseMappingRules(extra["ssl.principal.mapping.rules"])
	if err != nil {
		t.Fatal(err)
	}
	store := auth.ImageCredentials(func() *metadata.Image { _, im := tb.b.Image(); return im })
	mechs, err := auth.Mechanisms([]string{auth.MechPlain, auth.MechScramSHA256, auth.MechScramSHA512}, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	var reauth time.Duration
	if v := extra["connections.max.reauth.ms"]; v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		reauth = time.Duration(ms) * time.Millisecond
	}
	srv, err := auth.NewServer(auth.ServerConfig{Mechanisms: mechs, FailureDelay: 10 * time.Millisecond, MaxReauth: reauth,
		Principals: auth.PrincipalBuilder{Rules: rules}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewSecureListener(tb.b, ListenerSecurity{Name: p.String(), Protocol: p, Auth: srv, Authorizer: az})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if p.TLS() {
		props := map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": ca.certPEM, "ssl.keystore.key": ca.keyPEM}
		for k, v := range extra {
			props[k] = v
		}
		cfg, err := transport.SSLConfigFromProps(transport.ListenerLookup(props, p.String()))
		if err != nil {
			t.Fatal(err)
		}
		tl, err := transport.NewTLS(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ln, err = tl.Listener(ln); err != nil {
			t.Fatal(err)
		}
	}
	serveStd(t, l, ln)
	return l, ln.Addr().String()
}

// serveStd serves h on ln with the std transport until the test ends.
func serveStd(t testing.TB, h transport.Handler, ln net.Listener) {
	t.Helper()
	tr := transport.NewStd(transport.Config{}, h, testLogger(t))
	done := make(chan error, 1)
	go func() { done <- tr.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		tr.Shutdown(ctx)
		<-done
	})
}

// secureClient is a franz-go client of tb's secure listener addr over TLS (ca) with
// mechanism m. The broker advertises its first (plaintext) listener, as a broker
// configured with one advertised listener does; the client's dialer takes that
// address to addr.
func (tb *testBroker) secureClient(t testing.TB, addr string, ca testCA, m sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	d := &tls.Dialer{Config: &tls.Config{RootCAs: ca.pool, ServerName: "127.0.0.1"}}
	dial := func(ctx context.Context, network, host string) (net.Conn, error) {
		if host == tb.addr {
			host = addr
		}
		return d.DialContext(ctx, network, host)
	}
	base := []kgo.Opt{kgo.SeedBrokers(addr), kgo.Dialer(dial), kgo.RetryTimeout(3 * time.Second), kgo.RequestRetries(2)}
	if m != nil {
		base = append(base, kgo.SASL(m))
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// setScram stores user's SCRAM credentials (both mechanisms) through the plaintext
// listener (the controller writes the records; the image has them on return).
func (tb *testBroker) setScram(t testing.TB, user, password string) {
	t.Helper()
	res, err := tb.admin(t).AlterUserSCRAMs(context.Background(), nil, []kadm.UpsertSCRAM{
		{User: user, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: password},
		{User: user + "-256", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: password},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("%s: %v", r.User, r.Err)
		}
	}
}

func TestSecurityScramPlainOverTLSWithACLs(t *testing.T) {
	tb := startTestBroker(t)
	ca := newTestCA(t)
	tb.setScram(t, "admin", "admin-secret")
	tb.setScram(t, "alice", "alice-secret")
	tb.setScram(t, "bob", "bob-secret")
	az := acl.New(acl.Config{SuperUsers: []string{"User:admin"}})
	addr := tb.secureListener(t, auth.SASLSSL, ca, az)
	ctx := context.Background()

	adminCl := tb.secureClient(t, addr, ca, scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism())
	admin := kadm.NewClient(adminCl)
	if _, err := admin.CreateTopics(ctx, 1, 1, nil, "granted", "refused"); err != nil {
		t.Fatal(err)
	}
	b := kadm.NewACLs().Allow("User:alice").Topics("granted").Operations(kadm.OpWrite, kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	res, err := admin.CreateACLs(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	desc := kmsg.NewPtrDescribeACLsRequest()
	desc.ResourceType, desc.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	desc.Operation, desc.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	dr, err := desc.RequestWith(ctx, adminCl)
	if err != nil || dr.ErrorCode != 0 || len(dr.Resources) != 1 || len(dr.Resources[0].ACLs) != 2 {
		t.Fatalf("describe: %v %+v", err, dr)
	}

	// alice over PLAIN (checked against her SCRAM credential): writes "granted", is
	// refused "refused", and sees only "granted" in Metadata.
	alice := tb.secureClient(t, addr, ca, plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(), kgo.DisableIdempotentWrite())
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "granted", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("alice produces to granted: %v", err)
	}
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "refused", Value: []byte("v")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produces to refused: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	md, err := kadm.NewClient(alice).Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Topics) != 1 || md.Topics["granted"].Topic != "granted" {
		t.Fatalf("alice's metadata of all topics: %v", md.Topics.Names())
	}

	// bob (SCRAM-SHA-256, no ACL at all): refused everywhere.
	bob := tb.secureClient(t, addr, ca, scram.Auth{User: "bob-256", Pass: "bob-secret"}.AsSha256Mechanism(), kgo.DisableIdempotentWrite())
	if err := bob.ProduceSync(ctx, &kgo.Record{Topic: "granted", Value: []byte("v")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob produces: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	ct, err := kadm.NewClient(bob).CreateTopics(ctx, 1, 1, nil, "bobs")
	if err != nil || !errors.Is(ct["bobs"].Err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob creates a topic: %v %v, want TOPIC_AUTHORIZATION_FAILED", err, ct["bobs"].Err)
	}

	// A super user consumes what alice wrote.
	cons := tb.secureClient(t, addr, ca, scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism(),
		kgo.ConsumeTopics("granted"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	fs := cons.PollFetches(fctx)
	if err := fs.Err(); err != nil || fs.NumRecords() != 1 {
		t.Fatalf("admin consumes: %v, %d records", err, fs.NumRecords())
	}

	// A wrong password: SASL_AUTHENTICATION_FAILED, and the broker keeps serving.
	wrong := tb.secureClient(t, addr, ca, scram.Auth{User: "alice", Pass: "nope"}.AsSha512Mechanism())
	if err := wrong.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	unknown := tb.secureClient(t, addr, ca, plain.Auth{User: "mallory", Pass: "x"}.AsMechanism())
	if err := unknown.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("unknown user: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	if err := alice.Ping(ctx); err != nil {
		t.Fatalf("alice after the failures: %v", err)
	}
}

// tlsRaw is a raw connection over TLS to addr.
func tlsRaw(t testing.TB, addr string, ca testCA) *rawConn {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, c: c}
}

// expectClosed reads until the connection ends (no answer may come).
func expectClosed(t testing.TB, rc *rawConn) {
	t.Helper()
	if b, err := rc.readFrame(); err == nil {
		t.Fatalf("got a %d-byte answer, want the connection closed", len(b))
	}
}

func TestSecurityRefusesBeforeAuthenticationAndGarbage(t *testing.T) {
	tb := startTestBroker(t)
	ca := newTestCA(t)
	tb.setScram(t, "alice", "alice-secret")
	addr := tb.secureListener(t, auth.SASLSSL, ca, acl.New(acl.Config{}))

	// A Metadata request before authentication closes the connection unanswered.
	rc := tlsRaw(t, addr, ca)
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(9)
	rc.send(md)
	expectClosed(t, rc)

	// ApiVersions is answered, then garbage in place of the SCRAM client-first message.
	rc = tlsRaw(t, addr, ca)
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	av.ClientSoftwareName, av.ClientSoftwareVersion = "t", "1"
	if r := rc.recv(av, rc.send(av)).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "SCRAM-SHA-512"
	if r := rc.recv(hs, rc.send(hs)).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	sa := kmsg.NewPtrSASLAuthenticateRequest()
	sa.SetVersion(2)
	sa.SASLAuthBytes = []byte("\x00\xff garbage,,=,r=")
	if r := rc.recv(sa, rc.send(sa)).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("garbage token: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	expectClosed(t, rc)

	// Garbage bytes in place of a frame after a version-0 handshake, and a frame too
	// large before authentication: closed.
	rc = tlsRaw(t, addr, ca)
	hs0 := kmsg.NewPtrSASLHandshakeRequest()
	hs0.Mechanism = "PLAIN"
	if r := rc.recv(hs0, rc.send(hs0)).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	rc.write([]byte{0, 0, 0, 5, 1, 2, 3, 4, 5})
	expectClosed(t, rc)
	rc = tlsRaw(t, addr, ca)
	rc.write([]byte{0x7f, 0, 0, 0})
	expectClosed(t, rc)

	// An unknown mechanism: UNSUPPORTED_SASL_MECHANISM with the enabled list.
	rc = tlsRaw(t, addr, ca)
	hs.Mechanism = "GSSAPI"
	r := rc.recv(hs, rc.send(hs)).(*kmsg.SASLHandshakeResponse)
	if r.ErrorCode != kerr.UnsupportedSaslMechanism.Code || len(r.SupportedMechanisms) != 3 {
		t.Fatalf("GSSAPI: %v %v", kerr.ErrorForCode(r.ErrorCode), r.SupportedMechanisms)
	}

	// A version-0 handshake: the PLAIN token as a raw frame, answered by an empty raw
	// frame; then requests are served.
	rc = tlsRaw(t, addr, ca)
	hs0 = kmsg.NewPtrSASLHandshakeRequest()
	hs0.Mechanism = "PLAIN"
	if r := rc.recv(hs0, rc.send(hs0)).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	tok := []byte("\x00alice\x00alice-secret")
	rc.write(append([]byte{0, 0, 0, byte(len(tok))}, tok...))
	if b, err := rc.readFrame(); err != nil || len(b) != 0 {
		t.Fatalf("raw PLAIN token answered %q, %v", b, err)
	}
	md.SetVersion(9)
	if r := rc.recv(md, rc.send(md)).(*kmsg.MetadataResponse); len(r.Brokers) != 1 {
		t.Fatalf("metadata after a v0 authentication: %+v", r)
	}

	// The broker still serves an authenticated client.
	cl := tb.secureClient(t, addr, ca, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())
	if err := cl.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}
