package transport

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testPKI is a certificate authority made in the test, and the certificates it signs.
type testPKI struct {
	caCert *x509.Certificate
	caKey  crypto.Signer
	caPEM  []byte
}

var serial atomic.Int64

// check fails t, or panics without one (package-level PKI built outside a test).
func check(t testing.TB, err error) {
	if err == nil {
		return
	}
	if t == nil {
		panic(err)
	}
	t.Helper()
	t.Fatal(err)
}

func newPKI(t testing.TB, name string) *testPKI {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	check(t, err)
	cert, _ := x509.ParseCertificate(der)
	return &testPKI{caCert: cert, caKey: key, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// leaf is a signed certificate and its key, as PEM.
type leaf struct {
	certPEM, keyPEM []byte
	cert            *x509.Certificate
	key             crypto.Signer
}

// keystore is the PEM key store file Kafka reads: the key, then the chain.
func (l leaf) keystore() []byte { return append(append([]byte{}, l.keyPEM...), l.certPEM...) }

func (l leaf) tlsCert(t testing.TB) tls.Certificate {
	c, err := tls.X509KeyPair(l.certPEM, l.keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// issue signs a certificate for cn: a server one (with 127.0.0.1 and localhost) or a
// client one; notAfter zero means a day from now.
func (p *testPKI) issue(t testing.TB, cn string, server bool, notAfter time.Time) leaf {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if notAfter.IsZero() {
		notAfter = time.Now().Add(24 * time.Hour)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)),
		Subject:   pkix.Name{CommonName: cn, OrganizationalUnit: []string{"ServiceUsers"}, Organization: []string{"Samsa"}},
		NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		tmpl.DNSNames = []string{"localhost"}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	check(t, err)
	pk, _ := x509.MarshalPKCS8PrivateKey(key)
	cert, _ := x509.ParseCertificate(der)
	return leaf{certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}), cert: cert, key: key}
}

// issueFor signs a server certificate for a public key made elsewhere, as PEM.
func (p *testPKI) issueFor(t testing.TB, cn string, pub crypto.PublicKey) []byte {
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, pub, p.caKey)
	check(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func (p *testPKI) pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.caCert)
	return pool
}

func writeFile(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	// Written to a temporary name and renamed, as a certificate rotation would.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// conformancePKI is the one PKI of the std-tls conformance kind.
var conformancePKI = sync.OnceValues(func() (*TLS, *tls.Config) {
	ca := newPKI(nil, "conformance CA")
	srv := ca.issue(nil, "conformance", true, time.Time{})
	tt, err := NewTLS(SSLConfig{KeystoreCertificateChain: string(srv.certPEM), KeystoreKey: string(srv.keyPEM)}, nil)
	check(nil, err)
	return tt, &tls.Config{RootCAs: ca.pool(), ServerName: "127.0.0.1"}
})

// tlsServed is Std serving its listeners with TLS.
type tlsServed struct {
	*Std
	t *TLS
}

func (s tlsServed) Serve(ln net.Listener) error {
	tl, err := s.t.Listener(ln)
	if err != nil {
		return err
	}
	if name := listenerName(ln); name != "" {
		tl = NamedListener(tl, name)
	}
	return s.Std.Serve(tl)
}
