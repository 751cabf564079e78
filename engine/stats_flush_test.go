package engine

import (
	"testing"
	"time"
)

func TestStageHistBuckets(t *testing.T) {
	var d logDir
	for _, v := range []time.Duration{time.Microsecond, 5 * time.Microsecond, 5*time.Microsecond + 1, 10 * time.Microsecond, 3 * time.Millisecond, time.Hour} {
		d.flushStats.queue.observe(v)
	}
	for _, n := range []int{1, 1, 2, 3, 64, 1 << 20} {
		d.flushStats.files.observe(n)
	}
	m := &Manager{dirs: []*logDir{&d}}
	st := m.FlushStats()
	q := st.QueueWait
	if q.Count != 6 || len(q.Buckets) != len(StageBuckets) {
		t.Fatalf("count %d, %d buckets", q.Count, len(q.Buckets))
	}
	// 5µs: two; 10µs: four; 3ms (in 5µs<<10 = 5.12ms): five; the hour only in Count.
	for i, want := range map[int]uint64{0: 2, 1: 4, 9: 4, 10: 5, len(StageBuckets) - 1: 5} {
		if q.Buckets[i] != want {
			t.Errorf("bucket %d (le %v) = %d, want %d", i, StageBuckets[i], q.Buckets[i], want)
		}
	}
	f := st.Files
	// le 1: two; le 2: three; le 4: four; le 64: five; a million only in Count.
	for i, want := range map[int]uint64{0: 2, 1: 3, 2: 4, 5: 4, 6: 5, len(FilesBuckets) - 1: 5} {
		if f.Buckets[i] != want {
			t.Errorf("files bucket %d (le %v) = %d, want %d", i, FilesBuckets[i], f.Buckets[i], want)
		}
	}
	if f.Count != 6 || f.Sum != 1+1+2+3+64+1<<20 {
		t.Errorf("files count %d sum %v", f.Count, f.Sum)
	}
}

// TestFlushStatsDurable: durable appends under fsync are counted stage by stage
// (the rounds run on the test's goroutine, so that every count is exact), and
// with the flusher goroutine neither the append, the wait nor the round allocates.
func TestFlushStatsDurable(t *testing.T) {
	m, err := Open(Options{Dirs: []string{t.TempDir()}, Sync: SyncFsync, manualBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.CreateLog(TopicPartition{"stages", 0}, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	batch := makeBatch(testBatch{records: 1, valueSize: 100})
	const n = 5
	done := 0
	for range n {
		r, err := l.Append(batch, AppendOptions{LeaderEpoch: 1})
		if err != nil {
			t.Fatal(err)
		}
		l.OnDurable(r.LastOffset, func(err error) {
			if err != nil {
				t.Error(err)
			}
			done++
		})
		l.OnDurable(r.LastOffset, func(error) { done++ })
		m.flushRound()
	}
	m.flushRound() // a round with nothing to do counts nothing
	st := m.FlushStats()
	if done != 2*n {
		t.Fatalf("%d of %d waiters released", done, 2*n)
	}
	if st.QueueWait.Count != 2*n || st.SyncPhase.Count != n || st.Release.Count != n || st.SerialRounds != n || st.ParallelRounds != 0 {
		t.Errorf("queue waits %d, sync phases %d, releases %d, rounds %d serial %d parallel; want %d, %d, %d, %d, 0",
			st.QueueWait.Count, st.SyncPhase.Count, st.Release.Count, st.SerialRounds, st.ParallelRounds, 2*n, n, n, n)
	}
	// Each round: the segment; the first also the leader-epoch checkpoint (epoch 1
	// began), whose write syncs the directory and so the new segment's name with it:
	// no directory sync of its own.
	if st.Syncs[SyncKindSegment] != n || st.Syncs[SyncKindEpochs] != 1 || st.Syncs[SyncKindDir] != 0 ||
		st.Syncs[SyncKindIndex] != 0 || st.Syncs[SyncKindTxnIndex] != 0 || st.Files.Count != n || st.Files.Sum != n+1 {
		t.Errorf("syncs %v, files %d rounds %v files", st.Syncs, st.Files.Count, st.Files.Sum)
	}
	if st.Wakeup.Count != 0 || st.SyncPhase.Sum <= 0 {
		t.Errorf("wake-ups %d (no flusher goroutine), sync phase sum %v", st.Wakeup.Count, st.SyncPhase.Sum)
	}
}

func TestDurableAppendNoAllocs(t *testing.T) {
	m := openTest(t, []string{t.TempDir()}, SyncFsync, nil)
	defer m.Close()
	l, err := m.CreateLog(TopicPartition{"alloc", 0}, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	batch := makeBatch(testBatch{records: 1, valueSize: 100})
	app := func() {
		r, err := l.Append(batch, AppendOptions{LeaderEpoch: 1})
		if err == nil {
			err = l.WaitDurable(r.LastOffset)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	app()
	if raceEnabled {
		t.Skip("sync.Pool drops waiters at random under the race detector")
	}
	if a := testing.AllocsPerRun(20, app); a != 0 {
		t.Errorf("durable append: %v allocs", a)
	}
	if st := m.FlushStats(); st.Syncs[SyncKindSegment] < 21 || st.SerialRounds < 21 {
		t.Errorf("%d segment syncs in %d rounds for 22 durable appends", st.Syncs[SyncKindSegment], st.SerialRounds)
	}
}
