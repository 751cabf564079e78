package cluster

import (
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
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// A secured cluster (Config.Secure) is configured as docs/SECURITY.md's "Between
// nodes" describes, with certificates the harness makes at run time:
//
//	listeners    SASL_SSL://host:9092 (clients and replication), CONTROLLER://host:9093
//	             (SASL_SSL), every one SCRAM-SHA-512 only
//	between      sasl.mechanism.inter.broker.protocol and sasl.mechanism.controller.protocol
//	nodes        SCRAM-SHA-512, as User:broker and User:controller
//	SCRAM        every credential given to `storage format --add-scram` (controller,
//	             broker, admin, the clients' user), so they are in the metadata log from
//	             its start; passwords drawn per run
//	ACLs         StandardAuthorizer, super.users=User:admin;User:broker;User:controller,
//	             allow.everyone.if.no.acl.found=false; the workload's clients are
//	             User:chaos, a plain user with the ACLs the runner creates
//	TLS          two CAs (ECDSA P-256, crypto/x509) in every trust store (the nodes'
//	             ssl.truststore.location and the clients' root pool); each node's key
//	             store (PKCS#8 key, certificate for its address, 127.0.0.1 and
//	             localhost, issuing CA) is from the first; RotateCertificate replaces it
//	             with a new key and certificate from the other CA
//	sessions     connections.max.reauth.ms=20000: every connection re-authenticates
//	             (KIP-368) during the run
//
// Layout: pki/ca-1.pem, pki/ca-2.pem, pki/ca-bundle.pem, node<i>/certs/keystore.pem.

// Users of a secured cluster.
const (
	UserController = "controller"
	UserBroker     = "broker"
	UserAdmin      = "admin"
	UserClient     = "chaos"
)

type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

type security struct {
	dir       string
	cas       [2]*authority
	bundle    string // path of the trust store
	pool      *x509.CertPool
	passwords map[string]string

	mu struct {
		sync.Mutex
		issuer  map[int]int   // node id -> index of the CA that issued its certificate
		serials map[int]int64 // node id -> serial of its certificate
		serial  int64
	}
}

func newSecurity(dir string) (*security, error) {
	s := &security{dir: filepath.Join(dir, "pki"), passwords: map[string]string{}, pool: x509.NewCertPool()}
	s.mu.issuer, s.mu.serials = map[int]int{}, map[int]int64{}
	s.mu.serial = 100
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	var bundle []byte
	for i := range s.cas {
		ca, err := newAuthority(fmt.Sprintf("samsa-chaos CA %d", i+1), int64(i+1))
		if err != nil {
			return nil, err
		}
		s.cas[i] = ca
		s.pool.AddCert(ca.cert)
		bundle = append(bundle, ca.pem...)
		if err := os.WriteFile(filepath.Join(s.dir, fmt.Sprintf("ca-%d.pem", i+1)), ca.pem, 0o644); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
	}
	s.bundle = filepath.Join(s.dir, "ca-bundle.pem")
	if err := os.WriteFile(s.bundle, bundle, 0o644); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	for _, u := range []string{UserController, UserBroker, UserAdmin, UserClient} {
		b := make([]byte, 12)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		s.passwords[u] = u + "-" + hex.EncodeToString(b)
	}
	return s, nil
}

func newAuthority(name string, serial int64) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("cluster: CA key: %w", err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("cluster: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("cluster: CA certificate: %w", err)
	}
	return &authority{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// keystorePath is node n's key store.
func (s *security) keystorePath(n *Node) string { return filepath.Join(n.Dir, "certs", "keystore.pem") }

// issue writes a new key and certificate for n, from CA ca, into its key store
// (written to a temporary file and renamed, so the broker never reads half of it).
func (s *security) issue(n *Node, ca int) (string, error) {
	s.mu.Lock()
	s.mu.serial++
	serial := s.mu.serial
	s.mu.Unlock()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", fmt.Errorf("cluster: node key: %w", err)
	}
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	if ip := net.ParseIP(n.Host); ip != nil && !ip.Equal(ips[0]) {
		ips = append(ips, ip)
	}
	auth := s.cas[ca]
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: fmt.Sprintf("node-%d", n.ID)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, IPAddresses: ips, DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, auth.cert, &key.PublicKey, auth.key)
	if err != nil {
		return "", fmt.Errorf("cluster: node certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", fmt.Errorf("cluster: node key: %w", err)
	}
	var b []byte
	b = append(b, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})...)
	b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	b = append(b, auth.pem...)
	path := s.keystorePath(n)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	s.mu.Lock()
	s.mu.issuer[n.ID] = ca
	s.mu.serials[n.ID] = serial
	s.mu.Unlock()
	return fmt.Sprintf("node %d: certificate serial %d from %s", n.ID, serial, auth.cert.Subject.CommonName), nil
}

// properties are a secured node's listener and security keys.
func (s *security) properties(n *Node) []string {
	jaas := func(user string) string {
		return fmt.Sprintf(`org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s";`, user, s.passwords[user])
	}
	return []string{
		fmt.Sprintf("listeners=SASL_SSL://%s,CONTROLLER://%s", n.Addr(), n.ControllerAddr()),
		"advertised.listeners=SASL_SSL://" + n.Addr(),
		"controller.listener.names=CONTROLLER",
		"inter.broker.listener.name=SASL_SSL",
		"listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL",
		"sasl.enabled.mechanisms=SCRAM-SHA-512",
		"listener.name.controller.sasl.enabled.mechanisms=SCRAM-SHA-512",
		"sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
		"sasl.mechanism.controller.protocol=SCRAM-SHA-512",
		"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=" + jaas(UserBroker),
		"listener.name.controller.scram-sha-512.sasl.jaas.config=" + jaas(UserController),
		"ssl.keystore.type=PEM",
		"ssl.keystore.location=" + s.keystorePath(n),
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + s.bundle,
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:" + UserAdmin + ";User:" + UserBroker + ";User:" + UserController,
		"allow.everyone.if.no.acl.found=false",
		"connections.max.reauth.ms=20000",
	}
}

// addScram are `storage format` arguments giving every user its credential.
func (s *security) addScram() []string {
	var args []string
	for _, u := range []string{UserController, UserBroker, UserAdmin, UserClient} {
		args = append(args, "--add-scram", fmt.Sprintf("SCRAM-SHA-512=[name=%s,password=%s]", u, s.passwords[u]))
	}
	return args
}

// opts are a client's options as user.
func (s *security) opts(user string) []kgo.Opt {
	return []kgo.Opt{
		kgo.DialTLSConfig(&tls.Config{RootCAs: s.pool, MinVersion: tls.VersionTLS12}),
		kgo.SASL(scram.Auth{User: user, Pass: s.passwords[user]}.AsSha512Mechanism()),
	}
}

// Secure reports whether the cluster runs with TLS, SASL and ACLs.
func (c *Cluster) Secure() bool { return c.sec != nil }

// AdminOpts are the client options of the harness's own requests (its admin client,
// readiness probes, observers): on a secured cluster TLS and SCRAM-SHA-512 as the
// super user admin; none on a plaintext one.
func (c *Cluster) AdminOpts() []kgo.Opt {
	if c.sec == nil {
		return nil
	}
	return c.sec.opts(UserAdmin)
}

// ClientOpts are the workload's client options: on a secured cluster TLS and
// SCRAM-SHA-512 as UserClient, who is no super user (the runner gives it its ACLs).
func (c *Cluster) ClientOpts() []kgo.Opt {
	if c.sec == nil {
		return nil
	}
	return c.sec.opts(UserClient)
}

// RotateCertificate gives node n a new key and certificate from the CA that did not
// issue its current one, written over its key store; the node reads it at its next
// start (or its next reload of the store). It says what it issued.
func (c *Cluster) RotateCertificate(n *Node) (string, error) {
	if c.sec == nil {
		return "", fmt.Errorf("cluster: not a secured cluster")
	}
	c.sec.mu.Lock()
	next := 1 - c.sec.mu.issuer[n.ID]
	c.sec.mu.Unlock()
	return c.sec.issue(n, next)
}

// IsAuthFailure reports whether a node's log line (its "msg") says an authentication
// failed, between nodes or of a client: what a secured run must not see once its
// faults have healed.
func IsAuthFailure(msg string) bool {
	for _, p := range []string{"peer authentication failed", "peer re-authentication failed", "SASL authentication failed", "SASL handshake refused"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// CheckServedCertificate dials node n's Kafka listener with TLS (verified against the
// trust bundle) and checks that it presents the certificate last issued to it.
func (c *Cluster) CheckServedCertificate(n *Node, timeout time.Duration) error {
	if c.sec == nil {
		return fmt.Errorf("cluster: not a secured cluster")
	}
	d := &net.Dialer{Timeout: timeout}
	conn, err := tls.DialWithDialer(d, "tcp", n.Addr(), &tls.Config{RootCAs: c.sec.pool, ServerName: n.Host, MinVersion: tls.VersionTLS12})
	if err != nil {
		return fmt.Errorf("cluster: TLS to node %d: %w", n.ID, err)
	}
	defer conn.Close()
	certs := conn.ConnectionState().PeerCertificates
	c.sec.mu.Lock()
	want := c.sec.mu.serials[n.ID]
	c.sec.mu.Unlock()
	if len(certs) == 0 || certs[0].SerialNumber.Int64() != want {
		got := int64(-1)
		if len(certs) > 0 {
			got = certs[0].SerialNumber.Int64()
		}
		return fmt.Errorf("cluster: node %d presents certificate serial %d, not the %d issued to it", n.ID, got, want)
	}
	return nil
}
