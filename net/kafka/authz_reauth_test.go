package kafka

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/samsa-broker/samsa/coordinator/acl"
	"github.com/samsa-broker/samsa/net/auth"
)

type connectCounter struct{ n atomic.Int32 }

func (c *connectCounter) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		c.n.Add(1)
	}
}

// TestSecurityReauthentication: with connections.max.reauth.ms=1000, franz-go
// re-authenticates its connections (KIP-368) before their sessions expire, so a
// client producing for three session lifetimes keeps its connections: an expired
// session would have had its connection closed and re-opened.
func TestSecurityReauthentication(t *testing.T) {
	tb := startTestBroker(t)
	tb.setScram(t, "alice", "alice-secret")
	_, addr := tb.secureListenerProps(t, auth.SASLPlaintext, testCA{}, acl.New(acl.Config{SuperUsers: []string{"User:alice"}}),
		map[string]string{"connections.max.reauth.ms": "1000"})
	var connects connectCounter
	var d net.Dialer
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
		kgo.WithHooks(&connects), kgo.DefaultProduceTopic("reauth"), kgo.AllowAutoTopicCreation(),
		kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			if host == tb.addr {
				host = addr
			}
			return d.DialContext(ctx, network, host)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("0")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	before := connects.n.Load()
	end := time.Now().Add(3 * time.Second)
	for n := 0; time.Now().Before(end); n++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", n, err)
		}
		<-time.After(50 * time.Millisecond) // pacing, not a wait for a condition
	}
	if after := connects.n.Load(); after != before {
		t.Fatalf("%d new connections over three session lifetimes: sessions were not re-authenticated", after-before)
	}
}

// TestSecurityLateReauthentication: a client idle past its session's end
// (connections.max.reauth.ms=1000, 2 s without a request) re-authenticates before its
// next request, as franz-go does, and that request is served: Kafka accepts a
// re-authentication begun after the session expired (the fault harness's secured runs
// saw ILLEGAL_SASL_STATE answered to it, and the request that triggered it failed).
func TestSecurityLateReauthentication(t *testing.T) {
	tb := startTestBroker(t)
	tb.setScram(t, "alice", "alice-secret")
	_, addr := tb.secureListenerProps(t, auth.SASLPlaintext, testCA{}, acl.New(acl.Config{SuperUsers: []string{"User:alice"}}),
		map[string]string{"connections.max.reauth.ms": "1000"})
	var d net.Dialer
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
		kgo.DefaultProduceTopic("late-reauth"), kgo.AllowAutoTopicCreation(), kgo.RequestRetries(0),
		kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			if host == tb.addr {
				host = addr
			}
			return d.DialContext(ctx, network, host)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	for i := range 3 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		<-time.After(2 * time.Second) // idle past the session's end: the condition under test
	}
}
