package metadata

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
)

func openT(t testing.TB, dir string, opts StoreOptions) *Store {
	t.Helper()
	s, err := OpenStore(dir, opts)
	if err != nil {
		t.Fatalf("OpenStore: %v", err)
	}
	return s
}

func mustAppend(t testing.TB, s *Store, recs ...Record) {
	t.Helper()
	if err := s.Append(recs...); err != nil {
		t.Fatalf("Append: %v", err)
	}
}

// workload appends a mix of every record type in batches of varied size.
func workload(t testing.TB, s *Store, rounds int) {
	t.Helper()
	mustAppend(t, s, &RegisterBrokerRecord{ID: 0, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "localhost", Port: 9092}}})
	for i := 0; i < rounds; i++ {
		id := UUID{0: byte(i), 1: byte(i >> 8), 15: 0x77}
		name := fmt.Sprintf("topic-%03d", i)
		mustAppend(t, s, createTopic(name, id, 1+i%4)...)
		mustAppend(t, s, &ConfigRecord{Resource: ResourceTopic, Name: name, Key: "retention.ms", Value: StringPtr(fmt.Sprint(i))})
		if i%3 == 0 {
			mustAppend(t, s, &PartitionRecord{TopicID: id, Partition: int32(1 + i%4), Replicas: []int32{0}, ISR: []int32{0}, Leader: 0})
		}
		if i%5 == 4 {
			mustAppend(t, s, &RemoveTopicRecord{ID: UUID{0: byte(i - 1), 1: byte((i - 1) >> 8), 15: 0x77}})
		}
		if i%7 == 0 {
			if _, err := s.AllocateProducerIDs(0, 1000); err != nil {
				t.Fatal(err)
			}
		}
	}
	mustAppend(t, s, &ConfigRecord{Resource: ResourceBroker, Name: "0", Key: "log.retention.hours", Value: StringPtr("1")})
}

func logFiles(t *testing.T, dir string) (logs, snaps []int64) {
	t.Helper()
	logs, snaps, err := listDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return logs, snaps
}

func TestStoreReplayEqualsImage(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, StoreOptions{SnapshotEvery: -1, SnapshotBytes: -1})
	workload(t, s, 40)
	before, off := s.Image(), s.Offset()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(&RegisterBrokerRecord{ID: 1, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 1}}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close = %v", err)
	}
	s = openT(t, dir, StoreOptions{SnapshotEvery: -1, SnapshotBytes: -1})
	defer s.Close()
	if !sameImage(s.Image(), before) || s.Offset() != off {
		t.Fatalf("replayed image differs (offset %d, want %d)", s.Offset(), off)
	}
	if before.NumTopics() == 0 || before.NextProducerID() == 0 {
		t.Fatal("workload built nothing")
	}
	mustAppend(t, s, createTopic("after-restart", NewUUID(), 2)...)
}

func TestStoreAppendAllOrNothing(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, StoreOptions{})
	defer s.Close()
	mustAppend(t, s, createTopic("a", idA, 1)...)
	before, size := s.Image(), s.mu.size
	err := s.Append(append(createTopic("b", idB, 1), &TopicRecord{Name: "a", ID: idC})...)
	if !errors.Is(err, ErrTopicExists) {
		t.Fatalf("Append = %v, want ErrTopicExists", err)
	}
	if s.Image() != before || s.mu.size != size || s.Offset() != 2 {
		t.Fatal("failed Append changed the store")
	}
	huge := make([]byte, MaxRecordSize)
	err = s.Append(&ConfigRecord{Resource: ResourceBroker, Key: "k", Value: StringPtr(string(huge))})
	if !errors.Is(err, ErrInvalidRecord) || s.Image() != before {
		t.Fatalf("oversized record: %v", err)
	}
	if err := s.Append(); err != nil || s.Image() != before {
		t.Fatalf("empty Append: %v", err)
	}
}

// copyDir copies a store directory (without its lock file).
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == "LOCK" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestTornTailEveryByte cuts the last entry (a multi-record topic creation) at every
// byte: replay must drop the whole entry, keep everything before it, truncate the file
// and accept new appends.
func TestTornTailEveryByte(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, StoreOptions{SnapshotEvery: -1, SnapshotBytes: -1})
	workload(t, s, 6)
	prev, prevOff, prevSize := s.Image(), s.Offset(), s.mu.size
	mustAppend(t, s, createTopic("last", idC, 3)...)
	full := s.mu.size
	logName := s.mu.f.Name()
	s.Close()
	content, err := os.ReadFile(logName)
	if err != nil {
		t.Fatal(err)
	}
	for cut := prevSize; cut < full; cut++ {
		d := copyDir(t, dir)
		name := filepath.Join(d, filepath.Base(logName))
		if err := os.WriteFile(name, content[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		r := openT(t, d, StoreOptions{SnapshotEvery: -1, SnapshotBytes: -1})
		if !sameImage(r.Image(), prev) || r.Offset() != prevOff {
			t.Fatalf("cut at %d: image or offset (%d) differs", cut, r.Offset())
		}
		if st, _ := os.Stat(name); st.Size() != prevSize {
			t.Fatalf("cut at %d: log is %d bytes, want truncated to %d", cut, st.Size(), prevSize)
		}
		mustAppend(t, r, createTopic("last", idC, 1)...)
		want := r.Image()
		r.Close()
		r = openT(t, d, StoreOptions{SnapshotEvery: -1, SnapshotBytes: -1})
		if !sameImage(r.Image(), want) {
			t.Fatalf("cut at %d: append after truncation did not survive a restart", cut)
		}
		r.Close()
	}
	// Garbage after the last entry, and a flipped bit inside it, are cut the same way.
	for _, mangle := range []func([]byte) []byte{
		func(b []byte) []byte { return append(b, 0, 0, 0, 9, 1, 2, 3) },
		func(b []byte) []byte { return append(b, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 1) }, // a huge length claim
		func(b []byte) []byte { b[len(b)-3] ^= 0x10; return b },
	} {
		d := copyDir(t, dir)
		name := filepath.Join(d, filepath.Base(logName))
		if err := os.WriteFile(name, mangle(slices.Clone(content)), 0o644); err != nil {
			t.Fatal(err)
		}
		r := openT(t, d, StoreOptions{SnapshotEvery: -1, SnapshotBytes: -1})
		if got := r.Offset(); got != prevOff && got != prevOff+4 {
			t.Fatalf("mangled tail: offset %d", got)
		}
		r.Close()
	}
}

func TestSnapshotAndTailReplay(t *testing.T) {
	dir := t.TempDir()
	opts := StoreOptions{SnapshotEvery: 10, SnapshotBytes: -1}
	s := openT(t, dir, opts)
	workload(t, s, 30)
	want, off := s.Image(), s.Offset()
	logs, snaps := logFiles(t, dir)
	if len(snaps) != 1 || len(logs) != 1 || logs[0] != snaps[0] || snaps[0] == 0 {
		t.Fatalf("after snapshots: logs %v snapshots %v, want one of each at the same offset", logs, snaps)
	}
	if off == snaps[0] {
		t.Fatal("no tail after the snapshot; test proves nothing")
	}
	s.Close()
	s = openT(t, dir, opts)
	if !sameImage(s.Image(), want) || s.Offset() != off {
		t.Fatal("snapshot + tail replay differs")
	}
	s.Close()
}

// TestCrashAfterSnapshotBeforeRoll: the snapshot is durable but the log was not rolled
// (and the old log still holds the records the snapshot covers).
func TestCrashAfterSnapshotBeforeRoll(t *testing.T) {
	dir := t.TempDir()
	opts := StoreOptions{SnapshotEvery: -1, SnapshotBytes: -1}
	s := openT(t, dir, opts)
	workload(t, s, 10)
	at := s.Offset()
	if err := writeSnapshot(dir, at, s.Image(), true); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, createTopic("tail", idC, 2)...)
	want, off := s.Image(), s.Offset()
	s.Close()

	s = openT(t, dir, opts)
	if !sameImage(s.Image(), want) || s.Offset() != off {
		t.Fatal("replay across an unrolled snapshot differs")
	}
	mustAppend(t, s, &RegisterBrokerRecord{ID: 3, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 3}}})
	want = s.Image()
	s.Close()
	s = openT(t, dir, opts)
	defer s.Close()
	if !sameImage(s.Image(), want) {
		t.Fatal("append after unrolled snapshot lost")
	}

	// The snapshot covers the whole of a log whose records it holds: a crash right after
	// it, before the new log existed.
	d2 := t.TempDir()
	s2 := openT(t, d2, opts)
	workload(t, s2, 5)
	w2, o2 := s2.Image(), s2.Offset()
	if err := writeSnapshot(d2, o2, w2, true); err != nil {
		t.Fatal(err)
	}
	s2.Close()
	s2 = openT(t, d2, opts)
	if !sameImage(s2.Image(), w2) || s2.Offset() != o2 {
		t.Fatal("replay with snapshot at the log end differs")
	}
	mustAppend(t, s2, &RegisterBrokerRecord{ID: 9, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9}}})
	w2 = s2.Image()
	s2.Close()
	s2 = openT(t, d2, opts)
	defer s2.Close()
	if !sameImage(s2.Image(), w2) || s2.Offset() != o2+1 {
		t.Fatal("append after snapshot at log end lost")
	}
}

func TestCorruptSnapshot(t *testing.T) {
	opts := StoreOptions{SnapshotEvery: -1, SnapshotBytes: -1}
	// With the full log still present, a bad snapshot is skipped.
	dir := t.TempDir()
	s := openT(t, dir, opts)
	workload(t, s, 8)
	want := s.Image()
	if err := writeSnapshot(dir, s.Offset(), want, true); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, snaps := logFiles(t, dir)
	name := filepath.Join(dir, fileName(snaps[0], snapshotSuffix))
	b, _ := os.ReadFile(name)
	b[len(b)/2] ^= 1
	os.WriteFile(name, b, 0o644)
	s = openT(t, dir, opts)
	if !sameImage(s.Image(), want) {
		t.Fatal("fallback to the log differs")
	}
	s.Close()

	// Once the log it covered is gone, a bad snapshot is an error, not an empty image.
	dir = t.TempDir()
	s = openT(t, dir, opts)
	workload(t, s, 8)
	if err := s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, &RegisterBrokerRecord{ID: 5, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 5}}})
	s.Close()
	logs, snaps := logFiles(t, dir)
	if len(logs) != 1 || logs[0] != snaps[0] {
		t.Fatalf("Snapshot did not roll: logs %v snaps %v", logs, snaps)
	}
	name = filepath.Join(dir, fileName(snaps[0], snapshotSuffix))
	b, _ = os.ReadFile(name)
	b[len(b)/2] ^= 1
	os.WriteFile(name, b, 0o644)
	if _, err := OpenStore(dir, opts); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("OpenStore with lost history = %v, want ErrCorrupt", err)
	}
}

func TestProducerIDsNeverRepeat(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, StoreOptions{})
	seen := map[int64]bool{}
	alloc := func() {
		first, err := s.AllocateProducerIDs(1, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if seen[first] || first%1000 != 0 {
			t.Fatalf("block %d repeated or misaligned", first)
		}
		seen[first] = true
	}
	for i := 0; i < 3; i++ {
		alloc()
	}
	s.Close()
	s = openT(t, dir, StoreOptions{})
	defer s.Close()
	for i := 0; i < 3; i++ {
		alloc()
	}
	if _, err := s.AllocateProducerIDs(1, 0); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("allocating 0 ids: %v", err)
	}
	if s.Image().NextProducerID() != 6000 {
		t.Fatalf("next producer id = %d", s.Image().NextProducerID())
	}
}

func TestWriteFailureFailsStore(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, StoreOptions{})
	mustAppend(t, s, createTopic("a", idA, 1)...)
	before := s.Image()
	s.mu.f.Close() // the disk goes away under the store
	if err := s.Append(createTopic("b", idB, 1)...); !errors.Is(err, ErrStoreFailed) {
		t.Fatalf("Append on a dead file = %v", err)
	}
	if s.Image() != before {
		t.Fatal("image published without a durable write")
	}
	if err := s.Append(&RegisterBrokerRecord{ID: 1, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 1}}}); !errors.Is(err, ErrStoreFailed) {
		t.Fatalf("store accepted an append after a failure: %v", err)
	}
	s.mu.f = nil
	s.Close()
	s = openT(t, dir, StoreOptions{})
	defer s.Close()
	if !sameImage(s.Image(), before) {
		t.Fatal("reopen after failure differs")
	}
}

func TestGapIsCorrupt(t *testing.T) {
	dir := t.TempDir()
	opts := StoreOptions{SnapshotEvery: -1, SnapshotBytes: -1}
	s := openT(t, dir, opts)
	workload(t, s, 3)
	s.Close()
	// A log that starts past the end of the others: records are missing.
	if err := os.WriteFile(filepath.Join(dir, fileName(1_000_000, logSuffix)), EncodeEntry(nil, &RegisterBrokerRecord{ID: 1, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 1}}}), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStore(dir, opts); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("OpenStore with a gap = %v", err)
	}
}

func TestStoreLocked(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, StoreOptions{})
	if _, err := OpenStore(dir, StoreOptions{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second OpenStore = %v, want ErrLocked", err)
	}
	s.Close()
	s = openT(t, dir, StoreOptions{})
	s.Close()
}

// FuzzReplay writes arbitrary bytes as a log file (and optionally a snapshot) and opens
// the store: it must not panic, and if it opens, it must take an append and replay to
// the same image again.
func FuzzReplay(f *testing.F) {
	valid := EncodeEntry(nil, createTopic("t", idA, 2)...)
	valid = EncodeEntry(valid, &RegisterBrokerRecord{ID: 1, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 1}}}, &ProducerIDsRecord{NextProducerID: 1000})
	f.Add(valid, []byte(nil))
	f.Add(valid[:len(valid)-3], []byte(nil))
	f.Add(append(slices.Clone(valid), 1, 2, 3), []byte(nil))
	im := mustApply(f, &Image{}, createTopic("t", idA, 2)...)
	sd := f.TempDir()
	if err := writeSnapshot(sd, 3, im, true); err != nil {
		f.Fatal(err)
	}
	snap, _ := os.ReadFile(filepath.Join(sd, fileName(3, snapshotSuffix)))
	f.Add(valid, snap)
	root := f.TempDir()
	var iter atomic.Int64
	f.Fuzz(func(t *testing.T, logBytes, snapBytes []byte) {
		// A fresh directory per input, under one parent made once (TempDir per input is
		// slow when the disk is busy).
		dir := filepath.Join(root, fmt.Sprint(iter.Add(1)))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		if err := os.WriteFile(filepath.Join(dir, fileName(0, logSuffix)), logBytes, 0o644); err != nil {
			t.Fatal(err)
		}
		if len(snapBytes) > 0 {
			var off int64
			if len(snapBytes) >= 16 {
				off = int64(snapBytes[15]) // small offsets, so names and contents can agree
			}
			if err := os.WriteFile(filepath.Join(dir, fileName(off, snapshotSuffix)), snapBytes, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		opts := StoreOptions{SnapshotEvery: 3, noSync: true}
		s, err := OpenStore(dir, opts)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("OpenStore error not ErrCorrupt: %v", err)
			}
			return
		}
		if err := s.Append(&RegisterBrokerRecord{ID: 77, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "fuzz", Port: 7}}}); err != nil {
			t.Fatalf("Append after replay: %v", err)
		}
		want, off := s.Image(), s.Offset()
		s.Close()
		s, err = OpenStore(dir, opts)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer s.Close()
		if !sameImage(s.Image(), want) || s.Offset() != off {
			t.Fatal("second replay differs")
		}
	})
}

func BenchmarkAppend(b *testing.B) {
	s := openT(b, b.TempDir(), StoreOptions{})
	defer s.Close()
	rec := &ConfigRecord{Resource: ResourceBroker, Name: "0", Key: "log.retention.ms"}
	b.SetBytes(int64(len(EncodeEntry(nil, rec))))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		rec.Value = StringPtr(fmt.Sprint(i))
		if err := s.Append(rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReplay opens a store whose log creates `topics` topics of 4 partitions, one
// entry each, with a config per topic.
func BenchmarkReplay(b *testing.B) {
	for _, topics := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("topics=%d", topics), func(b *testing.B) {
			dir := b.TempDir()
			var buf []byte
			for i := 0; i < topics; i++ {
				name := fmt.Sprintf("topic-%06d", i)
				recs := createTopic(name, UUID{0: byte(i), 1: byte(i >> 8), 2: byte(i >> 16), 15: 9}, 4)
				recs = append(recs, &ConfigRecord{Resource: ResourceTopic, Name: name, Key: "retention.ms", Value: StringPtr("1")})
				buf = EncodeEntry(buf, recs...)
			}
			if err := os.WriteFile(filepath.Join(dir, fileName(0, logSuffix)), buf, 0o644); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s := openT(b, dir, StoreOptions{SnapshotEvery: -1, SnapshotBytes: -1})
				if s.Image().NumTopics() != topics {
					b.Fatal("topics missing")
				}
				s.Close()
			}
		})
	}
}

// TestCrashDuringSnapshotSteps replays directories as a crash would leave them at each
// step of a snapshot: a half-written temporary file; the new log created but the old
// log not yet deleted.
func TestCrashDuringSnapshotSteps(t *testing.T) {
	opts := StoreOptions{SnapshotEvery: -1, SnapshotBytes: -1}
	dir := t.TempDir()
	s := openT(t, dir, opts)
	workload(t, s, 6)
	oldLog, _ := os.ReadFile(s.mu.f.Name())
	oldName := filepath.Base(s.mu.f.Name())
	if err := s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, &RegisterBrokerRecord{ID: 4, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 4}}})
	want, off := s.Image(), s.Offset()
	s.Close()

	// The old log survives (the crash came before the cleanup), and a temporary snapshot
	// file is lying around.
	if err := os.WriteFile(filepath.Join(dir, oldName), oldLog, 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, fileName(off, snapshotSuffix)+tmpSuffix)
	if err := os.WriteFile(tmp, []byte("SMSNAP01 half written"), 0o644); err != nil {
		t.Fatal(err)
	}
	s = openT(t, dir, opts)
	defer s.Close()
	if !sameImage(s.Image(), want) || s.Offset() != off {
		t.Fatal("replay after an interrupted snapshot differs")
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("temporary snapshot file not removed")
	}
	if _, err := os.Stat(filepath.Join(dir, oldName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("log covered by the snapshot not removed")
	}
}
