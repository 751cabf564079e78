package group

import (
	"testing"

	"github.com/samsa-broker/samsa/engine"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestReplicatedLogSurvivesReopen: a single node's offsets and groups, written
// through its leader replicas, are all loaded again after the engine and the replica
// manager are closed and reopened on the same directory.
func TestReplicatedLogSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	const parts = 4
	start := func() (*replicaNode, *harness) {
		n := newReplicaNode(t, 1, dir)
		n.lead(t, parts, []int32{1}, []int32{1}, 0)
		h := &harness{t: t, clock: newFakeClock()}
		h.c = New(Config{NumPartitions: parts, Clock: h.clock, Logger: quietLogger(), InitialRebalanceDelay: -1}, NewReplicatedLog(n.m, 0))
		loadAll(t, h.c)
		return n, h
	}
	n, h := start()
	ids, gen := h.stableGroup("g", 1)
	for i := int64(0); i < 300; i++ { // one batch per commit
		if code := h.commit("g", ids[0], gen, "t", int32(i%7), i, "meta"); code != 0 {
			t.Fatal(kerr.ErrorForCode(code))
		}
	}
	if code := h.commit("simple", "", -1, "u", 0, 77, ""); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	h.c.Close()
	n.close()

	n, h = start()
	defer h.c.Close()
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
	lg := n.eng.Log(engine.TopicPartition{Topic: OffsetsTopic, Partition: h.c.PartitionFor("g")})
	if lg == nil || lg.Config().RetentionMs != -1 {
		t.Fatalf("offsets log config: %+v", lg)
	}
}
