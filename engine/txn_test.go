package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"syscall"
	"testing"

	"github.com/samsa-broker/samsa/engine/vfs"
	"github.com/samsa-broker/samsa/engine/vfs/errorfs"
)

// txnData builds a transactional batch of n records for pid.
func txnData(t testing.TB, pid int64, epoch int16, seq int32, n int, ts int64) []byte {
	recs := make([]kv, n)
	for i := range recs {
		recs[i] = kv{key: fmt.Sprint("k", i), value: []byte("v")}
	}
	return keyedBatch(t, recs, batchOpts{pid: pid, epoch: epoch, seq: seq, transactional: true, baseTs: ts})
}

// verified runs a successful verification for pid's next transaction.
func verified(t testing.TB, l *Log, pid int64, epoch int16, seq int32) {
	t.Helper()
	g, needed := l.StartTxnVerification(pid, epoch, seq)
	if needed && !l.CompleteTxnVerification(pid, g) {
		t.Fatalf("verification of producer %d not completed", pid)
	}
}

func marker(pid int64, epoch int16, coord int32, commit bool) []byte {
	return AppendMarkerBatch(nil, Marker{ProducerID: pid, ProducerEpoch: epoch, CoordinatorEpoch: coord, Commit: commit, Timestamp: 5})
}

func TestTxnLastStableOffsetAndAbortedIndex(t *testing.T) {
	m := openTest(t, []string{t.TempDir()}, SyncNone, nil)
	defer m.Close()
	l, _ := m.CreateLog(TopicPartition{"txn", 0}, DefaultLogConfig())
	hwAtEnd := func() { l.SetHighWatermark(l.LogEndOffset()) }

	if got := l.LastStableOffset(); got != 0 {
		t.Fatalf("LSO of an empty log %d", got)
	}
	verified(t, l, 1, 0, 0)
	a := mustAppend(t, l, txnData(t, 1, 0, 0, 3, 1))   // 0..2, producer 1 open
	mustAppend(t, l, makeBatch(testBatch{records: 2})) // 3..4
	hwAtEnd()
	if got := l.LastStableOffset(); got != a.BaseOffset {
		t.Fatalf("LSO %d with producer 1's transaction open at %d", got, a.BaseOffset)
	}
	verified(t, l, 2, 0, 0)
	b := mustAppend(t, l, txnData(t, 2, 0, 0, 2, 2)) // 5..6, producer 2 open
	m1 := mustAppend(t, l, marker(1, 0, 7, false))   // 7: abort producer 1
	if got := l.LastStableOffset(); got != a.BaseOffset {
		t.Fatalf("LSO %d: the abort marker at %d is not below the high watermark", got, m1.BaseOffset)
	}
	hwAtEnd()
	if got := l.LastStableOffset(); got != b.BaseOffset {
		t.Fatalf("LSO %d after the abort, want producer 2's first offset %d", got, b.BaseOffset)
	}
	want1 := AbortedTxn{ProducerID: 1, FirstOffset: 0, LastOffset: 7, LastStableOffset: b.BaseOffset}
	if got := l.AbortedTransactions(0, l.LogEndOffset(), nil); !reflect.DeepEqual(got, []AbortedTxn{want1}) {
		t.Fatalf("aborted %+v, want %+v", got, want1)
	}
	m2 := mustAppend(t, l, marker(2, 0, 7, true)) // 8: commit producer 2
	hwAtEnd()
	if got, end := l.LastStableOffset(), l.LogEndOffset(); got != end {
		t.Fatalf("LSO %d with every transaction decided, want the high watermark %d", got, end)
	}
	// Producer 2 again: an abort leaves the LSO past it.
	verified(t, l, 2, 0, 2)
	c := mustAppend(t, l, txnData(t, 2, 0, 2, 1, 3)) // 9
	m3 := mustAppend(t, l, marker(2, 0, 7, false))   // 10
	want2 := AbortedTxn{ProducerID: 2, FirstOffset: c.BaseOffset, LastOffset: m3.BaseOffset, LastStableOffset: m3.BaseOffset + 1}
	all := l.AbortedTransactions(0, l.LogEndOffset(), nil)
	if !reflect.DeepEqual(all, []AbortedTxn{want1, want2}) {
		t.Fatalf("aborted %+v", all)
	}
	// Ranges: an overlap is an abort marker at or after from and data below upTo.
	for _, tc := range []struct {
		from, upTo int64
		want       []AbortedTxn
	}{
		{0, 1, []AbortedTxn{want1}}, {7, 8, []AbortedTxn{want1}}, {8, 9, nil}, {8, 10, []AbortedTxn{want2}},
		{m2.BaseOffset, 100, []AbortedTxn{want2}}, {11, 100, nil}, {5, 5, nil},
	} {
		if got := l.AbortedTransactions(tc.from, tc.upTo, nil); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("AbortedTransactions(%d, %d) = %+v, want %+v", tc.from, tc.upTo, got, tc.want)
		}
	}
	// The file is Kafka's: 34-byte entries, version 0.
	data, err := os.ReadFile(filepath.Join(l.Dir(), segmentFileName(0, txnIndexSuffix)))
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 2*txnEntrySize || binary.BigEndian.Uint16(data) != 0 || int64(binary.BigEndian.Uint64(data[2:])) != 1 ||
		int64(binary.BigEndian.Uint64(data[18:])) != 7 || int64(binary.BigEndian.Uint64(data[26:])) != b.BaseOffset {
		t.Fatalf("txnindex bytes %x", data)
	}
	ps := l.Producers()
	if len(ps) != 2 || ps[0].CoordinatorEpoch != 7 || ps[0].TxnStartOffset != -1 || ps[1].TxnStartOffset != -1 {
		t.Fatalf("producers %+v", ps)
	}
}

func TestTxnStateRules(t *testing.T) {
	m := openTest(t, []string{t.TempDir()}, SyncNone, nil)
	defer m.Close()
	l, _ := m.CreateLog(TopicPartition{"rules", 0}, DefaultLogConfig())
	app := func(b []byte) error { _, err := l.Append(b, AppendOptions{LeaderEpoch: 1}); return err }

	// A transactional batch nobody verified opens nothing.
	if err := app(txnData(t, 1, 0, 0, 1, 1)); !isErr(err, ErrInvalidTxnState) {
		t.Fatalf("unverified transactional batch: %v", err)
	}
	verified(t, l, 1, 0, 0)
	if err := app(txnData(t, 1, 0, 0, 1, 1)); err != nil {
		t.Fatal(err)
	}
	// Inside a transaction no verification is needed, and no
	// non-transactional batch is taken.
	if _, needed := l.StartTxnVerification(1, 0, 1); needed {
		t.Fatal("verification asked for inside an open transaction")
	}
	if err := app(keyedBatch(t, []kv{{key: "x", value: []byte("y")}}, batchOpts{pid: 1, epoch: 0, seq: 1})); !isErr(err, ErrInvalidTxnState) {
		t.Fatalf("non-transactional batch inside a transaction: %v", err)
	}
	if err := app(txnData(t, 1, 0, 1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	// Markers: never a lower epoch or coordinator epoch; control batches
	// must be markers.
	if err := app(marker(1, 0, 3, true)); err != nil {
		t.Fatal(err)
	}
	if err := app(marker(1, 0, 2, false)); !isErr(err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("marker from an older coordinator: %v", err)
	}
	bogus := keyedBatch(t, []kv{{key: "\x00\x00\x00\x09", value: []byte{0, 0, 0, 0, 0, 3}}}, batchOpts{pid: 1, epoch: 0, transactional: true, control: true})
	if err := app(bogus); !isErr(err, ErrInvalidRecord) {
		t.Fatalf("control batch of unknown type: %v", err)
	}
	// KIP-890 part 2: the coordinator writes the marker with the bumped
	// epoch; the old epoch is fenced, the new one starts at sequence 0.
	verified(t, l, 1, 0, 2)
	if err := app(txnData(t, 1, 0, 2, 1, 2)); err != nil {
		t.Fatal(err)
	}
	if err := app(marker(1, 1, 3, true)); err != nil {
		t.Fatal(err)
	}
	if err := app(marker(1, 0, 3, false)); !isErr(err, ErrInvalidProducerEpoch) {
		t.Fatalf("marker of a fenced epoch: %v", err)
	}
	verified(t, l, 1, 0, 3)
	if err := app(txnData(t, 1, 0, 3, 1, 3)); !isErr(err, ErrInvalidProducerEpoch) {
		t.Fatalf("late batch of the epoch before the bump: %v", err)
	}
	verified(t, l, 1, 1, 5)
	if err := app(txnData(t, 1, 1, 5, 1, 3)); !isErr(err, ErrOutOfOrderSequence) {
		t.Fatalf("bumped epoch not starting at 0: %v", err)
	}
	verified(t, l, 1, 1, 0)
	if err := app(txnData(t, 1, 1, 0, 1, 3)); err != nil {
		t.Fatalf("bumped epoch at 0: %v", err)
	}

	// The ABA race KIP-890 closes: a verification answered after a marker
	// ended the transaction it verified is stale.
	g, _ := l.StartTxnVerification(2, 0, 0)
	verified(t, l, 3, 0, 0) // another producer, unaffected
	if err := app(marker(2, 0, 3, false)); err != nil {
		t.Fatal(err)
	}
	if l.CompleteTxnVerification(2, g) {
		t.Fatal("a verification survived a marker of its producer")
	}
	if err := app(txnData(t, 2, 0, 0, 1, 4)); !isErr(err, ErrInvalidTxnState) {
		t.Fatalf("append after a stale verification: %v", err)
	}
	if err := app(txnData(t, 3, 0, 0, 1, 4)); err != nil {
		t.Fatal(err)
	}
	// While a verification is pending, a higher sequence waits for the
	// lower one (no reordering through retries).
	g4, _ := l.StartTxnVerification(4, 0, 0)
	if _, needed := l.StartTxnVerification(4, 0, 1); !needed {
		t.Fatal("second verification")
	}
	if err := app(keyedBatch(t, []kv{{key: "x", value: []byte("y")}}, batchOpts{pid: 4, epoch: 0, seq: 1})); !isErr(err, ErrOutOfOrderSequence) {
		t.Fatalf("sequence above a pending verification's: %v", err)
	}
	if !l.CompleteTxnVerification(4, g4) {
		t.Fatal("complete")
	}
	if err := app(txnData(t, 4, 0, 0, 1, 5)); err != nil {
		t.Fatal(err)
	}
	// A coordinator's transactional batch (TxnOffsetCommit) has no
	// sequence: held to the epoch and transaction rules only.
	offs := func(epoch int16) []byte {
		b, err := AppendProducerRecords(nil, BatchProducer{ID: 5, Epoch: epoch, BaseSequence: -1, Transactional: true},
			[]Record{{Key: []byte("k"), Value: []byte("v")}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if err := app(offs(2)); !isErr(err, ErrInvalidTxnState) {
		t.Fatalf("unverified coordinator batch: %v", err)
	}
	verified(t, l, 5, 2, -1)
	for i := 0; i < 2; i++ {
		if err := app(offs(2)); err != nil {
			t.Fatalf("coordinator batch %d: %v", i, err)
		}
	}
	if err := app(offs(1)); !isErr(err, ErrInvalidProducerEpoch) {
		t.Fatalf("coordinator batch of an older epoch: %v", err)
	}
	// Verification can be switched off (transaction.partition.verification.enable=false).
	m2, err := Open(Options{Dirs: []string{t.TempDir()}, Sync: SyncNone, DisableTxnVerification: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	l2, _ := m2.CreateLog(TopicPartition{"noverify", 0}, DefaultLogConfig())
	if _, err := l2.Append(txnData(t, 1, 0, 0, 1, 1), AppendOptions{}); err != nil {
		t.Fatalf("transactional batch with verification off: %v", err)
	}
}

// TestTxnStateSurvivesReopen: open transactions, coordinator epochs and the
// index come back after a clean close (from the snapshot) and after a
// crash (rebuilt from the log), across segments, truncation included.
func TestTxnStateSurvivesReopen(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprint("crash=", crash), func(t *testing.T) {
			dir := t.TempDir()
			fs := vfs.NewCrashFS(vfs.Default)
			open := func() *Manager {
				m, err := Open(Options{Dirs: []string{dir}, Sync: SyncFsync, FS: fs, DefaultConfig: smallConfig(), manualBackground: true})
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			m := open()
			l, _ := m.CreateLog(TopicPartition{"re", 0}, smallConfig())
			seq := map[int64]int32{}
			for i := 0; i < 40; i++ {
				if i == 20 && crash {
					// A recovery point halfway: the indexes below it are read
					// from their files, those above rebuilt from the log.
					m.flushRound()
					if err := m.writeCheckpoints(); err != nil {
						t.Fatal(err)
					}
				}
				pid := int64(1 + i%3)
				verified(t, l, pid, 0, seq[pid])
				mustAppend(t, l, txnData(t, pid, 0, seq[pid], 3, int64(i)))
				seq[pid] += 3
				mustAppend(t, l, makeBatch(testBatch{records: 2, valueSize: 200}))
				if i%3 == 2 {
					mustAppend(t, l, marker(pid, 0, int32(i), i%2 == 0))
				}
			}
			verified(t, l, 9, 0, 0)
			open9 := mustAppend(t, l, txnData(t, 9, 0, 0, 1, 99))
			if n := segmentCount(l); n < 4 {
				t.Fatalf("only %d segments", n)
			}
			wantAborted := l.AbortedTransactions(0, math.MaxInt64, nil)
			wantProducers := l.Producers()
			if len(wantAborted) < 5 {
				t.Fatalf("only %d aborts", len(wantAborted))
			}
			checkSame := func(what string, l *Log) {
				t.Helper()
				if got := l.AbortedTransactions(0, math.MaxInt64, nil); !reflect.DeepEqual(got, wantAborted) {
					t.Fatalf("%s: aborted\n%+v\nwant\n%+v", what, got, wantAborted)
				}
				if got := l.Producers(); !reflect.DeepEqual(got, wantProducers) {
					t.Fatalf("%s: producers\n%+v\nwant\n%+v", what, got, wantProducers)
				}
				l.SetHighWatermark(l.LogEndOffset())
				if got := l.LastStableOffset(); got > open9.BaseOffset {
					t.Fatalf("%s: LSO %d past the open transaction at %d", what, got, open9.BaseOffset)
				}
			}
			if crash {
				m.flushRound()
				if err := fs.Crash(); err != nil {
					t.Fatal(err)
				}
				m.abandon()
				fs.Restart()
			} else if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			m = open()
			l = m.Log(TopicPartition{"re", 0})
			checkSame("reopened", l)
			if !crash {
				if rec := m.Recovery(); rec.RecoveredLogs != 0 {
					t.Fatalf("clean reopen recovered: %+v", rec)
				}
			}
			// Truncating below the last abort takes its entry and reopens its
			// transaction.
			last := wantAborted[len(wantAborted)-1]
			if err := l.TruncateTo(last.LastOffset); err != nil {
				t.Fatal(err)
			}
			got := l.AbortedTransactions(0, math.MaxInt64, nil)
			if !reflect.DeepEqual(got, wantAborted[:len(wantAborted)-1]) {
				t.Fatalf("after truncation: %+v", got)
			}
			if first, ok := l.OpenTransaction(last.ProducerID); !ok || first != last.FirstOffset {
				t.Fatalf("truncated-away abort: transaction of %d open at %d %v", last.ProducerID, first, ok)
			}
			m.Close()
			m = open()
			defer m.Close()
			l = m.Log(TopicPartition{"re", 0})
			if got := l.AbortedTransactions(0, math.MaxInt64, nil); !reflect.DeepEqual(got, wantAborted[:len(wantAborted)-1]) {
				t.Fatalf("after truncation and reopen: %+v", got)
			}
		})
	}
}

// TestTxnIndexCorruptIsRebuilt: a .txnindex that does not hold together is
// rebuilt from the log at Open.
func TestTxnIndexCorruptIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	m := openTest(t, []string{dir}, SyncFsync, nil)
	l, _ := m.CreateLog(TopicPartition{"c", 0}, smallConfig())
	for i := 0; i < 30; i++ {
		verified(t, l, 1, 0, int32(i))
		mustAppend(t, l, txnData(t, 1, 0, int32(i), 1, int64(i)))
		mustAppend(t, l, makeBatch(testBatch{records: 3, valueSize: 300}))
		mustAppend(t, l, marker(1, 0, 0, i%2 == 0))
	}
	want := l.AbortedTransactions(0, math.MaxInt64, nil)
	ldir := l.Dir()
	m.Close()
	ents, _ := os.ReadDir(ldir)
	n := 0
	for _, e := range ents {
		if filepath.Ext(e.Name()) == txnIndexSuffix {
			p := filepath.Join(ldir, e.Name())
			b, _ := os.ReadFile(p)
			b[0] = 7 // version 7
			os.WriteFile(p, b, 0o644)
			n++
		}
	}
	if n < 2 {
		t.Fatalf("%d index files", n)
	}
	m = openTest(t, []string{dir}, SyncFsync, nil)
	defer m.Close()
	l = m.Log(TopicPartition{"c", 0})
	if got := l.AbortedTransactions(0, math.MaxInt64, nil); !reflect.DeepEqual(got, want) {
		t.Fatalf("rebuilt index %+v, want %+v", got, want)
	}
	for _, e := range ents {
		if filepath.Ext(e.Name()) == txnIndexSuffix {
			b, err := os.ReadFile(filepath.Join(ldir, e.Name()))
			if err == nil && len(b) > 0 && b[0] != 0 {
				t.Fatalf("%s still corrupt", e.Name())
			}
		}
	}
}

func TestProducerSnapshotTransactionFields(t *testing.T) {
	ps := newProducerStates()
	e := newProducerEntry(3)
	e.push(batchMeta{firstSeq: 5, lastSeq: 9, firstOffset: 100, lastOffs: 104, timestamp: 77})
	e.coordEpoch, e.txnFirst, e.lastTs = 12, 90, 77
	ps.m[42] = e
	mk := newProducerEntry(1) // known by a marker only
	mk.coordEpoch, mk.lastTs = 4, 50
	ps.m[7] = mk
	b := ps.encodeSnapshot()
	got, err := decodeSnapshot(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.m, ps.m) {
		t.Fatalf("snapshot round trip:\n%+v\n%+v", got.m[42], ps.m[42])
	}
	var tr txnTracker
	got.attach(&tr)
	if fo := tr.firstOpen(); fo != 90 {
		t.Fatalf("open transaction from the snapshot at %d", fo)
	}
}

// oracleTxns derives the aborted and open transactions of l by reading it
// from its start: what the index and the producer state must say.
func oracleTxns(t testing.TB, l *Log) (aborted []AbortedTxn, open map[int64]int64) {
	t.Helper()
	open = map[int64]int64{}
	var order []int64 // pids by the first offset of their open transaction
	off, leo := l.LogStartOffset(), l.LogEndOffset()
	var buf []byte
	for off < leo {
		var err error
		buf, err = l.ReadCopy(off, 1<<20, leo, true, buf[:0])
		if err != nil || len(buf) == 0 {
			t.Fatalf("read at %d: %v", off, err)
		}
		for p := 0; p < len(buf); {
			h, err := validateStoredBatch(buf[p:])
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case h.Control():
				mk, ok, err := DecodeMarker(buf[p : p+int(h.Size())])
				if err != nil {
					t.Fatal(err)
				}
				first, isOpen := open[h.ProducerID]
				if ok && isOpen {
					delete(open, h.ProducerID)
					for i, pid := range order {
						if pid == h.ProducerID {
							order = append(order[:i], order[i+1:]...)
							break
						}
					}
					if !mk.Commit {
						lso := h.BaseOffset + 1
						if len(order) > 0 {
							lso = open[order[0]]
						}
						aborted = append(aborted, AbortedTxn{h.ProducerID, first, h.BaseOffset, lso})
					}
				}
			case h.Transactional():
				if _, ok := open[h.ProducerID]; !ok {
					open[h.ProducerID] = h.BaseOffset
					order = append(order, h.ProducerID)
				}
			}
			off = h.LastOffset() + 1
			p += int(h.Size())
		}
	}
	return aborted, open
}

// txnCrashRun is a seeded transactional workload over a CrashFS: producers
// open transactions (verified), write, commit or abort (sometimes with the
// KIP-890 epoch bump), among plain batches, truncations, flushes,
// checkpoints and power losses. After each loss, and at the end, the
// index, the open transactions and the LSO must be what the log says
// (oracleTxns).
type txnCrashRun struct {
	*crashRun
	epoch map[int64]int16
}

func (r *txnCrashRun) producerSeq(pid int64) (int16, int32, bool) {
	ep, last, ok := r.l.ProducerState(pid)
	if !ok {
		return r.epoch[pid], 0, false
	}
	_, inTxn := r.l.OpenTransaction(pid)
	return ep, nextSequence(last), inTxn
}

func (r *txnCrashRun) txnOp(k int) {
	r.step++
	l := r.l
	pid := int64(1 + r.rng.Intn(4))
	switch {
	case k < 45:
		ep, seq, inTxn := r.producerSeq(pid)
		if !inTxn {
			verified(r.t, l, pid, ep, seq)
		}
		n := 1 + r.rng.Intn(3)
		res, err := l.Append(txnData(r.t, pid, ep, seq, n, int64(r.step)), AppendOptions{LeaderEpoch: 1})
		if err != nil {
			r.fatalf("append of producer %d epoch %d seq %d: %v", pid, ep, seq, err)
		}
		r.note("txn data %d: %d..%d", pid, res.BaseOffset, res.LastOffset)
	case k < 62:
		ep, _, inTxn := r.producerSeq(pid)
		bump := r.rng.Intn(3) == 0
		if bump {
			ep++
			r.epoch[pid] = ep
		}
		commit := r.rng.Intn(2) == 0
		res, err := l.Append(marker(pid, ep, 1, commit), AppendOptions{LeaderEpoch: 1})
		if err != nil {
			r.fatalf("marker of producer %d epoch %d: %v", pid, ep, err)
		}
		r.note("marker %d commit %v open %v bump %v at %d", pid, commit, inTxn, bump, res.BaseOffset)
	case k < 72:
		res := mustAppend(r.t, l, makeBatch(testBatch{records: 1 + r.rng.Intn(3), valueSize: r.rng.Intn(300)}))
		r.note("plain %d..%d", res.BaseOffset, res.LastOffset)
	case k < 77:
		to := max(l.LogStartOffset(), l.LogEndOffset()-1-r.rng.Int63n(10))
		if err := l.TruncateTo(to); err != nil {
			r.fatalf("truncate to %d: %v", to, err)
		}
		r.note("truncate to %d: end %d", to, l.LogEndOffset())
	case k < 82:
		if err := r.m.writeCheckpoints(); err != nil {
			r.fatalf("checkpoints: %v", err)
		}
		r.note("checkpoints")
	case k < 87:
		r.m.flushRound()
		r.note("flusher round: recovery point %d", l.RecoveryPoint())
	case k < 90:
		l.SetHighWatermark(l.LogEndOffset())
		r.txnCheck("high watermark at the end")
	case k < 93:
		if err := l.Flush(); err != nil {
			r.fatalf("flush: %v", err)
		}
	default:
		r.txnCrash(k%2 == 0)
	}
}

func (r *txnCrashRun) txnCrash(torn bool) {
	r.note("crash (torn %v)", torn)
	var err error
	if torn {
		err = r.fs.CrashTorn(r.rng)
	} else {
		err = r.fs.Crash()
	}
	if err != nil {
		r.fatalf("crash: %v", err)
	}
	r.m.abandon()
	r.fs.Restart()
	r.open()
	r.txnCheck("after a crash")
}

func (r *txnCrashRun) txnCheck(when string) {
	l := r.l
	wantAborted, open := oracleTxns(r.t, l)
	got := l.AbortedTransactions(l.LogStartOffset(), l.LogEndOffset()+1, nil)
	if len(got) == 0 {
		got = nil
	}
	if !reflect.DeepEqual(got, wantAborted) {
		var segs []string
		l.mu.RLock()
		for _, s := range l.segs {
			segs = append(segs, fmt.Sprintf("%d..%d:%v", s.base, s.next.Load(), s.tix.entries))
		}
		l.mu.RUnlock()
		r.fatalf("%s: aborted transactions\n%+v\nthe log says\n%+v\nsegments %v\nrecovery %+v rp %d", when, got, wantAborted, segs, l.Recovery(), l.RecoveryPoint())
	}
	for i := 0; i < 5; i++ {
		from := l.LogStartOffset() + r.rng.Int63n(l.LogEndOffset()-l.LogStartOffset()+1)
		upTo := from + 1 + r.rng.Int63n(20)
		var want []AbortedTxn
		for _, a := range wantAborted {
			if a.LastOffset >= from && a.FirstOffset < upTo {
				want = append(want, a)
			}
		}
		if got := l.AbortedTransactions(from, upTo, nil); !reflect.DeepEqual(got, want) {
			r.fatalf("%s: AbortedTransactions(%d, %d) = %+v, want %+v", when, from, upTo, got, want)
		}
	}
	firstOpen := int64(math.MaxInt64)
	for pid, first := range open {
		if got, ok := l.OpenTransaction(pid); !ok || got != first {
			r.fatalf("%s: producer %d's transaction open at %d %v, the log says %d", when, pid, got, ok, first)
		}
		firstOpen = min(firstOpen, first)
	}
	for _, p := range l.Producers() {
		if _, ok := open[p.ProducerID]; !ok && p.TxnStartOffset >= 0 {
			r.fatalf("%s: producer %d has a transaction open at %d the log does not", when, p.ProducerID, p.TxnStartOffset)
		}
	}
	l.SetHighWatermark(l.LogEndOffset())
	if got, want := l.LastStableOffset(), min(l.LogEndOffset(), firstOpen); got != want {
		r.fatalf("%s: LSO %d, want %d", when, got, want)
	}
	r.note("checked %s: %d aborts, %d open", when, len(wantAborted), len(open))
}

// TestTxnCrashRecovery runs the transactional crash workload for a few
// seeds (SAMSA_LONG=1: many, longer).
func TestTxnCrashRecovery(t *testing.T) {
	seeds, steps := []int64{1, 3, 5}, 300
	if os.Getenv("SAMSA_LONG") != "" {
		seeds, steps = nil, 3000
		for s := int64(1); s <= 60; s += 2 {
			seeds = append(seeds, s)
		}
	}
	if s := os.Getenv("SAMSA_CRASH_SEED"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seeds = []int64{n}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			r := &txnCrashRun{crashRun: newCrashRun(t, seed), epoch: map[int64]int16{}}
			for i := 0; i < steps; i++ {
				r.txnOp(r.rng.Intn(100))
			}
			r.txnCrash(false)
			r.close()
		})
	}
}

// FuzzTxnIndex: the .txnindex decoder never panics, and what it accepts
// encodes back to the same bytes.
func FuzzTxnIndex(f *testing.F) {
	f.Add(encodeTxnIndex([]AbortedTxn{{1, 0, 5, 6}, {2, 3, 9, 10}}), int64(0), int64(20))
	f.Add([]byte{0, 0, 1}, int64(0), int64(-1))
	f.Fuzz(func(t *testing.T, b []byte, base, end int64) {
		entries, err := decodeTxnIndex(b, base, end)
		if err != nil {
			return
		}
		full := len(b) / txnEntrySize * txnEntrySize
		if got := encodeTxnIndex(entries); !bytes.Equal(got, b[:full]) {
			t.Fatalf("re-encoded %x, read %x", got, b[:full])
		}
	})
}

// FuzzProducerSnapshot: the snapshot decoder never panics, and what it
// accepts encodes to a snapshot that reads the same.
func FuzzProducerSnapshot(f *testing.F) {
	ps := newProducerStates()
	e := newProducerEntry(2)
	e.push(batchMeta{firstSeq: 0, lastSeq: 4, firstOffset: 10, lastOffs: 14, timestamp: 3})
	e.txnFirst, e.lastTs = 10, 3
	ps.m[5] = e
	f.Add(ps.encodeSnapshot())
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeSnapshot(b)
		if err != nil {
			return
		}
		again, err := decodeSnapshot(got.encodeSnapshot())
		if err != nil || !reflect.DeepEqual(again.m, got.m) {
			t.Fatalf("re-encoded snapshot reads %+v (%v), want %+v", again.m, err, got.m)
		}
	})
}

// TestTxnIndexWriteFailureIsUndone: an abort whose .txnindex write fails
// is undone whole (the marker cut off, the transaction still open, the
// directory online); once the disk takes writes again the abort goes in.
func TestTxnIndexWriteFailureIsUndone(t *testing.T) {
	dir := t.TempDir()
	efs := errorfs.New(vfs.Default, 1)
	m := openFS(t, []string{dir}, SyncFsync, efs)
	defer m.Close()
	l, _ := m.CreateLog(TopicPartition{"tix", 0}, DefaultLogConfig())
	verified(t, l, 1, 0, 0)
	d := mustAppend(t, l, txnData(t, 1, 0, 0, 2, 1))
	leo, size := l.LogEndOffset(), l.Size()
	id := efs.Add(errorfs.Rule{Ops: errorfs.OpWrite, Path: "*.txnindex", Errno: syscall.ENOSPC})
	if _, err := l.Append(marker(1, 0, 1, false), AppendOptions{}); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("abort with a full disk: %v", err)
	}
	if l.LogEndOffset() != leo || l.Size() != size {
		t.Fatalf("log changed: LEO %d size %d, want %d %d", l.LogEndOffset(), l.Size(), leo, size)
	}
	if first, ok := l.OpenTransaction(1); !ok || first != d.BaseOffset {
		t.Fatalf("transaction not open after the undone abort: %d %v", first, ok)
	}
	if got := l.AbortedTransactions(0, math.MaxInt64, nil); len(got) != 0 {
		t.Fatalf("index entries of an undone abort: %+v", got)
	}
	efs.RemoveRule(id)
	r := mustAppend(t, l, marker(1, 0, 1, false))
	if r.BaseOffset != leo {
		t.Fatalf("abort at %d, want %d", r.BaseOffset, leo)
	}
	if got := l.AbortedTransactions(0, math.MaxInt64, nil); len(got) != 1 || got[0].LastOffset != leo {
		t.Fatalf("aborted %+v", got)
	}
	if st := m.Stats(); st.DirsOffline != 0 {
		t.Fatalf("directory offline: %+v", st)
	}
}

// A batch of a producer's next transaction (transaction version 2 bumps the
// epoch at every EndTxn) that reaches a partition before the marker of the
// one open there is refused, not taken into that transaction.
func TestTxnNextEpochWaitsForMarker(t *testing.T) {
	m := openTest(t, []string{t.TempDir()}, SyncNone, nil)
	defer m.Close()
	l, _ := m.CreateLog(TopicPartition{"bump", 0}, DefaultLogConfig())
	app := func(b []byte) error { _, err := l.Append(b, AppendOptions{LeaderEpoch: 1}); return err }
	verified(t, l, 1, 0, 0)
	if err := app(txnData(t, 1, 0, 0, 2, 1)); err != nil {
		t.Fatal(err)
	}
	if err := app(txnData(t, 1, 1, 0, 1, 2)); !isErr(err, ErrInvalidTxnState) {
		t.Fatalf("next epoch's batch before the marker: %v", err)
	}
	if first, open := l.OpenTransaction(1); !open || first != 0 {
		t.Fatalf("open transaction at %d (%t), want 0", first, open)
	}
	// The marker, at the bumped epoch, ends it; the next transaction starts.
	if err := app(marker(1, 1, 0, true)); err != nil {
		t.Fatal(err)
	}
	verified(t, l, 1, 1, 0)
	if err := app(txnData(t, 1, 1, 0, 1, 3)); err != nil {
		t.Fatalf("next transaction after the marker: %v", err)
	}
	if first, open := l.OpenTransaction(1); !open || first != 3 {
		t.Fatalf("open transaction at %d (%t), want 3", first, open)
	}
}

// Transaction version 2: the next transaction's first batch (at the epoch EndTxn
// bumped to) reaches a partition whose marker of the previous transaction is not
// written yet. It is sent to verification (not taken as part of the open
// transaction, nor refused outright); the marker, written at the bumped epoch while the
// verification waits, ends the old transaction and keeps the verification, so the
// batch is appended once the coordinator confirms it. A verification of the ended
// transaction (its epoch below the marker's) is ended by the marker.
func TestTxnNextEpochVerifiedAcrossTheMarker(t *testing.T) {
	m := openTest(t, []string{t.TempDir()}, SyncNone, nil)
	defer m.Close()
	l, _ := m.CreateLog(TopicPartition{"bump", 0}, DefaultLogConfig())
	app := func(b []byte) error { _, err := l.Append(b, AppendOptions{LeaderEpoch: 1}); return err }
	verified(t, l, 1, 5, 0)
	if err := app(txnData(t, 1, 5, 0, 2, 1)); err != nil {
		t.Fatal(err)
	}
	if _, needed := l.StartTxnVerification(1, 5, 2); needed {
		t.Fatal("a batch of the open transaction's epoch needed verification")
	}
	g, needed := l.StartTxnVerification(1, 6, 0)
	if !needed {
		t.Fatal("the next epoch's batch was taken as part of the open transaction")
	}
	if err := app(marker(1, 6, 0, false)); err != nil { // abort, at the bumped epoch
		t.Fatal(err)
	}
	if !l.CompleteTxnVerification(1, g) {
		t.Fatal("the marker ended the next transaction's verification")
	}
	if err := app(txnData(t, 1, 6, 0, 1, 2)); err != nil {
		t.Fatalf("the next transaction's first batch: %v", err)
	}
	if first, open := l.OpenTransaction(1); !open || first != 3 {
		t.Fatalf("open transaction at %d (%t), want 3", first, open)
	}
	// A partition added to the transaction of epoch 6 whose batch is still in
	// verification when that transaction ends (marker at 7): the batch is refused.
	if err := app(marker(1, 7, 0, true)); err != nil {
		t.Fatal(err)
	}
	g, _ = l.StartTxnVerification(2, 3, 0)
	if err := app(marker(2, 4, 0, false)); err != nil {
		t.Fatal(err)
	}
	if l.CompleteTxnVerification(2, g) {
		t.Fatal("a verification of the ended transaction survived its marker")
	}
	if err := app(txnData(t, 2, 3, 0, 1, 3)); err == nil {
		t.Fatal("a batch of the ended transaction was appended")
	}
}
