package bench

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/samsa-broker/samsa/internal/versitygw"
)

// TestTieredCatchupSpawnedSamsa runs the tiered-catchup workload end to end on a
// tiny backlog (16 MiB in 1 MiB segments over 2 partitions) against a samsa that
// Compare starts with a versitygw as its object store: the copies are waited for,
// the backlog is drained locally, local retention moves the local log start, and the
// remote read and the local tail read every record once more.
func TestTieredCatchupSpawnedSamsa(t *testing.T) {
	if _, err := versitygw.Binary(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	bin := samsaBinary(t)
	w, err := LoadWorkload("tiered-catchup")
	if err != nil {
		t.Fatal(err)
	}
	w.PartitionsPerTopic, w.ConsumerBacklogSizeGB, w.Duration = 2, 16.0/1024, Duration(60*time.Second)
	w.TopicConfigs["segment.bytes"], w.TopicConfigs["local.retention.bytes"] = "1048576", "1048576"
	w.BrokerConfigs["remote.log.manager.task.interval.ms"], w.BrokerConfigs["log.retention.check.interval.ms"] = "200", "200"
	work := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rs, err := Compare(ctx, CompareConfig{Workload: w, Targets: []string{"samsa@sync=none"}, Rounds: 1,
		Spawn:     SpawnOptions{SamsaBin: bin, WorkDir: work},
		RawConfig: RawConfig{Connections: 1, InFlight: 4, RecordsPerBatch: 100}, Progress: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Mode != "raw" || rs[0].Failed != "" {
		for _, r := range rs {
			t.Logf("%s %s: failed %q", r.Target, r.Mode, r.Failed)
		}
		t.Fatalf("%d results (a tiered catch-up is raw only)", len(rs))
	}
	r, f := rs[0], rs[0].Tiered
	for _, n := range r.Notes {
		t.Log(n)
	}
	if f == nil {
		t.Fatal("no tiered figures")
	}
	if f.Records < 10000 || f.Local.Records != f.Records || f.Remote.Records+f.Tail.Records != f.Records || !r.CaughtUp || r.Errors != 0 {
		t.Errorf("backlog %d: local drain %d, remote %d + tail %d, caught up %v, errors %d", f.Records, f.Local.Records, f.Remote.Records, f.Tail.Records, r.CaughtUp, r.Errors)
	}
	// 8 MiB a partition in 1 MiB segments, 1 MiB kept locally: most of it is remote.
	if f.Remote.Records < f.Records/2 || f.Remote.Rate <= 0 || f.Local.Rate <= 0 || f.RemoteShare != f.Remote.Rate/f.Local.Rate {
		t.Errorf("remote read %+v, local drain %+v, share %v", f.Remote, f.Local, f.RemoteShare)
	}
	if r.ConsRate != f.Remote.Rate || r.Broker == nil || r.Broker.PerWhat != "consumed" || f.ObjectStoreCPUs < 0 {
		t.Errorf("window rate %v, broker %+v, object store CPU %v", r.ConsRate, r.Broker, f.ObjectStoreCPUs)
	}
	if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.HasPrefix(n, "remote read: ") }) {
		t.Errorf("notes %q", r.Notes)
	}
	figs := map[string]bool{}
	for _, fg := range Figures(rs) {
		figs[fg.Name] = true
	}
	if !figs["remote read rate"] || !figs["local drain rate"] || !figs["remote read / local drain"] {
		t.Errorf("figures %v", figs)
	}
	ents, _ := os.ReadDir(work)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "samsa-bench-objstore-") {
			t.Errorf("object store dir %s left behind", e.Name())
		}
	}
}

// testWriter sends progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// TestTieredReadBackSpawnedSamsa runs the tiered-readback workload end to end on
// 32 MiB over 2 partitions in 1 MiB segments, with local.retention.bytes 1.6 MiB a
// partition (10x the topic's local retention, most of it only in remote storage),
// against a samsa that Compare starts with a versitygw as its object store: every
// record of the fill is numbered and its acknowledgement kept, and a franz-go
// consumer and kcat each read every acknowledged record back from offset 0, once
// and in order (PASS).
func TestTieredReadBackSpawnedSamsa(t *testing.T) {
	for _, need := range []func() error{
		func() error { _, err := versitygw.Binary(); return err },
		func() error { _, err := exec.LookPath("kcat"); return err },
	} {
		if err := need(); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal(err)
			}
			t.Skip(err)
		}
	}
	bin := samsaBinary(t)
	w, err := LoadWorkload("tiered-readback")
	if err != nil {
		t.Fatal(err)
	}
	if !w.ReadBack {
		t.Fatal("tiered-readback has no readBack")
	}
	w.PartitionsPerTopic, w.ConsumerBacklogSizeGB, w.Duration = 2, 32.0/1024, Duration(90*time.Second)
	w.TopicConfigs["segment.bytes"], w.TopicConfigs["local.retention.bytes"] = "1048576", "1677721"
	w.BrokerConfigs["remote.log.manager.task.interval.ms"], w.BrokerConfigs["log.retention.check.interval.ms"] = "200", "200"
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rs, err := Compare(ctx, CompareConfig{Workload: w, Targets: []string{"samsa@sync=none"}, Rounds: 1,
		Spawn:     SpawnOptions{SamsaBin: bin, WorkDir: t.TempDir()},
		RawConfig: RawConfig{Connections: 2, InFlight: 4, RecordsPerBatch: 100}, Progress: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Failed != "" || rs[0].Tiered == nil {
		for _, r := range rs {
			t.Logf("%s %s: failed %q", r.Target, r.Mode, r.Failed)
		}
		t.Fatalf("%d results", len(rs))
	}
	r, f := rs[0], rs[0].Tiered
	for _, n := range r.Notes {
		t.Log(n)
	}
	if f.Records < 30000 || f.Remote.Records < f.Records*3/4 || !r.CaughtUp || r.Errors != 0 {
		t.Errorf("backlog %d: remote %d + tail %d, caught up %v, errors %d", f.Records, f.Remote.Records, f.Tail.Records, r.CaughtUp, r.Errors)
	}
	if len(f.ReadBack) != 2 || f.ReadBack[0].Reader != "franz-go" || f.ReadBack[1].Reader != "kcat" {
		t.Fatalf("read-backs %+v", f.ReadBack)
	}
	for _, rb := range f.ReadBack {
		if !rb.Pass || rb.Records != f.Records || rb.Acked != f.Records || rb.Remote != f.Remote.Records || rb.Bytes != f.Records*int64(w.MessageSize) || rb.Rate <= 0 || rb.Discrepancies != 0 {
			t.Errorf("read-back %+v", rb)
		}
	}
	rep := &Report{Results: rs}
	if probs := rep.Problems(); len(probs) != 0 || !f.ReadBackPassed() {
		t.Errorf("problems %q", probs)
	}
	figs := map[string]bool{}
	for _, fg := range Figures(rs) {
		figs[fg.Name] = true
	}
	if !figs["franz-go read-back rate"] || !figs["kcat read-back rate"] {
		t.Errorf("figures %v", figs)
	}
}
