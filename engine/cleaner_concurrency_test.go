package engine

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCleanerConcurrentReadersAndAppends runs passes while appenders
// append and readers read the whole log over and over: every read sees
// increasing offsets and, at each offset, what was written there; a Slice
// taken before a swap reads its old segment's bytes intact after it; and
// the replaced files are removed once the last reader releases them.
// (While it is held, a later pass may replace the same base again and
// its .deleted names, as in Kafka: the holder reads through its
// descriptors.)
func TestCleanerConcurrentReadersAndAppends(t *testing.T) {
	dir := t.TempDir()
	m, err := Open(Options{Dirs: []string{dir}, Sync: SyncNone, manualBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cfg := compactConfig()
	cfg.FileDeleteDelayMs = 0
	l, _ := m.CreateLog(TopicPartition{"conc", 0}, cfg)
	var written sync.Map // offset → value
	appendOne := func(i int) {
		k := fmt.Sprint("k", i%17)
		v := valueOf(k, i)
		res, err := l.Append(keyedBatch(t, []kv{{key: k, value: v}}, batchOpts{codec: i % 5, baseTs: 10}), AppendOptions{LeaderEpoch: 1})
		if err != nil {
			t.Error(err)
			return
		}
		written.Store(res.BaseOffset, string(v))
		l.SetHighWatermark(res.LastOffset + 1)
	}
	for i := 0; i < 400; i++ {
		appendOne(i)
	}
	// A slice pinned across the swaps, on the first segment.
	held, err := l.Read(l.LogStartOffset(), 1<<20, l.LogEndOffset(), true)
	if err != nil || held.Size == 0 {
		t.Fatalf("read: %v", err)
	}
	heldBytes := make([]byte, held.Size)
	held.File.ReadAt(heldBytes, held.Pos)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newCodecs(1 << 20)
			defer c.close()
			var buf []byte
			for {
				select {
				case <-stop:
					return
				default:
				}
				prev := int64(-1)
				for off, end := l.LogStartOffset(), l.HighWatermark(); off < end; {
					var err error
					if buf, err = l.ReadCopy(off, 4096, end, true, buf[:0]); err != nil {
						t.Errorf("read at %d: %v", off, err)
						return
					}
					if len(buf) == 0 {
						t.Errorf("nothing at %d below %d", off, end)
						return
					}
					for p := 0; p < len(buf); {
						h, err := validateStoredBatch(buf[p:])
						if err != nil {
							t.Errorf("batch at %d: %v", off, err)
							return
						}
						payload := buf[p+BatchHeaderSize : p+int(h.Size())]
						if h.Compression() != 0 {
							if payload, _, err = c.decompress(h.Compression(), payload, nil); err != nil {
								t.Errorf("batch %d: %v", h.BaseOffset, err)
								return
							}
						}
						forEachRecord(payload, h.NumRecords, h.LastOffsetDelta, func(r *record) error {
							o := h.BaseOffset + r.offDelta
							if o <= prev {
								t.Errorf("offset %d after %d", o, prev)
							}
							prev = o
							if w, ok := written.Load(o); !ok || w.(string) != string(r.value) {
								t.Errorf("offset %d holds %q, written %q", o, r.value, w)
							}
							return nil
						})
						off = h.LastOffset() + 1
						p += int(h.Size())
					}
				}
				reads.Add(1)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 400; i < 1000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			appendOne(i)
		}
	}()
	for pass := 0; pass < 5; pass++ {
		compactNow(t, m)
	}
	eventually(t, 10*time.Second, "readers reading through the passes", func() bool { return reads.Load() >= 3 })
	close(stop)
	wg.Wait()
	if m.CleanerStats().Swaps == 0 {
		t.Fatal("no swap")
	}
	again := make([]byte, held.Size)
	if _, err := held.File.ReadAt(again, held.Pos); err != nil || !bytes.Equal(again, heldBytes) {
		t.Fatalf("a slice held across the swap reads other bytes (%v)", err)
	}
	deleted := func() int {
		n := 0
		ents, _ := os.ReadDir(filepath.Join(dir, "conc-0"))
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), deletedSuffix) {
				n++
			}
		}
		return n
	}
	held.Release()
	if n := deleted(); n != 0 {
		t.Fatalf("%d .deleted files left after the last release", n)
	}
}

// TestCleanerAbortedByTruncation: a truncation during a pass stops it
// (here while it waits for the I/O limit), the cleaned files go, and the
// log is cleaned again afterwards.
func TestCleanerAbortedByTruncation(t *testing.T) {
	dir := t.TempDir()
	m, err := Open(Options{Dirs: []string{dir}, Sync: SyncNone, manualBackground: true,
		Cleaner: CleanerOptions{IOMaxBytesPerSecond: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.cl.limit.Load().tokens = 0 // the first read already waits (about forever)
	l, _ := m.CreateLog(TopicPartition{"abort", 0}, compactConfig())
	for i := 0; i < 200; i++ {
		mustAppend(t, l, keyedBatch(t, []kv{{key: fmt.Sprint(i % 3), value: valueOf("v", i)}}, batchOpts{baseTs: 10}))
	}
	l.SetHighWatermark(l.LogEndOffset())
	done := make(chan error, 1)
	go func() {
		_, err := m.Compact(t.Context())
		done <- err
	}()
	eventually(t, 5*time.Second, "the pass to start", func() bool {
		m.cl.mu.Lock()
		defer m.cl.mu.Unlock()
		return l.cstate.inProgress
	})
	if err := l.TruncateTo(l.LogEndOffset() - 10); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Compact: %v", err)
	}
	if st := m.CleanerStats(); st.Aborted != 1 || st.Passes != 0 {
		t.Fatalf("stats: %+v", st)
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "abort-0"))
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), cleanedSuffix) || strings.HasSuffix(e.Name(), swapSuffix) {
			t.Fatalf("%s left by the aborted pass", e.Name())
		}
	}
	m.cl.limit.Store(nil)
	if n := compactNow(t, m); n != 1 {
		t.Fatalf("not cleaned after the truncation: %d", n)
	}
}

// TestCleanerBackground: the cleaner goroutines take a log past its dirty
// ratio by themselves.
func TestCleanerBackground(t *testing.T) {
	m, err := Open(Options{Dirs: []string{t.TempDir()}, Sync: SyncNone,
		Cleaner: CleanerOptions{Threads: 2, Backoff: 5 * time.Millisecond, DedupeBufferSize: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cfg := compactConfig()
	cfg.MinCleanableDirtyRatio = 0.5
	for p := int32(0); p < 3; p++ {
		l, _ := m.CreateLog(TopicPartition{"bg", p}, cfg)
		for i := 0; i < 300; i++ {
			mustAppend(t, l, keyedBatch(t, []kv{{key: fmt.Sprint(i % 4), value: valueOf("v", i)}}, batchOpts{baseTs: 10}))
		}
		l.SetHighWatermark(l.LogEndOffset())
	}
	eventually(t, 10*time.Second, "the cleaner goroutines to clean every log", func() bool {
		st := m.CleanerStats()
		for _, ls := range st.Logs {
			if ls.LastCleaned.IsZero() {
				return false
			}
		}
		return len(st.Logs) == 3
	})
	st := m.CleanerStats()
	if st.MaxDirtyRatio > 0.5 || st.TimeSinceLastRun < 0 || m.Stats().CleanerBytesWritten == 0 {
		t.Fatalf("stats: %+v", st)
	}
	for _, ls := range st.Logs {
		if ls.DirtyRatio > 0.5 || ls.FirstDirtyOffset == 0 {
			t.Fatalf("log stats: %+v", ls)
		}
	}
}

// TestCleanerDamagedLogIsUncleanable: a pass that meets a batch failing
// its CRC stops, the log is reported uncleanable and left as it was.
func TestCleanerDamagedLogIsUncleanable(t *testing.T) {
	dir := t.TempDir()
	m, err := Open(Options{Dirs: []string{dir}, Sync: SyncNone, manualBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, _ := m.CreateLog(TopicPartition{"dmg", 0}, compactConfig())
	for i := 0; i < 200; i++ {
		mustAppend(t, l, keyedBatch(t, []kv{{key: fmt.Sprint(i % 3), value: valueOf("v", i)}}, batchOpts{baseTs: 10}))
	}
	l.SetHighWatermark(l.LogEndOffset())
	// Flip a byte in the records of the first batch.
	f, err := os.OpenFile(filepath.Join(dir, "dmg-0", segmentFileName(0, logSuffix)), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0xff}, BatchHeaderSize+3)
	f.Close()
	if _, err := m.Compact(t.Context()); err == nil || !isErr(err, ErrCorrupt) {
		t.Fatalf("Compact over a damaged segment: %v", err)
	}
	st := m.CleanerStats()
	if st.UncleanableLogs != 1 || st.Logs[0].Uncleanable == nil || m.Stats().UncleanableLogs != 1 {
		t.Fatalf("stats: %+v", st)
	}
	if n := compactNow(t, m); n != 0 {
		t.Fatal("an uncleanable log was cleaned again")
	}
}

// TestReconfigureCleaner: log.cleaner.* keys changed at run time take effect without a
// restart (Kafka's LogCleaner.reconfigure): a cleaner asleep for an hour's backoff is
// replaced by goroutines with the new options, which clean the log at once; the I/O
// limit changes under a running limiter; disabling stops the goroutines.
func TestReconfigureCleaner(t *testing.T) {
	m, err := Open(Options{Dirs: []string{t.TempDir()}, Sync: SyncNone, Cleaner: CleanerOptions{Threads: 1, Backoff: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cfg := compactConfig()
	l, err := m.CreateLog(TopicPartition{"reconf", 0}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Let the first goroutine find nothing and fall asleep for its hour.
	for deadline := time.Now().Add(5 * time.Second); m.cl.lastRun.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the cleaner never looked for work")
		}
		time.Sleep(time.Millisecond) // polling for the cleaner's first look, with a deadline
	}
	for i := 0; i < 300; i++ {
		mustAppend(t, l, keyedBatch(t, []kv{{key: fmt.Sprint(i % 3), value: valueOf("v", i)}}, batchOpts{baseTs: 10}))
	}
	l.SetHighWatermark(l.LogEndOffset())
	before := m.CleanerStats().Passes
	m.ReconfigureCleaner(CleanerOptions{Threads: 2, Backoff: 10 * time.Millisecond, IOMaxBytesPerSecond: 1 << 30})
	if r := m.cl.limit.Load(); r == nil || r.rate != 1<<30 {
		t.Fatalf("the I/O limit after the reconfiguration: %+v", r)
	}
	for deadline := time.Now().Add(10 * time.Second); m.CleanerStats().Passes == before; {
		if time.Now().After(deadline) {
			t.Fatal("the reconfigured cleaner did not clean the log")
		}
		time.Sleep(5 * time.Millisecond) // polling for a pass, with a deadline
	}
	m.ReconfigureCleaner(CleanerOptions{Threads: 2, Backoff: 10 * time.Millisecond, IOMaxBytesPerSecond: 1 << 20})
	if r := m.cl.limit.Load(); r == nil || r.rate != 1<<20 {
		t.Fatalf("the I/O limit after the second reconfiguration: %+v", r)
	}
	m.ReconfigureCleaner(CleanerOptions{Disable: true})
	if m.cl.limit.Load() != nil || m.cl.quit != nil {
		t.Fatal("disabled: a limit or goroutines remain")
	}
}
