package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"strings"
	"testing"
)

// The harness's PKI: a node's key store holds a key and a certificate for its
// address that the clients' trust bundle verifies; a rotation issues a new key and
// certificate from the other CA, which the same bundle verifies.
func TestSecurityCertificatesRotate(t *testing.T) {
	dir := t.TempDir()
	s, err := newSecurity(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{sec: s}
	n := &Node{c: c, ID: 2, Host: "10.1.2.12", KafkaPort: 9092, ControllerPort: 9093, Dir: dir + "/node2"}
	var issuers []string
	var keys [][]byte
	for i := 0; i < 3; i++ {
		var what string
		if i == 0 {
			what, err = s.issue(n, 0)
		} else {
			what, err = c.RotateCertificate(n)
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(s.keystorePath(n))
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair(b, b)
		if err != nil {
			t.Fatalf("%s: key store: %v", what, err)
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: s.pool, DNSName: "10.1.2.12"}); err != nil {
			t.Fatalf("%s: not verified for the node's address: %v", what, err)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: s.pool, DNSName: "127.0.0.1"}); err != nil {
			t.Fatalf("%s: not verified for 127.0.0.1: %v", what, err)
		}
		issuers = append(issuers, leaf.Issuer.CommonName)
		blk, _ := pem.Decode(b)
		keys = append(keys, blk.Bytes)
	}
	if issuers[0] == issuers[1] || issuers[1] == issuers[2] || issuers[0] != issuers[2] {
		t.Errorf("issuers %v: want the CAs to alternate", issuers)
	}
	if string(keys[0]) == string(keys[1]) {
		t.Error("a rotation kept the key")
	}
	props := strings.Join(s.properties(n), "\n")
	for _, want := range []string{"listeners=SASL_SSL://10.1.2.12:9092,CONTROLLER://10.1.2.12:9093", "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
		"sasl.mechanism.controller.protocol=SCRAM-SHA-512", "StandardAuthorizer", "super.users=User:admin;User:broker;User:controller", "ssl.truststore.location=" + s.bundle} {
		if !strings.Contains(props, want) {
			t.Errorf("properties lack %q:\n%s", want, props)
		}
	}
	if strings.Contains(props, "User:"+UserClient) {
		t.Errorf("the clients' user is a super user:\n%s", props)
	}
	if args := strings.Join(s.addScram(), " "); strings.Count(args, "--add-scram") != 4 || !strings.Contains(args, "name=chaos,") {
		t.Errorf("storage format arguments %q", args)
	}
}
