package engine

import (
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestStressAppendReadRetentionTruncate runs appenders, readers, retention,
// DeleteRecords and truncation at once (meant for -race). Readers check every
// batch they read unless a truncation ran meanwhile (truncGen is odd while
// one runs).
func TestStressAppendReadRetentionTruncate(t *testing.T) {
	m := openTest(t, []string{t.TempDir()}, SyncFsync, nil)
	defer m.Close()
	cfg := smallConfig()
	cfg.SegmentBytes = 16 << 10
	l, _ := m.CreateLog(TopicPartition{"stress", 0}, cfg)
	var truncGen, appended atomic.Int64
	truncated := func(gen int64) bool { return gen%2 == 1 || truncGen.Load() != gen }
	stop := make(chan struct{})
	var wg sync.WaitGroup
	run := func(f func(i int) bool) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if !f(i) {
					return
				}
			}
		}()
	}
	for a := 0; a < 2; a++ {
		run(func(i int) bool {
			r, err := l.Append(makeBatch(testBatch{records: 1 + i%3, valueSize: 100 + i%200}), AppendOptions{LeaderEpoch: 1})
			if err != nil {
				t.Error(err)
				return false
			}
			if err := l.WaitDurable(r.LastOffset); err != nil && !isErr(err, ErrOffsetOutOfRange) {
				t.Error(err) // out of range: truncated away meanwhile
				return false
			}
			appended.Add(1)
			l.SetHighWatermark(l.LogEndOffset()) // a batch boundary, even after a truncation
			return true
		})
	}
	for r := 0; r < 2; r++ {
		run(func(i int) bool {
			gen := truncGen.Load()
			start := l.LogStartOffset()
			hw := l.HighWatermark()
			if hw <= start {
				return true
			}
			off := start + int64(i)%(hw-start)
			s, err := l.Read(off, 8<<10, hw, true)
			if err != nil {
				if !isErr(err, ErrOffsetOutOfRange) && !truncated(gen) {
					t.Error(err)
					return false
				}
				return true
			}
			if s.Size == 0 {
				if !truncated(gen) {
					t.Errorf("nothing read at %d below HW %d", off, hw)
					return false
				}
				return true
			}
			buf := make([]byte, s.Size)
			_, rerr := s.File.ReadAt(buf, s.Pos)
			s.Release()
			if truncated(gen) {
				return true
			}
			if rerr != nil && rerr != io.EOF {
				t.Error(rerr)
				return false
			}
			for p := 0; p < len(buf); {
				h, err := ValidateBatch(buf[p:])
				if err != nil {
					t.Errorf("read at %d: %v", off, err)
					return false
				}
				p += int(h.Size())
			}
			return true
		})
	}
	run(func(i int) bool {
		if hw := l.HighWatermark(); hw > 200 {
			if _, err := l.DeleteRecordsBefore(hw - 200); err != nil && !isErr(err, ErrOffsetOutOfRange) {
				t.Error(err)
				return false
			}
		}
		m.EnforceRetention()
		time.Sleep(time.Millisecond) // pacing, not waiting for a condition
		return true
	})
	run(func(i int) bool {
		time.Sleep(5 * time.Millisecond) // pacing
		if leo := l.LogEndOffset(); leo > 50 && i%4 == 0 {
			truncGen.Add(1)
			if err := l.TruncateTo(leo - 10); err != nil {
				t.Error(err)
				return false
			}
			truncGen.Add(1)
		}
		return true
	})
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && !t.Failed() {
		time.Sleep(10 * time.Millisecond) // the test's duration, not a condition
	}
	close(stop)
	wg.Wait()
	if appended.Load() < 20 {
		t.Fatalf("only %d appends", appended.Load())
	}
	l.SetHighWatermark(l.LogEndOffset())
	readAll(t, l)
}
