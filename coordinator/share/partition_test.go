package share

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

var t0 = time.Unix(1_000_000, 0)

func testCfg() Config {
	return Config{LockDuration: 10 * time.Second, DeliveryLimit: 3, MaxInFlight: 10}
}

func TestPartitionAcquireDistinct(t *testing.T) {
	p := NewPartition(testCfg(), 5)
	if got := p.NextFetchOffset(); got != 5 {
		t.Fatalf("next fetch offset %d, want 5", got)
	}
	a := p.Acquire("m1", 5, 9, 0, t0)
	if !slices.Equal(a, []Range{{5, 8, 1}}) {
		t.Fatalf("m1 acquired %v", a)
	}
	// A second member reading the same bytes gets nothing already held.
	if b := p.Acquire("m2", 5, 9, 0, t0); len(b) != 0 {
		t.Fatalf("m2 acquired %v of m1's records", b)
	}
	// max bounds what one fetch takes; the window bounds the rest.
	if b := p.Acquire("m2", 9, 100, 2, t0); !slices.Equal(b, []Range{{9, 10, 1}}) {
		t.Fatalf("m2 acquired %v", b)
	}
	if b := p.Acquire("m2", 11, 100, 0, t0); !slices.Equal(b, []Range{{11, 14, 1}}) {
		t.Fatalf("m2 acquired %v, want up to the window's end 14", b)
	}
	if got := p.NextFetchOffset(); got != -1 {
		t.Fatalf("full window: next fetch offset %d, want -1", got)
	}
	if p.Acquired("m1") != 4 || p.Acquired("m2") != 6 {
		t.Fatalf("acquired m1 %d m2 %d", p.Acquired("m1"), p.Acquired("m2"))
	}
}

func TestPartitionAcknowledge(t *testing.T) {
	p := NewPartition(testCfg(), 0)
	p.Acquire("m1", 0, 6, 0, t0)
	// Another member may not acknowledge m1's records; nothing is applied.
	if _, err := p.Acknowledge("m2", 0, 0, []AckType{AckAccept}, false, t0); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("foreign ack: %v", err)
	}
	if _, err := p.Acknowledge("m1", 2, 1, []AckType{AckAccept}, false, t0); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("reversed batch: %v", err)
	}
	if _, err := p.Acknowledge("m1", 0, 2, []AckType{AckAccept, AckAccept}, false, t0); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("wrong type count: %v", err)
	}
	if _, err := p.Acknowledge("m1", 0, 0, []AckType{AckRenew}, false, t0); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("renew not allowed: %v", err)
	}
	// accept 0, release 1, reject 2, gap 3.
	changed, err := p.Acknowledge("m1", 0, 3, []AckType{AckAccept, AckRelease, AckReject, AckGap}, false, t0)
	if err != nil || !changed {
		t.Fatalf("ack: %v %v", changed, err)
	}
	if p.Start() != 1 {
		t.Fatalf("start %d, want 1 (offset 1 released)", p.Start())
	}
	for o, want := range map[int64]State{1: Available, 2: Archived, 3: Archived, 4: Acquired} {
		if s, _ := p.StateOf(o); s != want {
			t.Fatalf("offset %d: %v, want %v", o, s, want)
		}
	}
	// The released record is redelivered with a higher count.
	if a := p.Acquire("m2", p.NextFetchOffset(), 6, 0, t0); !slices.Equal(a, []Range{{1, 1, 2}}) {
		t.Fatalf("redelivery %v", a)
	}
	// Acknowledging twice is refused.
	if _, err := p.Acknowledge("m1", 0, 0, []AckType{AckAccept}, false, t0); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("second ack: %v", err)
	}
	if _, err := p.Acknowledge("m2", 1, 1, []AckType{AckAccept}, false, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Acknowledge("m1", 4, 5, []AckType{AckAccept}, false, t0); err != nil {
		t.Fatal(err)
	}
	if p.Start() != 6 || p.End() != 6 {
		t.Fatalf("start %d end %d, want 6 6", p.Start(), p.End())
	}
}

func TestPartitionLockExpiryAndDeliveryLimit(t *testing.T) {
	cfg := testCfg()
	p := NewPartition(cfg, 0)
	now := t0
	p.Acquire("m1", 0, 2, 0, now)
	if d := p.NextDeadline(); !d.Equal(now.Add(cfg.LockDuration)) {
		t.Fatalf("deadline %v", d)
	}
	// Renew moves the deadline.
	now = now.Add(5 * time.Second)
	if changed, err := p.Acknowledge("m1", 1, 1, []AckType{AckRenew}, true, now); err != nil || changed {
		t.Fatalf("renew: %v %v", changed, err)
	}
	now = t0.Add(cfg.LockDuration)
	if rel, arch := p.Expire(now); !rel || arch {
		t.Fatalf("expire: released %v archived %v", rel, arch)
	}
	if s, _ := p.StateOf(0); s != Available {
		t.Fatalf("offset 0 after its lock expired: %v", s)
	}
	if s, _ := p.StateOf(1); s != Acquired {
		t.Fatalf("renewed offset 1: %v", s)
	}
	// Deliveries 2 and 3 of offset 0 expire too; the third reaches the limit: archived,
	// and the start moves past it.
	var archived bool
	for i := 2; i <= cfg.DeliveryLimit; i++ {
		a := p.Acquire("m2", 0, 1, 0, now)
		if !slices.Equal(a, []Range{{0, 0, int16(i)}}) {
			t.Fatalf("delivery %d: %v", i, a)
		}
		now = now.Add(cfg.LockDuration)
		_, archived = p.Expire(now)
	}
	if !archived || p.Start() != 1 {
		t.Fatalf("after %d deliveries: archived %v, start %d, want 1", cfg.DeliveryLimit, archived, p.Start())
	}
	if s, c := p.StateOf(1); s != Available || c != 1 {
		t.Fatalf("offset 1 after its renewed lock expired: %v count %d", s, c)
	}
}

func TestPartitionReleaseMemberAndMoveStart(t *testing.T) {
	p := NewPartition(testCfg(), 0)
	p.Acquire("m1", 0, 3, 0, t0)
	p.Acquire("m2", 3, 5, 0, t0)
	if rel, _ := p.ReleaseMember("m1"); !rel {
		t.Fatal("nothing released")
	}
	if p.Acquired("m1") != 0 || p.Acquired("m2") != 2 {
		t.Fatalf("acquired after release: m1 %d m2 %d", p.Acquired("m1"), p.Acquired("m2"))
	}
	if !p.MoveStart(4) || p.Start() != 4 || p.End() != 5 {
		t.Fatalf("move start: start %d end %d", p.Start(), p.End())
	}
	if !p.MoveStart(20) || p.Start() != 20 || p.End() != 20 || p.NextFetchOffset() != 20 {
		t.Fatalf("move past the end: start %d end %d", p.Start(), p.End())
	}
}

func TestPartitionSnapshotRestore(t *testing.T) {
	cfg := testCfg()
	p := NewPartition(cfg, 100)
	p.Acquire("m1", 100, 108, 0, t0)
	p.Acknowledge("m1", 101, 102, []AckType{AckAccept}, false, t0)
	p.Acknowledge("m1", 103, 103, []AckType{AckReject}, false, t0)
	p.Acknowledge("m1", 104, 104, []AckType{AckRelease}, false, t0)
	start, batches := p.Snapshot()
	want := []Batch{{100, 100, Available, 1}, {101, 102, Acknowledged, 1}, {103, 103, Archived, 1}, {104, 107, Available, 1}}
	if start != 100 || !slices.Equal(batches, want) {
		t.Fatalf("snapshot %d %v", start, batches)
	}
	// The value round-trips through the record encoding.
	v, err := DecodeValue(AppendValue(nil, &Snapshot{LeaderEpoch: 3, StartOffset: start, Batches: batches}))
	if err != nil || v.LeaderEpoch != 3 || !slices.Equal(v.Batches, batches) {
		t.Fatalf("value round trip: %+v %v", v, err)
	}
	q := Restore(cfg, v.StartOffset, v.Batches)
	// Nothing is acquired after a restore; acknowledged and archived stay done.
	if q.Acquired("") != 0 || q.Start() != 100 || q.End() != 108 {
		t.Fatalf("restored start %d end %d acquired %d", q.Start(), q.End(), q.Acquired(""))
	}
	a := q.Acquire("m2", q.NextFetchOffset(), 110, 0, t0)
	want2 := []Range{{100, 100, 2}, {104, 107, 2}, {108, 109, 1}}
	if !slices.Equal(a, want2) {
		t.Fatalf("after restore acquired %v, want %v", a, want2)
	}
}

func TestKeyRoundTripAndCorruption(t *testing.T) {
	k := Key{Group: "g", TopicID: [16]byte{1, 2, 3}, Partition: 7}
	got, err := DecodeKey(AppendKey(nil, k))
	if err != nil || got != k {
		t.Fatalf("key round trip: %v %v", got, err)
	}
	for _, b := range [][]byte{nil, {0, 0, 0, 200}, {0, 1, 0, 0}} {
		if _, err := DecodeKey(b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("DecodeKey(%x): %v", b, err)
		}
	}
	v := AppendValue(nil, &Snapshot{Batches: []Batch{{1, 2, Acknowledged, 1}}})
	v[29] = 0xff // the batch count
	if _, err := DecodeValue(v); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("DecodeValue with a lying count: %v", err)
	}
	if p := PartitionFor(k, 50); p < 0 || p >= 50 {
		t.Fatalf("partition %d", p)
	}
}

func FuzzDecodeValue(f *testing.F) {
	f.Add(AppendValue(nil, &Snapshot{StartOffset: 3, Batches: []Batch{{3, 9, Archived, 2}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := DecodeValue(b)
		if err != nil {
			return
		}
		p := Restore(testCfg(), v.StartOffset, v.Batches)
		if p.End()-p.Start() > int64(testCfg().MaxInFlight)*8+1 {
			t.Fatalf("restored a window of %d", p.End()-p.Start())
		}
	})
}

// Restore of damaged offsets (a negative start, offsets whose signed distance
// overflows) allocates nothing beyond its limits: the window is refused.
func TestRestoreOverflowingOffsets(t *testing.T) {
	for _, c := range []struct {
		start int64
		b     Batch
	}{
		{math.MinInt64 / 2 * 3 / 2, Batch{First: math.MaxInt64 / 2, Last: math.MaxInt64 / 2, State: Acknowledged}},
		{0, Batch{First: 0, Last: math.MaxInt64, State: Archived}},
		{-1, Batch{First: math.MinInt64, Last: math.MaxInt64, State: Available}},
	} {
		p := Restore(testCfg(), c.start, []Batch{c.b})
		if n := len(p.recs); n > testCfg().MaxInFlight*8 {
			t.Fatalf("start %d, batch %+v: %d records in flight", c.start, c.b, n)
		}
	}
}
