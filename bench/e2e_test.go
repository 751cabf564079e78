package bench

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMain lets this test binary serve kfake as a child process (kfake-proc).
func TestMain(m *testing.M) {
	if addr := os.Getenv(KfakeServeEnv); addr != "" {
		ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		err := ServeKfake(ctx, addr, os.Getenv(KfakeAdminEnv), os.Getenv(KfakeNullEnv) != "")
		cancel()
		if err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startKfakeE2E starts an in-process kfake, closed when t ends, and returns it with
// the e2e workload.
func startKfakeE2E(t *testing.T) (*Target, *Workload) {
	t.Helper()
	tg, err := StartTarget(context.Background(), TargetKfake, SpawnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tg.Close() })
	return tg, e2eWorkload(t)
}

// e2eWorkload is a 3-second run: 1 topic, 3 partitions, 100-byte records at a fixed
// 5,000 msg/s, read by 2 consumer groups.
func e2eWorkload(t *testing.T) *Workload {
	t.Helper()
	w, err := ParseWorkload(strings.NewReader(`
name: e2e
topics: 1
partitionsPerTopic: 3
messageSize: 100
randomBytesRatio: 0.5
keyDistributor: round-robin
subscriptionsPerTopic: 2
consumerPerSubscription: 1
producersPerTopic: 1
producerRate: 5000
warmup: 1s
duration: 2s
producer:
  acks: all
  linger: 1ms
  maxBufferedRecords: 20000
consumer:
  fetchMaxWait: 100ms
`))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// checkCounts: nothing failed, everything acknowledged was read by every group.
func checkCounts(t *testing.T, r *Result) {
	t.Helper()
	if r.Failed != "" {
		t.Fatalf("%s failed: %s", r.Target, r.Failed)
	}
	if r.Errors != 0 {
		t.Errorf("%s: %d errors: %v", r.Target, r.Errors, r.ErrorSamples)
	}
	if r.Acked == 0 || r.Acked != r.Sent {
		t.Errorf("%s: sent %d, acked %d", r.Target, r.Sent, r.Acked)
	}
	if !r.CaughtUp || len(r.ConsumedPerSubscription) != r.Subscriptions {
		t.Errorf("%s: not caught up: %+v", r.Target, r.ConsumedPerSubscription)
	}
	for i, c := range r.ConsumedPerSubscription {
		if c != r.Acked {
			t.Errorf("%s: subscription %d consumed %d of %d acked", r.Target, i, c, r.Acked)
		}
	}
	if r.PublishLatency.Count == 0 || (r.Subscriptions > 0 && r.E2ELatency.Count == 0) {
		t.Errorf("%s: no latency samples: pub %d e2e %d", r.Target, r.PublishLatency.Count, r.E2ELatency.Count)
	}
	if r.Config != nil && r.Config.BacklogBytes() > 0 {
		return // a backlog run measures the drain; nothing is produced in its window
	}
	if r.PubRate <= 0 || len(r.Series) < 3 {
		t.Errorf("%s: rate %v, %d points", r.Target, r.PubRate, len(r.Series))
	}
}

func TestRunKfake(t *testing.T) {
	ctx := context.Background()
	tg, w := startKfakeE2E(t)
	r, err := Run(ctx, RunConfig{Workload: w, Brokers: tg.Brokers, Target: "kfake"})
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, r)
	// 5,000 msg/s over a 2 s window, on a busy machine: within a wide band.
	if r.PubRate < 2500 || r.PubRate > 7500 {
		t.Errorf("fixed rate 5000 measured as %.0f", r.PubRate)
	}
	if r.Broker != nil {
		t.Error("in-process kfake has no separate CPU figure")
	}
}

func TestRunKfakeMaxRateAssignZipf(t *testing.T) {
	ctx := context.Background()
	tg, w := startKfakeE2E(t)
	w.ProducerRate = 0
	w.KeyDistributor, w.KeySpace = KeyZipf, 1000
	w.Producer.Compression = "lz4"
	w.Producer.MaxBufferedRecords = 5000
	w.Consumer.Mode = "assign"
	w.ConsumerPerSubscription = 2
	w.SubscriptionsPerTopic = 1
	w.Warmup, w.Duration = 0, Duration(2*time.Second)
	r, err := Run(ctx, RunConfig{Workload: w, Brokers: tg.Brokers, Target: "kfake"})
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, r)
}

func TestBacklogDrainKfake(t *testing.T) {
	ctx := context.Background()
	tg, w := startKfakeE2E(t)
	w.ProducerRate = 0
	w.SubscriptionsPerTopic = 1
	w.ConsumerBacklogSizeGB = 2.0 / 1024 // 2 MiB
	w.Duration = Duration(30 * time.Second)
	r, err := Run(ctx, RunConfig{Workload: w, Brokers: tg.Brokers, Target: "kfake"})
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, r)
	if r.Acked*100 < 2<<20 {
		t.Errorf("backlog of %d records is under 2 MiB", r.Acked)
	}
	if r.ConsRate <= 0 {
		t.Errorf("drain rate %v", r.ConsRate)
	}
}

func TestRawKfake(t *testing.T) {
	ctx := context.Background()
	tg, w := startKfakeE2E(t)
	r, err := RunRaw(ctx, RawConfig{Workload: w, Brokers: tg.Brokers, Target: "kfake", Duration: 2 * time.Second, Warmup: time.Second,
		Connections: 1, InFlight: 4, RecordsPerBatch: 100})
	if err != nil {
		t.Fatal(err)
	}
	if r.Mode != "raw" || r.Acked == 0 || r.Consumed == 0 || r.Errors != 0 || r.PubRate <= 0 {
		t.Fatalf("raw result %+v", r)
	}
	if r.Acked%100 != 0 {
		t.Errorf("acked %d is not whole batches", r.Acked)
	}
	if r.Consumed > r.Acked {
		t.Errorf("fetched %d > produced %d", r.Consumed, r.Acked)
	}
}

// TestRawBacklogKfake: on a backlog workload the raw mode fills with no fetcher, then
// drains from offset 0 with no producer; the window (and the CPU per message) is the
// drain's, and every acknowledged record is read.
func TestRawBacklogKfake(t *testing.T) {
	ctx := context.Background()
	tg, w := startKfakeE2E(t)
	w.ProducerRate = 0
	w.ConsumerBacklogSizeGB = 2.0 / 1024 // 2 MiB
	var steady atomic.Int64
	r, err := RunRaw(ctx, RawConfig{Workload: w, Brokers: tg.Brokers, Target: "kfake", Duration: 30 * time.Second,
		Connections: 2, InFlight: 4, RecordsPerBatch: 100,
		OnSteady: func(context.Context) { steady.Store(time.Now().UnixNano()) }})
	if err != nil {
		t.Fatal(err)
	}
	if r.Acked*int64(w.MessageSize) < 2<<20 || r.Acked%100 != 0 {
		t.Errorf("backlog of %d records of %d B: under 2 MiB or not whole batches", r.Acked, w.MessageSize)
	}
	if r.Consumed != r.Acked || !r.CaughtUp || r.Errors != 0 {
		t.Errorf("drained %d of %d records (caught up %v, errors %d)", r.Consumed, r.Acked, r.CaughtUp, r.Errors)
	}
	if r.PubRate != 0 || r.ConsRate <= 0 {
		t.Errorf("window rates: produce %v, fetch %v; want 0 and > 0", r.PubRate, r.ConsRate)
	}
	if r.Loader != nil && r.Loader.PerWhat != "consumed" {
		t.Errorf("loader cost per %q", r.Loader.PerWhat)
	}
	if steady.Load() == 0 || steady.Load() < r.Started.UnixNano() {
		t.Error("OnSteady did not run at the drain's start")
	}
	if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.HasPrefix(n, "backlog filled: ") }) {
		t.Errorf("notes %q", r.Notes)
	}
}

// TestRawBacklogKfakeFillOutOfTime: a fill that the duration cuts short is drained as
// far as it got.
func TestRawBacklogKfakeFillOutOfTime(t *testing.T) {
	ctx := context.Background()
	tg, w := startKfakeE2E(t)
	w.ProducerRate = 0
	w.ConsumerBacklogSizeGB = 64 // far more than a second's fill
	r, err := RunRaw(ctx, RawConfig{Workload: w, Brokers: tg.Brokers, Target: "kfake", Duration: time.Second,
		Connections: 1, InFlight: 1, RecordsPerBatch: 10})
	if err != nil {
		t.Fatal(err)
	}
	if r.Acked == 0 || r.Consumed > r.Acked || r.Errors != 0 || r.PubRate != 0 {
		t.Errorf("acked %d, consumed %d, errors %d, window produce rate %v", r.Acked, r.Consumed, r.Errors, r.PubRate)
	}
	t.Logf("acked %d, consumed %d, caught up %v, window %.2fs", r.Acked, r.Consumed, r.CaughtUp, r.DurationSec)
	if r.CaughtUp != (r.Consumed == r.Acked) {
		t.Errorf("caught up %v with %d of %d read", r.CaughtUp, r.Consumed, r.Acked)
	}
}

// TestCompareKfakeInProcessAndChild runs A B for one round against kfake in process
// and kfake as a child (this test binary, via TestMain), whose CPU and RSS are read
// from /proc.
func TestCompareKfakeInProcessAndChild(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	w := e2eWorkload(t)
	w.Warmup, w.Duration = 0, Duration(2*time.Second)
	rs, err := Compare(context.Background(), CompareConfig{Workload: w, Targets: []string{TargetKfake, TargetKfakeProc}, Rounds: 1,
		Spawn: SpawnOptions{SelfExe: self, WorkDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Target != TargetKfake || rs[1].Target != TargetKfakeProc {
		t.Fatalf("results %+v", rs)
	}
	for _, r := range rs {
		checkCounts(t, r)
	}
	b := rs[1].Broker
	if b == nil || b.CPUSeconds <= 0 || b.CPUUsPerMsg <= 0 || b.PeakRSS <= 0 {
		t.Errorf("child broker cost %+v", b)
	}
	// The loader's own CPU over the window: with kfake in process it includes the
	// broker and is said to; against the child it is the loader's alone.
	if l := rs[0].Loader; l == nil || l.CPUSeconds <= 0 || l.CPUUsPerMsg <= 0 || !l.IncludesBroker {
		t.Errorf("loader cost with kfake in process %+v", l)
	}
	if l := rs[1].Loader; l == nil || l.CPUSeconds <= 0 || l.CPUUsPerMsg <= 0 || l.CPUCores <= 0 || l.IncludesBroker {
		t.Errorf("loader cost against the child %+v", l)
	}
	// The loader's runtime figures; with kfake in process they are the broker's too.
	if l := rs[0].LoaderRuntime; l == nil || !l.IncludesBroker || rs[0].BrokerRuntime != nil {
		t.Errorf("runtime figures with kfake in process: loader %+v broker %+v", l, rs[0].BrokerRuntime)
	}
	if l := rs[1].LoaderRuntime; l == nil || l.IncludesBroker || l.SchedMaxMs <= 0 {
		t.Errorf("loader runtime figures against the child %+v", l)
	}
	// The child serves its own runtime figures on its admin address.
	if b := rs[1].BrokerRuntime; b == nil || b.SchedMaxMs <= 0 || b.Engine {
		t.Errorf("kfake-proc's runtime figures %+v (notes %q)", b, rs[1].Notes)
	}
	figs := Figures(rs)
	if len(figs) == 0 || len(figs[0].Stats) != 2 {
		t.Errorf("figures %+v", figs)
	}
	for _, f := range figs {
		if strings.HasPrefix(f.Name, "loader ") && (len(f.Stats) != 1 || f.Stats[0].Target != TargetKfakeProc) {
			t.Errorf("%s: %+v (only the run whose broker is another process)", f.Name, f.Stats)
		}
	}
}

func TestStartTargetErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := StartTarget(ctx, "not-a-target", SpawnOptions{}); !errors.Is(err, ErrTarget) {
		t.Errorf("bad spec: %v", err)
	}
	if _, err := StartTarget(ctx, "samsa@", SpawnOptions{SamsaBin: "/bin/true"}); !errors.Is(err, ErrTarget) {
		t.Errorf("empty flag: %v", err)
	}
	dir := t.TempDir()
	// A broker that exits at once: the error carries its log.
	exits := filepath.Join(dir, "exits")
	if err := os.WriteFile(exits, []byte("#!/bin/sh\necho \"cannot serve: $*\" >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := StartTarget(ctx, TargetSamsa, SpawnOptions{SamsaBin: exits, WorkDir: dir})
	if !errors.Is(err, ErrTarget) || !strings.Contains(err.Error(), "cannot serve: serve --listen") || !strings.Contains(err.Error(), "--data-dir") {
		t.Errorf("exiting broker: %v", err)
	}
	// A broker that never answers: bounded by StartTimeout, then stopped.
	hangs := filepath.Join(dir, "hangs")
	if err := os.WriteFile(hangs, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = StartTarget(ctx, "samsa@sync=none", SpawnOptions{SamsaBin: hangs, WorkDir: dir, StartTimeout: 500 * time.Millisecond, StopGrace: time.Second})
	if !errors.Is(err, ErrTarget) || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("hanging broker: %v", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("took %v", time.Since(start))
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "samsa-bench-") {
			t.Errorf("temporary dir %s left behind", e.Name())
		}
	}
}

// samsaBinary builds ./cmd/samsa (or takes $SAMSA_BIN), or skips while the broker
// cannot serve yet.
func samsaBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("SAMSA_BIN"); bin != "" {
		return bin
	}
	root, err := FindModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "samsa")
	if err := BuildSamsa(context.Background(), root, bin); err != nil {
		t.Skipf("SKIP: ./cmd/samsa does not build yet, so the end-to-end test against Samsa cannot run: %v", err)
	}
	out, _ := exec.Command(bin, "help").CombinedOutput()
	if !strings.Contains(string(out), "serve") {
		t.Skipf("SKIP: ./cmd/samsa builds but has no `serve` command yet (samsa help: %q)", strings.TrimSpace(string(out)))
	}
	return bin
}

func TestRunSpawnedSamsa(t *testing.T) {
	bin := samsaBinary(t)
	ctx := context.Background()
	tg, err := StartTarget(ctx, TargetSamsa, SpawnOptions{SamsaBin: bin, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tg.Close(); err != nil {
			t.Error(err)
		}
	}()
	w := e2eWorkload(t)
	r, err := Run(ctx, RunConfig{Workload: w, Brokers: tg.Brokers, Target: "samsa", Broker: tg.UsageSource(), BrokerRuntime: tg.RuntimeSource(),
		DeliveryTimeout: 20 * time.Second, JoinTimeout: 15 * time.Second, DrainTimeout: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, r)
	if r.Broker == nil || r.Broker.CPUSeconds <= 0 {
		t.Errorf("broker cost %+v", r.Broker)
	}
	if r.Loader == nil || r.Loader.CPUSeconds <= 0 || r.Loader.IncludesBroker {
		t.Errorf("loader cost %+v", r.Loader)
	}
	// The broker's runtime figures from its /metrics: its goroutines ran, so the
	// scheduling latency histogram moved in the window; acks=all under fsync made
	// the group commit sync.
	if b := r.BrokerRuntime; b == nil || b.SchedMaxMs <= 0 || b.SchedP99Ms > b.SchedMaxMs || !strings.HasSuffix(b.Source, "/metrics") || b.GCCPUShare > 1 ||
		!b.Engine || b.Fsyncs == 0 || b.FsyncMaxMs < b.FsyncP99Ms {
		t.Errorf("broker runtime %+v (notes %q)", b, r.Notes)
	}
	raw, err := RunRaw(ctx, RawConfig{Workload: w, Brokers: tg.Brokers, Target: "samsa", BrokerRuntime: tg.RuntimeSource(), Duration: 2 * time.Second, Connections: 1, InFlight: 4, RecordsPerBatch: 100})
	if err != nil {
		t.Fatal(err)
	}
	if raw.Acked == 0 || raw.Consumed == 0 || raw.Errors != 0 {
		t.Errorf("raw against samsa: %+v", raw)
	}
	if raw.Loader == nil || raw.Loader.CPUSeconds <= 0 {
		t.Errorf("raw loader cost %+v", raw.Loader)
	}
	if raw.BrokerRuntime == nil || raw.LoaderRuntime == nil {
		t.Errorf("raw runtime figures: broker %+v loader %+v", raw.BrokerRuntime, raw.LoaderRuntime)
	}
}

// TestKfakeNull: the null broker acks everything and serves canned fetches; the
// consumer must not mistake the canned values for send times.
func TestKfakeNull(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tg, err := StartTarget(context.Background(), TargetKfakeNull, SpawnOptions{SelfExe: self, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	w := e2eWorkload(t)
	w.SubscriptionsPerTopic = 1
	w.Consumer.Mode = "assign"
	w.Warmup, w.Duration = 0, Duration(time.Second)
	r, err := Run(context.Background(), RunConfig{Workload: w, Brokers: tg.Brokers, Target: TargetKfakeNull, Broker: tg.UsageSource()})
	if err != nil {
		t.Fatal(err)
	}
	if r.Acked == 0 || r.Errors != 0 || r.Consumed == 0 || r.E2ELatency.Count != 0 || len(r.Notes) == 0 {
		t.Fatalf("null run: acked %d errors %d consumed %d e2e %d notes %v", r.Acked, r.Errors, r.Consumed, r.E2ELatency.Count, r.Notes)
	}
}

// A spawned samsa@security=SASL_SSL: its client listener speaks TLS and SCRAM-SHA-512
// only (a plaintext ApiVersions gets no answer), a run with the target's client
// options produces and consumes every record, and the plaintext raw mode is refused
// rather than run against another listener.
func TestRunSpawnedSecureSamsa(t *testing.T) {
	bin := samsaBinary(t)
	ctx := context.Background()
	tg, err := StartTarget(ctx, "samsa@security=SASL_SSL", SpawnOptions{SamsaBin: bin, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tg.Close(); err != nil {
			t.Error(err)
		}
	}()
	if len(tg.ClientOpts) != 2 {
		t.Fatalf("client options %d, want TLS and SASL", len(tg.ClientOpts))
	}
	if _, err := apiVersions(ctx, tg.Brokers[0], time.Second); err == nil {
		t.Fatal("the SASL_SSL listener answered a plaintext ApiVersions")
	}
	w := e2eWorkload(t)
	r, err := Run(ctx, RunConfig{Workload: w, Brokers: tg.Brokers, Target: "samsa@security=SASL_SSL", Broker: tg.UsageSource(),
		DeliveryTimeout: 20 * time.Second, JoinTimeout: 15 * time.Second, DrainTimeout: 15 * time.Second, ClientOpts: tg.ClientOpts})
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, r)
	if _, err := StartTarget(ctx, "samsa@security=TLS", SpawnOptions{SamsaBin: bin}); err == nil {
		t.Fatal("samsa@security=TLS was accepted")
	}
	res, err := Compare(ctx, CompareConfig{Workload: w, Targets: []string{"kfake"}, RawOnly: true,
		ClientOpts: map[string][]kgo.Opt{"kfake": tg.ClientOpts}})
	if err != nil || len(res) != 1 || !strings.Contains(res[0].Failed, "plaintext only") {
		t.Fatalf("raw mode with client security options: %v %+v", err, res)
	}
}
