package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// probe GETs path on node id's admin listener and returns the status and the body.
func probe(c *procCluster, id int32, path string) (int, string, error) {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get("http://" + c.Node(id).Admin + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b)), err
}

// waitProbe waits until path on node id answers status with a body containing want.
func waitProbe(t *testing.T, c *procCluster, id int32, path string, status int, want string) string {
	t.Helper()
	var body string
	eventually(t, 30*time.Second, fmt.Sprintf("node %d %s: %d %q", id, path, status, want), func() error {
		code, b, err := probe(c, id, path)
		if err != nil {
			return err
		}
		body = b
		if code != status || !strings.Contains(b, want) {
			return fmt.Errorf("%d %q", code, b)
		}
		return nil
	})
	return body
}

// TestProcHealthProbes: the admin listener's /live and /ready, as a Kubernetes probe
// or a rolling restart asks them. A node of three started alone is live but not ready
// (no quorum to register with); once the others run every node is ready, and ready
// with ?isr=true once its replicas are in their ISRs; a node restarted after records
// were written without it is ready with ?isr=true only once it caught up; during a
// controlled shutdown /live answers 503.
func TestProcHealthProbes(t *testing.T) {
	spec := combined(3)
	spec.Keys = map[string]string{"replica.lag.time.max.ms": "2000"}
	c, err := newProcCluster(samsaBin(t), t.TempDir(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.KillAll)
	if err := c.Start(1); err != nil {
		t.Fatal(err)
	}
	waitProbe(t, c, 1, "/live", 200, "live")
	// Alone it cannot register: 503, saying where it stands, for a while.
	body := waitProbe(t, c, 1, "/ready", 503, "broker: not serving yet (state ")
	t.Logf("node 1 alone: /ready 503 %q", body)
	for range 5 {
		if code, b, err := probe(c, 1, "/ready"); err != nil || code != 503 {
			t.Fatalf("node 1 without a quorum: /ready %d %q %v", code, b, err)
		}
		time.Sleep(100 * time.Millisecond) // spaced probes, as an orchestrator's
	}
	if err := c.StartAll(); err != nil {
		t.Fatal(err)
	}
	for _, id := range c.Brokers() {
		t.Logf("node %d: /ready 200 %q", id, waitProbe(t, c, id, "/ready", 200, "ready: broker"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(client(t, c.Bootstrap()))
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, "health"); err != nil {
		t.Fatal(err)
	}
	for _, id := range c.Brokers() {
		waitProbe(t, c, id, "/ready?isr=true", 200, "in every ISR of its replicas")
	}

	// Node 3 stopped; records written without it; started again: ready, then ready
	// with ?isr=true once back in every ISR.
	if err := c.Stop(3, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	p := client(t, c.Node(1).Client, kgo.DefaultProduceTopic("health"), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	val := strings.Repeat("x", 1000)
	for range 20 {
		var rs []*kgo.Record
		for range 500 {
			rs = append(rs, kgo.StringRecord(val))
		}
		if err := p.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Start(3); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	eventually(t, 30*time.Second, "node 3 ready with ?isr=true", func() error {
		code, b, err := probe(c, 3, "/ready?isr=true")
		if err != nil {
			return err
		}
		if code != 200 {
			seen[b] = true
			return fmt.Errorf("%d %q", code, b)
		}
		return nil
	})
	t.Logf("node 3 after its restart, before it was ready with ?isr=true: %v", seen)

	// A controlled shutdown: /live is 503 while it lasts (or the listener is gone).
	if err := c.Signal(1, 15); err != nil { // SIGTERM
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "node 1 not live while stopping", func() error {
		code, b, err := probe(c, 1, "/live")
		if err != nil || code == 503 {
			t.Logf("node 1 stopping: /live %d %q %v", code, b, err)
			return nil
		}
		return fmt.Errorf("%d %q", code, b)
	})
}
