package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/samsa-broker/samsa/engine"
)

func transactionsCmd(args []string, out *bytes.Buffer) int { return transactionsMain(args, out) }
func aclsCmd(args []string, out *bytes.Buffer) int         { return aclsMain(args, out) }
func usersCmd(args []string, out *bytes.Buffer) int        { return usersMain(args, out) }

// lastStable returns the last stable offset (read_committed end) and the high
// watermark of topic-partition.
func lastStable(ctx context.Context, t *testing.T, adm *kadm.Client, topic string, p int32) (lso, hw int64) {
	t.Helper()
	c, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	e, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	lc, _ := c.Lookup(topic, p)
	le, _ := e.Lookup(topic, p)
	if lc.Err != nil || le.Err != nil {
		t.Fatalf("offsets of %s-%d: %v, %v", topic, p, lc.Err, le.Err)
	}
	return lc.Offset, le.Offset
}

// writeUnverifiedTxn sends, as a raw Produce over cl, a transactional batch of the
// transactional id txnID that was never added to a transaction (InitProducerId, then
// no AddPartitionsToTxn): on a broker without KIP-890's verification it opens a
// transaction in the partition that its coordinator does not count, so nobody will
// end it, the way a hanging transaction comes about (a produce that reaches the
// leader after its transaction ended). Its record's timestamp is age ago. It returns
// the producer id.
func writeUnverifiedTxn(ctx context.Context, t *testing.T, cl *kgo.Client, txnID, topic string, p int32, age time.Duration) int64 {
	t.Helper()
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = &txnID, 60000
	iresp, err := init.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(iresp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("InitProducerId: %v", err)
	}
	batch, err := engine.AppendProducerRecords(nil, engine.BatchProducer{ID: iresp.ProducerID, Epoch: iresp.ProducerEpoch, BaseSequence: 0, Transactional: true},
		[]engine.Record{{Timestamp: time.Now().Add(-age).UnixMilli(), Value: []byte("late")}})
	if err != nil {
		t.Fatal(err)
	}
	td, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil || td.Error() != nil {
		t.Fatalf("topic %s: %v %v", topic, err, td.Error())
	}
	// Produce before v12: from v12 on (KIP-890 part 2) the leader adds the partition to
	// the transaction even without verification.
	old, err := kgo.NewClient(kgo.SeedBrokers(cl.OptValue(kgo.SeedBrokers).([]string)...), kgo.MaxVersions(kversion.V3_9_0()))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis, req.TransactionID = -1, 10000, &txnID
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, td[topic].ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = p, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	presp, err := req.RequestWith(ctx, old)
	if err == nil {
		err = kerr.ErrorForCode(presp.Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("transactional produce: %v", err)
	}
	return iresp.ProducerID
}

// TestTransactionsCommands: list, describe, describe-producers, find-hanging and
// abort against one broker with two open transactions: a kgo producer's, left open
// (its coordinator counts the partition: open, not hanging), and a hanging one (a
// transactional batch of an id whose coordinator never added the partition, on a broker without KIP-890's
// verification). abort ends each at its start offset with an ABORT marker, and the
// partitions' last stable offsets move to their ends.
func TestTransactionsCommands(t *testing.T) {
	s := startTestServer(t, t.TempDir(), "--set", "transaction.partition.verification.enable=false",
		"--set", "transaction.state.log.num.partitions=2", "--set", "offsets.topic.num.partitions=2")
	defer stopTestServer(t, s)
	addr := s.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "tx"); err != nil {
		t.Fatal(err)
	}

	// ACLs on a broker without an authorizer: SECURITY_DISABLED, exit 1.
	if code, out := run1(t, aclsCmd, addr, "list"); code != 1 || out != "" {
		t.Fatalf("acls list without an authorizer: %d\n%s", code, out)
	}

	// A kgo producer opens a transaction on tx-0 and leaves it open.
	p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("open-txn"), kgo.TransactionTimeout(time.Minute),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: "tx", Partition: 0, Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p.Close() // left open: its coordinator would abort it after a minute
	d, err := adm.DescribeTransactions(ctx, "open-txn")
	if err != nil {
		t.Fatal(err)
	}
	pid := d["open-txn"].ProducerID

	code, out := run1(t, transactionsCmd, addr, "list")
	row := regexp.MustCompile(`(?m)^open-txn\s+1\s+` + fmt.Sprint(pid) + `\s+Ongoing$`)
	if code != 0 || !strings.HasPrefix(out, "TransactionalId") || !row.MatchString(out) {
		t.Fatalf("list: %d\n%s", code, out)
	}
	if code, out := run1(t, transactionsCmd, addr, "list", "--state", "Ongoing", "--producer-id", fmt.Sprint(pid)); code != 0 || !row.MatchString(out) {
		t.Fatalf("list filtered: %d\n%s", code, out)
	}
	if code, out := run1(t, transactionsCmd, addr, "list", "--state", "Empty"); code != 0 || strings.Contains(out, "open-txn") {
		t.Fatalf("list --state Empty: %d\n%s", code, out)
	}
	if code, out := run1(t, transactionsCmd, addr, "list", "--producer-id", "x"); code != 1 || out != "" {
		t.Fatalf("list --producer-id x: %d\n%s", code, out)
	}
	code, out = run1(t, transactionsCmd, addr, "describe", "--transactional-id", "open-txn")
	desc := regexp.MustCompile(`(?m)^1\s+open-txn\s+` + fmt.Sprint(pid) + `\s+0\s+Ongoing\s+60000\s+\d{13}\s+\d+\s+tx-0$`)
	if code != 0 || !desc.MatchString(out) {
		t.Fatalf("describe: %d\n%s", code, out)
	}
	if code, _ := run1(t, transactionsCmd, addr, "describe", "--transactional-id", "nope"); code != 1 {
		t.Fatalf("describe of an unknown id: exit %d", code)
	}
	if code, _ := run1(t, transactionsCmd, addr, "describe"); code != 1 {
		t.Fatalf("describe without an id: exit %d", code)
	}
	code, out = run1(t, transactionsCmd, addr, "describe-producers", "--topic", "tx", "--partition", "0")
	prod := regexp.MustCompile(`(?m)^` + fmt.Sprint(pid) + `\s+0\s+-1\s+0\s+\d{13}\s+0$`)
	if code != 0 || !prod.MatchString(out) {
		t.Fatalf("describe-producers: %d\n%s", code, out)
	}

	// The kgo transaction is open and older than 0 minutes, but its coordinator counts
	// tx-0 in it: not hanging.
	const header = "Topic  Partition  ProducerId  ProducerEpoch  CoordinatorEpoch  StartOffset  LastTimestamp  Duration(min)\n"
	if code, out := run1(t, transactionsCmd, addr, "find-hanging", "--topic", "tx", "--max-transaction-timeout", "0"); code != 0 || out != header {
		t.Fatalf("find-hanging with an open transaction only: %d\n%s", code, out)
	}

	// A hanging transaction on tx-1, last written 20 minutes ago (beyond the default
	// 15-minute bound).
	hpid := writeUnverifiedTxn(ctx, t, cl, "late-writer", "tx", 1, 20*time.Minute)
	if lso, hw := lastStable(ctx, t, adm, "tx", 1); lso != 0 || hw != 1 {
		t.Fatalf("tx-1 with a hanging transaction: last stable offset %d, high watermark %d", lso, hw)
	}
	hang := regexp.MustCompile(`(?m)^tx\s+1\s+` + fmt.Sprint(hpid) + `\s+0\s+-1\s+0\s+\d{13}\s+(20|21)$`)
	for _, args := range [][]string{{"find-hanging", "--broker-id", "1"}, {"find-hanging", "--topic", "tx"}, {"find-hanging", "--broker", "1", "--topic", "tx", "--partition", "1"}} {
		code, out := run1(t, transactionsCmd, addr, args...)
		if code != 0 || !hang.MatchString(out) || strings.Count(out, "\n") != 2 {
			t.Fatalf("%q: %d\n%s", args, code, out)
		}
	}
	if code, _ := run1(t, transactionsCmd, addr, "find-hanging"); code != 1 {
		t.Fatalf("find-hanging without a scope: exit %d", code)
	}
	if code, _ := run1(t, transactionsCmd, addr, "find-hanging", "--partition", "1"); code != 1 {
		t.Fatalf("find-hanging --partition without --topic: exit %d", code)
	}

	// abort: a wrong start offset is refused; the right ones end both transactions.
	if code, out := run1(t, transactionsCmd, addr, "abort", "--topic", "tx", "--partition", "1", "--start-offset", "5"); code != 1 || out != "" {
		t.Fatalf("abort at a wrong offset: %d\n%s", code, out)
	}
	if code, _ := run1(t, transactionsCmd, addr, "abort", "--topic", "tx", "--partition", "1"); code != 1 {
		t.Fatalf("abort without a transaction: exit %d", code)
	}
	code, out = run1(t, transactionsCmd, addr, "abort", "--topic", "tx", "--partition", "1", "--start-offset", "0")
	if want := fmt.Sprintf("Aborted the transaction of producer %d (epoch 0, coordinator epoch 0) on tx-1 (leader 1).\n", hpid); code != 0 || out != want {
		t.Fatalf("abort of the hanging transaction: %d\n%s", code, out)
	}
	code, out = run1(t, transactionsCmd, addr, "abort", "--topic", "tx", "--partition", "0", "--start-offset", "0")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("producer %d ", pid)) {
		t.Fatalf("abort of the kgo transaction: %d\n%s", code, out)
	}
	for _, part := range []int32{0, 1} {
		eventually(t, 10*time.Second, "the last stable offset reaches the marker", func() error {
			if lso, hw := lastStable(ctx, t, adm, "tx", part); lso != 2 || hw != 2 {
				return fmt.Errorf("tx-%d: last stable offset %d, high watermark %d", part, lso, hw)
			}
			return nil
		})
	}
	if code, out := run1(t, transactionsCmd, addr, "find-hanging", "--topic", "tx", "--max-transaction-timeout", "0"); code != 0 || out != header {
		t.Fatalf("find-hanging after the aborts: %d\n%s", code, out)
	}
	code, out = run1(t, transactionsCmd, addr, "describe-producers", "--topic", "tx", "--partition", "1")
	if after := regexp.MustCompile(`(?m)^` + fmt.Sprint(hpid) + `\s+0\s+0\s+0\s+\d{13}\s+None$`); code != 0 || !after.MatchString(out) {
		t.Fatalf("describe-producers after the abort: %d\n%s", code, out)
	}
	// A read_committed consumer reads neither aborted record.
	rc, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("tx"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "tx", Partition: 1, Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fs := rc.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "after" {
		t.Fatalf("read_committed after the aborts: %d records %v", len(recs), recs)
	}
	// The older brokers' form: producer id, epoch and coordinator epoch given.
	if code, out := run1(t, transactionsCmd, addr, "abort", "--topic", "tx", "--partition", "1", "--producer-id", fmt.Sprint(hpid),
		"--producer-epoch", "0", "--coordinator-epoch", "-1"); code != 0 || !strings.HasPrefix(out, "Aborted") {
		t.Fatalf("abort by producer id: %d\n%s", code, out)
	}
}

// testPKI writes a CA (ca.pem), a key store for 127.0.0.1 (keystore.pem: the PKCS#8
// key and the certificate) and a client's (client.pem, subject CN=ops) into dir.
func testPKI(t *testing.T, dir string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "samsa test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	p8, _ := x509.MarshalPKCS8PrivateKey(key)
	ks := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	if err := os.WriteFile(filepath.Join(dir, "keystore.pem"), ks, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	ckey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	client := &x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "ops"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	cder, err := x509.CreateCertificate(rand.Reader, client, caCert, &ckey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	c8, _ := x509.MarshalPKCS8PrivateKey(ckey)
	cs := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cder}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: c8})...)
	if err := os.WriteFile(filepath.Join(dir, "client.pem"), cs, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCommandConfigMutualTLS: --command-config with an SSL listener that requires a
// client certificate: the key store's certificate is sent, the trust store checks the
// broker (with or without its name); without the key store the broker refuses.
func TestCommandConfigMutualTLS(t *testing.T) {
	dir := t.TempDir()
	testPKI(t, dir)
	props := filepath.Join(dir, "server.properties")
	os.WriteFile(props, []byte("listeners=SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0\n"+
		"listener.security.protocol.map=SSL:SSL,CONTROLLER:PLAINTEXT\ninter.broker.listener.name=SSL\ncontroller.listener.names=CONTROLLER\n"+
		"ssl.keystore.type=PEM\nssl.keystore.location="+filepath.Join(dir, "keystore.pem")+"\n"+
		"ssl.truststore.type=PEM\nssl.truststore.location="+filepath.Join(dir, "ca.pem")+"\nssl.client.auth=required\n"), 0o644)
	s := startTestServer(t, filepath.Join(dir, "data"), "--config", props)
	defer stopTestServer(t, s)
	ca := filepath.Join(dir, "ca.pem")
	for _, c := range []struct {
		name, props string
		code        int
	}{
		{"client certificate", "security.protocol=SSL\nssl.keystore.type=PEM\nssl.keystore.location=" + filepath.Join(dir, "client.pem") + "\nssl.truststore.location=" + ca + "\n", 0},
		{"no name check", "security.protocol=SSL\nssl.keystore.location=" + filepath.Join(dir, "client.pem") + "\nssl.truststore.location=" + ca + "\nssl.endpoint.identification.algorithm=\n", 0},
		{"no client certificate", "security.protocol=SSL\nssl.truststore.location=" + ca + "\n", 1},
		{"untrusted broker", "security.protocol=SSL\nssl.keystore.location=" + filepath.Join(dir, "client.pem") + "\nssl.truststore.location=" + filepath.Join(dir, "client.pem") + "\n", 1},
	} {
		f := filepath.Join(dir, "client.properties")
		os.WriteFile(f, []byte(c.props), 0o600)
		if code, out := run1(t, topicsCmd, s.Addr(), "list", "--command-config", f, "--timeout", "3s"); code != c.code {
			t.Errorf("%s: exit %d, want %d\n%s", c.name, code, c.code, out)
		}
	}
}

// TestAclsUsersCommands: users and acls against a SASL_SSL listener with Kafka's
// StandardAuthorizer, the super user connecting with --command-config (PLAIN over TLS
// with a PEM trust store). A SCRAM credential set by `users set` (salted here) lets
// its user authenticate; ACLs made by `acls create` let it write, list and delete
// show and remove exactly the matching ones; `transactions abort` of a user without
// ALTER or CLUSTER_ACTION on the cluster is refused with CLUSTER_AUTHORIZATION_FAILED,
// and allowed once it has CLUSTER_ACTION.
func TestAclsUsersCommands(t *testing.T) {
	dir := t.TempDir()
	testPKI(t, dir)
	props := filepath.Join(dir, "server.properties")
	os.WriteFile(props, []byte(`listeners=SASL_SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0
listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT
inter.broker.listener.name=SASL_SSL
controller.listener.names=CONTROLLER
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
    username="admin" password="admin-secret" user_admin="admin-secret";
ssl.keystore.type=PEM
ssl.keystore.location=`+filepath.Join(dir, "keystore.pem")+`
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin
connection.failed.authentication.delay.ms=10
transaction.state.log.num.partitions=1
offsets.topic.num.partitions=1
`), 0o644)
	s := startTestServer(t, filepath.Join(dir, "data"), "--config", props)
	defer stopTestServer(t, s)
	addr := s.Addr()
	ca := filepath.Join(dir, "ca.pem")
	adminConf := filepath.Join(dir, "admin.properties")
	os.WriteFile(adminConf, []byte(`security.protocol=SASL_SSL
sasl.mechanism=PLAIN
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
    username="admin" password="admin-secret";
ssl.truststore.type=PEM
ssl.truststore.location=`+ca+"\n"), 0o600)
	aliceConf := filepath.Join(dir, "alice.properties")
	os.WriteFile(aliceConf, []byte("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=alice\nsasl.password=alice-secret\nssl.truststore.location="+ca+"\n"), 0o600)
	as := func(conf string, main func([]string, *bytes.Buffer) int, args ...string) (int, string) {
		t.Helper()
		return run1(t, main, addr, append(args, "--command-config", conf)...)
	}

	// Without the properties the TLS listener does not answer a plaintext client.
	if code, _ := run1(t, usersCmd, addr, "list", "--timeout", "2s"); code != 1 {
		t.Fatalf("users list without --command-config: exit %d", code)
	}
	// groups takes them too.
	if code := runGroups([]string{"list", "--bootstrap-server", addr, "--command-config", adminConf, "--timeout", "10s"}); code != 0 {
		t.Fatalf("groups list with --command-config: exit %d", code)
	}
	if code := runGroups([]string{"list", "--bootstrap-server", addr, "--timeout", "2s"}); code != 1 {
		t.Fatalf("groups list without --command-config: exit %d", code)
	}

	// users: set (SCRAM-SHA-512 from the command line, SCRAM-SHA-256 from a file),
	// list, describe; no output holds a password or a salt.
	pwFile := filepath.Join(dir, "pw")
	os.WriteFile(pwFile, []byte("alice-secret-256\n"), 0o600)
	var all strings.Builder
	for _, c := range [][]string{
		{"set", "--user", "alice", "--mechanism", "SCRAM-SHA-512", "--password", "alice-secret", "--iterations", "8192"},
		{"set", "--user", "alice", "--mechanism", "scram-sha-256", "--password-file", pwFile},
		{"create", "--user", "bob", "--mechanism", "SCRAM-SHA-256", "--password", "bob-secret"},
	} {
		code, out := as(adminConf, usersCmd, c...)
		if code != 0 || !strings.HasPrefix(out, "Set the SCRAM-SHA-") {
			t.Fatalf("users %q: %d\n%s", c, code, out)
		}
		all.WriteString(out)
	}
	code, out := as(adminConf, usersCmd, "list")
	if !regexp.MustCompile(`(?m)^alice\s+SCRAM-SHA-256=iterations=4096,SCRAM-SHA-512=iterations=8192$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^bob\s+SCRAM-SHA-256=iterations=4096$`).MatchString(out) || code != 0 {
		t.Fatalf("users list: %d\n%s", code, out)
	}
	all.WriteString(out)
	if code, out := as(adminConf, usersCmd, "describe", "--user", "bob"); code != 0 || strings.Contains(out, "alice") || !strings.Contains(out, "bob ") {
		t.Fatalf("users describe: %d\n%s", code, out)
	}
	if code, _ := as(adminConf, usersCmd, "describe", "--user", "nobody"); code != 1 {
		t.Fatalf("users describe of an unknown user: exit %d", code)
	}
	for _, bad := range [][]string{
		{"set", "--user", "carol", "--mechanism", "SCRAM-SHA-1", "--password", "x"},
		{"set", "--user", "carol", "--mechanism", "SCRAM-SHA-256", "--password", "x", "--iterations", "100"},
		{"set", "--user", "carol", "--mechanism", "SCRAM-SHA-256"},
		{"create", "--user", "bob", "--mechanism", "SCRAM-SHA-256", "--password", "bob-secret-2"},
	} {
		if code, out := as(adminConf, usersCmd, bad...); code != 1 || out != "" {
			t.Fatalf("users %q: %d\n%s", bad, code, out)
		}
	}
	if strings.Contains(all.String(), "secret") {
		t.Fatalf("a password in the output:\n%s", all.String())
	}
	// The SCRAM-SHA-256 credential authenticates with the password from the file.
	cl256, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(tlsTo(t, ca)),
		kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret-256"}.AsSha256Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl256.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl256.Ping(ctx); err != nil {
		t.Fatalf("alice over SCRAM-SHA-256: %v", err)
	}

	// alice (SCRAM-SHA-512, from her properties) may not create or see the topic yet.
	if code, out := as(adminConf, topicsCmd, "create", "orders", "--partitions", "2"); code != 0 {
		t.Fatalf("topics create as admin: %d\n%s", code, out)
	}
	if code, out := as(aliceConf, topicsCmd, "list"); code != 0 || out != "" {
		t.Fatalf("topics list as alice without ACLs: %d\n%q", code, out)
	}

	// acls create: literal topic ACLs for alice, a prefixed group ACL, a deny for bob
	// on one host.
	code, out = as(adminConf, aclsCmd, "create", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Write",
		"--operation", "Describe", "--topic", "orders")
	if code != 0 || !strings.Contains(out, "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:\n") ||
		!strings.Contains(out, "\t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)\n") {
		t.Fatalf("acls create: %d\n%s", code, out)
	}
	if code, out := as(adminConf, aclsCmd, "create", "--allow-principal", "User:alice", "--operation", "Read", "--group", "alice-",
		"--resource-pattern-type", "prefixed"); code != 0 {
		t.Fatalf("acls create prefixed: %d\n%s", code, out)
	}
	if code, out := as(adminConf, aclsCmd, "create", "--deny-principal", "User:bob", "--topic", "orders", "--host", "10.0.0.1"); code != 0 ||
		!strings.Contains(out, "(principal=User:bob, host=10.0.0.1, operation=ALL, permissionType=DENY)") {
		t.Fatalf("acls create deny: %d\n%s", code, out)
	}
	for _, bad := range [][]string{
		{"create", "--allow-principal", "User:alice", "--operation", "Fly", "--topic", "x"},
		{"create", "--allow-principal", "alice", "--topic", "x"},
		{"create", "--allow-principal", "User:alice"},
		{"create", "--topic", "x"},
		{"create", "--allow-principal", "User:alice", "--topic", "x", "--resource-pattern-type", "match"},
		{"delete"},
	} {
		if code, _ := as(adminConf, aclsCmd, bad...); code != 1 {
			t.Fatalf("acls %q: exit %d", bad, code)
		}
	}

	// alice now writes and sees the topic.
	if code, out := as(aliceConf, topicsCmd, "list"); code != 0 || out != "orders\n" {
		t.Fatalf("topics list as alice: %d\n%q", code, out)
	}
	aliceOpts, err := loadClientConfig(aliceConf, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	alice, err := kgo.NewClient(append(aliceOpts, kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("alice produces: %v", err)
	}

	// acls list: everything, by resource, by principal, and what applies to a topic.
	code, out = as(adminConf, aclsCmd, "list")
	wantAll := "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:\n" +
		"\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)\n" +
		"\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n" +
		"\t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)\n" +
		"\t(principal=User:bob, host=10.0.0.1, operation=ALL, permissionType=DENY)\n\n" +
		"Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=alice-, patternType=PREFIXED)`:\n" +
		"\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n\n"
	if code != 0 || out != wantAll {
		t.Fatalf("acls list: %d\n%s\nwant\n%s", code, out, wantAll)
	}
	if code, out := as(adminConf, aclsCmd, "list", "--principal", "User:bob"); code != 0 || strings.Contains(out, "alice") || !strings.Contains(out, "User:bob") {
		t.Fatalf("acls list --principal: %d\n%s", code, out)
	}
	if code, out := as(adminConf, aclsCmd, "list", "--group", "alice-g"); code != 0 || out != "" {
		t.Fatalf("acls list of a literal group without ACLs: %d\n%s", code, out)
	}
	if code, out := as(adminConf, aclsCmd, "list", "--group", "alice-g", "--resource-pattern-type", "match"); code != 0 || !strings.Contains(out, "name=alice-, patternType=PREFIXED") {
		t.Fatalf("acls list --resource-pattern-type match: %d\n%s", code, out)
	}
	if code, _ := as(aliceConf, aclsCmd, "list"); code != 1 {
		t.Fatalf("acls list as alice (no DESCRIBE on the cluster): exit %d", code)
	}

	// transactions abort as alice: refused (CLUSTER_AUTHORIZATION_FAILED) until she
	// has CLUSTER_ACTION. The transaction is the admin's kgo producer's, left open.
	adminOpts, err := loadClientConfig(adminConf, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := kgo.NewClient(append(adminOpts, kgo.SeedBrokers(addr), kgo.TransactionalID("orders-txn"), kgo.TransactionTimeout(time.Minute),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tp.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tp.Close()
	abort := []string{"abort", "--topic", "orders", "--partition", "0", "--start-offset", "1"}
	if code, out := as(aliceConf, transactionsCmd, append(abort, "--timeout", "10s")...); code != 1 || out != "" {
		t.Fatalf("abort as alice without CLUSTER_ACTION: %d\n%s", code, out)
	}
	if err := abortErr(ctx, alice); err == nil || !strings.Contains(err.Error(), "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("WriteTxnMarkers as alice without CLUSTER_ACTION: %v", err)
	}
	if code, out := as(adminConf, aclsCmd, "create", "--allow-principal", "User:alice", "--operation", "ClusterAction", "--cluster"); code != 0 ||
		!strings.Contains(out, "resourceType=CLUSTER, name=kafka-cluster") {
		t.Fatalf("acls create --cluster: %d\n%s", code, out)
	}
	eventually(t, 10*time.Second, "alice aborts with CLUSTER_ACTION", func() error {
		if code, out := as(aliceConf, transactionsCmd, abort...); code != 0 || !strings.HasPrefix(out, "Aborted the transaction of producer") {
			return fmt.Errorf("exit %d: %s", code, out)
		}
		return nil
	})

	// acls delete: bob's deny by principal, then everything of the cluster; a filter
	// that matches nothing removes nothing.
	if code, out := as(adminConf, aclsCmd, "delete", "--topic", "orders", "--deny-principal", "User:bob"); code != 0 ||
		out != "Removed from `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`: (principal=User:bob, host=10.0.0.1, operation=ALL, permissionType=DENY)\n1 ACLs removed.\n" {
		t.Fatalf("acls delete bob: %d\n%s", code, out)
	}
	if code, out := as(adminConf, aclsCmd, "delete", "--cluster"); code != 0 || !strings.HasSuffix(out, "1 ACLs removed.\n") {
		t.Fatalf("acls delete --cluster: %d\n%s", code, out)
	}
	if code, out := as(adminConf, aclsCmd, "delete", "--topic", "orders", "--operation", "Alter"); code != 0 || out != "0 ACLs removed.\n" {
		t.Fatalf("acls delete of nothing: %d\n%s", code, out)
	}
	if code, out := as(adminConf, aclsCmd, "list", "--topic", "orders"); code != 0 || strings.Contains(out, "bob") || strings.Count(out, "User:alice") != 3 {
		t.Fatalf("acls list after the deletes: %d\n%s", code, out)
	}

	// users delete: one mechanism, then the rest; bob's credential goes, and with it
	// his login.
	if code, out := as(adminConf, usersCmd, "delete", "--user", "alice", "--mechanism", "SCRAM-SHA-256"); code != 0 || out != "Deleted the SCRAM-SHA-256 credential of user alice.\n" {
		t.Fatalf("users delete one mechanism: %d\n%s", code, out)
	}
	if code, out := as(adminConf, usersCmd, "delete", "--user", "bob"); code != 0 || out != "Deleted the SCRAM-SHA-256 credential of user bob.\n" {
		t.Fatalf("users delete bob: %d\n%s", code, out)
	}
	if code, out := as(adminConf, usersCmd, "list"); code != 0 || strings.Contains(out, "bob") || !regexp.MustCompile(`(?m)^alice\s+SCRAM-SHA-512=iterations=8192$`).MatchString(out) {
		t.Fatalf("users list after the deletes: %d\n%s", code, out)
	}
	if code, _ := as(adminConf, usersCmd, "delete", "--user", "bob"); code != 1 {
		t.Fatalf("users delete of a user without credentials: exit %d", code)
	}

	// kafka-acls.sh's --producer and --consumer shortcuts, made and removed.
	code, out = as(adminConf, aclsCmd, "create", "--allow-principal", "User:dave", "--producer", "--idempotent", "--topic", "orders", "--transactional-id", "dave-tx")
	for _, want := range []string{
		"`ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:\n" +
			"\t(principal=User:dave, host=*, operation=WRITE, permissionType=ALLOW)\n" +
			"\t(principal=User:dave, host=*, operation=DESCRIBE, permissionType=ALLOW)\n" +
			"\t(principal=User:dave, host=*, operation=CREATE, permissionType=ALLOW)\n",
		"`ResourcePattern(resourceType=TRANSACTIONAL_ID, name=dave-tx, patternType=LITERAL)`:\n" +
			"\t(principal=User:dave, host=*, operation=WRITE, permissionType=ALLOW)\n" +
			"\t(principal=User:dave, host=*, operation=DESCRIBE, permissionType=ALLOW)\n",
		"`ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)`:\n" +
			"\t(principal=User:dave, host=*, operation=IDEMPOTENT_WRITE, permissionType=ALLOW)\n",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("acls create --producer: %d\n%s\nwant\n%s", code, out, want)
		}
	}
	if code, out := as(adminConf, aclsCmd, "create", "--allow-principal", "User:dave", "--consumer", "--topic", "orders", "--group", "dave-g"); code != 0 ||
		!strings.Contains(out, "name=dave-g, patternType=LITERAL)`:\n\t(principal=User:dave, host=*, operation=READ, permissionType=ALLOW)\n") ||
		!strings.Contains(out, "(principal=User:dave, host=*, operation=READ, permissionType=ALLOW)\n\t(principal=User:dave, host=*, operation=DESCRIBE, permissionType=ALLOW)\n") {
		t.Fatalf("acls create --consumer: %d\n%s", code, out)
	}
	for _, bad := range [][]string{
		{"create", "--allow-principal", "User:dave", "--consumer", "--topic", "orders"},
		{"create", "--allow-principal", "User:dave", "--producer", "--group", "g"},
		{"create", "--allow-principal", "User:dave", "--producer", "--topic", "orders", "--operation", "Read"},
		{"create", "--allow-principal", "User:dave", "--idempotent", "--topic", "orders"},
		{"list", "--producer"},
	} {
		if code, _ := as(adminConf, aclsCmd, bad...); code != 1 {
			t.Fatalf("acls %q: exit %d", bad, code)
		}
	}
	if code, out := as(adminConf, aclsCmd, "delete", "--allow-principal", "User:dave", "--producer", "--idempotent", "--topic", "orders", "--transactional-id", "dave-tx"); code != 0 ||
		!strings.HasSuffix(out, "\n6 ACLs removed.\n") {
		t.Fatalf("acls delete --producer: %d\n%s", code, out)
	}
	if code, out := as(adminConf, aclsCmd, "delete", "--allow-principal", "User:dave", "--consumer", "--topic", "orders", "--group", "dave-g"); code != 0 ||
		!strings.HasSuffix(out, "\n2 ACLs removed.\n") {
		t.Fatalf("acls delete --consumer: %d\n%s", code, out)
	}
	if code, out := as(adminConf, aclsCmd, "list", "--principal", "User:dave"); code != 0 || out != "" {
		t.Fatalf("dave's ACLs after the deletes: %d\n%s", code, out)
	}
}

func tlsTo(t *testing.T, caFile string) *tls.Config {
	t.Helper()
	b, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b)
	return &tls.Config{RootCAs: pool}
}

// abortErr sends alice's own ABORT marker for producer 1 on orders-0 and returns the
// partition's error.
func abortErr(ctx context.Context, cl *kgo.Client) error {
	m := kadm.TxnMarkers{ProducerID: 1, ProducerEpoch: 0, Topics: kadm.TopicsSet{}}
	m.Topics.Add("orders", 0)
	resp, err := kadm.NewClient(cl).WriteTxnMarkers(ctx, m)
	if err != nil {
		return err
	}
	return resp[1].Topics["orders"].Partitions[0].Err
}

// TestClientConfig: the properties --command-config reads, and the ones it refuses.
func TestClientConfig(t *testing.T) {
	dir := t.TempDir()
	testPKI(t, dir)
	for _, c := range []struct {
		name, props, err string
	}{
		{"plaintext", "client.id=ops\n", ""},
		{"sasl_ssl jaas", "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"u\" password=\"p\";\nssl.truststore.location=" + filepath.Join(dir, "ca.pem") + "\n", ""},
		{"ssl mtls", "security.protocol=SSL\nssl.keystore.type=PEM\nssl.keystore.location=" + filepath.Join(dir, "keystore.pem") + "\nssl.endpoint.identification.algorithm=\n", ""},
		{"unknown key", "request.timeout.ms=1000\n", ""},
		{"bad protocol", "security.protocol=TLS\n", "security.protocol"},
		{"gssapi", "security.protocol=SASL_PLAINTEXT\n", "GSSAPI"},
		{"no user", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n", "needs a user"},
		{"jks", "security.protocol=SSL\nssl.truststore.type=JKS\n", "only PEM"},
		{"missing store", "security.protocol=SSL\nssl.truststore.location=" + filepath.Join(dir, "nope.pem") + "\n", "ssl.truststore.location"},
		{"bad jaas", "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config=nonsense\n", "sasl.jaas.config"},
		{"other module", "sasl.jaas.config=com.example.Login required;\n", "login module"},
		{"encrypted key", "ssl.key.password=x\n", "encrypted"},
		{"bad trust", "security.protocol=SSL\nssl.truststore.certificates=not a certificate\n", "no PEM certificate"},
	} {
		f := filepath.Join(dir, "c.properties")
		os.WriteFile(f, []byte(c.props), 0o600)
		var warn bytes.Buffer
		_, err := loadClientConfig(f, &warn)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want one with %q", c.name, err, c.err)
		case c.name == "unknown key" && !strings.Contains(warn.String(), "request.timeout.ms is not used"):
			t.Errorf("%s: warning %q", c.name, warn.String())
		}
	}
}

func TestChunkTopicsSet(t *testing.T) {
	s := kadm.TopicsSet{}
	s.Add("b", 1, 0)
	s.Add("a", 2, 0, 1)
	for _, c := range []struct {
		n    int
		want string
	}{
		{1, "a-0 | a-1 | a-2 | b-0 | b-1"},
		{2, "a-0,a-1 | a-2,b-0 | b-1"},
		{5, "a-0,a-1,a-2,b-0,b-1"},
		{500, "a-0,a-1,a-2,b-0,b-1"},
	} {
		var parts []string
		for _, ch := range chunkTopicsSet(s, c.n) {
			parts = append(parts, formatTopicsSet(ch))
		}
		if got := strings.Join(parts, " | "); got != c.want {
			t.Errorf("chunks of %d: %s, want %s", c.n, got, c.want)
		}
	}
	if got := chunkTopicsSet(kadm.TopicsSet{}, 500); len(got) != 0 {
		t.Errorf("chunks of nothing: %v", got)
	}
}
