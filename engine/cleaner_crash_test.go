package engine

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// trapFS counts the operations that change files (creations, writes,
// syncs, truncations, renames, removals) and cuts the power (CrashFS.Crash)
// just before the armed one runs: that operation and everything after it
// fail, and the disk is what the power-loss model leaves.
type trapFS struct {
	*vfs.CrashFS
	mu      sync.Mutex
	n, at   int
	crashed bool
}

func (f *trapFS) arm(at int) {
	f.mu.Lock()
	f.n, f.at, f.crashed = 0, at, false
	f.mu.Unlock()
}

func (f *trapFS) ops() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func (f *trapFS) tick() {
	f.mu.Lock()
	f.n++
	hit := f.at > 0 && f.n == f.at && !f.crashed
	if hit {
		f.crashed = true
	}
	f.mu.Unlock()
	if hit {
		f.CrashFS.Crash()
	}
}

func (f *trapFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC) != 0 {
		f.tick()
	}
	file, err := f.CrashFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &trapFile{File: file, fs: f}, nil
}
func (f *trapFS) Rename(o, n string) error { f.tick(); return f.CrashFS.Rename(o, n) }
func (f *trapFS) Remove(n string) error    { f.tick(); return f.CrashFS.Remove(n) }
func (f *trapFS) RemoveAll(n string) error { f.tick(); return f.CrashFS.RemoveAll(n) }
func (f *trapFS) SyncDir(d string) error   { f.tick(); return f.CrashFS.SyncDir(d) }
func (f *trapFS) MkdirAll(d string, p os.FileMode) error {
	f.tick()
	return f.CrashFS.MkdirAll(d, p)
}

type trapFile struct {
	vfs.File
	fs *trapFS
}

func (f *trapFile) Unwrap() vfs.File { return f.File }
func (f *trapFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.tick()
	return f.File.WriteAt(p, off)
}
func (f *trapFile) Write(p []byte) (int, error) { f.fs.tick(); return f.File.Write(p) }
func (f *trapFile) Sync() error                 { f.fs.tick(); return f.File.Sync() }
func (f *trapFile) Datasync() error             { f.fs.tick(); return f.File.Datasync() }
func (f *trapFile) Truncate(n int64) error      { f.fs.tick(); return f.File.Truncate(n) }

// cleanCrash is one run of TestCleanerCrashAtEveryStep's workload.
type cleanCrash struct {
	t     *testing.T
	dir   string
	fs    *trapFS
	m     *Manager
	tp    TopicPartition
	cfg   LogConfig
	clk   *fakeClock
	merge bool // a first pass before the one crashed: the crashed one merges cleaned segments
}

// scratchDir is a temporary directory on tmpfs when there is one: these
// tests model power loss with CrashFS, and the real fdatasyncs of a disk
// would only slow down their hundreds of runs.
func scratchDir(t *testing.T) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "samsa-engine-test"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

func newCleanCrash(t *testing.T, merge bool) *cleanCrash {
	c := &cleanCrash{t: t, dir: scratchDir(t), fs: &trapFS{CrashFS: vfs.NewCrashFS(vfs.Default)}, tp: TopicPartition{"cc", 0},
		cfg: compactConfig(), clk: newFakeClock(5_000_000), merge: merge}
	c.cfg.FileDeleteDelayMs = 0
	c.open()
	l, err := c.m.CreateLog(c.tp, c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(42))
	// Idempotent batches need consecutive sequences: one producer, counted.
	seq, txnSeq := int32(0), int32(0)
	writeSeq := func(n int) {
		for i := 0; i < n; i++ {
			k := fmt.Sprint("k", rng.Intn(12))
			recs := []kv{{key: k, value: valueOf(k, i)}}
			if rng.Intn(9) == 0 {
				recs[0].value = nil
			}
			if rng.Intn(3) == 0 {
				recs = append(recs, kv{key: "hot", value: valueOf("hot", i)})
			}
			pid := int64(0)
			if i%4 == 0 {
				pid = 77
			}
			mustAppend(t, l, keyedBatch(t, recs, batchOpts{codec: i % 5, pid: pid, epoch: 3, seq: seq, baseTs: 100}))
			if pid != 0 {
				seq += int32(len(recs))
			}
			if i%15 == 7 {
				// A transaction of producer 88, aborted every other time: its
				// records go at the first pass, the abort markers stay with
				// their entries in the cleaned segments' .txnindex.
				abort := i%30 == 7
				key := fmt.Sprint("t", rng.Intn(5))
				if abort {
					key = fmt.Sprint("x-", i) // aborted: not a key's last record
				}
				verified(t, l, 88, 0, txnSeq)
				mustAppend(t, l, keyedBatch(t, []kv{{key: key, value: valueOf(key, i)}}, batchOpts{pid: 88, epoch: 0, seq: txnSeq, transactional: true, baseTs: 100}))
				txnSeq++
				mustAppend(t, l, AppendMarkerBatch(nil, Marker{ProducerID: 88, CoordinatorEpoch: 1, Commit: !abort, Timestamp: 100}))
			}
		}
	}
	writeSeq(160)
	if merge {
		l.SetHighWatermark(l.LogEndOffset())
		compactNow(t, c.m)
		writeSeq(80)
	}
	l.SetHighWatermark(l.LogEndOffset())
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := c.m.writeCheckpoints(); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *cleanCrash) open() {
	m, err := Open(c.options())
	if err != nil {
		c.t.Fatalf("Open: %v", err)
	}
	c.m = m
	if l := m.Log(c.tp); l != nil {
		l.SetConfig(c.cfg)
		l.SetHighWatermark(l.LogEndOffset())
	}
}

func (c *cleanCrash) options() Options {
	return Options{Dirs: []string{c.dir}, Sync: SyncNone, FS: c.fs, Now: c.clk.now, manualBackground: true, DefaultConfig: c.cfg,
		Cleaner: CleanerOptions{DedupeBufferSize: 64 << 10}}
}

// swapLeft reports whether the directory holds files of a swap.
func (c *cleanCrash) swapLeft() bool {
	ents, _ := os.ReadDir(filepath.Join(c.dir, c.tp.String()))
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), cleanedSuffix) || strings.HasSuffix(e.Name(), swapSuffix) {
			return true
		}
	}
	return false
}

// crash cuts the power (unless the trap did), drops the Manager and
// restarts the file system.
func (c *cleanCrash) crash() {
	c.fs.mu.Lock()
	done := c.fs.crashed
	c.fs.crashed = true
	c.fs.at = 0
	c.fs.mu.Unlock()
	if !done {
		c.fs.CrashFS.Crash()
	}
	if c.m != nil {
		c.m.abandon()
		c.m = nil
	}
	c.fs.CrashFS.Restart()
}

// records returns the log's records by offset.
func (c *cleanCrash) records() (map[int64]logRecord, int64, int64) {
	l := c.m.Log(c.tp)
	_, recs := readLog(c.t, l)
	out := map[int64]logRecord{}
	for _, r := range recs {
		out[r.offset] = r
	}
	return out, l.LogStartOffset(), l.LogEndOffset()
}

// checkBetween checks that got is a state between before and after: a
// subset of before, a superset of after, the same content at each offset,
// and every key's last record there.
func checkBetween(t *testing.T, what string, got, before, after map[int64]logRecord) {
	t.Helper()
	last := map[string]int64{}
	for o, r := range before {
		if strings.HasPrefix(r.key, "x-") {
			continue // an aborted transaction's: goes at the first pass
		}
		if cur, ok := last[r.key]; !ok || o > cur {
			last[r.key] = o
		}
	}
	for o, r := range got {
		b, ok := before[o]
		if !ok || b.key != r.key || string(b.value) != string(r.value) || b.tomb != r.tomb {
			t.Fatalf("%s: offset %d holds %q=%q, not what was written (%v)", what, o, r.key, r.value, ok)
		}
	}
	for o := range after {
		if _, ok := got[o]; !ok {
			t.Fatalf("%s: offset %d (kept by a complete pass) is gone", what, o)
		}
	}
	for k, o := range last {
		if _, ok := got[o]; !ok {
			t.Fatalf("%s: the last record of %q (offset %d) is gone", what, k, o)
		}
	}
}

// checkAbortIndex checks that every aborted record still in the log is
// covered by an aborted transaction of its producer in the index (a
// read_committed consumer would drop it), and that the index lists no
// transaction the log does not show aborted.
func (c *cleanCrash) checkAbortIndex(what string, got map[int64]logRecord) {
	l := c.m.Log(c.tp)
	for o, r := range got {
		if !strings.HasPrefix(r.key, "x-") {
			continue
		}
		covered := false
		for _, a := range l.AbortedTransactions(o, o+1, nil) {
			covered = covered || a.ProducerID == 88 && a.FirstOffset <= o && o < a.LastOffset
		}
		if !covered {
			c.t.Fatalf("%s: aborted record at %d is in no aborted transaction of the index", what, o)
		}
	}
	for _, a := range l.AbortedTransactions(l.LogStartOffset(), l.LogEndOffset(), nil) {
		if r, ok := got[a.LastOffset]; !ok || r.batch.ProducerID != 88 || !r.batch.Control() {
			c.t.Fatalf("%s: index entry %+v without its abort marker", what, a)
		}
	}
}

func (c *cleanCrash) checkNoTempFiles(what string) {
	ents, _ := os.ReadDir(filepath.Join(c.dir, c.tp.String()))
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), cleanedSuffix) || strings.HasSuffix(e.Name(), swapSuffix) {
			c.t.Fatalf("%s: %s left after Open", what, e.Name())
		}
	}
}

// TestCleanerCrashAtEveryStep cuts the power at every file-system
// operation of a cleaning pass (a first pass, and a pass that merges
// cleaned segments), reopens, and checks that the log is between its state
// before and after the pass (each group swapped or not, never half), with
// no temporary file left and the same log start and end; then that a new
// pass completes to the state of a pass never interrupted. Some of those
// crashes are followed by a crash at every operation of the recovery
// itself (every one with SAMSA_LONG=1), then a clean reopen.
func TestCleanerCrashAtEveryStep(t *testing.T) {
	long := os.Getenv("SAMSA_LONG") != ""
	for _, merge := range []bool{false, true} {
		t.Run(fmt.Sprint("merge=", merge), func(t *testing.T) {
			tmpl := newCleanCrash(t, merge)
			before, start, end := tmpl.records()
			tmpl.m.Close()
			ref := tmpl.copyDir(t)
			ref.open()
			ref.fs.arm(0)
			compactNow(t, ref.m)
			ops := ref.fs.ops()
			after, _, _ := ref.records()
			if len(after) >= len(before) {
				t.Fatalf("the pass removed nothing: %d records before, %d after", len(before), len(after))
			}
			if n := len(ref.m.Log(ref.tp).AbortedTransactions(0, end, nil)); n == 0 {
				t.Fatal("no aborted transaction in the index after the pass")
			}
			cleanedTo := ref.m.Log(ref.tp).firstDirty.Load()
			for o, r := range after {
				if strings.HasPrefix(r.key, "x-") && o < cleanedTo {
					t.Fatalf("aborted record at %d kept by the pass (cleaned to %d)", o, cleanedTo)
				}
			}
			ref.m.Close()
			nested := 0
			for k := 1; k <= ops; k++ {
				c := tmpl.copyDir(t)
				c.open()
				c.fs.arm(k)
				c.m.Compact(t.Context())
				c.crash()
				var snap *cleanCrash
				if c.swapLeft() && (long || nested < 2) {
					snap = c.copyDir(t) // the disk as the crash left it
				}
				c.open()
				what := fmt.Sprintf("crash at operation %d of %d", k, ops)
				c.checkNoTempFiles(what)
				got, s, e := c.records()
				if s != start || e != end {
					t.Fatalf("%s: log [%d, %d), want [%d, %d)", what, s, e, start, end)
				}
				checkBetween(t, what, got, before, after)
				c.checkAbortIndex(what, got)
				// A crash during the recovery that finished the swap.
				if rec := c.m.Log(c.tp).Recovery(); snap != nil && rec.SwapsCompleted > 0 {
					nested++
					snap.crashDuringRecovery(t, what, before, after, start, end)
				}
				if _, err := c.m.Compact(t.Context()); err != nil {
					t.Fatalf("%s: a new pass: %v", what, err)
				}
				final, _, _ := c.records()
				if len(final) != len(after) {
					t.Fatalf("%s: a new pass leaves %d records, an uninterrupted one %d", what, len(final), len(after))
				}
				checkBetween(t, what+", then a new pass", final, after, after)
				c.checkAbortIndex(what+", then a new pass", final)
				c.m.Close()
			}
			t.Logf("merge=%v: %d operations in the pass, %d crashes during recovery", merge, ops, nested)
		})
	}
}

// crashDuringRecovery cuts the power at every operation of Open, each
// time on a copy of c's directory (the state a crash left).
func (c *cleanCrash) crashDuringRecovery(t *testing.T, what string, before, after map[int64]logRecord, start, end int64) {
	t.Helper()
	for j := 1; ; j++ {
		cp := c.copyDir(t)
		cp.fs.arm(j)
		m, err := Open(cp.options())
		completed := err == nil && !cp.fs.crashed
		if err == nil {
			cp.m = m
		}
		cp.crash()
		cp.open()
		w := fmt.Sprintf("%s, then at operation %d of the recovery", what, j)
		cp.checkNoTempFiles(w)
		got, s, e := cp.records()
		if s != start || e != end {
			t.Fatalf("%s: log [%d, %d), want [%d, %d)", w, s, e, start, end)
		}
		checkBetween(t, w, got, before, after)
		cp.checkAbortIndex(w, got)
		cp.m.Close()
		if completed {
			return
		}
	}
}

// copyDir copies the log directories to a fresh cleanCrash (its own
// CrashFS, the files counted as durable).
func (c *cleanCrash) copyDir(t *testing.T) *cleanCrash {
	cp := &cleanCrash{t: t, dir: scratchDir(t), fs: &trapFS{CrashFS: vfs.NewCrashFS(vfs.Default)}, tp: c.tp, cfg: c.cfg, clk: c.clk}
	err := filepath.Walk(c.dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(c.dir, p)
		dst := filepath.Join(cp.dir, rel)
		if fi.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if fi.Name() == ".lock" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// TestCleanerCrashWorkload is a seeded workload on one compacted log over
// a CrashFS: keyed appends acknowledged through OnDurable, passes of the
// cleaner, truncations, flushes, checkpoints and power losses (plain and
// torn), with a check after each loss: every record is what was written
// at its offset, offsets increase, the log reaches every acknowledged
// offset not truncated since, and for each key the last acknowledged
// record is there, or a later one of the same key (compaction only ever
// removes a record for a later one, which it writes durably before).
// SAMSA_LONG=1: more seeds, longer.
func TestCleanerCrashWorkload(t *testing.T) {
	seeds, steps := []int64{1, 2, 3}, 250
	if os.Getenv("SAMSA_LONG") != "" {
		seeds, steps = nil, 2000
		for s := int64(1); s <= 30; s++ {
			seeds = append(seeds, s)
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { runCleanerCrashWorkload(t, seed, steps) })
	}
}

func runCleanerCrashWorkload(t *testing.T, seed int64, steps int) {
	dir := scratchDir(t)
	fs := vfs.NewCrashFS(vfs.Default)
	clk := newFakeClock(1_000_000)
	cfg := compactConfig()
	cfg.DeleteRetentionMs = 1 << 40 // tombstones stay: the check below needs the last record of each key
	opts := Options{Dirs: []string{dir}, Sync: SyncFsync, FS: fs, Now: clk.now, manualBackground: true, DefaultConfig: cfg,
		Cleaner: CleanerOptions{DedupeBufferSize: 24 * 53}} // partial passes too
	tp := TopicPartition{"cw", 0}
	m, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.CreateLog(tp, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(seed))
	writes := map[int64]kv{}
	var mu sync.Mutex
	acked, committed := int64(0), int64(0)
	var trace []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d: %s\nlast operations: %v", seed, fmt.Sprintf(format, args...), trace[max(0, len(trace)-15):])
	}
	for step := 0; step < steps; step++ {
		switch k := rng.Intn(100); {
		case k < 62:
			n := 1 + rng.Intn(3)
			recs := make([]kv, n)
			for i := range recs {
				key := fmt.Sprint("k", rng.Intn(25))
				recs[i] = kv{key: key, value: valueOf(key, step*10+i), ts: 100}
				if rng.Intn(12) == 0 {
					recs[i].value = nil
				}
			}
			res, err := l.Append(keyedBatch(t, recs, batchOpts{codec: rng.Intn(5), baseTs: 100}), AppendOptions{LeaderEpoch: 1})
			if err != nil {
				fail("append: %v", err)
			}
			for i, r := range recs {
				writes[res.BaseOffset+int64(i)] = r
			}
			last := res.LastOffset
			l.OnDurable(last, func(err error) {
				if err == nil {
					mu.Lock()
					acked = max(acked, last+1)
					mu.Unlock()
				}
			})
			trace = append(trace, fmt.Sprintf("append %d..%d", res.BaseOffset, last))
		case k < 74:
			l.SetHighWatermark(l.LogEndOffset())
			committed = l.HighWatermark()
			if _, err := m.Compact(t.Context()); err != nil {
				fail("compact: %v", err)
			}
			trace = append(trace, fmt.Sprintf("compact to %d", l.firstDirty.Load()))
		case k < 78:
			// As replication does: never below an offset that was under the
			// high watermark (committed), where the cleaner may have removed
			// older records for the ones a deeper cut would remove. (After a
			// crash the high watermark reloads from an older checkpoint.)
			to := max(committed, l.LogEndOffset()-1-rng.Int63n(8))
			if to >= l.LogEndOffset() {
				continue
			}
			if err := l.TruncateTo(to); err != nil {
				fail("truncate: %v", err)
			}
			end := l.LogEndOffset()
			for o := range writes {
				if o >= end {
					delete(writes, o)
				}
			}
			mu.Lock()
			acked = min(acked, end)
			mu.Unlock()
			trace = append(trace, fmt.Sprintf("truncate to %d: end %d", to, end))
		case k < 84:
			m.flushRound()
			trace = append(trace, "flusher round")
		case k < 88:
			if err := m.writeCheckpoints(); err != nil {
				fail("checkpoints: %v", err)
			}
			trace = append(trace, "checkpoints")
		case k < 92:
			if err := l.Flush(); err != nil {
				fail("flush: %v", err)
			}
			trace = append(trace, "flush")
		default:
			torn := k%2 == 0
			trace = append(trace, fmt.Sprintf("crash (torn %v)", torn))
			if torn {
				err = fs.CrashTorn(rng)
			} else {
				err = fs.Crash()
			}
			if err != nil {
				fail("crash: %v", err)
			}
			m.abandon()
			fs.Restart()
			if m, err = Open(opts); err != nil {
				fail("open: %v", err)
			}
			l = m.Log(tp)
			l.SetConfig(cfg)
			_, recs := readLog(t, l)
			got := map[int64]logRecord{}
			for _, r := range recs {
				w, ok := writes[r.offset]
				if !ok || w.key != r.key || string(w.value) != string(r.value) || (w.value == nil) != r.tomb {
					fail("offset %d holds %q=%q, written %q=%q (%v)", r.offset, r.key, r.value, w.key, w.value, ok)
				}
				got[r.offset] = r
			}
			mu.Lock()
			a := acked
			mu.Unlock()
			if l.LogEndOffset() < a {
				fail("log end %d, acknowledged up to %d", l.LogEndOffset(), a)
			}
			lastAcked := map[string]int64{}
			lastHere := map[string]int64{}
			for o, w := range writes {
				if o < a && o >= lastAcked[w.key] {
					lastAcked[w.key] = o
				}
			}
			for o, r := range got {
				if o >= lastHere[r.key] {
					lastHere[r.key] = o
				}
			}
			for key, o := range lastAcked {
				if h, ok := lastHere[key]; !ok || h < o {
					fail("key %q: its last acknowledged record (offset %d) is gone, and no later one is there", key, o)
				}
			}
			// What survived is the log from here on.
			for o := range writes {
				if o >= l.LogEndOffset() {
					delete(writes, o)
				}
			}
			mu.Lock()
			acked = l.LogEndOffset()
			mu.Unlock()
			trace = append(trace, fmt.Sprintf("checked: %d records, end %d", len(got), l.LogEndOffset()))
		}
	}
	m.Close()
}
