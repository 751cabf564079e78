package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSpawnRelativeBinary: a binary named relative to the caller's working directory
// (--samsa-bin bin/samsa) is found although the child runs in its own temporary
// directory, and so is a relative --work-dir.
func TestSpawnRelativeBinary(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(dir, "bin", "bench.test")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	tg, err := StartTarget(context.Background(), TargetKfakeProc, SpawnOptions{SelfExe: "bin/bench.test", WorkDir: "work"})
	if err != nil {
		t.Fatalf("relative binary and work dir: %v", err)
	}
	if err := tg.Close(); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "work")); err != nil {
		t.Errorf("relative work dir not used: %v", err)
	}

	_, err = StartTarget(context.Background(), TargetSamsa, SpawnOptions{SamsaBin: "bin/no-such-samsa", WorkDir: "work"})
	if !errors.Is(err, ErrTarget) || !strings.Contains(err.Error(), "bin/no-such-samsa") || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing binary: %v", err)
	}
}

// TestCostFromPIDAndAdmin: a target that is not spawned gets its CPU and RSS from
// /proc when its pid is given (--pid), and from its /metrics when its admin URL is
// (--admin).
func TestCostFromPIDAndAdmin(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w := e2eWorkload(t)
	w.SubscriptionsPerTopic = 1
	w.Warmup, w.Duration = 0, Duration(time.Second)

	child, err := StartTarget(ctx, TargetKfakeProc, SpawnOptions{SelfExe: self, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer child.Close()
	addr := child.Brokers[0]
	rs, err := Compare(ctx, CompareConfig{Workload: w, Targets: []string{addr}, PIDs: map[string]int{addr: child.PID}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Failed != "" {
		t.Fatalf("results %+v", rs)
	}
	if b := rs[0].Broker; b == nil || b.CPUSeconds <= 0 || b.PeakRSS <= 0 || !strings.HasPrefix(b.Source, "/proc/") {
		t.Errorf("--pid: broker cost %+v", b)
	}
	rs, _ = Compare(ctx, CompareConfig{Workload: w, Targets: []string{addr}, PIDs: map[string]int{addr: 1 << 30}})
	if len(rs) != 1 || !strings.Contains(rs[0].Failed, "pid") {
		t.Errorf("a wrong --pid fails the run: %+v", rs)
	}

	bin := samsaBinary(t)
	samsa, err := StartTarget(ctx, TargetSamsa, SpawnOptions{SamsaBin: bin, WorkDir: t.TempDir(), SamsaArgs: []string{"--sync", "none"}})
	if err != nil {
		t.Fatal(err)
	}
	defer samsa.Close()
	addr = samsa.Brokers[0]
	rs, err = Compare(ctx, CompareConfig{Workload: w, Targets: []string{addr}, AdminURLs: map[string]string{addr: samsa.AdminURL}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Failed != "" {
		t.Fatalf("results %+v", rs)
	}
	if b := rs[0].Broker; b == nil || b.CPUSeconds <= 0 || b.PeakRSS <= 0 || b.Source != samsa.AdminURL+"/metrics" {
		t.Errorf("--admin: broker cost %+v", b)
	}
	// The same process through /proc: the RSS sampled from /metrics is near VmHWM.
	proc, err := ProcUsage(samsa.PID).Usage()
	if err != nil {
		t.Fatal(err)
	}
	if m := rs[0].Broker.PeakRSS; m > proc.PeakRSS || m < proc.PeakRSS/4 {
		t.Errorf("RSS from /metrics %d, VmHWM %d", m, proc.PeakRSS)
	}
}

func TestScrapeValues(t *testing.T) {
	page := `# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.5
process_cpu_seconds_total_other 3
go_gc_duration_seconds{quantile="0.5"} 1e-05
process_resident_memory_bytes 1.2345e+08 1700000000000
`
	v, err := scrapeValues(strings.NewReader(page), "process_cpu_seconds_total", "process_resident_memory_bytes")
	if err != nil || v[0] != 12.5 || v[1] != 1.2345e8 {
		t.Errorf("values %v, %v", v, err)
	}
	if _, err := scrapeValues(strings.NewReader(page), "process_max_fds"); err == nil || !strings.Contains(err.Error(), "process_max_fds") {
		t.Errorf("missing series: %v", err)
	}
	if _, err := scrapeValues(strings.NewReader("process_cpu_seconds_total abc\n"), "process_cpu_seconds_total"); err == nil {
		t.Error("bad value accepted")
	}
}

// TestBacklogNeverNegative: consumers can read a record before its producer sees the
// acknowledgement (and a retried record twice); the backlog stays at zero then.
func TestBacklogNeverNegative(t *testing.T) {
	r := &run{w: &Workload{ProducersPerTopic: 1, SubscriptionsPerTopic: 2}, topics: []string{"t"},
		producers: []*producer{{}}, subs: []*subscription{{}, {}}}
	r.producers[0].acked.Store(10)
	r.subs[0].consumed.Store(12) // ahead of the acks
	r.subs[1].consumed.Store(3)
	if got := r.backlog(); got != 7 {
		t.Errorf("backlog %d, want 0 + 7", got)
	}
}

// TestSamsaLDFlagsMatchMakefile: a broker samsa-bench builds is linked as `make build`
// links it.
func TestSamsaLDFlagsMatchMakefile(t *testing.T) {
	root, err := FindModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), "\nSAMSA_LDFLAGS ?= "+SamsaLDFlags+"\n") {
		t.Fatalf("the Makefile's SAMSA_LDFLAGS is not %q", SamsaLDFlags)
	}
}
