package bench

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/samsa-broker/samsa/internal/versitygw"
)

// TestTieredTargetSpec: samsa@tiered is told from the serve flags beside it, and
// only a samsa target takes it.
func TestTieredTargetSpec(t *testing.T) {
	for _, c := range []struct {
		spec string
		want bool
	}{
		{"samsa@tiered", true},
		{"samsa@tiered@sync=none", true},
		{"samsa@sync=none@tiered", true},
		{"samsa@security=SSL@tiered", true},
		{"samsa", false},
		{"samsa@sync=none", false},
		{"samsa@tiered=true", false}, // a serve flag --tiered=true, which samsa refuses
		{"samsa-cluster@tiered", false},
		{"kfake-proc", false},
		{"127.0.0.1:9092", false},
	} {
		if got := specTiered(c.spec); got != c.want {
			t.Errorf("specTiered(%q) = %v, want %v", c.spec, got, c.want)
		}
	}
	tiered, rest := tieredOf([]string{"sync=none", "tiered", "transport=std"})
	if !tiered || !slices.Equal(rest, []string{"sync=none", "transport=std"}) {
		t.Errorf("tieredOf: %v %q", tiered, rest)
	}
	_, err := StartTarget(context.Background(), "samsa-cluster@tiered", SpawnOptions{SamsaBin: "/bin/true", WorkDir: t.TempDir()})
	if !errors.Is(err, ErrTarget) || !strings.Contains(err.Error(), `"tiered"`) {
		t.Errorf("samsa-cluster@tiered: %v", err)
	}
}

// TestWithTopicConfigs: a tiered target's topic configs are added where the
// workload has none of its own, the workload itself is left as it is, and the note
// names what was added and the segment size.
func TestWithTopicConfigs(t *testing.T) {
	w := &Workload{TopicConfigs: map[string]string{"segment.bytes": "1048576", "local.retention.bytes": "2097152"}}
	got, note := withTopicConfigs(w, tieredTopicConfigs)
	if got.TopicConfigs["remote.storage.enable"] != "true" || got.TopicConfigs["local.retention.bytes"] != "2097152" ||
		got.TopicConfigs["segment.bytes"] != "1048576" || len(got.TopicConfigs) != 3 {
		t.Errorf("topic configs %v", got.TopicConfigs)
	}
	if len(w.TopicConfigs) != 2 {
		t.Errorf("the workload's own configs changed: %v", w.TopicConfigs)
	}
	if !strings.Contains(note, "remote.storage.enable=true besides") || strings.Contains(note, "local.retention.bytes=4194304") || !strings.Contains(note, "(segment.bytes 1048576)") {
		t.Errorf("note %q", note)
	}
	got, note = withTopicConfigs(&Workload{}, tieredTopicConfigs)
	if got.TopicConfigs["local.retention.bytes"] != "4194304" || !strings.Contains(note, "--topic-config segment.bytes=") {
		t.Errorf("without segment.bytes: %v, note %q", got.TopicConfigs, note)
	}
}

func TestScrapeSums(t *testing.T) {
	page := `# HELP samsa_remote_copy_bytes_total Bytes of segments copied to remote storage, per topic [RemoteCopyBytesPerSec].
# TYPE samsa_remote_copy_bytes_total counter
samsa_remote_copy_bytes_total{topic="a"} 1.048576e+06
samsa_remote_copy_bytes_total{topic="b"} 2048 1700000000000
samsa_remote_copy_bytes_total_other 7
samsa_remote_copy_lag_bytes{partition="0",topic="a b}"} 10
samsa_remote_copy_lag_bytes{partition="1",topic="a"} 5
samsa_remote_copy_errors_total 3
`
	v := scrapeSums([]byte(page), "samsa_remote_copy_bytes_total", "samsa_remote_copy_lag_bytes", "samsa_remote_copy_errors_total", "samsa_remote_fetch_bytes_total")
	if want := []float64{1048576 + 2048, 15, 3, 0}; !slices.Equal(v, want) {
		t.Errorf("sums %v, want %v", v, want)
	}
}

// TestTieredTargetCopiesInWindow runs latency-20k for a few seconds, A B, against a
// samsa and a samsa@tiered that Compare starts, the topics in 256 KiB segments on
// both: the tiered round copies segments during its measured window and says how
// many, the plain round has no copies and the same topic configs but the tiered
// ones. A tiered round with the broker's 1 GiB segments copies nothing and fails.
func TestTieredTargetCopiesInWindow(t *testing.T) {
	if _, err := versitygw.Binary(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	bin := samsaBinary(t)
	w, err := LoadWorkload("latency-20k")
	if err != nil {
		t.Fatal(err)
	}
	w.Warmup, w.Duration = Duration(time.Second), Duration(4*time.Second)
	w.TopicConfigs = map[string]string{"segment.bytes": "262144"} // a roll a partition every 0.8 s
	work := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rs, err := Compare(ctx, CompareConfig{Workload: w, Targets: []string{"samsa@sync=none", "samsa@tiered@sync=none"}, Rounds: 1,
		Spawn: SpawnOptions{SamsaBin: bin, WorkDir: work}, Progress: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("%d results", len(rs))
	}
	plain, tiered := rs[0], rs[1]
	for _, r := range rs {
		for _, n := range r.Notes {
			t.Logf("%s: %s", r.Target, n)
		}
		if r.Failed != "" {
			t.Fatalf("%s failed: %s", r.Target, r.Failed)
		}
	}
	c := tiered.Copies
	if c == nil {
		t.Fatal("no copy figures on the tiered target")
	}
	if c.Segments < 2 || c.Bytes < 2*200_000 || c.Active < 1 || c.Seconds < 3 || c.Errors != 0 || c.Sec < 3 || c.LagMax < c.LagEnd {
		t.Errorf("copies in the window %+v", c)
	}
	if !slices.ContainsFunc(tiered.Notes, func(n string) bool { return strings.HasPrefix(n, "tiered copies in the measured window") }) ||
		!slices.ContainsFunc(tiered.Notes, func(n string) bool { return strings.HasPrefix(n, "tiered: versitygw as the object store") }) {
		t.Errorf("tiered notes %q", tiered.Notes)
	}
	if plain.Copies != nil || plain.Config.TopicConfigs["remote.storage.enable"] != "" {
		t.Errorf("plain target: copies %+v, topic configs %v", plain.Copies, plain.Config.TopicConfigs)
	}
	tc := tiered.Config.TopicConfigs
	if tc["remote.storage.enable"] != "true" || tc["local.retention.bytes"] != "4194304" || tc["segment.bytes"] != plain.Config.TopicConfigs["segment.bytes"] {
		t.Errorf("tiered topic configs %v, plain %v", tc, plain.Config.TopicConfigs)
	}
	if plain.PublishLatency.Count == 0 || tiered.PublishLatency.Count == 0 {
		t.Errorf("publish latency counts %d, %d", plain.PublishLatency.Count, tiered.PublishLatency.Count)
	}
	figs := map[string][]string{}
	for _, f := range Figures(rs) {
		for _, s := range f.Stats {
			figs[f.Name] = append(figs[f.Name], s.Target)
		}
	}
	if !slices.Equal(figs["remote copies in the window"], []string{"samsa@tiered@sync=none"}) || len(figs["remote copy lag max"]) != 1 || len(figs["publish p99"]) != 2 {
		t.Errorf("figures %v", figs)
	}

	// The broker's 1 GiB segments: nothing rolls, nothing is copied, the round fails.
	w.Warmup, w.Duration, w.TopicConfigs = 0, Duration(2*time.Second), nil
	rs, err = Compare(ctx, CompareConfig{Workload: w, Targets: []string{"samsa@tiered@sync=none"}, Rounds: 1,
		Spawn: SpawnOptions{SamsaBin: bin, WorkDir: work}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || !strings.HasPrefix(rs[0].Failed, "tiered: nothing copied to remote storage in the measured window") {
		t.Errorf("a round without copies: %+v", rs)
	}
	ents, _ := os.ReadDir(work)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "samsa-bench-objstore-") {
			t.Errorf("object store dir %s left behind", e.Name())
		}
	}
}
