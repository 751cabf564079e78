package node

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/samsa-broker/samsa/engine"
)

// testMTLS is a CA and one certificate for 127.0.0.1 that serves as server and
// client certificate (every node's key store), as PEM text.
type testMTLS struct {
	caPEM, certPEM, keyPEM string
	pool                   *x509.CertPool
	cert                   tls.Certificate
}

func newTestMTLS(t *testing.T) *testMTLS {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "samsa test CA"}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "node"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	m := &testMTLS{
		caPEM:   string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})),
		certPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		keyPEM:  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})),
		pool:    x509.NewCertPool(),
	}
	m.pool.AddCert(ca)
	if m.cert, err = tls.X509KeyPair([]byte(m.certPEM), []byte(m.keyPEM)); err != nil {
		t.Fatal(err)
	}
	return m
}

func (m *testMTLS) clientConfig() *tls.Config {
	return &tls.Config{RootCAs: m.pool, Certificates: []tls.Certificate{m.cert}, ServerName: "127.0.0.1"}
}

// secureKeys are a node's keys for SASL_SSL with mTLS on the inter-broker listener
// INTERNAL (SCRAM-SHA-512 between brokers), the controller listener (PLAIN, static
// users) and the clients' listener CLIENT (PLAIN). ctlPass and brokerPass are the
// passwords the node authenticates with.
func secureKeys(m *testMTLS, ctlPass, brokerPass string) map[string]string {
	return map[string]string{
		"listener.security.protocol.map":                        "INTERNAL:SASL_SSL,CLIENT:SASL_SSL,CONTROLLER:SASL_SSL",
		"inter.broker.listener.name":                            "INTERNAL",
		"controller.listener.names":                             "CONTROLLER",
		"listener.name.controller.sasl.enabled.mechanisms":      "PLAIN",
		"listener.name.internal.sasl.enabled.mechanisms":        "SCRAM-SHA-512",
		"listener.name.client.sasl.enabled.mechanisms":          "PLAIN",
		"sasl.mechanism.controller.protocol":                    "PLAIN",
		"sasl.mechanism.inter.broker.protocol":                  "SCRAM-SHA-512",
		"listener.name.controller.plain.sasl.jaas.config":       `org.apache.kafka.common.security.plain.PlainLoginModule required username="controller" password="` + ctlPass + `" user_controller="ctl-secret" user_intruder="intruder-secret";`,
		"listener.name.internal.scram-sha-512.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="` + brokerPass + `";`,
		"listener.name.client.plain.sasl.jaas.config":           `org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";`,
		"ssl.keystore.type":                                     "PEM",
		"ssl.keystore.certificate.chain":                        m.certPEM,
		"ssl.keystore.key":                                      m.keyPEM,
		"ssl.truststore.type":                                   "PEM",
		"ssl.truststore.certificates":                           m.caPEM,
		"ssl.client.auth":                                       "required",
		// The nodes' principals are super users, on the controller listener too.
		"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":           "User:controller;User:broker;User:admin",
		// The sessions between nodes expire during the test: every connection
		// re-authenticates (KIP-368) while it carries its traffic.
		"listener.name.controller.connections.max.reauth.ms": "1000",
		"listener.name.internal.connections.max.reauth.ms":   "1000",
		"connection.failed.authentication.delay.ms":          "10",
		"admin.listen": "", "sync": "none",
	}
}

// startQuorum starts a node for each of the formatted configs at once (none of them
// is ready before a quorum of the voters runs), shuts them down when the test ends
// (a shutdown's error fails the test), and returns them once each is ready by ctx.
func startQuorum(ctx context.Context, t *testing.T, cfgs []*Config) []*Node {
	t.Helper()
	nodes := make([]*Node, len(cfgs))
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes[i], errs[i] = Start(cfg, Options{Logger: discard})
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, nd := range nodes {
			if nd == nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				if err := nd.Shutdown(ctx); err != nil {
					t.Errorf("node %d shutdown: %v", nd.NodeID(), err)
				}
			}()
		}
		wg.Wait()
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
	}
	for _, nd := range nodes {
		if err := nd.Ready(ctx); err != nil {
			t.Fatalf("node %d: %v", nd.NodeID(), err)
		}
	}
	return nodes
}

// TestInterNodeSASLSSL: three combined nodes whose inter-broker and controller
// listeners are SASL_SSL with mTLS form a cluster (raft, registration, heartbeats and
// metadata over the secured controller listener); a topic with three replicas and
// min.insync.replicas=3 takes acks=all produces, and every replica holds every record
// (replica fetches over TLS with SCRAM-SHA-512). Plaintext to the controller
// listener gets no Kafka answer, a TLS connection that has not authenticated is
// closed at its first controller request, a broker with wrong passwords cannot
// register, and one with a wrong inter-broker password registers but cannot fetch;
// both say why in their logs.
func TestInterNodeSASLSSL(t *testing.T) {
	m := newTestMTLS(t)
	const n = 3
	addrs := freeAddrs(t, 3*n)
	var voters []string
	for i := range n {
		voters = append(voters, fmt.Sprintf("%d@%s", i+1, addrs[3*i+2]))
	}
	id := RandomUUID()
	cfgs := make([]*Config, n)
	for i := range n {
		keys := secureKeys(m, "ctl-secret", "broker-secret")
		keys["process.roles"], keys["node.id"] = "broker,controller", strconv.Itoa(i+1)
		keys["controller.quorum.voters"] = strings.Join(voters, ",")
		keys["listeners"] = "INTERNAL://" + addrs[3*i] + ",CLIENT://" + addrs[3*i+1] + ",CONTROLLER://" + addrs[3*i+2]
		keys["data.dir"] = filepath.Join(t.TempDir(), strconv.Itoa(i+1))
		cfg, err := FromKeys(keys)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Format(cfg, id, false); err != nil {
			t.Fatal(err)
		}
		cfgs[i] = cfg
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nodes := startQuorum(ctx, t, cfgs)

	// Every node renews the sessions of its connections to the others.
	waitFor(t, 10*time.Second, "every node re-authenticates", func() error {
		for _, nd := range nodes {
			if nd.peer.Reauthentications() == 0 {
				return fmt.Errorf("node %d has not re-authenticated yet", nd.NodeID())
			}
		}
		return nil
	})

	admin := plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()
	cl, err := kgo.NewClient(kgo.SeedBrokers(nodes[0].ListenerAddr("CLIENT")), kgo.SASL(admin), kgo.DialTLSConfig(m.clientConfig()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("secured"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// The brokers' SCRAM credential, before any replica fetches.
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "broker", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "broker-secret"}})
	if err != nil || res.AllFailed() {
		t.Fatalf("broker credential: %v %+v", err, res)
	}
	waitFor(t, 10*time.Second, "every broker knows the brokers' credential", func() error {
		for _, nd := range nodes {
			_, im := nd.brk.follower.Image()
			if im == nil || len(im.ScramCredentials()) == 0 {
				return fmt.Errorf("node %d has no credential yet", nd.NodeID())
			}
		}
		return nil
	})
	if _, err := adm.CreateTopic(ctx, 2, 3, map[string]*string{"min.insync.replicas": kmsg.StringPtr("3")}, "secured"); err != nil {
		t.Fatal(err)
	}
	const records = 40
	for i := range records {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d (acks=all, min.insync.replicas=3): %v", i, err)
		}
	}
	waitFor(t, 10*time.Second, "every replica holds every record", func() error {
		for _, nd := range nodes {
			var total int64
			for p := range int32(2) {
				l := nd.eng.Log(engine.TopicPartition{Topic: "secured", Partition: p})
				if l == nil {
					return fmt.Errorf("node %d has no replica of partition %d", nd.NodeID(), p)
				}
				total += l.LogEndOffset()
			}
			if total != records {
				return fmt.Errorf("node %d holds %d of %d records", nd.NodeID(), total, records)
			}
		}
		return nil
	})

	ctlAddr := nodes[0].ListenerAddr("CONTROLLER")
	t.Run("plaintext to the controller listener", func(t *testing.T) {
		c, err := net.DialTimeout("tcp", ctlAddr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if resp, err := apiVersionsOver(c); err == nil {
			t.Fatalf("a plaintext ApiVersions was answered: %+v", resp)
		}
	})
	t.Run("controller request before authentication", func(t *testing.T) {
		c, err := tls.Dial("tcp", ctlAddr, m.clientConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// ApiVersions is served before authentication and lists the SASL APIs.
		resp, err := apiVersionsOver(c)
		if err != nil {
			t.Fatalf("ApiVersions over TLS before authentication: %v", err)
		}
		var sasl int
		for _, k := range resp.ApiKeys {
			if k.ApiKey == 17 || k.ApiKey == 36 {
				sasl++
			}
		}
		if sasl != 2 {
			t.Fatalf("the controller listener does not list SaslHandshake and SaslAuthenticate: %+v", resp.ApiKeys)
		}
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version, req.EndpointType = 1, 2
		if _, err := c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 2)); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c, make([]byte, 4)); err == nil {
			t.Fatal("a DescribeCluster before authentication was answered")
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("the connection stayed open after a request before authentication")
		}
	})
	t.Run("controller request without CLUSTER_ACTION", func(t *testing.T) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(ctlAddr), kgo.DialTLSConfig(m.clientConfig()),
			kgo.SASL(plain.Auth{User: "intruder", Pass: "intruder-secret"}.AsMechanism()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		req := kmsg.NewPtrBrokerRegistrationRequest()
		req.BrokerID, req.ClusterID = 9, nodes[0].ClusterID()
		resp, err := cl.SeedBrokers()[0].Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.(*kmsg.BrokerRegistrationResponse).ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
			t.Fatalf("a BrokerRegistration of an authenticated principal without CLUSTER_ACTION: %v", kerr.ErrorForCode(code))
		}
	})
	// startBroker starts broker-only node id with these passwords, logging into logs.
	startBroker := func(t *testing.T, id int32, ctlPass, brokerPass string, logs *syncBuffer) *Node {
		t.Helper()
		own := freeAddrs(t, 2)
		keys := secureKeys(m, ctlPass, brokerPass)
		keys["process.roles"], keys["node.id"] = "broker", strconv.Itoa(int(id))
		keys["controller.quorum.voters"] = strings.Join(voters, ",")
		keys["listeners"] = "INTERNAL://" + own[0] + ",CLIENT://" + own[1]
		keys["data.dir"] = t.TempDir()
		cfg, err := FromKeys(keys)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Format(cfg, nodes[0].ClusterID(), false); err != nil {
			t.Fatal(err)
		}
		nd, err := Start(cfg, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			nd.Shutdown(ctx)
		})
		return nd
	}
	t.Run("wrong passwords", func(t *testing.T) {
		var logs syncBuffer
		bad := startBroker(t, 4, "wrong", "wrong", &logs)
		waitFor(t, 10*time.Second, "the refused broker's log", func() error {
			s := logs.String()
			if !strings.Contains(s, "peer authentication failed") || !strings.Contains(s, "SASL_AUTHENTICATION_FAILED") {
				return fmt.Errorf("log so far:\n%s", s)
			}
			return nil
		})
		rctx, rcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		err := bad.Ready(rctx)
		rcancel()
		if err == nil {
			t.Fatal("a broker with wrong passwords is ready")
		}
		_, im := nodes[0].brk.follower.Image()
		if _, ok := im.Broker(4); ok {
			t.Fatal("the broker with wrong passwords registered")
		}
		if bad.peer.AuthenticationFailures() == 0 {
			t.Fatal("samsa_peer_authentication_failures_total counts nothing")
		}
	})
	t.Run("wrong inter-broker password", func(t *testing.T) {
		// It registers (its controller password is right) but cannot fetch: its
		// replica stays empty and out of the ISR, and its log says why.
		var logs syncBuffer
		bad := startBroker(t, 5, "ctl-secret", "wrong", &logs)
		if err := bad.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "on5", -1, -1
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = 0, []int32{1, 5}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
		req.Topics = append(req.Topics, rt)
		req.TimeoutMillis = 10000
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("create on5: %v %+v", err, resp)
		}
		one, err := kgo.NewClient(kgo.SeedBrokers(nodes[0].ListenerAddr("CLIENT")), kgo.SASL(admin), kgo.DialTLSConfig(m.clientConfig()),
			kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
		if err != nil {
			t.Fatal(err)
		}
		defer one.Close()
		if err := one.ProduceSync(ctx, &kgo.Record{Topic: "on5", Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce to on5 (acks=1): %v", err)
		}
		waitFor(t, 10*time.Second, "the fetcher's authentication failure in the log", func() error {
			s := logs.String()
			if !strings.Contains(s, "peer authentication failed") || !strings.Contains(s, `to="broker 1" purpose=fetch-`) {
				return fmt.Errorf("log so far:\n%s", s)
			}
			return nil
		})
		if l := nodes[0].eng.Log(engine.TopicPartition{Topic: "on5"}); l == nil || l.LogEndOffset() != 1 {
			t.Fatalf("the leader's replica: %v", l)
		}
		if l := bad.eng.Log(engine.TopicPartition{Topic: "on5"}); l != nil && l.LogEndOffset() != 0 {
			t.Fatalf("the replica of a broker that cannot authenticate holds %d records", l.LogEndOffset())
		}
	})
}

// apiVersionsOver sends ApiVersions v3 on c and reads its answer.
func apiVersionsOver(c net.Conn) (*kmsg.ApiVersionsResponse, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	if _, err := c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)); err != nil {
		return nil, err
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	br := bufio.NewReader(c)
	var hdr [8]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(hdr[:]))
	if size < 4 || size > 1<<20 || binary.BigEndian.Uint32(hdr[4:]) != 1 {
		return nil, errors.New("not a Kafka response")
	}
	body := make([]byte, size-4)
	if _, err := io.ReadFull(br, body); err != nil {
		return nil, err
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	if err := resp.ReadFrom(body); err != nil {
		return nil, err
	}
	return resp, nil
}

// TestInterNodeConfigErrors: the combinations between nodes that cannot work are
// start-up errors naming the fix.
func TestInterNodeConfigErrors(t *testing.T) {
	m := newTestMTLS(t)
	base := func(edit map[string]string) *Config {
		t.Helper()
		keys := secureKeys(m, "ctl-secret", "broker-secret")
		keys["process.roles"], keys["node.id"] = "broker,controller", "1"
		keys["controller.quorum.voters"] = "1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293"
		keys["listeners"] = "INTERNAL://127.0.0.1:9092,CLIENT://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093"
		keys["data.dir"] = t.TempDir()
		for k, v := range edit {
			if v == "" {
				delete(keys, k)
			} else {
				keys[k] = v
			}
		}
		cfg, err := FromKeys(keys)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	in, err := newInternode(base(nil), discard)
	if err != nil {
		t.Fatalf("the test's configuration: %v", err)
	}
	if in.voter.TLS == nil || in.voter.SASL == nil || in.voter.SASL.Name() != "PLAIN" ||
		in.broker.TLS == nil || in.broker.SASL == nil || in.broker.SASL.Name() != "SCRAM-SHA-512" || in.ctl == nil {
		t.Fatalf("security between nodes: %+v", in)
	}
	in.close()
	// A sole voter dials no broker unless broker-only nodes join: a SASL inter-broker
	// listener without client credentials does not stop it.
	sole := base(map[string]string{"controller.quorum.voters": "1@127.0.0.1:9093", "listener.name.internal.scram-sha-512.sasl.jaas.config": ""})
	if in, err := newInternode(sole, discard); err != nil {
		t.Fatalf("a sole voter: %v", err)
	} else {
		in.close()
	}
	for _, tc := range []struct {
		name string
		edit map[string]string
		want string
	}{
		{"no inter-broker credentials", map[string]string{"listener.name.internal.scram-sha-512.sasl.jaas.config": ""},
			"set listener.name.internal.scram-sha-512.sasl.jaas.config to a org.apache.kafka.common.security.scram.ScramLoginModule entry"},
		{"no controller username", map[string]string{"listener.name.controller.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required user_controller="ctl-secret";`},
			"has no username and password options"},
		{"inter-broker mechanism not enabled", map[string]string{"sasl.mechanism.inter.broker.protocol": "PLAIN"},
			"sasl.mechanism.inter.broker.protocol=PLAIN is not among listener INTERNAL's sasl.enabled.mechanisms"},
		{"controller mechanism not enabled", map[string]string{"listener.name.controller.sasl.enabled.mechanisms": "SCRAM-SHA-256"},
			"sasl.mechanism.controller.protocol=PLAIN is not among listener CONTROLLER's sasl.enabled.mechanisms"},
		{"controller listener without a key store", map[string]string{"ssl.keystore.certificate.chain": "", "ssl.keystore.key": "",
			"listener.name.internal.ssl.keystore.certificate.chain": m.certPEM, "listener.name.internal.ssl.keystore.key": m.keyPEM,
			"listener.name.client.ssl.keystore.certificate.chain": m.certPEM, "listener.name.client.ssl.keystore.key": m.keyPEM},
			"a TLS listener needs a key store (set listener.name.controller.ssl.keystore.location"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := newInternode(base(tc.edit), discard)
			if err == nil {
				in.close()
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrConfig saying %q", err, tc.want)
			}
		})
	}
}
