package bench

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestParseClusterSpec(t *testing.T) {
	for _, c := range []struct {
		spec      string
		ok        bool
		nodes, rf int
		bad       bool
	}{
		{spec: "samsa-cluster", ok: true, nodes: 3},
		{spec: "samsa-cluster@rf=3", ok: true, nodes: 3, rf: 3},
		{spec: "samsa-cluster@nodes=5@rf=2", ok: true, nodes: 5, rf: 2},
		{spec: "samsa", ok: false},
		{spec: "samsa@sync=none", ok: false},
		{spec: "127.0.0.1:9092", ok: false},
		{spec: "samsa-cluster@rf=4", ok: true, bad: true},
		{spec: "samsa-cluster@rf=0", ok: true, bad: true},
		{spec: "samsa-cluster@nodes=10", ok: true, bad: true},
		{spec: "samsa-cluster@sync=none", ok: true, bad: true},
		{spec: "samsa-cluster@", ok: true, bad: true},
	} {
		cs, ok, err := parseClusterSpec(c.spec)
		if ok != c.ok || (err != nil) != c.bad {
			t.Errorf("%q: ok %v err %v", c.spec, ok, err)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrTarget) {
				t.Errorf("%q: %v does not wrap ErrTarget", c.spec, err)
			}
			continue
		}
		if ok && (cs.nodes != c.nodes || cs.rf != c.rf) {
			t.Errorf("%q: %+v", c.spec, cs)
		}
	}
}

func TestParseClusterOutput(t *testing.T) {
	out := `node 1: pid 101, kafka 127.0.0.1:4001, controller 127.0.0.1:4002, admin http://127.0.0.1:4003, config /d/node-1/server.properties, log /d/node-1/samsa.log
node 2: pid 102, kafka 127.0.0.1:4011, controller 127.0.0.1:4012, admin http://127.0.0.1:4013, config /d/node-2/server.properties, log /d/node-2/samsa.log
`
	nodes, bootstrap := parseClusterOutput(out)
	if len(nodes) != 2 || bootstrap != nil {
		t.Fatalf("before ready: %+v %v", nodes, bootstrap)
	}
	if nodes[1] != (clusterNode{pid: 102, kafka: "127.0.0.1:4011", admin: "http://127.0.0.1:4013"}) {
		t.Errorf("node 2: %+v", nodes[1])
	}
	out += "cluster abc ready: --bootstrap-server 127.0.0.1:4001,127.0.0.1:4011\n(Ctrl-C stops every node)\n"
	if _, bootstrap = parseClusterOutput(out); !slices.Equal(bootstrap, []string{"127.0.0.1:4001", "127.0.0.1:4011"}) {
		t.Errorf("bootstrap %v", bootstrap)
	}
}

// TestRunSpawnedSamsaCluster: samsa-cluster@rf=3 starts three nodes through `samsa
// cluster start`, the run's topic has replication factor 3 and min.insync.replicas 2
// on every node's Metadata, the cost is the three processes', and Close stops them.
func TestRunSpawnedSamsaCluster(t *testing.T) {
	bin := samsaBinary(t)
	ctx := context.Background()
	tg, err := StartTarget(ctx, "samsa-cluster@rf=3", SpawnOptions{SamsaBin: bin, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			tg.Close()
		}
	}()
	if len(tg.Brokers) != 3 || len(tg.pids) != 3 || tg.replicationFactor != 3 {
		t.Fatalf("target %+v", tg)
	}
	w := e2eWorkload(t)
	w.ReplicationFactor, w.MinInsyncReplicas = tg.replicationFactor, 2
	r, err := Run(ctx, RunConfig{Workload: w, Brokers: tg.Brokers, Target: tg.Name, Broker: tg.UsageSource(), BrokerRuntime: tg.RuntimeSource(), KeepTopics: true,
		TopicPrefix: "cluster-e2e", DeliveryTimeout: 20 * time.Second, JoinTimeout: 15 * time.Second, DrainTimeout: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, r)
	if r.Broker == nil || r.Broker.CPUSeconds <= 0 {
		t.Errorf("broker cost %+v", r.Broker)
	}
	// The three nodes' runtime and group-commit figures, read together: acks=all at
	// RF 3 under fsync syncs on every node.
	if b := r.BrokerRuntime; b == nil || b.Source != "/metrics of 3 nodes, summed" || b.SchedMaxMs <= 0 || !b.Engine || b.Fsyncs == 0 {
		t.Errorf("cluster runtime %+v (notes %q)", b, r.Notes)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(tg.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	td, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var topic string
	for _, d := range td.Sorted() {
		if len(d.Topic) > len("cluster-e2e") && d.Topic[:len("cluster-e2e")] == "cluster-e2e" {
			topic = d.Topic
			for _, p := range d.Partitions.Sorted() {
				if len(p.Replicas) != 3 {
					t.Errorf("partition %d: replicas %v", p.Partition, p.Replicas)
				}
			}
		}
	}
	if topic == "" {
		t.Fatalf("no run topic in %v", td.Names())
	}
	rc, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rc.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, kv := range c.Configs {
		if kv.Key == "min.insync.replicas" {
			found = kv.MaybeValue() == "2"
		}
	}
	if !found {
		t.Errorf("min.insync.replicas of %s: %+v", topic, c.Configs)
	}
	pids := slices.Clone(tg.pids)
	closed = true
	if err := tg.Close(); err != nil {
		t.Error(err)
	}
	for _, pid := range pids {
		if _, err := procUsage(pid); err == nil {
			t.Errorf("node pid %d still runs after Close", pid)
		}
	}
}
