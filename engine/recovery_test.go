package engine

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// segmentFiles lists the .log files of a partition directory, oldest first.
func segmentFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+logSuffix))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(m)
	return m
}

func TestRecoveryTornLastBatchAtEveryByte(t *testing.T) {
	dir := t.TempDir()
	tp := TopicPartition{"torn", 0}
	m := openTest(t, []string{dir}, SyncFsync, nil)
	l, _ := m.CreateLog(tp, DefaultLogConfig())
	for i := 0; i < 20; i++ {
		r := mustAppend(t, l, makeBatch(testBatch{records: 2, valueSize: 30, pid: 5, epoch: 0, seq: int32(2 * i)}))
		if err := l.WaitDurable(r.LastOffset); err != nil {
			t.Fatal(err)
		}
	}
	syncedLEO, syncedSize := l.LogEndOffset(), l.Size()
	last := makeBatch(testBatch{records: 3, valueSize: 40, pid: 5, epoch: 0, seq: 40})
	mustAppend(t, l, last)
	m.abandon()
	files := segmentFiles(t, l.Dir())
	if len(files) != 1 {
		t.Fatalf("%d segments", len(files))
	}
	full, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	// The fsync policy allocates the active segment ahead of its appends
	// (prealloc.go): the file may be longer than its batches, with zeros.
	if int64(len(full)) < syncedSize+int64(len(last)) {
		t.Fatalf("file %d bytes, want at least %d", len(full), syncedSize+int64(len(last)))
	}
	if zeros := bytes.Count(full[syncedSize+int64(len(last)):], []byte{0}); zeros != len(full)-int(syncedSize)-len(last) {
		t.Fatalf("past the batches: %d zeros of %d bytes", zeros, len(full)-int(syncedSize)-len(last))
	}
	ahead := len(full) - int(syncedSize) - len(last)
	if ahead == 0 {
		ahead = 4096
	}
	for i := 0; i <= 2*len(last)+1; i++ {
		// Each cut k of the last batch alone, then followed by zeros (the
		// torn write landed in space allocated ahead).
		k := i / 2
		file := append([]byte(nil), full[:syncedSize+int64(k)]...)
		if i%2 == 1 {
			file = append(file, make([]byte, ahead)...)
		}
		if err := os.WriteFile(files[0], file, 0o644); err != nil {
			t.Fatal(err)
		}
		m := openTest(t, []string{dir}, SyncNone, nil) // the policy does not matter here; fewer fsyncs
		l := m.Log(tp)
		// The batch is whole when it was, or when the bytes it lost were
		// zeros and the zeros after the cut stand in for them.
		whole := k == len(last) || (i%2 == 1 && bytes.Count(last[k:], []byte{0}) == len(last)-k)
		want, batches := syncedLEO, 20
		if whole {
			want, batches = syncedLEO+3, 21
		}
		if l.LogEndOffset() != want {
			t.Fatalf("cut at %d of %d (zeros after: %t): LEO %d, want %d", k, len(last), i%2 == 1, l.LogEndOffset(), want)
		}
		if hs := readAll(t, l); len(hs) != batches {
			t.Fatalf("cut at %d: %d batches", k, len(hs))
		}
		// Producer state follows the log: the retried batch is new, or a duplicate.
		r, err := l.Append(append([]byte(nil), last...), AppendOptions{})
		if err != nil || r.Duplicate != whole {
			t.Fatalf("cut at %d: retry %+v %v", k, r, err)
		}
		m.abandon()
	}
}

func TestRecoveryCorruptTailAndLaterSegments(t *testing.T) {
	dir := t.TempDir()
	tp := TopicPartition{"corrupt", 0}
	m := openTest(t, []string{dir}, SyncNone, nil)
	l, _ := m.CreateLog(tp, smallConfig())
	for i := 0; i < 100; i++ {
		mustAppend(t, l, makeBatch(testBatch{records: 1, valueSize: 150}))
	}
	m.abandon() // no recovery point checkpoint: every segment is scanned
	files := segmentFiles(t, l.Dir())
	if len(files) < 4 {
		t.Fatalf("%d segments", len(files))
	}
	// Flip a byte in the middle of the third segment.
	f, _ := os.OpenFile(files[2], os.O_RDWR, 0)
	var b [1]byte
	f.ReadAt(b[:], 1000)
	b[0] ^= 0x40
	f.WriteAt(b[:], 1000)
	f.Close()
	m = openTest(t, []string{dir}, SyncNone, nil)
	defer m.Close()
	l = m.Log(tp)
	hs := readAll(t, l)
	if len(hs) == 0 || hs[len(hs)-1].LastOffset()+1 != l.LogEndOffset() {
		t.Fatalf("LEO %d after %d batches", l.LogEndOffset(), len(hs))
	}
	if n := len(segmentFiles(t, l.Dir())); n != 3 {
		t.Fatalf("%d segments remain, want 3 (later ones deleted)", n)
	}
	if l.LogEndOffset() >= 100 || l.LogEndOffset() < 20 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
	if r := mustAppend(t, l, makeBatch(testBatch{})); r.BaseOffset != l.LogEndOffset()-1 {
		t.Fatalf("append at %d", r.BaseOffset)
	}
}

func TestLazyIndexDamageIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	tp := TopicPartition{"idx", 0}
	m := openTest(t, []string{dir}, SyncNone, nil)
	l, _ := m.CreateLog(tp, smallConfig())
	for i := 0; i < 200; i++ {
		mustAppend(t, l, makeBatch(testBatch{records: 1, valueSize: 100, baseTs: int64(10 * i)}))
	}
	m.Close()
	files := segmentFiles(t, l.Dir())
	idx := func(i int, suf string) string { return files[i][:len(files[i])-len(logSuffix)] + suf }
	os.WriteFile(idx(1, indexSuffix), bytes.Repeat([]byte{0xAB}, 64), 0o644)
	os.Truncate(idx(2, timeIndexSuffix), 5)
	os.Remove(idx(3, indexSuffix))
	// Plausible but wrong: entries increasing, pointing mid-batch.
	wrong := make([]byte, 16)
	binary.BigEndian.PutUint32(wrong[0:], 3)
	binary.BigEndian.PutUint32(wrong[4:], 17)
	binary.BigEndian.PutUint32(wrong[8:], 4)
	binary.BigEndian.PutUint32(wrong[12:], 33)
	os.WriteFile(idx(4, indexSuffix), wrong, 0o644)
	os.WriteFile(idx(5, timeIndexSuffix), bytes.Repeat([]byte{0xFF}, 24), 0o644)

	m = openTest(t, []string{dir}, SyncNone, nil)
	defer m.Close()
	l = m.Log(tp)
	for off := int64(0); off < 200; off++ {
		got, err := l.ReadCopy(off, 1, 200, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		h, err := ValidateBatch(got)
		if err != nil || h.BaseOffset != off {
			t.Fatalf("offset %d: got batch %d: %v", off, h.BaseOffset, err)
		}
		o, _, ok, err := l.OffsetForTimestamp(10 * off)
		if err != nil || !ok || o != off {
			t.Fatalf("OffsetForTimestamp(%d) = %d %v %v", 10*off, o, ok, err)
		}
	}
}

func TestHalfDeletedSegmentIsFinished(t *testing.T) {
	dir := t.TempDir()
	tp := TopicPartition{"half", 0}
	m := openTest(t, []string{dir}, SyncNone, nil)
	l, _ := m.CreateLog(tp, smallConfig())
	for i := 0; i < 60; i++ {
		mustAppend(t, l, makeBatch(testBatch{records: 1, valueSize: 150}))
	}
	m.Close()
	files := segmentFiles(t, l.Dir())
	// A crash between renaming the .log and its indexes.
	if err := os.Rename(files[0], files[0]+deletedSuffix); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(l.Dir(), "x.tmp"), []byte("junk"), 0o644)
	m = openTest(t, []string{dir}, SyncNone, nil)
	defer m.Close()
	l = m.Log(tp)
	ents, _ := os.ReadDir(l.Dir())
	for _, e := range ents {
		n := e.Name()
		if filepath.Ext(n) == deletedSuffix || filepath.Ext(n) == tmpSuffix || n[:20] == filepath.Base(files[0])[:20] {
			t.Fatalf("%s left behind", n)
		}
	}
	if l.LogStartOffset() == 0 {
		t.Fatalf("log start still 0 after the first segment went")
	}
	readAll(t, l)
}

func TestCheckpointFilesFormat(t *testing.T) {
	dir := t.TempDir()
	m := openTest(t, []string{dir}, SyncNone, nil)
	l, _ := m.CreateLog(TopicPartition{"my.topic-x", 7}, DefaultLogConfig())
	mustAppend(t, l, makeBatch(testBatch{records: 5}))
	l.SetHighWatermark(3)
	l.AssignEpochStartOffset(9, 5)
	m.Close()
	want := map[string]string{
		recoveryPointFile:  "0\n1\nmy.topic-x 7 5\n",
		replicationFile:    "0\n1\nmy.topic-x 7 3\n",
		logStartOffsetFile: "0\n1\nmy.topic-x 7 0\n",
		filepath.Join("my.topic-x-7", leaderEpochFile): "0\n2\n1 0\n9 5\n",
		cleanShutdownFile: `{"version":0,"brokerEpoch":-1}`, // Kafka's; no broker epoch set
	}
	for name, w := range want {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != w {
			t.Errorf("%s = %q, %v; want %q", name, got, err, w)
		}
	}
	m = openTest(t, []string{dir}, SyncNone, nil)
	defer m.Close()
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); !os.IsNotExist(err) {
		t.Fatalf("clean shutdown marker not removed at open: %v", err)
	}
	l = m.Log(TopicPartition{"my.topic-x", 7})
	if l.HighWatermark() != 3 || l.LogEndOffset() != 5 {
		t.Fatalf("HW %d LEO %d", l.HighWatermark(), l.LogEndOffset())
	}
}

// FuzzSegmentRecovery writes a log whose first part is synced, crashes while
// appending more, damages the unsynced tail of the .log and any index file
// (bit flips, truncation, extension), and checks that Open succeeds, that
// every batch read back has a valid CRC and that nothing synced is lost.
func FuzzSegmentRecovery(f *testing.F) {
	f.Add(int64(1), uint8(30), uint8(10), []byte{0, 1, 2, 3, 4, 5})
	f.Add(int64(2), uint8(80), uint8(3), []byte{9, 200, 17, 4, 77, 1, 2, 3, 250, 8})
	f.Add(int64(3), uint8(5), uint8(40), []byte{})
	f.Add(int64(4), uint8(120), uint8(0), []byte{255, 255, 255, 255, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, seed int64, nA, nB uint8, damage []byte) {
		rng := rand.New(rand.NewSource(seed))
		dir := t.TempDir()
		tp := TopicPartition{"fuzz", 0}
		m := openTest(t, []string{dir}, SyncFsync, nil)
		l, _ := m.CreateLog(tp, smallConfig())
		for i := 0; i < int(nA); i++ {
			mustAppend(t, l, makeBatch(testBatch{records: 1 + rng.Intn(4), valueSize: rng.Intn(300), baseTs: int64(i)}))
		}
		if err := l.WaitDurable(l.LogEndOffset() - 1); err != nil {
			t.Fatal(err)
		}
		synced := readAll(t, l)
		m.Close()

		m = openTest(t, []string{dir}, SyncNone, nil)
		big := smallConfig()
		big.SegmentBytes = 1 << 30
		l, _ = m.CreateLog(tp, big)
		files := segmentFiles(t, l.Dir())
		active := files[len(files)-1]
		fi, _ := os.Stat(active)
		syncedActive := fi.Size()
		for i := 0; i < int(nB); i++ {
			mustAppend(t, l, makeBatch(testBatch{records: 1 + rng.Intn(4), valueSize: rng.Intn(300)}))
		}
		m.abandon()

		// Damage: each 4 bytes pick a file, a position and an action.
		var idxFiles []string
		for _, lf := range files {
			base := lf[:len(lf)-len(logSuffix)]
			idxFiles = append(idxFiles, base+indexSuffix, base+timeIndexSuffix)
		}
		for i := 0; i+4 <= len(damage); i += 4 {
			sel, a, b, act := int(damage[i]), int(damage[i+1]), int(damage[i+2]), damage[i+3]%4
			var path string
			var floor int64
			if sel%3 == 0 {
				path, floor = active, syncedActive
			} else {
				path = idxFiles[sel%len(idxFiles)]
			}
			fi, err := os.Stat(path)
			if err != nil {
				continue
			}
			size := fi.Size()
			span := size - floor
			pos := floor
			if span > 0 {
				pos += int64(a<<8|b) % span
			}
			switch act {
			case 0, 1: // flip
				if span <= 0 {
					continue
				}
				fh, _ := os.OpenFile(path, os.O_RDWR, 0)
				var x [1]byte
				fh.ReadAt(x[:], pos)
				x[0] ^= byte(1 << (b % 8))
				fh.WriteAt(x[:], pos)
				fh.Close()
			case 2: // truncate
				os.Truncate(path, pos)
			case 3: // extend with garbage
				fh, _ := os.OpenFile(path, os.O_RDWR, 0)
				fh.WriteAt(bytes.Repeat([]byte{byte(a)}, b+1), size)
				fh.Close()
			}
		}

		m = openTest(t, []string{dir}, SyncNone, nil)
		defer m.Close()
		l = m.Log(tp)
		got := readAll(t, l)
		if len(got) < len(synced) {
			t.Fatalf("lost synced data: %d batches, %d synced", len(got), len(synced))
		}
		for i := range synced {
			if got[i] != synced[i] {
				t.Fatalf("batch %d changed: %+v vs %+v", i, got[i], synced[i])
			}
		}
		for i, h := range synced {
			if i%3 != 0 {
				continue
			}
			b, err := l.ReadCopy(h.BaseOffset, 1, l.LogEndOffset(), true, nil)
			if err != nil {
				t.Fatal(err)
			}
			if g, err := ValidateBatch(b); err != nil || g != h {
				t.Fatalf("read at %d: %+v %v", h.BaseOffset, g, err)
			}
		}
		l.OffsetForTimestamp(int64(rng.Intn(200)))
		if r, err := l.Append(makeBatch(testBatch{records: 1}), AppendOptions{}); err != nil || r.BaseOffset != l.LogEndOffset()-1 {
			t.Fatalf("append after recovery: %+v %v", r, err)
		}
	})
}

// FuzzCheckpointFiles: damaged checkpoint, leader-epoch and snapshot files
// never make Open fail or panic, and the (intact) log stays readable.
func FuzzCheckpointFiles(f *testing.F) {
	f.Add([]byte("0\n1\nck 0 5\n"), []byte("0\n1\n3 0\n"), []byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 0}, true)
	f.Add([]byte("0\n-1\n"), []byte("1\n"), []byte{}, false)
	f.Add([]byte("0\n2\nck 0 -7\nck x 1\n"), []byte("0\n99999999999\n"), []byte{0, 1, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, false)
	f.Fuzz(func(t *testing.T, ckpt, epochs, snap []byte, clean bool) {
		dir := t.TempDir()
		tp := TopicPartition{"ck", 0}
		m := openTest(t, []string{dir}, SyncNone, nil)
		l, _ := m.CreateLog(tp, smallConfig())
		for i := 0; i < 30; i++ {
			mustAppend(t, l, makeBatch(testBatch{records: 1, valueSize: 150, pid: 4, epoch: 0, seq: int32(i)}))
		}
		want := len(readAll(t, l))
		m.Close()
		os.WriteFile(filepath.Join(dir, recoveryPointFile), ckpt, 0o644)
		os.WriteFile(filepath.Join(dir, replicationFile), ckpt, 0o644)
		os.WriteFile(filepath.Join(dir, "ck-0", leaderEpochFile), epochs, 0o644)
		os.WriteFile(snapshotPath(filepath.Join(dir, "ck-0"), 30), snap, 0o644)
		if !clean {
			os.Remove(filepath.Join(dir, cleanShutdownFile))
		}
		m = openTest(t, []string{dir}, SyncNone, nil)
		defer m.Close()
		l = m.Log(tp)
		if l.LogStartOffset() == 0 {
			if got := len(readAll(t, l)); got != want {
				t.Fatalf("%d batches, want %d", got, want)
			}
		}
		l.EndOffsetForEpoch(3)
		if _, err := l.Append(makeBatch(testBatch{records: 1, pid: 4, epoch: 0, seq: 30}), AppendOptions{LeaderEpoch: 5}); err != nil && !isErr(err, ErrOutOfOrderSequence) {
			t.Fatal(err)
		}
	})
}

func TestCleanOpenWithLogCutBehindIndexes(t *testing.T) {
	dir := t.TempDir()
	tp := TopicPartition{"cut", 0}
	m := openTest(t, []string{dir}, SyncNone, nil)
	// No offset-index entry (4 KiB interval); the time index gets its final
	// entry at Close.
	l, _ := m.CreateLog(tp, DefaultLogConfig())
	for i := 0; i < 15; i++ {
		mustAppend(t, l, makeBatch(testBatch{records: 1, valueSize: 150, baseTs: int64(100 * i)}))
	}
	m.Close()
	files := segmentFiles(t, l.Dir())
	last := files[len(files)-1]
	data, _ := os.ReadFile(last)
	h, err := ValidateBatch(data)
	if err != nil || int64(len(data)) < 3*h.Size() {
		t.Fatalf("last segment: %d bytes, %v", len(data), err)
	}
	os.Truncate(last, h.Size()) // at a batch boundary, behind the indexes' back
	m = openTest(t, []string{dir}, SyncNone, nil)
	defer m.Close()
	l = m.Log(tp)
	hs := readAll(t, l)
	if hs[len(hs)-1].LastOffset()+1 != l.LogEndOffset() {
		t.Fatalf("LEO %d after %d batches", l.LogEndOffset(), len(hs))
	}
	for _, h := range hs {
		o, _, ok, err := l.OffsetForTimestamp(h.MaxTimestamp)
		if err != nil || !ok || o != h.BaseOffset {
			t.Fatalf("OffsetForTimestamp(%d) = %d %v %v", h.MaxTimestamp, o, ok, err)
		}
	}
	if _, _, ok, _ := l.OffsetForTimestamp(hs[len(hs)-1].MaxTimestamp + 1); ok {
		t.Fatal("found a timestamp past the end")
	}
	if ts, off := l.MaxTimestamp(); ts != hs[len(hs)-1].MaxTimestamp || off != hs[len(hs)-1].LastOffset() {
		t.Fatalf("MaxTimestamp = %d at %d, from an index entry past the data", ts, off)
	}
}

// TestCleanShutdownEpoch: Close records the broker epoch in every directory's marker
// and the next Open reads it back (Kafka's CleanShutdownFileHandler); a directory not
// closed cleanly, an empty marker (an earlier build's) or directories that disagree
// read as -1.
func TestCleanShutdownEpoch(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	m := openTest(t, dirs, SyncNone, nil)
	if e := m.CleanShutdownEpoch(); e != -1 {
		t.Fatalf("new directories: epoch %d", e)
	}
	m.SetBrokerEpoch(42)
	m.Close()
	m = openTest(t, dirs, SyncNone, nil)
	if e := m.CleanShutdownEpoch(); e != 42 {
		t.Fatalf("after a clean close at epoch 42: %d", e)
	}
	m.Close() // no epoch set this time
	m = openTest(t, dirs, SyncNone, nil)
	if e := m.CleanShutdownEpoch(); e != -1 {
		t.Fatalf("after a close without an epoch: %d", e)
	}
	m.SetBrokerEpoch(43)
	m.Close()
	os.Remove(filepath.Join(dirs[1], cleanShutdownFile)) // as a crash leaves it
	m = openTest(t, dirs, SyncNone, nil)
	if e := m.CleanShutdownEpoch(); e != -1 {
		t.Fatalf("one directory not closed cleanly: %d", e)
	}
	m.SetBrokerEpoch(44)
	m.Close()
	if err := os.WriteFile(filepath.Join(dirs[0], cleanShutdownFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	m = openTest(t, dirs, SyncNone, nil)
	defer m.Close()
	if e := m.CleanShutdownEpoch(); e != -1 {
		t.Fatalf("an empty marker: %d", e)
	}
}
