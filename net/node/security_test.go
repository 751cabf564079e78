package node

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
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// testPEM returns a CA pool and a server certificate and key (PEM) for 127.0.0.1.
func testPEM(t *testing.T) (*x509.CertPool, string, string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return pool, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
}

func saslSSLClient(t *testing.T, addr string, pool *x509.CertPool, m sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.SASL(m), kgo.RetryTimeout(5 * time.Second),
		kgo.DialTLSConfig(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestSecuritySASLSSLNode starts a node the way a Kafka operator configures one: a
// SASL_SSL listener (PLAIN users in the listener's JAAS configuration, SCRAM
// credentials from the metadata log), Kafka's StandardAuthorizer name and super.users.
func TestSecuritySASLSSLNode(t *testing.T) {
	pool, cert, key := testPEM(t)
	cfg, err := FromKeys(map[string]string{
		"listeners":                                     "SASL_SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map":                "SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name":                    "SASL_SSL",
		"sasl.enabled.mechanisms":                       "PLAIN,SCRAM-SHA-512",
		"listener.name.sasl_ssl.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret";`,
		"ssl.keystore.type":                             "PEM",
		"ssl.keystore.certificate.chain":                cert,
		"ssl.keystore.key":                              key,
		"authorizer.class.name":                         "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":                                   "User:admin",
		"connection.failed.authentication.delay.ms":     "10",
		"data.dir":                                      t.TempDir(), "admin.listen": "",
	})
	if err != nil {
		t.Fatal(err)
	}
	nd, err := Start(cfg, Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := nd.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := nd.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	addr := nd.Addr()
	admin := kadm.NewClient(saslSSLClient(t, addr, pool, plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	res, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-secret"},
		{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-secret"}})
	if err != nil || res.AllFailed() {
		t.Fatalf("credentials: %v %+v", err, res)
	}
	acls, err := admin.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || acls[0].Err != nil {
		t.Fatalf("ACLs: %v %+v", err, acls)
	}
	alice := saslSSLClient(t, addr, pool, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism(), kgo.DisableIdempotentWrite())
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("1")}).FirstErr(); err != nil {
		t.Fatalf("alice: %v", err)
	}
	bob := saslSSLClient(t, addr, pool, scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism(), kgo.DisableIdempotentWrite())
	if err := bob.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("1")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	wrong := saslSSLClient(t, addr, pool, scram.Auth{User: "alice", Pass: "wrong"}.AsSha512Mechanism())
	if err := wrong.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

func TestSecurityRefusedAtStart(t *testing.T) {
	_, cert, key := testPEM(t)
	for _, tc := range []struct {
		name string
		keys map[string]string
		want string
	}{
		{"TLS on the reactor", map[string]string{"listeners": "SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "transport": "reactor",
			"listener.security.protocol.map": "SSL:SSL,CONTROLLER:PLAINTEXT", "inter.broker.listener.name": "SSL",
			"ssl.keystore.certificate.chain": cert, "ssl.keystore.key": key}, "transport=reactor serves plaintext only"},
		{"an unknown authorizer", map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
			"authorizer.class.name": "com.example.Authorizer"}, "authorizer.class.name"},
		{"an SSL listener without a key store", map[string]string{"listeners": "SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
			"listener.security.protocol.map": "SSL:SSL,CONTROLLER:PLAINTEXT", "inter.broker.listener.name": "SSL"}, "listener SSL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.keys["data.dir"], tc.keys["admin.listen"] = t.TempDir(), ""
			cfg, err := FromKeys(tc.keys)
			if err == nil {
				var nd *Node
				if nd, err = Start(cfg, Options{Logger: discard}); err == nil {
					nd.Shutdown(context.Background())
				}
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// TestSecurityTwoListeners: a PLAINTEXT inter-broker listener and a SASL_SSL one for
// clients; a client of the SASL_SSL listener is advertised that listener's endpoint
// (Metadata, FindCoordinator), so a consumer group works over it end to end.
func TestSecurityTwoListeners(t *testing.T) {
	pool, cert, key := testPEM(t)
	cfg, err := FromKeys(map[string]string{
		"listeners":                                             "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map":                        "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name":                            "INTERNAL",
		"sasl.enabled.mechanisms":                               "PLAIN",
		"listener.name.external.plain.sasl.jaas.config":         `org.apache.kafka.common.security.plain.PlainLoginModule required user_app="app-secret";`,
		"listener.name.external.ssl.keystore.certificate.chain": cert,
		"listener.name.external.ssl.keystore.key":               key,
		"group.initial.rebalance.delay.ms":                      "0", "offsets.topic.num.partitions": "1",
		"data.dir": t.TempDir(), "admin.listen": "",
	})
	if err != nil {
		t.Fatal(err)
	}
	nd, err := Start(cfg, Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := nd.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := nd.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	ext := nd.ListenerAddr("EXTERNAL")
	app := plain.Auth{User: "app", Pass: "app-secret"}.AsMechanism()
	prod := saslSSLClient(t, ext, pool, app, kgo.DefaultProduceTopic("t"), kgo.AllowAutoTopicCreation())
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce over EXTERNAL: %v", err)
	}
	md, err := kadm.NewClient(prod).BrokerMetadata(ctx)
	if err != nil || len(md.Brokers) != 1 || md.Brokers[0].Port != int32(mustPort(t, ext)) {
		t.Fatalf("brokers advertised over EXTERNAL: %v %+v (listener %s)", err, md.Brokers, ext)
	}
	cons := saslSSLClient(t, ext, pool, app, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := cons.PollFetches(ctx)
	if err := fs.Err(); err != nil || fs.NumRecords() != 1 {
		t.Fatalf("group consume over EXTERNAL: %v, %d records", err, fs.NumRecords())
	}
}

func mustPort(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTwoPlaintextListenersAdvertiseTheirOwn: a node without an authorizer with two
// PLAINTEXT listeners (the inter-broker one and one for clients) advertises, to a client
// of each, that listener's own endpoints in Metadata, FindCoordinator and
// DescribeCluster, as Kafka does; the second listener advertised the inter-broker one,
// so that a client behind a proxy or on another network bypassed the listener it
// dialled.
func TestTwoPlaintextListenersAdvertiseTheirOwn(t *testing.T) {
	cfg, err := FromKeys(map[string]string{
		"listeners":                        "INTERNAL://127.0.0.1:0,CLIENT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map":   "INTERNAL:PLAINTEXT,CLIENT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name":       "INTERNAL",
		"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1",
		"data.dir": t.TempDir(), "admin.listen": "",
	})
	if err != nil {
		t.Fatal(err)
	}
	nd, err := Start(cfg, Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := nd.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := nd.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"CLIENT", "INTERNAL"} {
		addr := nd.ListenerAddr(name)
		port := int32(mustPort(t, addr))
		// The client dials only addr: whatever it is told is then tried as it is.
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RetryTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
		if err != nil || len(md.Brokers) != 1 || md.Brokers[0].Port != port {
			t.Fatalf("%s: brokers advertised: %v %+v (listener %s)", name, err, md.Brokers, addr)
		}
		dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
		if err != nil || len(dc.Brokers) != 1 || dc.Brokers[0].Port != port {
			t.Fatalf("%s: DescribeCluster: %v %+v (listener %s)", name, err, dc, addr)
		}
		var fc *kmsg.FindCoordinatorResponse
		for deadline := time.Now().Add(30 * time.Second); ; {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.CoordinatorKeys = []string{"g-" + name}
			if fc, err = req.RequestWith(ctx, cl); err == nil && len(fc.Coordinators) == 1 && fc.Coordinators[0].ErrorCode == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: FindCoordinator: %v %+v", name, err, fc)
			}
			time.Sleep(50 * time.Millisecond) // polling for the offsets topic, with a deadline
		}
		if c := fc.Coordinators[0]; c.Port != port {
			t.Fatalf("%s: FindCoordinator names %s:%d, want the listener's port %d", name, c.Host, c.Port, port)
		}
	}
}
