package node

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var lns []net.Listener
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, l)
		out = append(out, l.Addr().String())
	}
	for _, l := range lns {
		l.Close()
	}
	return out
}

// inProcessCluster starts n combined nodes in this process over real TCP, formatted
// with one cluster id; they are shut down at the end of the test.
func inProcessCluster(t *testing.T, n int, extra map[string]string) []*Node {
	t.Helper()
	return inProcessClusterWith(t, n, func(_ int, keys map[string]string) {
		for k, v := range extra {
			keys[k] = v
		}
	})
}

// inProcessClusterWith is inProcessCluster with each node's keys set by keys (i: the
// node's index, its id minus one).
func inProcessClusterWith(t *testing.T, n int, set func(i int, keys map[string]string)) []*Node {
	t.Helper()
	addrs := freeAddrs(t, 2*n)
	var voters []string
	for i := range n {
		voters = append(voters, fmt.Sprintf("%d@%s", i+1, addrs[2*i+1]))
	}
	id := RandomUUID()
	cfgs := make([]*Config, n)
	for i := range n {
		dir := filepath.Join(t.TempDir(), strconv.Itoa(i+1))
		keys := map[string]string{
			"process.roles": "broker,controller", "node.id": strconv.Itoa(i + 1),
			"controller.quorum.voters": strings.Join(voters, ","), "controller.listener.names": "CONTROLLER",
			"listeners": "PLAINTEXT://" + addrs[2*i] + ",CONTROLLER://" + addrs[2*i+1],
			"data.dir":  dir, "admin.listen": "", "sync": "none",
		}
		set(i, keys)
		cfg, err := FromKeys(keys)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Format(cfg, id, false); err != nil {
			t.Fatal(err)
		}
		cfgs[i] = cfg
	}
	nodes := make([]*Node, n)
	for i, cfg := range cfgs {
		nd, err := Start(cfg, Options{Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = nd
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, nd := range nodes {
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, nd := range nodes {
		if err := nd.Ready(ctx); err != nil {
			t.Fatalf("node %d: %v", nd.NodeID(), err)
		}
	}
	return nodes
}

// TestInProcessCluster: three nodes started with Start in one process form a cluster:
// every broker serves, a topic with three replicas created through one is in every
// broker's Metadata, and each names the same controller.
func TestInProcessCluster(t *testing.T) {
	nodes := inProcessCluster(t, 3, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(nodes[1].Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, "inproc"); err != nil {
		t.Fatal(err)
	}
	// Every broker's image follows the committed log: within a second.
	for _, nd := range nodes {
		one, err := kgo.NewClient(kgo.SeedBrokers(nd.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Second, fmt.Sprintf("node %d shows the topic", nd.NodeID()), func() error {
			// Sent to this node itself (kgo would answer a Metadata call from its cache
			// or from any broker).
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr("inproc")
			req.Topics = append(req.Topics, rt)
			md, err := req.RequestWith(ctx, one.SeedBrokers()[0])
			if err != nil {
				return err
			}
			if len(md.Brokers) != 3 || md.ControllerID < 1 || md.ControllerID > 3 || len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 3 {
				return fmt.Errorf("brokers %d, controller %d, topics %+v", len(md.Brokers), md.ControllerID, md.Topics)
			}
			for _, p := range md.Topics[0].Partitions {
				if len(p.Replicas) != 3 || p.Leader < 1 {
					return fmt.Errorf("partition %+v", p)
				}
			}
			return nil
		})
		one.Close()
	}
}

// TestBrokerWaitsForController: a broker-only node whose voters nobody serves starts,
// does not serve, and says why in its log; Shutdown ends it.
func TestBrokerWaitsForController(t *testing.T) {
	addrs := freeAddrs(t, 2)
	cfg, err := FromKeys(map[string]string{
		"process.roles": "broker", "node.id": "4", "controller.listener.names": "CONTROLLER",
		"controller.quorum.voters": "1@" + addrs[1], "listeners": "PLAINTEXT://" + addrs[0],
		"data.dir": t.TempDir(), "admin.listen": "", "broker.heartbeat.interval.ms": "200", "broker.session.timeout.ms": "1000",
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Format(cfg, RandomUUID(), false); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	n, err := Start(cfg, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the waiting broker's warning", func() error {
		if !strings.Contains(logs.String(), "waiting for the controller quorum") || !strings.Contains(logs.String(), "1@"+addrs[1]) {
			return fmt.Errorf("log so far:\n%s", logs.String())
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err = n.Ready(ctx)
	cancel()
	if err == nil {
		t.Fatal("a broker without a controller is ready")
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if err := n.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestBrokerOnlyBootstrapServers: a broker-only node given
// controller.quorum.bootstrap.servers (one of which nobody serves) instead of
// controller.quorum.voters learns the voters from them, joins and serves.
func TestBrokerOnlyBootstrapServers(t *testing.T) {
	nodes := inProcessCluster(t, 3, nil)
	addrs := freeAddrs(t, 2)
	cfg, err := FromKeys(map[string]string{
		"process.roles": "broker", "node.id": "4", "controller.listener.names": "CONTROLLER",
		"controller.quorum.bootstrap.servers": addrs[1] + "," + nodes[1].ListenerAddr("CONTROLLER"),
		"listeners":                           "PLAINTEXT://" + addrs[0], "data.dir": t.TempDir(), "admin.listen": "", "sync": "none",
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Format(cfg, nodes[0].ClusterID(), false); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	n, err := Start(cfg, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Shutdown(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Ready(ctx); err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), "learned the controller quorum's voters") {
		t.Errorf("no word of the voters learned:\n%s", logs.String())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	waitFor(t, 5*time.Second, "node 4 lists the four brokers", func() error {
		md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl.SeedBrokers()[0])
		if err != nil {
			return err
		}
		if len(md.Brokers) != 4 || md.ControllerID < 1 || md.ControllerID > 3 {
			return fmt.Errorf("brokers %d, controller %d", len(md.Brokers), md.ControllerID)
		}
		return nil
	})
}
