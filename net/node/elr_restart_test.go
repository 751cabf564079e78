package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestELRCleanShutdownRestart: eligible leader replicas across restarts, end to end. A
// controller-only node (it stays up) and brokers 2, 3 and 4 of a cluster formatted at
// this build's levels (eligible.leader.replicas.version 1), a topic on 2, 3, 4 with
// min.insync.replicas=2. The brokers stop cleanly one by one: 4 while the ISR is above
// min.insync.replicas (not eligible; a record is then committed without it), 3 and 2
// below it (eligible; 2 the last known leader). Then:
//   - 4 comes back: it lacks a committed record and is not elected;
//   - 2 comes back with its clean-shutdown markers gone, as a crash leaves them: it
//     registers without its previous broker epoch and leaves the ELR; 3 is still
//     eligible, so 2 is not elected as the last known leader either;
//   - 3 comes back after its clean shutdown: it names its epoch, stays eligible and is
//     elected; both committed records are read from it.
func TestELRCleanShutdownRestart(t *testing.T) {
	addrs := freeAddrs(t, 4)
	id := RandomUUID()
	voters := "1@" + addrs[0]
	common := func(keys map[string]string) map[string]string {
		keys["controller.quorum.voters"], keys["controller.listener.names"] = voters, "CONTROLLER"
		keys["admin.listen"], keys["sync"] = "", "none"
		keys["broker.heartbeat.interval.ms"], keys["broker.session.timeout.ms"] = "200", "3000"
		keys["min.insync.replicas"] = "2"
		return keys
	}
	start := func(cfg *Config) *Node {
		t.Helper()
		n, err := Start(cfg, Options{Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := n.Ready(ctx); err != nil {
			t.Fatalf("node %d: %v", cfg.NodeID, err)
		}
		return n
	}
	stop := func(n *Node) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := n.Shutdown(ctx); err != nil {
			t.Fatalf("node %d shutdown: %v", n.NodeID(), err)
		}
	}
	format := func(keys map[string]string) *Config {
		t.Helper()
		cfg, err := FromKeys(common(keys))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Format(cfg, id, false); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	ctlCfg := format(map[string]string{"process.roles": "controller", "node.id": "1",
		"listeners": "CONTROLLER://" + addrs[0], "data.dir": t.TempDir()})
	running := map[int32]*Node{}
	t.Cleanup(func() {
		for _, n := range running {
			n.Shutdown(context.Background())
		}
	})
	running[1] = start(ctlCfg)
	cfgs := map[int32]*Config{}
	for i, b := range []int32{2, 3, 4} {
		cfgs[b] = format(map[string]string{"process.roles": "broker", "node.id": strconv.Itoa(int(b)),
			"listeners": "PLAINTEXT://" + addrs[1+i], "data.dir": t.TempDir()})
		running[b] = start(cfgs[b])
	}
	stopBroker := func(b int32) {
		t.Helper()
		stop(running[b])
		delete(running, b)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := func(b int32) *kgo.Client {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(running[b].Addr()), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.DefaultProduceTopic("elr"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	cl := client(2)
	create := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "elr", -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Replicas = []int32{2, 3, 4}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	create.Topics = append(create.Topics, rt)
	if r, err := create.RequestWith(ctx, cl); err != nil || r.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics: %v %+v", err, r)
	}

	// state describes the partition through broker b (DescribeTopicPartitions).
	state := func(b int32) (string, error) {
		one, err := kgo.NewClient(kgo.SeedBrokers(running[b].Addr()))
		if err != nil {
			return "", err
		}
		defer one.Close()
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		rq := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rq.Topic = "elr"
		req.Topics = append(req.Topics, rq)
		resp, err := req.RequestWith(ctx, one.SeedBrokers()[0])
		if err != nil {
			return "", err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return "", fmt.Errorf("answer %+v", resp.Topics)
		}
		p := resp.Topics[0].Partitions[0]
		return fmt.Sprintf("leader %d ISR %v ELR %v last known %v", p.LeaderID, p.ISR, p.EligibleLeaderReplicas, p.LastKnownELR), nil
	}
	await := func(what string, b int32, want string) {
		t.Helper()
		waitFor(t, 20*time.Second, what, func() error {
			got, err := state(b)
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("%s, want %s", got, want)
			}
			return nil
		})
	}
	produce := func(value string) {
		t.Helper()
		pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if err := cl.ProduceSync(pctx, &kgo.Record{Value: []byte(value)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", value, err)
		}
	}
	await("all in sync", 2, "leader 2 ISR [2 3 4] ELR [] last known []")
	produce("a")

	// 4 stops cleanly with the ISR above min.insync.replicas: not eligible; b is
	// committed on 2 and 3 only.
	stopBroker(4)
	await("4 out", 2, "leader 2 ISR [2 3] ELR [] last known []")
	produce("b")
	stopBroker(3)
	await("3 eligible", 2, "leader 2 ISR [2] ELR [3] last known []")
	stopBroker(2)
	for _, b := range []int32{2, 3} {
		for _, dir := range cfgs[b].LogDirs {
			data, err := os.ReadFile(filepath.Join(dir, ".kafka_cleanshutdown"))
			if err != nil || !strings.HasPrefix(string(data), `{"version":0,"brokerEpoch":`) || strings.Contains(string(data), ":-1") {
				t.Fatalf("broker %d's clean-shutdown marker: %q %v", b, data, err)
			}
		}
	}

	// 4 comes back: it lacks b; nothing changes.
	running[4] = start(cfgs[4])
	await("2 and 3 eligible, 2 the last known leader", 4, "leader -1 ISR [] ELR [2 3] last known [2]")

	// 2 comes back as after a crash: no marker, no previous epoch.
	for _, dir := range cfgs[2].LogDirs {
		if err := os.Remove(filepath.Join(dir, ".kafka_cleanshutdown")); err != nil {
			t.Fatal(err)
		}
	}
	running[2] = start(cfgs[2])
	await("2 not eligible after its crash", 4, "leader -1 ISR [] ELR [3] last known [2]")
	// Still no leader a while later: 2 and 4 are live, neither is elected.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if got, err := state(4); err != nil || got != "leader -1 ISR [] ELR [3] last known [2]" {
			t.Fatalf("with 2 and 4 back: %s %v", got, err)
		}
		time.Sleep(100 * time.Millisecond) // sampling a state that must not change
	}

	// 3 comes back after its clean shutdown: elected from the ELR.
	running[3] = start(cfgs[3])
	waitFor(t, 20*time.Second, "3 elected", func() error {
		got, err := state(4)
		if err != nil {
			return err
		}
		if !strings.HasPrefix(got, "leader 3 ") {
			return fmt.Errorf("%s", got)
		}
		return nil
	})
	rd, err := kgo.NewClient(kgo.SeedBrokers(running[4].Addr()), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"elr": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var got []string
	for len(got) < 2 {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %v: %v", got, err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("read %v, want [a b]", got)
	}
}
