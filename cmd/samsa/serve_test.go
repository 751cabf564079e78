package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/node"
)

func startTestServer(t *testing.T, dataDir string, extra ...string) *node.Node {
	t.Helper()
	args := append([]string{"--data-dir", dataDir, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--sync", "none"}, extra...)
	cfg, err := loadConfig(args, nil, slog.New(slog.DiscardHandler), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s, err := startNode(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func stopTestServer(t *testing.T, s *node.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestServeEndToEnd(t *testing.T) {
	dir := t.TempDir()
	s := startTestServer(t, dir, "--set", "num.partitions=3", "--set", "group.initial.rebalance.delay.ms=0", "--set", "offsets.topic.num.partitions=3")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, -1, -1, map[string]*string{"retention.ms": kadm.StringPtr("60000")}, "e2e"); err != nil {
		t.Fatal(err)
	}
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 1 || net.JoinHostPort(md.Brokers[0].Host, strconv.Itoa(int(md.Brokers[0].Port))) != s.Addr() {
		t.Fatalf("advertised %+v, bound %s", md.Brokers, s.Addr())
	}
	clusterID := md.Cluster

	// Produce, then consume in a group and commit: the data path and the group
	// coordinator wired by serve.
	var recs []*kgo.Record
	for i := range 30 {
		recs = append(recs, &kgo.Record{Topic: "e2e", Key: []byte{byte(i)}, Value: []byte("value")})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("e2e"),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 30; {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	consumer.Close()

	resp, err := http.Get("http://" + s.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`samsa_requests_total{api="CreateTopics"} 1`, "samsa_request_latency_seconds_bucket", "samsa_connections ", "samsa_engine_fsync_latency_seconds", "samsa_bytes_in_total"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(string(body), "samsa_connections 0") {
		t.Error("connections gauge is 0 with a client connected")
	}
	if resp, err := http.Get("http://" + s.AdminAddr() + "/debug/pprof/"); err != nil || resp.StatusCode != 200 {
		t.Errorf("pprof: %v", err)
	} else {
		resp.Body.Close()
	}
	brs, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	br, _ := brs.On("1", nil)
	for _, c := range br.Configs {
		if c.Key == "log.dirs" && (c.Value == nil || *c.Value != filepath.Join(dir, "logs")) {
			t.Errorf("log.dirs reported as %v", c.Value)
		}
		if c.Key == "num.partitions" && (c.Value == nil || *c.Value != "3" || c.Source != kmsg.ConfigSourceStaticBrokerConfig) {
			t.Errorf("num.partitions reported as %+v", c)
		}
	}
	cl.Close()
	stopTestServer(t, s)

	// Layout, and a restart on the same data keeps the cluster, topic and config.
	for _, p := range []string{filepath.Join("logs", "meta.properties"), filepath.Join("meta", "meta.properties"), filepath.Join("logs", "e2e-2")} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("layout: %v", err)
		}
	}
	s = startTestServer(t, dir)
	defer stopTestServer(t, s)
	cl, err = kgo.NewClient(kgo.SeedBrokers(s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm = kadm.NewClient(cl)
	td, err := adm.ListTopics(ctx, "e2e")
	if err != nil || len(td["e2e"].Partitions) != 3 {
		t.Fatalf("after restart: %v %+v", err, td)
	}
	if md, err := adm.BrokerMetadata(ctx); err != nil || md.Cluster != clusterID {
		t.Fatalf("cluster id changed: %v %q != %q", err, md.Cluster, clusterID)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "e2e")
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := rcs.On("e2e", nil)
	found := false
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" && c.Value != nil && *c.Value == "60000" {
			found = true
		}
	}
	if !found {
		t.Fatal("topic config lost across restart")
	}
	// The group coordinator answers once __consumer_offsets is led and loaded again
	// (COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS until then, which
	// clients retry).
	var offs kadm.OffsetResponses
	eventually(t, 20*time.Second, "the group coordinator after the restart", func() error {
		offs, err = adm.FetchOffsets(ctx, "g")
		return err
	})
	var committed int64
	offs.Each(func(o kadm.OffsetResponse) { committed += o.At })
	if committed != 30 {
		t.Fatalf("committed offsets after restart sum to %d, want 30", committed)
	}
	ends, err := adm.ListEndOffsets(ctx, "e2e")
	if err != nil {
		t.Fatal(err)
	}
	var end int64
	ends.Each(func(o kadm.ListedOffset) { end += o.Offset })
	if end != 30 {
		t.Fatalf("end offsets after restart sum to %d, want 30", end)
	}
}

func TestServeReactor(t *testing.T) {
	s := startTestServer(t, t.TempDir(), "--transport", "reactor", "--set", "num.network.threads=1", "--set", "num.io.threads=2")
	defer stopTestServer(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()), kgo.DefaultProduceTopic("r"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("r", 0); o.Offset != 20 {
		t.Fatalf("end offset %d, want 20", o.Offset)
	}
}

func TestServeRefusesOtherNodesData(t *testing.T) {
	dir := t.TempDir()
	s := startTestServer(t, dir)
	stopTestServer(t, s)
	cfg, err := loadConfig([]string{"--data-dir", dir, "--listen", "127.0.0.1:0", "--admin-listen", "", "--node-id", "2"}, nil, slog.New(slog.DiscardHandler), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := startNode(cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "node.id") {
		t.Fatalf("started on another node's data: %v", err)
	}
}

// TestServeAddressInUse: a taken Kafka or admin address fails start-up with an error
// that names the address and the fix.
func TestServeAddressInUse(t *testing.T) {
	decoy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer decoy.Close()
	taken := decoy.Addr().String()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", taken, "--admin-listen", "127.0.0.1:0"}, "kafka listener " + taken + ": address already in use: pass --listen or LISTEN="},
		{[]string{"--listen", "127.0.0.1:0", "--admin-listen", taken}, "admin listener " + taken + ": address already in use: pass --admin-listen or ADMIN="},
	} {
		args := append([]string{"--data-dir", t.TempDir(), "--sync", "none"}, tc.args...)
		cfg, err := loadConfig(args, nil, slog.New(slog.DiscardHandler), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		s, err := startNode(cfg, slog.New(slog.DiscardHandler))
		if err == nil {
			stopTestServer(t, s)
			t.Fatalf("%v: started on a taken address", tc.args)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %q, want %q", tc.args, err, tc.want)
		}
	}
}

// TestServeUpgradesSingleNodeLayout: a data directory of the single-node layout
// before the raft log (<data.dir>/meta.properties without directory.id, the metadata
// in a coordinator/metadata.Store under <data.dir>/meta) starts as the same cluster
// with its topics and configs, imported into the raft log; the next start reads the
// raft log. (The first start waits out the session the new controller gives the
// imported broker registration: one broker.session.timeout.ms, shortened here.)
func TestServeUpgradesSingleNodeLayout(t *testing.T) {
	dir := t.TempDir()
	const clusterID = "AAAAAAAAAAAAAAAAAAAAAQ"
	if err := os.WriteFile(filepath.Join(dir, "meta.properties"), []byte("#\n#Mon Nov 30 10:00:00 UTC 2026\nversion=1\ncluster.id="+clusterID+"\nnode.id=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := metadata.OpenStore(filepath.Join(dir, "meta"), metadata.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recs := []metadata.Record{&metadata.RegisterBrokerRecord{ID: 1, Epoch: 1, Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 1}}}}
	recs = append(recs, metadata.CreateTopicRecords("kept", metadata.NewUUID(), [][]int32{{1}, {1}}, map[string]string{"retention.ms": "123456"})...)
	if err := st.Append(recs...); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		s := startTestServer(t, dir, "--set", "broker.session.timeout.ms=1500", "--set", "broker.heartbeat.interval.ms=300")
		cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()), kgo.DefaultProduceTopic("kept"))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		adm := kadm.NewClient(cl)
		md, err := adm.Metadata(ctx, "kept")
		if err != nil || md.Cluster != clusterID || len(md.Topics["kept"].Partitions) != 2 {
			t.Fatalf("round %d: %v cluster %q topics %+v", round, err, md.Cluster, md.Topics)
		}
		rcs, err := adm.DescribeTopicConfigs(ctx, "kept")
		if err != nil {
			t.Fatal(err)
		}
		rc, _ := rcs.On("kept", nil)
		found := false
		for _, c := range rc.Configs {
			found = found || c.Key == "retention.ms" && c.Value != nil && *c.Value == "123456"
		}
		if !found {
			t.Fatalf("round %d: the topic's config was not imported", round)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(round)}}).FirstErr(); err != nil {
			t.Fatalf("round %d: produce: %v", round, err)
		}
		cancel()
		cl.Close()
		stopTestServer(t, s)
	}
	if _, err := os.Stat(filepath.Join(dir, "meta.pre-raft")); err != nil {
		t.Errorf("the imported store was not moved aside: %v", err)
	}
}
