package engine

import (
	"errors"
	"fmt"
	"testing"
)

// TestProducerRetryAfterRestart: a retry of any of a producer's last five
// batches is answered as a duplicate with the offsets it was written at,
// after a clean restart and after a crash just as before them. A snapshot
// holds only each producer's newest batch (Kafka's format): loaded alone,
// it made the retry of the batch before it OUT_OF_ORDER_SEQUENCE_NUMBER,
// and franz-go renumbers such a batch under a new epoch and writes it a
// second time (the duplicates of the chaos harness's rolling restarts).
func TestProducerRetryAfterRestart(t *testing.T) {
	dir := t.TempDir()
	m := openTest(t, []string{dir}, SyncNone, nil)
	tp := TopicPartition{"retry", 0}
	l, err := m.CreateLog(tp, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	var batches [][]byte
	add := func(b []byte) {
		mustAppend(t, l, b)
		batches = append(batches, b)
	}
	// Producer 42: seven batches at epoch 0 (the first two beyond the five
	// kept), with another producer's and a plain batch between them.
	// Producer 43: two batches at epoch 0, then two at epoch 1.
	seq := int32(0)
	for i := 0; i < 7; i++ {
		n := 1 + i%2
		add(makeBatch(testBatch{records: n, pid: 42, seq: seq}))
		seq += int32(n)
		if i%3 == 1 {
			add(makeBatch(testBatch{records: 1, pid: 7, seq: int32(i / 3)}))
			mustAppend(t, l, makeBatch(testBatch{records: 1})) // not idempotent: no retry
		}
	}
	for _, ep := range []int16{0, 1} {
		add(makeBatch(testBatch{records: 1, pid: 43, epoch: ep, seq: 0}))
		add(makeBatch(testBatch{records: 2, pid: 43, epoch: ep, seq: 1}))
	}
	answers := func(l *Log) []string {
		var out []string
		for _, b := range batches {
			r, err := l.Append(append([]byte(nil), b...), AppendOptions{})
			switch {
			case err == nil && r.Duplicate:
				out = append(out, fmt.Sprintf("duplicate %d-%d", r.BaseOffset, r.LastOffset))
			case errors.Is(err, ErrOutOfOrderSequence):
				out = append(out, "out of order")
			case errors.Is(err, ErrInvalidProducerEpoch):
				out = append(out, "fenced epoch")
			case err == nil:
				t.Fatalf("a retry was written again at %d-%d", r.BaseOffset, r.LastOffset)
			default:
				t.Fatalf("retry: %v", err)
			}
		}
		return out
	}
	want := answers(l)
	for i, w := range want[:2] {
		if w != "out of order" {
			t.Fatalf("retry of batch %d, older than the five kept: %s", i, w)
		}
	}
	leo := l.LogEndOffset()
	m.Close()
	for _, crash := range []bool{false, true} {
		m = openTest(t, []string{dir}, SyncNone, nil)
		l = m.Log(tp)
		got := answers(l)
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("crash=%v: retry of batch %d: %s, before the restart %s", crash, i, got[i], want[i])
			}
		}
		if l.LogEndOffset() != leo {
			t.Fatalf("crash=%v: log end %d, want %d", crash, l.LogEndOffset(), leo)
		}
		// The next open is a crash's: recovery from the snapshot the clean
		// close wrote at the log end, with nothing after it to replay.
		m.abandon()
	}
	// A truncation back to that snapshot (a follower cut to its leader's log)
	// rebuilds the state from it: the retries are answered as before.
	m = openTest(t, []string{dir}, SyncNone, nil)
	defer m.Close()
	l = m.Log(tp)
	for i := 0; i < 2; i++ {
		mustAppend(t, l, makeBatch(testBatch{records: 1, pid: 8, seq: int32(i)}))
	}
	if err := l.TruncateTo(leo); err != nil {
		t.Fatal(err)
	}
	got := answers(l)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("truncated: retry of batch %d: %s, before %s", i, got[i], want[i])
		}
	}
}

// TestProducerRetryAfterRestartFarBack: a producer's earlier batches are
// found behind other producers' writes, as far back as the last 256 KiB of
// the active segment; past that they stay unknown, as in Kafka, and a
// retry of one is out of order.
func TestProducerRetryAfterRestartFarBack(t *testing.T) {
	dir := t.TempDir()
	m := openTest(t, []string{dir}, SyncNone, nil)
	tp := TopicPartition{"far", 0}
	l, err := m.CreateLog(tp, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	pb := func(pid int64, seq int32) []byte {
		return makeBatch(testBatch{records: 1, valueSize: 100, pid: pid, seq: seq})
	}
	filler := func(kib int) {
		for n := 0; n < kib*1024; {
			b := makeBatch(testBatch{records: 1, valueSize: 900})
			mustAppend(t, l, b)
			n += len(b)
		}
	}
	// Producer 45: two batches, then 300 KiB, then its last batch.
	// Producer 44: four batches, then 100 KiB, then its last batch.
	r45 := []AppendResult{mustAppend(t, l, pb(45, 0))}
	filler(300)
	r45 = append(r45, mustAppend(t, l, pb(45, 1)))
	var r44 []AppendResult
	for i := int32(0); i < 4; i++ {
		r44 = append(r44, mustAppend(t, l, pb(44, i)))
	}
	filler(100)
	r44 = append(r44, mustAppend(t, l, pb(44, 4)))
	m.Close()
	m = openTest(t, []string{dir}, SyncNone, nil)
	defer m.Close()
	l = m.Log(tp)
	for i, r := range r44 {
		d, err := l.Append(pb(44, int32(i)), AppendOptions{})
		if err != nil || !d.Duplicate || d.BaseOffset != r.BaseOffset {
			t.Errorf("retry of producer 44's batch %d (at %d): %+v %v", i, r.BaseOffset, d, err)
		}
	}
	if _, err := l.Append(pb(45, 0), AppendOptions{}); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Errorf("retry of producer 45's batch 300 KiB back: %v, want out of order", err)
	}
	if d, err := l.Append(pb(45, 1), AppendOptions{}); err != nil || !d.Duplicate || d.BaseOffset != r45[1].BaseOffset {
		t.Errorf("retry of producer 45's last batch: %+v %v", d, err)
	}
}
