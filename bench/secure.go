package bench

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Secured spawned targets: samsa@security=SSL and samsa@security=SASL_SSL (and
// samsa@security=PLAINTEXT, the same as samsa). The broker gets two listeners: the
// measured one of that protocol, and a PLAINTEXT inter-broker listener the loader
// uses only to set the target up. For SSL a CA and a certificate for 127.0.0.1 are
// made in the target's directory (ECDSA P-256, TLS 1.3 as Go negotiates it); for
// SASL_SSL a SCRAM-SHA-512 user is created (4096 iterations) and the clients
// authenticate as it on every connection. The Target carries the clients' options
// (ClientOpts). The raw mode speaks plaintext only and is refused for these targets.

// securityOf splits a security=PROTOCOL extra off a samsa@ spec's flags.
func securityOf(extras []string) (protocol string, rest []string, err error) {
	for _, a := range extras {
		v, ok := strings.CutPrefix(a, "security=")
		if !ok {
			rest = append(rest, a)
			continue
		}
		switch p := strings.ToUpper(v); p {
		case "PLAINTEXT", "SSL", "SASL_SSL":
			protocol = p
		default:
			return "", nil, fmt.Errorf("%w: security=%s: want PLAINTEXT, SSL or SASL_SSL", ErrTarget, v)
		}
	}
	return protocol, rest, nil
}

// startSecureSamsa starts samsa with a listener of protocol (SSL or SASL_SSL).
func startSecureSamsa(ctx context.Context, bin, protocol string, o SpawnOptions) (*Target, error) {
	dir, err := os.MkdirTemp(o.WorkDir, "samsa-bench-security-")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTarget, err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	pool, err := writeTestPKI(dir)
	if err != nil {
		return nil, err
	}
	var addrs [3]string
	for i := range addrs {
		if addrs[i], err = freeAddr(); err != nil {
			return nil, err
		}
	}
	plain, secured, admin := addrs[0], addrs[1], addrs[2]
	props := fmt.Sprintf(`listeners=PLAINTEXT://%s,SECURED://%s
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SECURED:%s
inter.broker.listener.name=PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-512
ssl.keystore.type=PEM
ssl.keystore.location=%s
`, plain, secured, protocol, filepath.Join(dir, "keystore.pem"))
	conf := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(conf, []byte(props), 0o600); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTarget, err)
	}
	t, err := spawn(ctx, TargetSamsa, bin, []string{"serve", "--config", conf, "--admin-listen", admin}, nil, plain, admin, o)
	if err != nil {
		return nil, err
	}
	t.Brokers, t.extraDir = []string{secured}, dir
	ok = true
	t.ClientOpts = []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})}
	if protocol == "SASL_SSL" {
		pw := make([]byte, 16)
		rand.Read(pw)
		user := scram.Auth{User: "samsa-bench", Pass: hex.EncodeToString(pw)}
		if err := createScramUser(ctx, plain, user); err != nil {
			t.Close()
			return nil, err
		}
		t.ClientOpts = append(t.ClientOpts, kgo.SASL(user.AsSha512Mechanism()))
	}
	return t, nil
}

// createScramUser stores u's SCRAM-SHA-512 credential through the broker at addr.
func createScramUser(ctx context.Context, addr string, u scram.Auth) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DisableClientMetrics())
	if err != nil {
		return fmt.Errorf("%w: %w", ErrTarget, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: u.User, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: u.Pass}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		return fmt.Errorf("%w: creating the SCRAM user: %w", ErrTarget, err)
	}
	return nil
}

// writeTestPKI writes dir/keystore.pem (the broker's key and a certificate for
// 127.0.0.1 signed by a new CA) and returns the CA as a pool.
func writeTestPKI(dir string) (*x509.CertPool, error) {
	fail := func(err error) (*x509.CertPool, error) {
		return nil, fmt.Errorf("%w: test certificates: %w", ErrTarget, err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fail(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "samsa-bench CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(30 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return fail(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return fail(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fail(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(30 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fail(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fail(err)
	}
	pemBytes := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	if err := os.WriteFile(filepath.Join(dir, "keystore.pem"), pemBytes, 0o600); err != nil {
		return fail(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return pool, nil
}
