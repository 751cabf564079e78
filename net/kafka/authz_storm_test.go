package kafka

import (
	"context"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/samsa-broker/samsa/coordinator/acl"
	"github.com/samsa-broker/samsa/net/auth"
)

// TestSecurityFailedAuthenticationStorm: 200 connections fail PLAIN authentication (8
// at a time) while an authenticated SCRAM client keeps being served; afterwards the
// listener holds no state for the failed connections and the heap is back within a
// bound. With SAMSA_LONG=1 it is the campaign: 10,000 failed attempts, 64 at
// a time (`make test-long-security`).
func TestSecurityFailedAuthenticationStorm(t *testing.T) {
	tb := startTestBroker(t)
	tb.setScram(t, "alice", "alice-secret")
	l, addr := tb.secureListenerL(t, auth.SASLPlaintext, testCA{}, acl.New(acl.Config{SuperUsers: []string{"User:alice"}}))
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
		kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			if host == tb.addr {
				host = addr
			}
			var d net.Dialer
			return d.DialContext(ctx, network, host)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if err := cl.Ping(ctx); err != nil {
		t.Fatal(err)
	}

	attempts, parallel := 200, 8
	if os.Getenv("SAMSA_LONG") != "" {
		attempts, parallel = 10000, 64
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	var wg sync.WaitGroup
	work := make(chan int)
	failures := make(chan string, attempts)
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					failures <- err.Error()
					continue
				}
				c.SetDeadline(time.Now().Add(10 * time.Second))
				rc := &rawConn{t: t, c: c}
				hs := kmsg.NewPtrSASLHandshakeRequest()
				hs.SetVersion(1)
				hs.Mechanism = "PLAIN"
				rc.send(hs)
				if b, err := rc.readFrame(); err != nil || len(b) == 0 {
					failures <- "handshake unanswered"
					c.Close()
					continue
				}
				sa := kmsg.NewPtrSASLAuthenticateRequest()
				sa.SetVersion(1)
				sa.SASLAuthBytes = []byte("\x00alice\x00wrong")
				rc.send(sa)
				b, err := rc.readFrame()
				resp := kmsg.NewPtrSASLAuthenticateResponse()
				resp.SetVersion(1)
				if err != nil || len(b) < 4 || resp.ReadFrom(b[4:]) != nil || resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
					failures <- "no SASL_AUTHENTICATION_FAILED"
				}
				c.Close()
			}
		}()
	}
	done, stopPing := make(chan struct{}), make(chan struct{})
	var served int
	go func() {
		defer close(done)
		for {
			if err := cl.Ping(ctx); err != nil {
				failures <- "authenticated client: " + err.Error()
				return
			}
			served++
			select {
			case <-time.After(5 * time.Millisecond):
			case <-stopPing:
				return
			}
		}
	}()
	for i := range attempts {
		work <- i
	}
	close(work)
	wg.Wait()
	close(stopPing)
	<-done
	close(failures)
	for f := range failures {
		t.Fatal(f)
	}
	if served == 0 {
		t.Fatal("the authenticated client was not served during the storm")
	}
	// Every failed connection's state goes when it closes (the client closed each).
	eventually(t, 10*time.Second, "no failed connection's security state kept after the storm", func() bool {
		return l.sessions.Conns() <= 2 // the authenticated client's connections
	})
	// The heap after the storm: a wide bound (the broker's and the test's own
	// garbage), far below what keeping each attempt's state would take.
	var after runtime.MemStats
	eventually(t, 10*time.Second, "the heap back within 64 MiB of its size before the storm", func() bool {
		runtime.GC()
		runtime.ReadMemStats(&after)
		return after.HeapInuse < before.HeapInuse+64<<20
	})
	t.Logf("%d failed authentications, %d at a time, in %s; the authenticated client was served %d times meanwhile; heap in use %d MiB before, %d MiB after",
		attempts, parallel, time.Since(start).Round(time.Millisecond), served, before.HeapInuse>>20, after.HeapInuse>>20)
}
