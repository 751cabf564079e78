package transport

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// peerHandler echoes, and records the TLS state of every connection it hears of.
type peerHandler struct {
	mu     sync.Mutex
	states []tls.ConnectionState
	opened int
}

func (h *peerHandler) ConnOpened(c Conn) {
	st, ok := TLSState(c)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.opened++
	if ok {
		h.states = append(h.states, st)
	}
}

func (h *peerHandler) ConnClosed(Conn) {}

func (h *peerHandler) Serve(r Request) {
	r.Ticket.Respond(Response{Chunks: []Chunk{{Bytes: append([]byte(nil), r.Frame...)}}})
}

func (h *peerHandler) last() (tls.ConnectionState, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.states) == 0 {
		return tls.ConnectionState{}, h.opened
	}
	return h.states[len(h.states)-1], h.opened
}

// serveTLS serves a peerHandler with Std over TLS built from cfg.
func serveTLS(t *testing.T, cfg SSLConfig, tcfg Config) (*TLS, *peerHandler, string) {
	t.Helper()
	tt, err := NewTLS(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &peerHandler{}
	s := NewStd(tcfg, h, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl, err := tt.Listener(ln)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(tl)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		tt.Close()
	})
	return tt, h, ln.Addr().String()
}

// roundTrip dials with cc, sends one frame and reads its echo.
func roundTrip(addr string, cc *tls.Config) (*tls.Conn, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cc)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte{0, 0, 0, 2, 'h', 'i'}); err != nil {
		c.Close()
		return nil, err
	}
	var b [6]byte
	if _, err := readFull(c, b[:]); err != nil {
		c.Close()
		return nil, err
	}
	if string(b[4:]) != "hi" {
		c.Close()
		return nil, errors.New("bad echo")
	}
	return c, nil
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func TestTLSServesAndExposesThePeer(t *testing.T) {
	dir := t.TempDir()
	ca := newPKI(t, "CA")
	srv := ca.issue(t, "broker-1", true, time.Time{})
	client := ca.issue(t, "client-1", false, time.Time{})
	cfg := SSLConfig{KeystoreType: "PEM", KeystoreLocation: writeFile(t, dir, "ks.pem", srv.keystore()),
		TruststoreLocation: writeFile(t, dir, "ts.pem", ca.caPEM), ClientAuth: "requested"}
	tt, h, addr := serveTLS(t, cfg, Config{})
	if tt.Certificate().Subject.CommonName != "broker-1" {
		t.Fatal("Certificate")
	}
	c, err := roundTrip(addr, &tls.Config{RootCAs: ca.pool(), ServerName: "127.0.0.1", Certificates: []tls.Certificate{client.tlsCert(t)}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, _ := h.last()
	if len(st.PeerCertificates) == 0 || st.PeerCertificates[0].Subject.CommonName != "client-1" || !st.HandshakeComplete {
		t.Fatalf("the handler did not see the client certificate: %+v", st.PeerCertificates)
	}
	if st.Version != tls.VersionTLS13 {
		t.Fatalf("negotiated version %x, want TLS 1.3 (Kafka's default ssl.enabled.protocols)", st.Version)
	}
	// Requested: a client without a certificate is served, with none.
	c2, err := roundTrip(addr, &tls.Config{RootCAs: ca.pool(), ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	c2.Close()
	if st, _ := h.last(); len(st.PeerCertificates) != 0 {
		t.Fatal("a client without a certificate shows one")
	}
	// Plaintext connections have no TLS state.
	if _, ok := TLSState(&stdConn{nc: &net.TCPConn{}}); ok {
		t.Fatal("TLSState of a plaintext connection")
	}
}

// TestTLSClientAuth: ssl.client.auth=required refuses clients without a certificate,
// with an untrusted one and with an expired one (a TLS alert, and the handler never
// hears of them); requested refuses untrusted certificates; none asks for none.
func TestTLSClientAuth(t *testing.T) {
	ca := newPKI(t, "CA")
	rogue := newPKI(t, "rogue CA")
	srv := ca.issue(t, "broker", true, time.Time{})
	good := ca.issue(t, "client", false, time.Time{})
	untrusted := rogue.issue(t, "mallory", false, time.Time{})
	expired := ca.issue(t, "old", false, time.Now().Add(-time.Hour))
	base := func(auth string) SSLConfig {
		return SSLConfig{KeystoreCertificateChain: string(srv.certPEM), KeystoreKey: string(srv.keyPEM),
			TruststoreCertificates: string(ca.caPEM), ClientAuth: auth}
	}
	cli := func(l *leaf) *tls.Config {
		c := &tls.Config{RootCAs: ca.pool(), ServerName: "127.0.0.1"}
		if l != nil {
			// Sent whatever CAs the server asks for (Go's client would send none).
			cert := l.tlsCert(t)
			c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
		}
		return c
	}
	for _, c := range []struct {
		auth   string
		client *leaf
		ok     bool
		alert  string
	}{
		{"required", &good, true, ""},
		{"required", nil, false, "certificate required"},
		{"required", &untrusted, false, "unknown certificate authority"},
		{"required", &expired, false, "expired certificate"},
		{"requested", &untrusted, false, "unknown certificate authority"},
		{"requested", &expired, false, "expired certificate"},
		{"none", &untrusted, true, ""},
		{"", nil, true, ""},
	} {
		name := c.auth + "/"
		if c.client != nil {
			name += c.client.cert.Subject.CommonName
		}
		t.Run(name, func(t *testing.T) {
			_, h, addr := serveTLS(t, base(c.auth), Config{})
			conn, err := roundTrip(addr, cli(c.client))
			if c.ok {
				if err != nil {
					t.Fatal(err)
				}
				conn.Close()
				st, opened := h.last()
				if opened != 1 || (c.auth == "none" && len(st.PeerCertificates) != 0) {
					t.Fatalf("opened %d, peer certificates %d", opened, len(st.PeerCertificates))
				}
				return
			}
			if err == nil {
				conn.Close()
				t.Fatal("refused client served")
			}
			if !strings.Contains(err.Error(), c.alert) {
				t.Fatalf("client saw %v, want the alert %q", err, c.alert)
			}
			if _, opened := h.last(); opened != 0 {
				t.Fatal("the handler heard of a connection whose handshake failed")
			}
		})
	}
}

// TestTLSRefusesPlaintextAndStalls: a Kafka request sent in the clear to a TLS
// listener, and a client that never starts its handshake, are closed; the handler never
// sees them and serves others meanwhile.
func TestTLSRefusesPlaintextAndStalls(t *testing.T) {
	ca := newPKI(t, "CA")
	srv := ca.issue(t, "broker", true, time.Time{})
	_, h, addr := serveTLS(t, SSLConfig{KeystoreCertificateChain: string(srv.certPEM), KeystoreKey: string(srv.keyPEM)},
		Config{HandshakeTimeout: 300 * time.Millisecond})
	clear := dial(t, addr)
	send(t, clear, "\x00\x12\x00\x03\x00\x00\x00\x01\x00\x04kcat") // an ApiVersions request
	expectClosed(t, clear)
	stalled := dial(t, addr)
	start := time.Now()
	if c, err := roundTrip(addr, &tls.Config{RootCAs: ca.pool(), ServerName: "localhost"}); err != nil {
		t.Fatal(err)
	} else {
		c.Close()
	}
	expectClosed(t, stalled)
	if time.Since(start) > 5*time.Second {
		t.Fatal("the stalled handshake was not timed out")
	}
	if _, opened := h.last(); opened != 1 {
		t.Fatalf("the handler heard of %d connections, want 1", opened)
	}
}

// TestTLSReload rotates the server certificate and the trust store under a running
// listener: explicit Reload, then the file watcher; a broken file keeps the old ones.
func TestTLSReload(t *testing.T) {
	dir := t.TempDir()
	ca := newPKI(t, "CA")
	ca2 := newPKI(t, "second CA")
	first := ca.issue(t, "cert-1", true, time.Time{})
	ks := writeFile(t, dir, "ks.pem", first.keystore())
	ts := writeFile(t, dir, "ts.pem", ca.caPEM)
	cfg := SSLConfig{KeystoreLocation: ks, TruststoreLocation: ts, ClientAuth: "required", ReloadInterval: 20 * time.Millisecond}
	tt, _, addr := serveTLS(t, cfg, Config{})
	roots := x509.NewCertPool()
	roots.AddCert(ca.caCert)
	roots.AddCert(ca2.caCert)
	client := ca.issue(t, "client", false, time.Time{})
	client2 := ca2.issue(t, "client-of-ca2", false, time.Time{})
	cc := func(l leaf) *tls.Config {
		return &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", Certificates: []tls.Certificate{l.tlsCert(t)}}
	}
	served := func(l leaf) (string, error) {
		c, err := roundTrip(addr, cc(l))
		if err != nil {
			return "", err
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
	}
	if cn, err := served(client); err != nil || cn != "cert-1" {
		t.Fatalf("before reload: %q, %v", cn, err)
	}
	old, err := roundTrip(addr, cc(client)) // stays open across the reload
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()

	if changed, err := tt.Reload(); changed || err != nil {
		t.Fatalf("Reload of unchanged files = %v, %v", changed, err)
	}
	second := ca.issue(t, "cert-2", true, time.Time{})
	writeFile(t, dir, "ks.pem", second.keystore())
	writeFile(t, dir, "ts.pem", append(append([]byte{}, ca.caPEM...), ca2.caPEM...))
	if changed, err := tt.Reload(); !changed || err != nil {
		t.Fatalf("Reload = %v, %v", changed, err)
	}
	if cn, err := served(client2); err != nil || cn != "cert-2" {
		t.Fatalf("after reload: %q, %v (the new certificate and trust store)", cn, err)
	}
	// The connection made before the reload still works.
	old.Write([]byte{0, 0, 0, 2, 'h', 'i'})
	var b [6]byte
	if _, err := readFull(old, b[:]); err != nil || string(b[4:]) != "hi" {
		t.Fatalf("an established connection broke on reload: %v", err)
	}

	// A half-written key store keeps the current configuration; the watcher picks up
	// the complete file.
	if err := os.WriteFile(ks, second.keystore()[:40], 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := tt.Reload(); changed || !errors.Is(err, ErrTLSConfig) {
		t.Fatalf("Reload of a broken file = %v, %v", changed, err)
	}
	if cn, err := served(client); err != nil || cn != "cert-2" {
		t.Fatalf("after a broken reload: %q, %v", cn, err)
	}
	tt.Watch()
	tt.Watch() // a second call is a no-op
	third := ca.issue(t, "cert-3", true, time.Time{})
	writeFile(t, dir, "ks.pem", third.keystore())
	waitFor(t, "the watcher to load cert-3", func() bool {
		cn, err := served(client)
		return err == nil && cn == "cert-3"
	})
	// The trust store loses the second CA: its clients are refused from now on.
	writeFile(t, dir, "ts.pem", ca.caPEM)
	waitFor(t, "the watcher to drop the second CA", func() bool {
		_, err := served(client2)
		return err != nil
	})
	if tt.Reloads() < 3 {
		t.Fatalf("%d reloads", tt.Reloads())
	}
	tt.Close()
	tt.Close()
}

// TestTLSEncryptedKeys reads keys encrypted by OpenSSL (testdata/pkcs8/README).
func TestTLSEncryptedKeys(t *testing.T) {
	ca := newPKI(t, "CA")
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "pkcs8", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// A certificate for the test keys' public keys, signed by the test CA.
	certFor := func(plainName string) []byte {
		blk, _ := pem.Decode(read(plainName))
		key, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return ca.issueFor(t, "enc", key.(crypto.Signer).Public())
	}
	ecCert, rsaCert := certFor("plain.pem"), certFor("rsa-plain.pem")
	for _, c := range []struct {
		file, password string
		cert           []byte
		err            string
	}{
		{"aes256-sha256.pem", "kafka-secret", ecCert, ""},
		{"aes128-sha1.pem", "kafka-secret", ecCert, ""},
		{"des3-sha512.pem", "kafka-secret", ecCert, ""},
		{"aes192-sha384.pem", "kafka-secret", ecCert, ""},
		{"rsa-aes256.pem", "kafka-secret", rsaCert, ""},
		{"plain.pem", "", ecCert, ""},
		{"aes256-sha256.pem", "wrong", ecCert, "wrong ssl.key.password"},
		{"aes256-sha256.pem", "-", ecCert, "ssl.key.password is not set"},
		{"plain.pem", "kafka-secret", ecCert, "not encrypted"},
		{"pbes1.pem", "kafka-secret", ecCert, "not supported"},
		{"scrypt.pem", "kafka-secret", ecCert, "not supported"},
		{"aes256-sha256.pem", "kafka-secret", rsaCert, "does not match"},
	} {
		cfg := SSLConfig{KeystoreKey: string(read(c.file)), KeystoreCertificateChain: string(c.cert)}
		if c.password != "-" && (c.password != "" || c.file != "plain.pem") {
			cfg.KeyPassword, cfg.HasKeyPassword = c.password, c.password != ""
		}
		tt, err := NewTLS(cfg, nil)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.file, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrTLSConfig)):
			t.Errorf("%s with %q: %v, want %q", c.file, c.password, err, c.err)
		case c.err == "" && tt.Certificate() == nil:
			t.Errorf("%s: no certificate", c.file)
		}
	}
}

func TestSSLConfigFromProps(t *testing.T) {
	props := map[string]string{
		"ssl.keystore.location":                        "/etc/ks.pem",
		"listener.name.external.ssl.keystore.location": "/etc/external.pem",
		"ssl.key.password":                             "pw",
		"ssl.client.auth":                              "required",
		"ssl.enabled.protocols":                        "TLSv1.2, TLSv1.3",
		"ssl.cipher.suites":                            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256",
		"ssl.endpoint.identification.algorithm":        "",
		"samsa.ssl.reload.interval.ms":                 "250",
	}
	c, err := SSLConfigFromProps(ListenerLookup(props, "EXTERNAL"))
	if err != nil {
		t.Fatal(err)
	}
	if c.KeystoreLocation != "/etc/external.pem" || c.KeyPassword != "pw" || !c.HasKeyPassword || c.ClientAuth != "required" ||
		len(c.EnabledProtocols) != 2 || len(c.CipherSuites) != 2 || c.EndpointIdentification != "" || c.ReloadInterval != 250*time.Millisecond {
		t.Fatalf("%+v", c)
	}
	c, _ = SSLConfigFromProps(ListenerLookup(props, "INTERNAL"))
	if c.KeystoreLocation != "/etc/ks.pem" {
		t.Fatal("the unprefixed key is not the fallback")
	}
	c, _ = SSLConfigFromProps(ListenerLookup(map[string]string{}, "X"))
	if c.EndpointIdentification != "https" || c.ReloadInterval != DefaultTLSReloadInterval || c.HasKeyPassword {
		t.Fatalf("defaults: %+v", c)
	}
	if _, err := SSLConfigFromProps(ListenerLookup(map[string]string{"samsa.ssl.reload.interval.ms": "-1"}, "X")); !errors.Is(err, ErrTLSConfig) {
		t.Fatal("negative reload interval accepted")
	}
}

func TestTLSConfigErrors(t *testing.T) {
	ca := newPKI(t, "CA")
	srv := ca.issue(t, "broker", true, time.Time{})
	dir := t.TempDir()
	ks := writeFile(t, dir, "ks.pem", srv.keystore())
	ok := SSLConfig{KeystoreLocation: ks}
	with := func(f func(c *SSLConfig)) SSLConfig { c := ok; f(&c); return c }
	for name, c := range map[string]SSLConfig{
		"JKS":                 with(func(c *SSLConfig) { c.KeystoreType = "JKS" }),
		"PKCS12 trust":        with(func(c *SSLConfig) { c.TruststoreType = "PKCS12"; c.TruststoreCertificates = string(ca.caPEM) }),
		"keystore password":   with(func(c *SSLConfig) { c.KeystorePassword = "x" }),
		"truststore password": with(func(c *SSLConfig) { c.TruststorePassword = "x" }),
		"location and inline": with(func(c *SSLConfig) { c.KeystoreKey = string(srv.keyPEM) }),
		"chain without key":   {KeystoreCertificateChain: string(srv.certPEM)},
		"no key store":        {TruststoreCertificates: string(ca.caPEM)},
		"missing file":        {KeystoreLocation: filepath.Join(dir, "nope.pem")},
		"empty trust store":   with(func(c *SSLConfig) { c.TruststoreCertificates = "not pem" }),
		"both trust stores":   with(func(c *SSLConfig) { c.TruststoreCertificates, c.TruststoreLocation = string(ca.caPEM), ks }),
		"client auth":         with(func(c *SSLConfig) { c.ClientAuth = "always" }),
		"SSLv3":               with(func(c *SSLConfig) { c.EnabledProtocols = []string{"SSLv3"} }),
		"protocol hole":       with(func(c *SSLConfig) { c.EnabledProtocols = []string{"TLSv1.1", "TLSv1.3"} }),
		"unknown suite":       with(func(c *SSLConfig) { c.CipherSuites = []string{"TLS_FAKE_WITH_NOTHING"} }),
		"insecure suite":      with(func(c *SSLConfig) { c.CipherSuites = []string{"TLS_RSA_WITH_RC4_128_SHA"} }),
		"suites without versions": with(func(c *SSLConfig) {
			c.CipherSuites = []string{"TLS_AES_128_GCM_SHA256"}
			c.EnabledProtocols = []string{"TLSv1.2"}
		}),
		"ssl.protocol":   with(func(c *SSLConfig) { c.Protocol = "SSLv3" }),
		"no certificate": {KeystoreKey: string(srv.keyPEM), KeystoreCertificateChain: string(srv.keyPEM)},
		"no private key": {KeystoreKey: string(srv.certPEM), KeystoreCertificateChain: string(srv.certPEM)},
		"legacy encrypted key": {KeystoreCertificateChain: string(srv.certPEM),
			KeystoreKey: "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nAAAA\n-----END RSA PRIVATE KEY-----\n"},
	} {
		tt, err := NewTLS(c, nil)
		if err == nil {
			_, err = tt.ServerConfig()
		}
		if !errors.Is(err, ErrTLSConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestTLSVersionsAndSuites: ssl.enabled.protocols and ssl.cipher.suites as Java reads
// them, within what Go can do.
func TestTLSVersionsAndSuites(t *testing.T) {
	ca := newPKI(t, "CA")
	srv := ca.issue(t, "broker", true, time.Time{})
	base := SSLConfig{KeystoreCertificateChain: string(srv.certPEM), KeystoreKey: string(srv.keyPEM)}
	for _, c := range []struct {
		name      string
		protocols []string
		suites    []string
		client    *tls.Config
		version   uint16
		suite     uint16
		fails     bool
	}{
		{name: "default: TLS 1.3", version: tls.VersionTLS13},
		{name: "TLS 1.2 only", protocols: []string{"TLSv1.2"}, version: tls.VersionTLS12},
		{name: "TLS 1.2 only refuses a 1.3 client", protocols: []string{"TLSv1.2"}, client: &tls.Config{MinVersion: tls.VersionTLS13}, fails: true},
		{name: "TLS 1.3 only refuses a 1.2 client", protocols: []string{"TLSv1.3"}, client: &tls.Config{MaxVersion: tls.VersionTLS12}, fails: true},
		{name: "a 1.2 suite only: no TLS 1.3", suites: []string{"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}, version: tls.VersionTLS12, suite: tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384},
		{name: "a 1.2 suite the client lacks", suites: []string{"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"},
			client: &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}, fails: true},
		{name: "a 1.3 suite only: TLS 1.3", suites: []string{"TLS_AES_128_GCM_SHA256"}, version: tls.VersionTLS13},
		{name: "a 1.3 suite only refuses a 1.2 client", suites: []string{"TLS_AES_128_GCM_SHA256"}, client: &tls.Config{MaxVersion: tls.VersionTLS12}, fails: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := base
			cfg.EnabledProtocols, cfg.CipherSuites = c.protocols, c.suites
			_, _, addr := serveTLS(t, cfg, Config{})
			cc := c.client
			if cc == nil {
				cc = &tls.Config{}
			}
			cc.RootCAs, cc.ServerName = ca.pool(), "localhost"
			conn, err := roundTrip(addr, cc)
			if c.fails {
				if err == nil {
					conn.Close()
					t.Fatal("handshake succeeded")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			st := conn.ConnectionState()
			if st.Version != c.version || (c.suite != 0 && st.CipherSuite != c.suite) {
				t.Fatalf("negotiated %x %s", st.Version, tls.CipherSuiteName(st.CipherSuite))
			}
		})
	}
}

// TestTLSClientConfig: the client side for node-to-node connections verifies the
// server's name (https) or only its chain (empty), and presents the key store for mTLS.
func TestTLSClientConfig(t *testing.T) {
	ca := newPKI(t, "CA")
	rogue := newPKI(t, "rogue")
	srv := ca.issue(t, "broker", true, time.Time{})
	peer := ca.issue(t, "broker-2", false, time.Time{})
	_, h, addr := serveTLS(t, SSLConfig{KeystoreCertificateChain: string(srv.certPEM), KeystoreKey: string(srv.keyPEM),
		TruststoreCertificates: string(ca.caPEM), ClientAuth: "required"}, Config{})
	client := func(endpoint string, trust []byte) *TLS {
		tt, err := NewTLS(SSLConfig{KeystoreCertificateChain: string(peer.certPEM), KeystoreKey: string(peer.keyPEM),
			TruststoreCertificates: string(trust), EndpointIdentification: endpoint, Protocol: "TLSv1.2"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return tt
	}
	for _, c := range []struct {
		name, endpoint, server string
		trust                  []byte
		ok                     bool
	}{
		{"https, right name", "https", "127.0.0.1", ca.caPEM, true},
		{"https, wrong name", "https", "broker-9.example", ca.caPEM, false},
		{"no name check", "", "broker-9.example", ca.caPEM, true},
		{"no name check, untrusted chain", "", "127.0.0.1", rogue.caPEM, false},
	} {
		cc, err := client(c.endpoint, c.trust).ClientConfig(c.server)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := roundTrip(addr, cc)
		if c.ok != (err == nil) {
			t.Errorf("%s: %v", c.name, err)
		}
		if err == nil {
			if v := conn.ConnectionState().Version; v != tls.VersionTLS12 {
				t.Errorf("%s: ssl.protocol=TLSv1.2 negotiated %x", c.name, v)
			}
			conn.Close()
			if st, _ := h.last(); st.PeerCertificates[0].Subject.CommonName != "broker-2" {
				t.Errorf("%s: the client certificate was not presented", c.name)
			}
		}
	}
	bad, _ := NewTLS(SSLConfig{TruststoreCertificates: string(ca.caPEM), EndpointIdentification: "dns"}, nil)
	if _, err := bad.ClientConfig("x"); !errors.Is(err, ErrTLSConfig) {
		t.Fatalf("unknown endpoint identification: %v", err)
	}
	if _, err := bad.ServerConfig(); !errors.Is(err, ErrTLSConfig) {
		t.Fatal("a server configuration without a key store")
	}
}

// TestTLSShutdownAbortsHandshakes: Shutdown does not wait for a client that never
// finishes its handshake.
func TestTLSShutdownAbortsHandshakes(t *testing.T) {
	ca := newPKI(t, "CA")
	srv := ca.issue(t, "broker", true, time.Time{})
	tt, err := NewTLS(SSLConfig{KeystoreCertificateChain: string(srv.certPEM), KeystoreKey: string(srv.keyPEM)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := NewStd(Config{HandshakeTimeout: time.Minute}, &peerHandler{}, nil)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	tl, _ := tt.Listener(ln)
	go s.Serve(tl)
	dial(t, ln.Addr().String())
	waitFor(t, "the connection", func() bool { return s.NumConns() == 1 })
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Shutdown waited %v for a handshake", d)
	}
}
