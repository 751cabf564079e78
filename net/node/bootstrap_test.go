package node

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// --add-scram arguments in Kafka's syntax: a password, iterations, a quoted value with
// a comma, salt and saltedpassword; the same arguments and cluster give the same
// credential, another cluster another salt; malformed arguments are refused.
func TestParseAddScram(t *testing.T) {
	id := RandomUUID()
	cred := func(arg, cluster string) metadata.ScramCredential {
		t.Helper()
		rec, err := ParseAddScram(arg, cluster)
		if err != nil {
			t.Fatal(err)
		}
		return rec.(*metadata.UserScramCredentialRecord).ScramCredential
	}
	a := cred("SCRAM-SHA-256=[name=alice,password=alice-secret]", id)
	if a.Name != "alice" || a.Mechanism != metadata.ScramSHA256 || a.Iterations != 4096 || len(a.Salt) != 32 {
		t.Fatalf("%+v", a)
	}
	salted, _ := metadata.ScramSHA256.SaltPassword("alice-secret", a.Salt, 4096)
	if stored, _ := metadata.ScramSHA256.Keys(salted); string(stored) != string(a.StoredKey) {
		t.Fatal("the stored key is not the password's")
	}
	if b := cred("SCRAM-SHA-256=[name=alice,password=alice-secret]", id); string(b.StoredKey) != string(a.StoredKey) {
		t.Fatal("the same arguments gave another credential")
	}
	if b := cred("SCRAM-SHA-256=[name=alice,password=alice-secret]", RandomUUID()); string(b.Salt) == string(a.Salt) {
		t.Fatal("two clusters share a salt")
	}
	q := cred(`SCRAM-SHA-512=[name="bob",iterations=8192,password="a,b\"c"]`, id)
	salted, _ = metadata.ScramSHA512.SaltPassword(`a,b"c`, q.Salt, 8192)
	if stored, _ := metadata.ScramSHA512.Keys(salted); q.Name != "bob" || q.Iterations != 8192 || string(stored) != string(q.StoredKey) {
		t.Fatalf("quoted values: %+v", q)
	}
	salt := []byte("0123456789abcdef")
	salted, _ = metadata.ScramSHA512.SaltPassword("carol-secret", salt, 4096)
	arg := fmt.Sprintf(`SCRAM-SHA-512=[name=carol,salt="%s",saltedpassword="%s"]`, base64.StdEncoding.EncodeToString(salt), base64.StdEncoding.EncodeToString(salted))
	if c, stored := cred(arg, id), func() []byte { s, _ := metadata.ScramSHA512.Keys(salted); return s }(); string(c.Salt) != string(salt) || string(c.StoredKey) != string(stored) {
		t.Fatalf("salt and saltedpassword: %+v", c)
	}
	for _, bad := range []string{
		"SCRAM-SHA-256=[password=x]",
		"SCRAM-SHA-1=[name=a,password=x]",
		"SCRAM-SHA-256=name=a,password=x",
		"SCRAM-SHA-256=[name=a]",
		"SCRAM-SHA-256=[name=a,password=x,saltedpassword=eA==,salt=eA==]",
		"SCRAM-SHA-256=[name=a,saltedpassword=eA==]",
		"SCRAM-SHA-256=[name=a,password=x,iterations=100]",
		"SCRAM-SHA-256=[name=a,password=x,iterations=20000]",
		"SCRAM-SHA-256=[name=a,password=x,colour=red]",
		`SCRAM-SHA-256=[name=a,password="x]`,
		"SCRAM-SHA-256=[name=a,name=b,password=x]",
		"SCRAM-SHA-256=[name=a,salt=!!,password=x]",
	} {
		if _, err := ParseAddScram(bad, id); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// Three combined nodes formatted with --add-scram's credentials (the controller's and
// a client's) form their quorum over a SASL_PLAINTEXT controller listener that
// accepts SCRAM-SHA-512 only, from the first start; the client authenticates with its
// bootstrap credential at once.
func TestBootstrapScramControllerListener(t *testing.T) {
	const n = 3
	addrs := freeAddrs(t, 2*n)
	var voters []string
	for i := range n {
		voters = append(voters, fmt.Sprintf("%d@%s", i+1, addrs[2*i+1]))
	}
	id := RandomUUID()
	var boot []metadata.Record
	for _, a := range []string{"SCRAM-SHA-512=[name=controller,password=ctl-secret]", "SCRAM-SHA-512=[name=alice,iterations=8192,password=alice-secret]"} {
		rec, err := ParseAddScram(a, id)
		if err != nil {
			t.Fatal(err)
		}
		boot = append(boot, rec)
	}
	cfgs := make([]*Config, n)
	for i := range n {
		keys := map[string]string{
			"process.roles": "broker,controller", "node.id": strconv.Itoa(i + 1),
			"controller.quorum.voters":       strings.Join(voters, ","),
			"listeners":                      "SASL_PLAINTEXT://" + addrs[2*i] + ",CONTROLLER://" + addrs[2*i+1],
			"listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
			"inter.broker.listener.name":     "SASL_PLAINTEXT", "controller.listener.names": "CONTROLLER",
			"sasl.enabled.mechanisms":                                     "SCRAM-SHA-512",
			"sasl.mechanism.controller.protocol":                          "SCRAM-SHA-512",
			"sasl.mechanism.inter.broker.protocol":                        "SCRAM-SHA-512",
			"listener.name.controller.scram-sha-512.sasl.jaas.config":     `org.apache.kafka.common.security.scram.ScramLoginModule required username="controller" password="ctl-secret";`,
			"listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="controller" password="ctl-secret";`,
			"data.dir": filepath.Join(t.TempDir(), strconv.Itoa(i+1)), "admin.listen": "", "sync": "none",
		}
		cfg, err := FromKeys(keys)
		if err != nil {
			t.Fatal(err)
		}
		res, err := FormatWith(cfg, id, FormatOptions{Bootstrap: boot})
		if err != nil {
			t.Fatal(err)
		}
		wrote := 0
		for _, r := range res {
			if r.Bootstrap {
				wrote++
				if fi, err := os.Stat(filepath.Join(r.Dir, BootstrapRecordsFile)); err != nil || fi.Mode().Perm() != 0o600 {
					t.Fatalf("bootstrap file: %v %v", fi, err)
				}
			}
		}
		if wrote != 1 {
			t.Fatalf("bootstrap records written into %d directories: %+v", wrote, res)
		}
		cfgs[i] = cfg
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nodes := startQuorum(ctx, t, cfgs)
	cl, err := kgo.NewClient(kgo.SeedBrokers(nodes[1].ListenerAddr("SASL_PLAINTEXT")),
		kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	users, err := kadm.NewClient(cl).DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatalf("alice with her bootstrap credential: %v", err)
	}
	if u, ok := users["alice"]; !ok || len(u.CredInfos) != 1 || u.CredInfos[0].Iterations != 8192 {
		t.Fatalf("described credentials: %+v", users)
	}
}
