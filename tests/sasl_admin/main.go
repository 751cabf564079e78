// Command sasl_admin is tests/sasl_ssl.sh's admin client (Debian's confluent-kafka 1.7
// has no ACL or SCRAM admin calls): over SASL_SSL as a PLAIN user it creates a topic,
// SCRAM-SHA-512 credentials and ALLOW ACLs.
//
//	sasl_admin -broker host:port -ca ca.pem -user admin -pass secret \
//	    -topic orders -scram alice=alice-secret -scram bob=bob-secret \
//	    -acl User:alice:topic:orders:WRITE -acl User:alice:group:g:READ
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	broker := flag.String("broker", "", "host:port")
	ca := flag.String("ca", "", "CA certificate (PEM)")
	user := flag.String("user", "", "PLAIN user")
	pass := flag.String("pass", "", "PLAIN password")
	topic := flag.String("topic", "", "topic to create (1 partition)")
	var scrams, acls list
	flag.Var(&scrams, "scram", "user=password (SCRAM-SHA-512, repeatable)")
	flag.Var(&acls, "acl", "User:name:topic|group:resource:OPERATION (ALLOW, literal, repeatable)")
	flag.Parse()
	if err := run(*broker, *ca, *user, *pass, *topic, scrams, acls); err != nil {
		fmt.Fprintln(os.Stderr, "sasl_admin:", err)
		os.Exit(1)
	}
}

func run(broker, caFile, user, pass, topic string, scrams, acls []string) error {
	pemBytes, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		return fmt.Errorf("no certificate in %s", caFile)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.DialTLSConfig(&tls.Config{RootCAs: pool}),
		kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if topic != "" {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			return fmt.Errorf("create topic: %w", err)
		}
	}
	var ups []kadm.UpsertSCRAM
	for _, s := range scrams {
		u, p, _ := strings.Cut(s, "=")
		ups = append(ups, kadm.UpsertSCRAM{User: u, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: p})
	}
	if len(ups) > 0 {
		res, err := adm.AlterUserSCRAMs(ctx, nil, ups)
		if err != nil {
			return fmt.Errorf("credentials: %w", err)
		}
		for _, r := range res {
			if r.Err != nil {
				return fmt.Errorf("credential of %s: %w", r.User, r.Err)
			}
		}
	}
	for _, a := range acls {
		f := strings.Split(a, ":")
		if len(f) != 5 {
			return fmt.Errorf("acl %q: want User:name:topic|group:resource:OPERATION", a)
		}
		op, err := kmsg.ParseACLOperation(strings.ToLower(f[4]))
		if err != nil {
			return err
		}
		b := kadm.NewACLs().Allow(f[0] + ":" + f[1]).Operations(op).ResourcePatternType(kadm.ACLPatternLiteral)
		switch f[2] {
		case "topic":
			b = b.Topics(f[3])
		case "group":
			b = b.Groups(f[3])
		default:
			return fmt.Errorf("acl %q: resource type %s", a, f[2])
		}
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			return fmt.Errorf("acl %q: %w", a, err)
		}
		for _, r := range res {
			if r.Err != nil {
				return fmt.Errorf("acl %q: %w", a, r.Err)
			}
		}
	}
	return nil
}
