package engine

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// cleanModel is what the log must hold after each pass: every write, and
// which of them the cleaner may have removed by Kafka's rules.
type cleanModel struct {
	writes    map[int64]kv    // offset → the record written there
	removed   map[int64]bool  // removed by a pass (never comes back)
	horizon   map[int64]int64 // tombstone → its delete horizon, once a pass kept it
	retention int64
}

func newCleanModel(retention int64) *cleanModel {
	return &cleanModel{writes: map[int64]kv{}, removed: map[int64]bool{}, horizon: map[int64]int64{}, retention: retention}
}

// pass applies one cleaning to end (the first dirty offset after it) at now.
func (cm *cleanModel) pass(end, now int64) {
	last := map[string]int64{}
	for o, w := range cm.writes {
		if o < end && !w.noKey {
			if cur, ok := last[w.key]; !ok || o > cur {
				last[w.key] = o
			}
		}
	}
	for o, w := range cm.writes {
		if o >= end || cm.removed[o] {
			continue
		}
		switch {
		case w.noKey:
			cm.removed[o] = true
		case last[w.key] != o:
			cm.removed[o] = true
		case w.value == nil:
			if hz, ok := cm.horizon[o]; !ok {
				cm.horizon[o] = now + cm.retention
			} else if now >= hz {
				cm.removed[o] = true
			}
		}
	}
}

// check compares the log's records with the model.
func (cm *cleanModel) check(t *testing.T, l *Log, what string) {
	t.Helper()
	_, recs := readLog(t, l)
	got := map[int64]logRecord{}
	for _, r := range recs {
		got[r.offset] = r
	}
	for o, w := range cm.writes {
		r, ok := got[o]
		if cm.removed[o] || o < l.LogStartOffset() {
			if ok {
				t.Fatalf("%s: offset %d (key %q) should be gone", what, o, w.key)
			}
			continue
		}
		if !ok {
			t.Fatalf("%s: offset %d (key %q, tombstone %v) is missing", what, o, w.key, w.value == nil)
		}
		if r.noKey != w.noKey || r.key != w.key || r.tomb != (w.value == nil) || !bytes.Equal(r.value, w.value) || r.ts != w.ts {
			t.Fatalf("%s: offset %d holds %q=%q (ts %d), want %q=%q (ts %d)", what, o, r.key, r.value, r.ts, w.key, w.value, w.ts)
		}
	}
	if len(got) != len(cm.writes)-len(cm.removed) {
		t.Fatalf("%s: %d records, want %d", what, len(got), len(cm.writes)-len(cm.removed))
	}
}

// TestCleanerModel drives a seeded workload of overwrites, tombstones and
// keyless records, in every codec, with passes in between, and checks
// after each pass that the log holds exactly what Kafka's rules leave:
// below the cleaned point, the last record of each key (a tombstone until
// delete.retention.ms after the pass that first kept it), at its offset;
// above it, everything. A small offset map (partial passes) and a large
// one; a restart at the end.
func TestCleanerModel(t *testing.T) {
	writes := 1200
	if os.Getenv("SAMSA_LONG") != "" {
		writes = 12000
	}
	for codec := codecNone; codec <= codecZstd; codec++ {
		for _, dedupe := range []int64{24 * 37, 1 << 20} {
			t.Run(fmt.Sprintf("%s/map=%d", codecName(codec), dedupe), func(t *testing.T) {
				runCleanerModel(t, int64(codec)*7+dedupe, codec, dedupe, writes)
			})
		}
	}
}

func runCleanerModel(t *testing.T, seed int64, codec int, dedupe int64, writes int) {
	dir := t.TempDir()
	clk := newFakeClock(1_000_000)
	opts := Options{Dirs: []string{dir}, Sync: SyncNone, Now: clk.now, manualBackground: true,
		Cleaner: CleanerOptions{DedupeBufferSize: dedupe}}
	m, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	cfg := compactConfig()
	cfg.DeleteRetentionMs = 300
	tp := TopicPartition{"model", 0}
	l, err := m.CreateLog(tp, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(seed))
	cm := newCleanModel(cfg.DeleteRetentionMs)
	passes := 0
	for w := 0; w < writes; {
		n := 1 + rng.Intn(8)
		recs := make([]kv, n)
		for i := range recs {
			k := fmt.Sprintf("k%02d", rng.Intn(40))
			recs[i] = kv{key: k, value: valueOf(k, w+i), ts: clk.ms.Load()}
			switch x := rng.Intn(100); {
			case x < 10:
				recs[i].value = nil
			case x < 12:
				recs[i].noKey, recs[i].key = true, ""
			}
		}
		res := mustAppend(t, l, keyedBatch(t, recs, batchOpts{codec: codec, baseTs: clk.ms.Load()}))
		for i, r := range recs {
			cm.writes[res.BaseOffset+int64(i)] = r
		}
		w += n
		clk.advance(7)
		if rng.Intn(25) == 0 {
			l.SetHighWatermark(l.LogEndOffset())
			now := clk.ms.Load()
			compactNow(t, m)
			passes++
			cm.pass(l.firstDirty.Load(), now)
			cm.check(t, l, fmt.Sprintf("pass %d", passes))
		}
	}
	l.SetHighWatermark(l.LogEndOffset())
	for i := 0; i < 3; i++ { // the last passes expire the tombstones kept so far
		clk.advance(cfg.DeleteRetentionMs)
		now := clk.ms.Load()
		compactNow(t, m)
		cm.pass(l.firstDirty.Load(), now)
		cm.check(t, l, "final pass")
	}
	st := m.CleanerStats()
	if st.Passes == 0 || st.BytesWritten == 0 || st.RecordsRetained >= st.RecordsRead {
		t.Fatalf("stats: %+v", st)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l = m.Log(tp)
	l.SetConfig(cfg)
	cm.check(t, l, "after a restart")
	if got := l.firstDirty.Load(); got <= 0 {
		t.Fatalf("cleaner checkpoint not reloaded: %d", got)
	}
	t.Logf("%s: %d writes, %d passes, %d records kept, %d segments", codecName(codec), len(cm.writes), passes+3,
		len(cm.writes)-len(cm.removed), segmentCount(l))
}

// TestCleanerKeepsOffsetsAndProducers checks that compaction keeps the
// offsets, and that idempotent producer state rebuilt from a compacted log
// (its snapshots removed) is the state before: a producer's last batch
// keeps its header even when compaction removed all its records.
func TestCleanerKeepsOffsetsAndProducers(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dirs: []string{dir}, Sync: SyncNone, manualBackground: true}
	m, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{"prod", 0}
	l, err := m.CreateLog(tp, compactConfig())
	if err != nil {
		t.Fatal(err)
	}
	// Producers 7 and 8 write key a; 9 writes key b last, then 7 again
	// writes a (so 7's earlier batches go, its last stays).
	seqs := map[int64]int32{}
	appendP := func(pid int64, key string, n int) AppendResult {
		recs := make([]kv, n)
		for i := range recs {
			recs[i] = kv{key: key, value: valueOf(key, int(seqs[pid])+i)}
		}
		res := mustAppend(t, l, keyedBatch(t, recs, batchOpts{pid: pid, epoch: 1, seq: seqs[pid], baseTs: 1000}))
		seqs[pid] += int32(n)
		return res
	}
	for i := 0; i < 30; i++ {
		appendP(7, "a", 3)
		appendP(8, "a", 2)
		appendP(9, "b", 4)
	}
	last8 := appendP(8, "a", 2)
	appendP(7, "a", 5)
	appendP(9, "c", 1)
	for i := 0; i < 40; i++ { // supersede everything of 8, and roll past it
		mustAppend(t, l, keyedBatch(t, []kv{{key: "a", value: []byte("x")}, {key: "b", value: []byte("y")}}, batchOpts{baseTs: 2000}))
	}
	l.SetHighWatermark(l.LogEndOffset())
	before := map[int64][2]int32{}
	for _, pid := range []int64{7, 8, 9} {
		e, s, ok := l.ProducerState(pid)
		if !ok {
			t.Fatalf("producer %d unknown", pid)
		}
		before[pid] = [2]int32{int32(e), s}
	}
	compactNow(t, m)
	hs, _ := readLog(t, l)
	var found8 bool
	for _, h := range hs {
		if h.ProducerID == 8 && h.LastOffset() == last8.LastOffset {
			found8 = true
			if h.NumRecords != 0 || h.BaseOffset != last8.BaseOffset || h.BaseSequence != seqs[8]-2 || h.LastSequence() != seqs[8]-1 {
				t.Fatalf("producer 8's last batch: %+v", h)
			}
		}
	}
	if !found8 {
		t.Fatal("producer 8's last batch (emptied by compaction) is gone")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	snaps, _ := filepath.Glob(filepath.Join(dir, tp.String(), "*.snapshot"))
	for _, s := range snaps {
		os.Remove(s)
	}
	m, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l = m.Log(tp)
	for pid, want := range before {
		e, s, ok := l.ProducerState(pid)
		if !ok || e != int16(want[0]) || s != want[1] {
			t.Fatalf("producer %d after compaction and restart: epoch %d seq %d (%v), want %v", pid, e, s, ok, want)
		}
	}
	// The producers go on: the next sequence is taken, a retry is a duplicate.
	res := appendP(8, "a", 1)
	if res.Duplicate {
		t.Fatal("new batch taken for a duplicate")
	}
	seqs[8]--
	if dup := appendP(8, "a", 1); !dup.Duplicate || dup.BaseOffset != res.BaseOffset {
		t.Fatalf("retry after compaction: %+v, want a duplicate of %+v", dup, res)
	}
}

// TestCleanerDropsEmptiedBatches: a batch compaction empties goes, as in Kafka's
// cleaner, unless it is a producer's last (TestCleanerKeepsOffsetsAndProducers) or the
// last of the round: the last batches of the round's other segment groups are not kept
// as empty headers (librdkafka 2.0 reports a run of empty batches as a message too
// large to fetch).
func TestCleanerDropsEmptiedBatches(t *testing.T) {
	m, err := Open(Options{Dirs: []string{t.TempDir()}, Sync: SyncNone, manualBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cfg := compactConfig()
	l, err := m.CreateLog(TopicPartition{"emptied", 0}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Keys a and b, over and over, in many segments: after a pass only the last value
	// of each key is left in the cleaned part.
	for i := 0; i < 400; i++ {
		mustAppend(t, l, keyedBatch(t, []kv{{key: "a", value: valueOf("a", i)}, {key: "b", value: valueOf("b", i)}}, batchOpts{baseTs: 1000}))
	}
	l.SetHighWatermark(l.LogEndOffset())
	compactNow(t, m)
	hs, _ := readLog(t, l)
	empty := 0
	for _, h := range hs {
		if h.NumRecords == 0 {
			empty++
		}
	}
	if empty > 1 {
		t.Fatalf("after compaction %d batches, %d of them empty: want at most the round's last batch empty", len(hs), empty)
	}
}

// TestCleanerTombstoneExpiry: a tombstone stays delete.retention.ms after
// the pass that first kept it, then a later pass removes it; its key's
// older values go at the first pass.
func TestCleanerTombstoneExpiry(t *testing.T) {
	clk := newFakeClock(1_000_000)
	m, err := Open(Options{Dirs: []string{t.TempDir()}, Sync: SyncNone, Now: clk.now, manualBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cfg := compactConfig()
	cfg.DeleteRetentionMs = 10_000
	l, _ := m.CreateLog(TopicPartition{"tomb", 0}, cfg)
	for i := 0; i < 20; i++ {
		mustAppend(t, l, keyedBatch(t, []kv{{key: "gone", value: valueOf("gone", i)}, {key: "kept", value: valueOf("kept", i)}}, batchOpts{baseTs: 5}))
	}
	tomb := mustAppend(t, l, keyedBatch(t, []kv{{key: "gone"}}, batchOpts{baseTs: 6}))
	for i := 0; i < 40; i++ { // roll the tombstone out of the active segment
		mustAppend(t, l, keyedBatch(t, []kv{{key: "kept", value: valueOf("kept", 100+i)}}, batchOpts{baseTs: 7}))
	}
	l.SetHighWatermark(l.LogEndOffset())
	has := func() (tombstone bool, gone int) {
		_, recs := readLog(t, l)
		for _, r := range recs {
			if r.key == "gone" {
				if r.tomb {
					tombstone = r.offset == tomb.BaseOffset
				} else {
					gone++
				}
			}
		}
		return
	}
	compactNow(t, m)
	if tb, n := has(); !tb || n != 0 {
		t.Fatalf("after the first pass: tombstone %v, %d old values", tb, n)
	}
	hs, _ := readLog(t, l)
	for _, h := range hs {
		if h.BaseOffset == tomb.BaseOffset {
			if hz, ok := h.DeleteHorizon(); !ok || hz != 1_000_000+10_000 {
				t.Fatalf("delete horizon %d %v", hz, ok)
			}
		}
	}
	clk.advance(9_999)
	compactNow(t, m)
	if tb, _ := has(); !tb {
		t.Fatal("tombstone removed before delete.retention.ms")
	}
	clk.advance(1)
	compactNow(t, m)
	if tb, _ := has(); tb {
		t.Fatal("tombstone kept past delete.retention.ms")
	}
}

// TestCleanerLagBounds: min.compaction.lag.ms keeps recent segments out of
// a pass; max.compaction.lag.ms makes a log below its dirty ratio
// cleanable, and rolls the active segment.
func TestCleanerLagBounds(t *testing.T) {
	clk := newFakeClock(1_000_000)
	m, err := Open(Options{Dirs: []string{t.TempDir()}, Sync: SyncNone, Now: clk.now, manualBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cfg := compactConfig()
	cfg.MinCompactionLagMs = 60_000
	l, _ := m.CreateLog(TopicPartition{"lag", 0}, cfg)
	write := func(n int, ts int64) {
		for i := 0; i < n; i++ {
			mustAppend(t, l, keyedBatch(t, []kv{{key: "k", value: valueOf("k", i), ts: ts}}, batchOpts{baseTs: ts}))
		}
		l.SetHighWatermark(l.LogEndOffset())
	}
	write(100, clk.ms.Load()) // timestamps now: within the lag
	if r, _ := l.cleanableRange(clk.ms.Load()); r.cleanable != 0 {
		t.Fatalf("segments within min.compaction.lag.ms are cleanable: %+v", r)
	}
	if n := compactNow(t, m); n != 0 {
		t.Fatalf("cleaned %d logs within min.compaction.lag.ms", n)
	}
	clk.advance(60_001)
	if r, _ := l.cleanableRange(clk.ms.Load()); r.cleanable == 0 {
		t.Fatalf("nothing cleanable past min.compaction.lag.ms: %+v", r)
	}
	compactNow(t, m)
	if _, recs := readLog(t, l); len(recs) >= 100 {
		t.Fatalf("%d records left", len(recs))
	}

	// max.compaction.lag.ms: a dirty ratio below the minimum, but old.
	cfg.MinCompactionLagMs = 0
	cfg.MinCleanableDirtyRatio = 1 // never by the ratio
	cfg.MaxCompactionLagMs = 120_000
	l.SetConfig(cfg)
	write(80, clk.ms.Load()) // rolls: dirty inactive segments
	if got := m.cl.grab(clk.ms.Load()); got != nil {
		m.cl.done(got, false, nil)
		t.Fatal("grabbed below the dirty ratio before max.compaction.lag.ms")
	}
	clk.advance(120_001)
	got := m.cl.grab(clk.ms.Load())
	if got != l {
		t.Fatal("not grabbed past max.compaction.lag.ms")
	}
	m.cl.done(got, false, nil)
	if st := m.CleanerStats(); st.MaxCompactionDelay <= 0 || st.Logs[0].Lag < 120_000*1e6 {
		t.Fatalf("stats: %+v", st)
	}
	// The active segment rolls once it is older than max.compaction.lag.ms.
	segs := segmentCount(l)
	clk.advance(120_001)
	write(1, clk.ms.Load())
	if segmentCount(l) != segs+1 {
		t.Fatalf("segments %d → %d: no roll past max.compaction.lag.ms", segs, segmentCount(l))
	}
}

// TestCleanerPolicyDelete: cleanup.policy=compact keeps old segments;
// compact,delete applies retention as well.
func TestCleanerPolicyDelete(t *testing.T) {
	clk := newFakeClock(10_000_000)
	m, err := Open(Options{Dirs: []string{t.TempDir()}, Sync: SyncNone, Now: clk.now, manualBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, del := range []bool{false, true} {
		cfg := compactConfig()
		cfg.Delete = del
		cfg.RetentionMs = 1000
		l, _ := m.CreateLog(TopicPartition{fmt.Sprint("policy", del), 0}, cfg)
		for i := 0; i < 60; i++ {
			mustAppend(t, l, keyedBatch(t, []kv{{key: fmt.Sprint(i), value: make([]byte, 100), ts: 1}}, batchOpts{baseTs: 1}))
		}
		l.SetHighWatermark(l.LogEndOffset())
		n, err := l.enforceRetention()
		if err != nil {
			t.Fatal(err)
		}
		if del != (n > 0) {
			t.Fatalf("delete=%v: retention deleted %d segments", del, n)
		}
		compactNow(t, m)
	}
}

// TestCleanerTransactions checks Kafka's rules on transactional data (as
// a follower would receive it; transactions are not served yet): aborted
// data goes at the first pass and never shadows committed data; a marker
// stays while its transaction has data, then until its delete horizon; a
// transaction without a marker stops the cleaning before it.
func TestCleanerTransactions(t *testing.T) {
	clk := newFakeClock(1_000_000)
	m, err := Open(Options{Dirs: []string{t.TempDir()}, Sync: SyncNone, Now: clk.now, manualBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cfg := compactConfig()
	cfg.DeleteRetentionMs = 1000
	l, _ := m.CreateLog(TopicPartition{"txn", 0}, cfg)
	next := int64(0)
	app := func(b []byte) int64 {
		binary := b
		h := parseHeaderUnchecked(binary)
		putBase(binary, next)
		if _, err := l.Append(binary, AppendOptions{Follower: true}); err != nil {
			t.Fatalf("append at %d: %v", next, err)
		}
		off := next
		next += int64(h.LastOffsetDelta) + 1
		return off
	}
	// Producer 1 commits k=committed, producer 2 aborts k=committed
	// (later, so it would shadow it if it entered the map).
	c1 := app(keyedBatch(t, []kv{{key: "k", value: []byte("committed")}}, batchOpts{pid: 1, epoch: 0, seq: 0, transactional: true, baseTs: 10}))
	a2 := app(keyedBatch(t, []kv{{key: "k", value: []byte("aborted")}}, batchOpts{pid: 2, epoch: 0, seq: 0, transactional: true, baseTs: 11}))
	cm1 := app(markerBatch(t, 1, 0, true, 0, 12))
	am2 := app(markerBatch(t, 2, 0, false, 0, 13))
	for i := 0; i < 60; i++ {
		app(keyedBatch(t, []kv{{key: fmt.Sprint("other", i%5), value: make([]byte, 50)}}, batchOpts{baseTs: 20}))
	}
	l.SetHighWatermark(l.LogEndOffset())
	compactNow(t, m)
	offsets := func() map[int64]string {
		out := map[int64]string{}
		_, recs := readLog(t, l)
		for _, r := range recs {
			out[r.offset] = r.key + "=" + string(r.value)
		}
		return out
	}
	got := offsets()
	if got[c1] != "k=committed" {
		t.Fatalf("committed record lost (or shadowed by aborted data): %q", got[c1])
	}
	if _, ok := got[a2]; ok {
		t.Fatal("aborted record kept")
	}
	if _, ok := got[cm1]; !ok {
		t.Fatal("commit marker removed while its transaction has data")
	}
	if _, ok := got[am2]; !ok {
		t.Fatal("abort marker removed before its delete horizon")
	}
	abortedIndexed := func() bool {
		for _, a := range l.AbortedTransactions(0, l.LogEndOffset(), nil) {
			if a.ProducerID == 2 && a.FirstOffset == a2 && a.LastOffset == am2 {
				return true
			}
		}
		return false
	}
	if !abortedIndexed() {
		t.Fatal("the cleaned segment lost the index entry of the abort it keeps")
	}
	// Producer 2's aborted batch stays as an empty batch while it is the
	// producer's last, and with it the marker (Kafka's rules). Once the
	// producer moves on, the batch goes, then the marker gets its delete
	// horizon, and goes past it. The commit marker stays (its data is
	// still there).
	app(keyedBatch(t, []kv{{key: "p2", value: []byte("next")}}, batchOpts{pid: 2, epoch: 0, seq: 1, baseTs: 14}))
	for i := 0; i < 60; i++ {
		app(keyedBatch(t, []kv{{key: fmt.Sprint("other", i%5), value: make([]byte, 50)}}, batchOpts{baseTs: 20}))
	}
	l.SetHighWatermark(l.LogEndOffset())
	compactNow(t, m) // the empty batch goes
	if _, ok := offsets()[am2]; !ok {
		t.Fatal("abort marker removed in the pass that removed its data")
	}
	if !abortedIndexed() {
		t.Fatal("index entry dropped in the pass that removed the last of its data")
	}
	compactNow(t, m) // the marker gets its horizon
	if _, ok := offsets()[am2]; !ok {
		t.Fatal("abort marker removed before its delete horizon")
	}
	if abortedIndexed() {
		t.Fatal("index entry kept for an abort with no data left")
	}
	clk.advance(1001)
	compactNow(t, m)
	got = offsets()
	if _, ok := got[am2]; ok {
		t.Fatal("abort marker kept past its delete horizon")
	}
	if _, ok := got[cm1]; !ok || got[c1] != "k=committed" {
		t.Fatal("commit marker or committed data removed")
	}

	// An open transaction (no marker below the high watermark) bounds
	// the cleaning.
	open := app(keyedBatch(t, []kv{{key: "o", value: []byte("open")}}, batchOpts{pid: 3, epoch: 0, seq: 0, transactional: true, baseTs: 30}))
	for i := 0; i < 60; i++ {
		app(keyedBatch(t, []kv{{key: "other0", value: make([]byte, 50)}}, batchOpts{baseTs: 31}))
	}
	l.SetHighWatermark(l.LogEndOffset())
	compactNow(t, m)
	if fd := l.firstDirty.Load(); fd > open {
		t.Fatalf("cleaned to %d, past the open transaction at %d", fd, open)
	}
}

// putBase sets a batch's base offset (outside the CRC).
func putBase(b []byte, off int64) { stampBatch(b, off, parseHeaderUnchecked(b).PartitionLeaderEpoch) }

// TestCleanerFollowerOfCompactedLeader copies a compacted log to a
// follower log batch by batch, then crashes the follower: the follower has
// the leader's batches, holes and emptied batches included, and recovery
// keeps all of it.
func TestCleanerFollowerOfCompactedLeader(t *testing.T) {
	m, err := Open(Options{Dirs: []string{t.TempDir()}, Sync: SyncNone, manualBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	leader, _ := m.CreateLog(TopicPartition{"leader", 0}, compactConfig())
	for i := 0; i < 300; i++ {
		mustAppend(t, leader, keyedBatch(t, []kv{{key: fmt.Sprint(i % 7), value: valueOf("x", i)}},
			batchOpts{pid: int64(1 + i%3), epoch: 0, seq: int32(i / 3), baseTs: 100}))
	}
	leader.SetHighWatermark(leader.LogEndOffset())
	compactNow(t, m)
	lh, lrecs := readLog(t, leader)

	fdir := t.TempDir()
	fs := vfs.NewCrashFS(vfs.Default)
	fm, err := Open(Options{Dirs: []string{fdir}, Sync: SyncFsync, FS: fs, manualBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg := compactConfig()
	cfg.SegmentBytes = 1500 // rolls at other places than the leader's
	follower, _ := fm.CreateLog(TopicPartition{"f", 0}, cfg)
	var buf []byte
	for off := leader.LogStartOffset(); off < leader.LogEndOffset(); {
		buf, err = leader.ReadCopy(off, 700, leader.LogEndOffset(), true, buf[:0])
		if err != nil || len(buf) == 0 {
			t.Fatalf("leader read at %d: %v", off, err)
		}
		for p := 0; p < len(buf); {
			h := parseHeaderUnchecked(buf[p:])
			if _, err := follower.Append(append([]byte(nil), buf[p:p+int(h.Size())]...), AppendOptions{Follower: true}); err != nil {
				t.Fatalf("follower append %d..%d: %v", h.BaseOffset, h.LastOffset(), err)
			}
			off = h.LastOffset() + 1
			p += int(h.Size())
		}
	}
	if err := follower.Flush(); err != nil {
		t.Fatal(err)
	}
	fs.Crash()
	fm.abandon()
	fs.Restart()
	fm, err = Open(Options{Dirs: []string{fdir}, Sync: SyncFsync, FS: fs, manualBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fm.Close()
	follower = fm.Log(TopicPartition{"f", 0})
	fh, frecs := readLog(t, follower)
	if len(fh) != len(lh) || len(frecs) != len(lrecs) || follower.LogEndOffset() != leader.LogEndOffset() {
		t.Fatalf("follower after a crash: %d batches, %d records, end %d; leader %d, %d, %d",
			len(fh), len(frecs), follower.LogEndOffset(), len(lh), len(lrecs), leader.LogEndOffset())
	}
	for i := range fh {
		if fh[i].CRC != lh[i].CRC || fh[i].BaseOffset != lh[i].BaseOffset {
			t.Fatalf("batch %d differs", i)
		}
	}
}

// TestFinishSwaps sets up, by hand, each state a crash can leave a swap
// in, and checks what Open makes of it.
func TestFinishSwaps(t *testing.T) {
	type state struct {
		name  string
		files []string // names created (segment content is written for .log names)
		want  []string // names left, sorted
		done  int      // swaps completed
	}
	for _, st := range []state{
		{"cleaned only", []string{"0.log", "0.index", "5.log", "0.log.cleaned", "0.index.cleaned"}, []string{"0.index", "0.log", "5.log"}, 0},
		{"swap with a cleaned index", []string{"0.log", "5.log", "0.log.swap", "0.index.cleaned"}, []string{"0.log", "5.log"}, 0},
		{"committed", []string{"0.log", "0.index", "5.log", "5.index", "10.log", "0.log.swap", "0.index.swap"}, []string{"0.index", "0.log", "10.log"}, 1},
		{"old renamed", []string{"0.log.deleted", "5.log.deleted", "10.log", "0.log.swap", "0.timeindex.swap"}, []string{"0.log", "0.timeindex", "10.log"}, 1},
		{"index renamed", []string{"10.log", "0.log.swap", "0.index"}, []string{"0.log", "10.log"}, 1},
		{"log renamed", []string{"10.log", "0.log", "0.timeindex.swap"}, []string{"0.log", "0.timeindex", "10.log"}, 0},
	} {
		t.Run(st.name, func(t *testing.T) {
			dir := t.TempDir()
			name := func(n string) string {
				base, rest, _ := strings.Cut(n, ".")
				var b int64
				fmt.Sscan(base, &b)
				return segmentFileName(b, "."+rest)
			}
			for _, f := range st.files {
				var data []byte
				if strings.Contains(f, ".log") {
					var b int64
					fmt.Sscan(strings.Split(f, ".")[0], &b)
					end := int64(10)
					if b == 10 {
						end = 11
					}
					data = keyedBatch(t, []kv{{key: "a", value: []byte("b")}}, batchOpts{})
					stampBatch(data, end-1, 0) // one batch ending at end-1
				}
				if err := os.WriteFile(filepath.Join(dir, name(f)), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var rec RecoveryStats
			ents, _ := os.ReadDir(dir)
			if _, err := finishSwaps(vfs.Default, dir, ents, &rec); err != nil {
				t.Fatal(err)
			}
			ents, _ = os.ReadDir(dir)
			var got []string
			for _, e := range ents {
				if strings.HasSuffix(e.Name(), deletedSuffix) {
					continue // removed by loadLog
				}
				got = append(got, e.Name())
			}
			var want []string
			for _, w := range st.want {
				want = append(want, name(w))
			}
			sort.Strings(want)
			if strings.Join(got, " ") != strings.Join(want, " ") || rec.SwapsCompleted != st.done {
				t.Fatalf("left %v (%d completed), want %v (%d)", got, rec.SwapsCompleted, want, st.done)
			}
		})
	}
}
