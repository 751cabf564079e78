package engine

import (
	"fmt"
	"sync"
	"testing"
)

// flushRounds counts the rounds with work, of every mode.
func flushRounds(s FlushStats) uint64 {
	return s.SerialRounds + s.ParallelRounds + s.SyncfsRounds + s.WritebackRounds
}

// TestFlushHold: appends and durability waits under a FlushHold queue their logs
// without waking the flusher; Release wakes it once, and one round syncs every log
// the hold gathered and releases every waiter. Without the hold, the first append
// already wakes it (the round that would sync that log alone).
func TestFlushHold(t *testing.T) {
	m, err := Open(Options{Dirs: []string{t.TempDir()}, Sync: SyncFsync, manualBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const n = 6
	logs := make([]*Log, n)
	for i := range logs {
		if logs[i], err = m.CreateLog(TopicPartition{"held", int32(i)}, DefaultLogConfig()); err != nil {
			t.Fatal(err)
		}
	}
	d := m.dirs[0]
	drain := func() {
		select {
		case <-d.kick:
		default:
		}
		d.kickAt.Store(0)
	}
	m.flushRound() // the creations' own work
	drain()
	batch := makeBatch(testBatch{records: 1, valueSize: 100})
	before := m.FlushStats()

	var h FlushHold
	done := 0
	for _, l := range logs {
		r, err := l.Append(batch, AppendOptions{LeaderEpoch: 1, Hold: &h})
		if err != nil {
			t.Fatal(err)
		}
		l.OnDurableHeld(r.LastOffset, &h, func(err error) {
			if err != nil {
				t.Error(err)
			}
			done++
		})
		if len(d.kick) != 0 || d.kickAt.Load() != 0 {
			t.Fatalf("%s: the flusher was woken during the hold", l.tp)
		}
	}
	if len(h.dirs) != 1 {
		t.Fatalf("hold of %d directories, want 1", len(h.dirs))
	}
	h.Release()
	if len(d.kick) != 1 || len(h.dirs) != 0 {
		t.Fatalf("after Release: %d kicks pending, %d directories held", len(d.kick), len(h.dirs))
	}
	drain()
	m.flushRound()
	if done != n {
		t.Fatalf("%d of %d waiters released by one round", done, n)
	}
	st := m.FlushStats()
	if r := flushRounds(st) - flushRounds(before); r != 1 {
		t.Errorf("%d rounds, want 1", r)
	}
	if f := st.Files.Count - before.Files.Count; f != 1 {
		t.Errorf("%d rounds synced files, want 1", f)
	}

	// Without a hold the first append wakes the flusher.
	if _, err := logs[0].Append(batch, AppendOptions{LeaderEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	if len(d.kick) != 1 {
		t.Errorf("an append without a hold left the flusher asleep")
	}
	drain()
	m.flushRound()
}

// TestFlushHoldDirs: a hold over logs of two directories wakes both flushers, each
// once.
func TestFlushHoldDirs(t *testing.T) {
	m, err := Open(Options{Dirs: []string{t.TempDir(), t.TempDir()}, Sync: SyncFsync, manualBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var h FlushHold
	batch := makeBatch(testBatch{records: 1, valueSize: 100})
	seen := map[*logDir]bool{}
	for i := 0; len(seen) < 2; i++ {
		if i > 16 {
			t.Fatal("16 logs, all in one directory")
		}
		l, err := m.CreateLog(TopicPartition{fmt.Sprintf("t%d", i), 0}, DefaultLogConfig())
		if err != nil {
			t.Fatal(err)
		}
		seen[l.ld] = true
		for _, d := range m.dirs {
			select {
			case <-d.kick:
			default:
			}
		}
		if _, err := l.Append(batch, AppendOptions{LeaderEpoch: 1, Hold: &h}); err != nil {
			t.Fatal(err)
		}
	}
	if len(h.dirs) != 2 {
		t.Fatalf("hold of %d directories, want 2", len(h.dirs))
	}
	for _, d := range m.dirs {
		if len(d.kick) != 0 {
			t.Fatalf("%s woken during the hold", d.path)
		}
	}
	h.Release()
	for _, d := range m.dirs {
		if len(d.kick) != 1 {
			t.Errorf("%s: %d kicks after Release, want 1", d.path, len(d.kick))
		}
	}
	m.flushRound()
}

// BenchmarkHeldRequest: one op is a Produce request of parts partitions under
// acks=all with SyncFsync: a batch appended to each of parts logs, then a wait
// until all are durable, as replication.Produce does it. held=false appends as
// before FlushHold (the first append wakes the flusher for a round of one log,
// the others wait for the next); held=true queues them under one hold released
// after the last append. Reports the flusher rounds and fdatasyncs per request.
func BenchmarkHeldRequest(b *testing.B) {
	for _, parts := range []int{6, 16} {
		for _, held := range []bool{false, true} {
			b.Run(fmt.Sprintf("parts=%d/held=%v", parts, held), func(b *testing.B) {
				m, err := Open(Options{Dirs: []string{benchDir(b)}, Sync: SyncFsync})
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close()
				logs := make([]*Log, parts)
				for i := range logs {
					if logs[i], err = m.CreateLog(TopicPartition{"bench", int32(i)}, DefaultLogConfig()); err != nil {
						b.Fatal(err)
					}
				}
				batch := makeBatch(testBatch{records: 1, valueSize: 1024})
				var h FlushHold
				req := func() {
					var wg sync.WaitGroup
					wg.Add(parts)
					var hp *FlushHold
					if held {
						hp = &h
					}
					for _, l := range logs {
						r, err := l.Append(batch, AppendOptions{LeaderEpoch: 1, Hold: hp})
						if err != nil {
							b.Fatal(err)
						}
						l.OnDurableHeld(r.LastOffset, hp, func(err error) {
							if err != nil {
								b.Error(err)
							}
							wg.Done()
						})
					}
					h.Release()
					wg.Wait()
				}
				for range preallocAfter { // past the flushes that decide preallocation
					req()
				}
				r0, f0 := flushRounds(m.FlushStats()), m.FsyncHistogram().Count
				b.SetBytes(int64(parts * len(batch)))
				b.ResetTimer()
				for range b.N {
					req()
				}
				b.StopTimer()
				b.ReportMetric(float64(flushRounds(m.FlushStats())-r0)/float64(b.N), "rounds/req")
				b.ReportMetric(float64(m.FsyncHistogram().Count-f0)/float64(b.N), "fdatasyncs/req")
			})
		}
	}
}
