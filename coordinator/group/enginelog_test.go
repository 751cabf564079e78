package group

import (
	"testing"

	"github.com/samsa-broker/samsa/engine"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestEngineLogSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	open := func() *engine.Manager {
		m, err := engine.Open(engine.Options{Dirs: []string{dir}, Sync: engine.SyncFsync, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := open()
	h := &harness{t: t, clock: newFakeClock()}
	el := NewEngineLog(m)
	h.c = New(Config{Clock: h.clock, Logger: quietLogger(), InitialRebalanceDelay: -1}, el)
	for p := int32(0); p < h.c.NumPartitions(); p++ {
		if err := h.c.LoadPartition(p); err != nil {
			t.Fatal(err)
		}
	}
	ids, gen := h.stableGroup("g", 1)
	for i := int64(0); i < 300; i++ { // several read chunks' worth of records on replay
		if code := h.commit("g", ids[0], gen, "t", int32(i%7), i, "meta"); code != 0 {
			t.Fatal(kerr.ErrorForCode(code))
		}
	}
	if code := h.commit("simple", "", -1, "u", 0, 77, ""); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	h.c.Close()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	m = open()
	defer m.Close()
	h.c = New(Config{Clock: h.clock, Logger: quietLogger(), InitialRebalanceDelay: -1}, NewEngineLog(m))
	defer h.c.Close()
	for p := int32(0); p < h.c.NumPartitions(); p++ {
		if err := h.c.LoadPartition(p); err != nil {
			t.Fatal(err)
		}
	}
	for p := int32(0); p < 7; p++ {
		want := int64(299 - (299-p)%7)
		got := h.fetch("g", "t", p)
		if got.Offset != want || *got.Metadata != "meta" || got.LeaderEpoch != 7 {
			t.Fatalf("partition %d after reopen: %+v, want offset %d", p, got, want)
		}
	}
	if got := h.fetch("simple", "u", 0); got.Offset != 77 {
		t.Fatalf("simple group after reopen: %+v", got)
	}
	if d := h.describe("g"); d.State != "Stable" || len(d.Members) != 1 {
		t.Fatalf("group after reopen: %+v", d)
	}
	if code := h.heartbeat("g", ids[0], gen, nil); code != 0 {
		t.Fatalf("member after reopen: %v", kerr.ErrorForCode(code))
	}
	lg := m.Log(engine.TopicPartition{Topic: OffsetsTopic, Partition: h.c.PartitionFor("g")})
	if lg == nil || lg.Config().RetentionMs != -1 {
		t.Fatalf("offsets log config: %+v", lg)
	}
}
