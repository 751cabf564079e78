package engine

import (
	"sync"
	"testing"
)

// TestFlushConcurrentRounds: with several rounds at once, every durable append of
// several producers over a few logs is durable when its wait returns, and a close
// during the appends leaves no waiter behind.
func TestFlushConcurrentRounds(t *testing.T) {
	m, err := Open(Options{Dirs: []string{t.TempDir()}, Sync: SyncFsync, FlushConcurrentRounds: 3})
	if err != nil {
		t.Fatal(err)
	}
	const logs, producers, appends = 4, 6, 30
	ls := make([]*Log, logs)
	for i := range ls {
		if ls[i], err = m.CreateLog(TopicPartition{"rounds", int32(i)}, DefaultLogConfig()); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := makeBatch(testBatch{records: 2, valueSize: 50}) // stamped in place by Append
			for i := range appends {
				l := ls[(p+i)%logs]
				r, err := l.Append(batch, AppendOptions{LeaderEpoch: 1})
				if err != nil {
					t.Error(err)
					return
				}
				if err := l.WaitDurable(r.LastOffset); err != nil {
					t.Error(err)
					return
				}
				if rp := l.recoveryPoint.Load(); rp <= r.LastOffset {
					t.Errorf("offset %d released at recovery point %d", r.LastOffset, rp)
				}
			}
		}()
	}
	wg.Wait()
	var n int64
	for _, l := range ls {
		n += l.LogEndOffset()
	}
	if n != 2*producers*appends {
		t.Errorf("log end offsets sum to %d, want %d", n, 2*producers*appends)
	}
	// A close while producers wait: each wait returns (nil or ErrClosed).
	done := make(chan struct{})
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := makeBatch(testBatch{records: 2, valueSize: 50})
			l := ls[p%logs]
			for {
				r, err := l.Append(batch, AppendOptions{LeaderEpoch: 1})
				if err != nil {
					return // closed
				}
				if err := l.WaitDurable(r.LastOffset); err != nil {
					return
				}
				select {
				case <-done:
					return
				default:
				}
			}
		}()
	}
	m.Close()
	close(done)
	wg.Wait()
}
