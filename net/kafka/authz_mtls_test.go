package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-broker/samsa/coordinator/acl"
	"github.com/samsa-broker/samsa/net/auth"
)

// TestSecurityMutualTLSPrincipal: an SSL listener with ssl.client.auth=required; the
// principal is the client certificate's subject mapped by ssl.principal.mapping.rules
// (CN only); ACLs on that principal decide; a client without a certificate is refused
// at the handshake.
func TestSecurityMutualTLSPrincipal(t *testing.T) {
	tb := startTestBroker(t)
	ca := newTestCA(t)
	az := acl.New(acl.Config{SuperUsers: []string{"User:admin"}})
	_, addr := tb.secureListenerProps(t, auth.SSL, ca, az, map[string]string{
		"ssl.client.auth": "required", "ssl.truststore.certificates": ca.caPEM,
		"ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/,DEFAULT",
	})
	client := func(cert *tls.Certificate) *kgo.Client {
		cfg := &tls.Config{RootCAs: ca.pool, ServerName: "127.0.0.1"}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		d := &tls.Dialer{Config: cfg}
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DisableIdempotentWrite(), kgo.RequestRetries(1),
			kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
				if host == tb.addr {
					host = addr
				}
				return d.DialContext(ctx, network, host)
			}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	ctx := context.Background()
	adminCert, appCert := ca.clientCert(t, "admin"), ca.clientCert(t, "app")
	admin := kadm.NewClient(client(&adminCert))
	if _, err := admin.CreateTopics(ctx, 1, 1, nil, "certs"); err != nil {
		t.Fatal(err)
	}
	app := client(&appCert)
	if err := app.ProduceSync(ctx, &kgo.Record{Topic: "certs", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("app before its ACL: %v", err)
	}
	res, err := admin.CreateACLs(ctx, kadm.NewACLs().Allow("User:app").Topics("certs").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || res[0].Err != nil {
		t.Fatalf("ACL: %v %+v", err, res)
	}
	if err := app.ProduceSync(ctx, &kgo.Record{Topic: "certs", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("app with its ACL: %v", err)
	}
	if err := client(nil).Ping(ctx); err == nil {
		t.Fatal("a client without a certificate was served")
	}
}
