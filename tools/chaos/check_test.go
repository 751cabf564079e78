package chaos

import (
	"strings"
	"testing"
	"time"
)

const sec = int64(time.Second)

// hb builds hand-written histories.
type hb struct {
	h  History
	id int64
}

func newHB() *hb {
	return &hb{h: History{Header: Header{Version: HistoryVersion, Topic: "t", Partitions: 2, Seed: 1}}}
}

func (b *hb) op(op Op) *hb {
	b.id++
	op.ID = b.id
	b.h.Ops = append(b.h.Ops, op)
	return b
}

// ack: proc sent v to p (invocation seq), acknowledged at offset o, over [s, e] seconds.
func (b *hb) ack(proc string, seq int64, p int32, o int64, v string, s, e float64) *hb {
	return b.op(Op{Proc: proc, F: FSend, Status: OK, Seq: seq, P: p, O: o, V: v, Start: ns(s), End: ns(e)})
}

func (b *hb) sendInfo(proc string, seq int64, p int32, v string, s, e float64) *hb {
	return b.op(Op{Proc: proc, F: FSend, Status: Info, Seq: seq, P: p, V: v, Start: ns(s), End: ns(e), Err: "timeout"})
}

func (b *hb) poll(proc, group string, s, e float64, recs ...Rec) *hb {
	return b.op(Op{Proc: proc, F: FPoll, Status: OK, Group: group, Start: ns(s), End: ns(e), Recs: recs})
}

func (b *hb) life(proc, group string, open, close float64) *hb {
	b.op(Op{Proc: proc, F: FOpen, Status: OK, Group: group, Start: ns(open), End: ns(open)})
	return b.op(Op{Proc: proc, F: FClose, Status: OK, Group: group, Start: ns(close), End: ns(close)})
}

func ns(s float64) int64 { return int64(s * float64(sec)) }

func r(p int32, o int64, v string) Rec { return Rec{p, o, v} }

func check(t *testing.T, b *hb) *Result {
	t.Helper()
	return Check(&b.h, Options{Liveness: 30 * time.Second, Linear: LinearOptions{Windows: 4, Width: 8}})
}

// expect asserts exactly the given anomaly counts, and that the first anomaly of each
// kind mentions every given word.
func expect(t *testing.T, res *Result, want map[string]int, words map[string][]string) {
	t.Helper()
	for k, n := range want {
		if res.Counts[k] != n {
			t.Errorf("%s: got %d, want %d (all: %s)", k, res.Counts[k], n, res.Summary())
		}
	}
	for k, n := range res.Counts {
		if _, ok := want[k]; !ok && n > 0 {
			t.Errorf("unexpected %d %s: %+v", n, k, res.Anomalies)
		}
	}
	for k, ws := range words {
		found := false
		for _, a := range res.Anomalies {
			if a.Kind != k {
				continue
			}
			found = true
			text := a.Detail + " " + a.Value + " " + a.Proc
			for _, w := range ws {
				if !strings.Contains(text, w) {
					t.Errorf("%s anomaly %q does not mention %q", k, text, w)
				}
			}
			break
		}
		if !found {
			t.Errorf("no %s anomaly listed", k)
		}
	}
	if res.Valid != (res.Total() == 0) {
		t.Errorf("valid %v with %d anomalies", res.Valid, res.Total())
	}
}

// clean: two producers, a group and an assigned consumer, everything read in order.
func cleanHistory() *hb {
	b := newHB()
	b.life("p0", "", 0, 20).life("p1", "", 0, 20).life("a0", "", 0, 20).life("g0", "g", 0, 20)
	b.op(Op{Proc: "a0", F: FAssign, Status: OK, Parts: []int32{0, 1}, Start: 0, End: 0})
	b.op(Op{Proc: "g0", F: FAssign, Status: OK, Group: "g", Parts: []int32{0, 1}, Start: ns(0.1), End: ns(0.1)})
	b.ack("p0", 1, 0, 0, "p0-1", 1, 2).ack("p1", 1, 0, 1, "p1-1", 1.5, 2.5).ack("p0", 2, 1, 0, "p0-2", 2, 3)
	b.ack("p0", 3, 0, 2, "p0-3", 3, 4)
	b.poll("a0", "", 2, 3, r(0, 0, "p0-1"), r(0, 1, "p1-1"))
	b.poll("a0", "", 3, 5, r(1, 0, "p0-2"), r(0, 2, "p0-3"))
	b.poll("g0", "g", 4, 5, r(0, 0, "p0-1"), r(0, 1, "p1-1"), r(0, 2, "p0-3"), r(1, 0, "p0-2"))
	b.op(Op{Proc: "g0", F: FCommit, Status: OK, Group: "g", Offs: map[int32]int64{0: 3, 1: 1}, Start: ns(5), End: ns(5.1)})
	b.poll(ProcFinal, "", 19, 19.5, r(0, 0, "p0-1"), r(0, 1, "p1-1"), r(0, 2, "p0-3"), r(1, 0, "p0-2"))
	return b
}

func TestCheckClean(t *testing.T) {
	res := check(t, cleanHistory())
	expect(t, res, nil, nil)
	if !res.Valid {
		t.Fatalf("clean history invalid: %s", res.Summary())
	}
	st := res.Stats
	if st.Sends != 4 || st.Acked != 4 || st.AckedRead != 4 || st.Polls != 4 || st.CommitsOK != 1 {
		t.Errorf("stats: %+v", st)
	}
	if res.Linear.Ok == 0 || res.Linear.Illegal != 0 {
		t.Errorf("linear: %+v", res.Linear)
	}
}

func TestCheckLost(t *testing.T) {
	b := newHB()
	b.ack("p0", 1, 0, 0, "p0-1", 1, 2).ack("p0", 2, 0, 1, "p0-2", 1, 2).ack("p0", 3, 0, 2, "p0-3", 1, 2)
	b.poll("a0", "", 3, 4, r(0, 0, "p0-1"), r(0, 2, "p0-3"))
	res := check(t, b)
	// The reader jumped over offset 1, which the ack says holds p0-2: a skip too.
	expect(t, res, map[string]int{KLost: 1, KPollSkip: 1}, map[string][]string{
		KLost:     {"p0-2", "up to offset 2", "a0"},
		KPollSkip: {"skipping 1", `1="p0-2"`},
	})
	a := res.Anomalies[0]
	if a.Kind != KLost || a.P != 0 || a.O != 1 || a.Value != "p0-2" || a.Time != ns(2) {
		t.Errorf("lost anomaly: %+v", a)
	}
}

func TestCheckUnseen(t *testing.T) {
	b := newHB()
	b.ack("p0", 1, 0, 0, "p0-1", 1, 2).ack("p0", 2, 0, 1, "p0-2", 1, 2)
	b.poll("a0", "", 3, 4, r(0, 0, "p0-1"))
	res := check(t, b)
	expect(t, res, map[string]int{KUnseen: 1}, map[string][]string{KUnseen: {"p0-2", "up to offset 0"}})
}

func TestCheckIndeterminateNotLost(t *testing.T) {
	b := newHB()
	b.ack("p0", 1, 0, 0, "p0-1", 1, 2).sendInfo("p0", 2, 0, "p0-2", 1, 12).ack("p0", 3, 0, 1, "p0-3", 13, 14)
	b.poll("a0", "", 15, 16, r(0, 0, "p0-1"), r(0, 1, "p0-3"))
	expect(t, check(t, b), nil, nil)
}

func TestCheckDuplicate(t *testing.T) {
	b := newHB()
	b.ack("p0", 1, 0, 0, "p0-1", 1, 2).sendInfo("p0", 2, 0, "p0-2", 1, 12)
	b.poll("a0", "", 15, 16, r(0, 0, "p0-1"), r(0, 1, "p0-2"), r(0, 2, "p0-2"))
	expect(t, check(t, b), map[string]int{KDuplicate: 1}, map[string][]string{KDuplicate: {"p0@1", "p0@2"}})
}

// TestCheckDuplicateCause: a duplicate's detail says, from the producers the
// readers saw, whether the broker wrote one producer's retry twice (same id and
// epoch), the client wrote the records again under a new epoch (franz-go after an
// OUT_OF_ORDER_SEQUENCE_NUMBER), or two producer ids did; nothing without them.
func TestCheckDuplicateCause(t *testing.T) {
	for _, c := range []struct {
		prods []string
		words []string
		not   string
	}{
		{[]string{"0/0", "0/0"}, []string{"producer 0/0", "did not recognise"}, "new epoch"},
		{[]string{"0/0", "0/1"}, []string{"0/0, 0/1", "under a new epoch"}, "did not recognise"},
		{[]string{"0/0", "5/0"}, []string{"0/0, 5/0", "different producer ids"}, "new epoch"},
		{nil, []string{"p0@1", "p0@2"}, "producer"},
	} {
		b := newHB()
		b.ack("p0", 1, 0, 0, "p0-1", 1, 2).sendInfo("p0", 2, 0, "p0-2", 1, 12)
		var prods []string
		if c.prods != nil {
			prods = append([]string{"0/0"}, c.prods...)
		}
		b.op(Op{Proc: "a0", F: FPoll, Status: OK, Start: ns(15), End: ns(16),
			Recs: []Rec{r(0, 0, "p0-1"), r(0, 1, "p0-2"), r(0, 2, "p0-2")}, Prods: prods})
		res := check(t, b)
		expect(t, res, map[string]int{KDuplicate: 1}, map[string][]string{KDuplicate: c.words})
		for _, a := range res.Anomalies {
			if strings.Contains(a.Detail, c.not) {
				t.Errorf("producers %v: %q says %q", c.prods, a.Detail, c.not)
			}
		}
	}
}

func TestCheckInconsistentOffsets(t *testing.T) {
	b := newHB()
	b.ack("p0", 1, 0, 0, "p0-1", 1, 2).sendInfo("p1", 1, 0, "p1-1", 1, 12)
	b.poll("a0", "", 15, 16, r(0, 0, "p1-1"))
	b.poll("a1", "", 15, 16, r(0, 0, "p0-1"))
	res := check(t, b)
	// p1-1 at offset 0 contradicts the ack; the porcupine sample sees it too.
	expect(t, res, map[string]int{KInconsistent: 1, KNonlinearizable: res.Counts[KNonlinearizable]}, map[string][]string{
		KInconsistent: {`"p0-1"`, `"p1-1"`, "a0"},
	})
	if res.Counts[KNonlinearizable] == 0 {
		t.Errorf("porcupine found the two values at one offset linearizable: %+v", res.Linear)
	}
}

func TestCheckPhantomAndFutureRead(t *testing.T) {
	b := newHB()
	b.poll("a0", "", 1, 2, r(0, 0, "zz-9"))
	b.ack("p0", 1, 0, 1, "p0-1", 5, 6)
	b.poll("a0", "", 2, 3, r(0, 1, "p0-1"))
	res := check(t, b)
	expect(t, res, map[string]int{KPhantom: 1, KFutureRead: 1, KNonlinearizable: res.Counts[KNonlinearizable]}, map[string][]string{
		KPhantom:    {"zz-9"},
		KFutureRead: {"p0-1", "3.000s", "5.000s"},
	})
}

func TestCheckNonmonotonicSend(t *testing.T) {
	b := newHB()
	b.ack("p0", 1, 0, 5, "p0-1", 1, 2).ack("p0", 2, 0, 3, "p0-2", 1.1, 2)
	b.poll("a0", "", 3, 4, r(0, 3, "p0-2"), r(0, 5, "p0-1"))
	expect(t, check(t, b), map[string]int{KNonmonotonicSnd: 1, KPollSkip: 0}, map[string][]string{
		KNonmonotonicSnd: {`"p0-1" (seq 1, offset 5)`, "offset 3 (seq 2)"},
	})
}

func TestCheckNonmonotonicSendResetsAfterFailure(t *testing.T) {
	b := newHB()
	b.ack("p0", 1, 0, 5, "p0-1", 1, 2).sendInfo("p0", 2, 0, "p0-2", 1.1, 9).ack("p0", 3, 0, 3, "p0-3", 1.2, 2)
	b.poll("a0", "", 3, 4, r(0, 3, "p0-3"), r(0, 5, "p0-1"))
	expect(t, check(t, b), nil, nil)
}

func TestCheckNonmonotonicPoll(t *testing.T) {
	b := cleanHistory()
	b.poll("a0", "", 6, 7, r(0, 1, "p1-1"))
	expect(t, check(t, b), map[string]int{KNonmonotonicPol: 1}, map[string][]string{
		KNonmonotonicPol: {"offset 1 after offset 2", `"p0-3"`},
	})
}

func TestCheckAssignmentResetsPollOrder(t *testing.T) {
	b := cleanHistory()
	b.op(Op{Proc: "g0", F: FRevoke, Status: OK, Group: "g", Parts: []int32{0}, Start: ns(6), End: ns(6)})
	b.op(Op{Proc: "g0", F: FAssign, Status: OK, Group: "g", Parts: []int32{0}, Start: ns(6.5), End: ns(6.5)})
	b.poll("g0", "g", 7, 8, r(0, 0, "p0-1"))
	// Re-reading from offset 0 after the assignment is not out of order, but the
	// group had committed offset 3 for p0 before it: resuming at 0 is a commit that
	// went backwards.
	expect(t, check(t, b), map[string]int{KCommitBackwards: 1}, map[string][]string{
		KCommitBackwards: {"resumed at offset 0 below offset 3"},
	})
}

func TestCheckPollSkip(t *testing.T) {
	b := newHB()
	for i := int64(0); i < 6; i++ {
		b.ack("p0", i+1, 1, i, "p0-"+string(rune('a'+i)), 1, 2)
	}
	b.poll("a1", "", 3, 4, r(1, 0, "p0-a"), r(1, 1, "p0-b"), r(1, 2, "p0-c"), r(1, 3, "p0-d"), r(1, 4, "p0-e"), r(1, 5, "p0-f"))
	b.poll("a0", "", 3, 4, r(1, 0, "p0-a"), r(1, 4, "p0-e"), r(1, 5, "p0-f"))
	expect(t, check(t, b), map[string]int{KPollSkip: 1}, map[string][]string{
		KPollSkip: {"a0", "offset 4 right after offset 0", "skipping 3", `1="p0-b"`},
	})
}

func TestCheckRealtimeOrder(t *testing.T) {
	b := newHB()
	b.ack("p0", 1, 0, 5, "p0-1", 0, 10).ack("p1", 1, 0, 3, "p1-1", 20, 30)
	b.poll("a0", "", 31, 32, r(0, 3, "p1-1"), r(0, 5, "p0-1"))
	res := check(t, b)
	expect(t, res, map[string]int{KRealtime: 1, KNonlinearizable: res.Counts[KNonlinearizable]}, map[string][]string{
		KRealtime: {"p1-1", "20.000s", `"p0-1"`, "higher offset 5"},
	})
	if res.Counts[KNonlinearizable] == 0 {
		t.Errorf("porcupine accepted an append that took a lower offset after a higher one was acknowledged: %+v", res.Linear)
	}
}

func TestCheckConcurrentSendsAnyOrder(t *testing.T) {
	b := newHB()
	b.ack("p0", 1, 0, 1, "p0-1", 0, 10).ack("p1", 1, 0, 0, "p1-1", 5, 30)
	b.poll("a0", "", 31, 32, r(0, 0, "p1-1"), r(0, 1, "p0-1"))
	res := check(t, b)
	expect(t, res, nil, nil)
	if res.Linear.Ok == 0 {
		t.Errorf("linear: %+v", res.Linear)
	}
}

func TestCheckCommitBackwards(t *testing.T) {
	b := newHB()
	b.op(Op{Proc: "g0", F: FCommit, Status: OK, Group: "g", Offs: map[int32]int64{0: 10}, Start: ns(1), End: ns(2)})
	b.op(Op{Proc: "g1", F: FCommit, Status: OK, Group: "g", Offs: map[int32]int64{0: 12}, Start: ns(1.5), End: ns(2.5)})
	// Concurrent with the commit of 12: allowed to be lower.
	b.op(Op{Proc: "g1", F: FCommit, Status: OK, Group: "g", Offs: map[int32]int64{0: 11}, Start: ns(2.2), End: ns(2.6)})
	// After both: 9 is below 12 (and 10).
	b.op(Op{Proc: "g1", F: FCommit, Status: OK, Group: "g", Offs: map[int32]int64{0: 9}, Start: ns(3), End: ns(4)})
	// A failed partition of a commit does not count.
	b.op(Op{Proc: "g1", F: FCommit, Status: OK, Group: "g", Offs: map[int32]int64{0: 1}, PartErr: map[int32]string{0: "ILLEGAL_GENERATION"}, Start: ns(5), End: ns(6)})
	expect(t, check(t, b), map[string]int{KCommitBackwards: 1}, map[string][]string{
		KCommitBackwards: {"offset 9", "below offset 12", "g1"},
	})
}

func TestCheckLivenessSend(t *testing.T) {
	b := newHB()
	b.op(Op{Proc: "nemesis", F: FFault, Status: OK, Start: ns(5), End: ns(10), Fault: &FaultInfo{Kind: "kill", Nodes: []int{1}}})
	b.life("p0", "", 0, 100)
	b.ack("p0", 1, 0, 0, "p0-4", 1, 9)     // before the heal: not judged
	b.ack("p0", 2, 0, 1, "p0-1", 6, 39)    // outstanding 29 s after the heal: within 30 s
	b.ack("p0", 3, 0, 2, "p0-2", 11, 50)   // 39 s
	b.sendInfo("p0", 4, 0, "p0-3", 12, 90) // 78 s, never acknowledged
	b.poll(ProcFinal, "", 95, 96, r(0, 0, "p0-4"), r(0, 1, "p0-1"), r(0, 2, "p0-2"))
	res := check(t, b)
	expect(t, res, map[string]int{KLivenessSend: 1}, map[string][]string{
		KLivenessSend: {"2 send(s)", `"p0-3"`, "78.0s", "10.000s"},
	})
	if res.LastHeal != ns(10) {
		t.Errorf("last heal %d", res.LastHeal)
	}
}

func TestCheckLivenessRead(t *testing.T) {
	b := newHB()
	b.op(Op{Proc: "nemesis", F: FFault, Status: OK, Start: ns(5), End: ns(10), Fault: &FaultInfo{Kind: "pause", Nodes: []int{1}}})
	b.life("a0", "", 0, 100).life("g0", "g", 0, 100).life("a1", "", 50, 100)
	b.ack("p0", 1, 0, 0, "p0-1", 1, 2).ack("p0", 2, 0, 1, "p0-2", 12, 13).ack("p0", 3, 1, 0, "p0-3", 12, 13)
	b.poll("a0", "", 20, 45, r(0, 0, "p0-1")) // p0-1 read 35 s after the heal
	b.poll("a0", "", 45, 46, r(0, 1, "p0-2")) // 33 s after its ack
	b.poll("g0", "g", 20, 21, r(0, 0, "p0-1"), r(0, 1, "p0-2"), r(1, 0, "p0-3"))
	b.poll("a1", "", 51, 52, r(0, 0, "p0-1")) // a1 started late: not judged
	b.poll(ProcFinal, "", 95, 96, r(0, 0, "p0-1"), r(0, 1, "p0-2"), r(1, 0, "p0-3"))
	// a0 never read p0-3 (partition 1) though it ran to 100 s.
	res := check(t, b)
	expect(t, res, map[string]int{KLivenessRead: 2}, map[string][]string{
		KLivenessRead: {"a0: 2 acknowledged value(s) of p0", `"p0-1"`, "read at 45.000s"},
	})
	found := false
	for _, a := range res.Anomalies {
		if a.Kind == KLivenessRead && a.P == 1 && strings.Contains(a.Detail, "never read") && strings.Contains(a.Detail, "p0-3") {
			found = true
		}
	}
	if !found {
		t.Errorf("no never-read finding for a0 on p1: %+v", res.Anomalies)
	}
}

func TestSummaryAndKinds(t *testing.T) {
	res := &Result{Counts: map[string]int{KDuplicate: 2, KLost: 3}}
	if got := res.Summary(); got != "3 lost, 2 duplicate" {
		t.Errorf("summary %q", got)
	}
	if res.Total() != 5 {
		t.Errorf("total %d", res.Total())
	}
}

func TestCheckMaxPerKindCountsAll(t *testing.T) {
	b := newHB()
	for i := int64(0); i < 30; i++ {
		b.ack("p0", i+1, 0, i, "v"+string(rune('A'+i)), 1, 2)
	}
	b.poll("a0", "", 3, 4, r(0, 40, "vx"))
	res := Check(&b.h, Options{MaxPerKind: 5, Linear: LinearOptions{Windows: -1}})
	if res.Counts[KLost] != 30 {
		t.Errorf("lost counted %d, want 30", res.Counts[KLost])
	}
	n := 0
	for _, a := range res.Anomalies {
		if a.Kind == KLost {
			n++
		}
	}
	if n != 5 {
		t.Errorf("listed %d lost, want 5", n)
	}
}

// TestLinearPausedBurst: appends that were all in flight through a pause, invoked in
// an order other than their offsets' and acknowledged together, with readers reading
// them together: porcupine decides the window at once (the model takes appends in
// offset order), and it is linearizable.
func TestLinearPausedBurst(t *testing.T) {
	b := newHB()
	// p0 took offsets 8..11, p1 0..3, p2 4..7; their sends interleave in time.
	for i := 0; i < 12; i++ {
		k := i % 3
		o := []int64{8, 0, 4}[k] + int64(i/3)
		b.ack([]string{"p0", "p1", "p2"}[k], int64(i/3+1), 0, o, "v"+string(rune('a'+o)), 10+float64(i)*0.02, 21.4)
	}
	for _, rd := range []string{"a0", "g0", ProcFinal} {
		var recs []Rec
		for o := int64(0); o < 12; o++ {
			recs = append(recs, r(0, o, "v"+string(rune('a'+o))))
		}
		b.poll(rd, "", 21.0, 21.5, recs...)
	}
	start := time.Now()
	res := Check(&b.h, Options{Liveness: time.Minute, Linear: LinearOptions{Windows: 1, Width: 12, Timeout: 5 * time.Second}})
	if res.Linear.Ok != 1 || res.Linear.Unknown != 0 {
		t.Errorf("linear %+v", res.Linear)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %s", d)
	}
	expect(t, res, nil, nil)
}

func (b *hb) endOffsets(at float64, end map[int32]int64) *hb {
	return b.op(Op{Proc: ProcFinal, F: FEvent, Status: OK, V: "end-offsets", Offs: end, Start: ns(at), End: ns(at)})
}

// TestCheckLostFromFinalRead: a value readers saw, then overwritten (a log cut back
// and written again): the final read of the partition to its end does not return it.
func TestCheckLostFromFinalRead(t *testing.T) {
	b := newHB()
	b.ack("p0", 1, 0, 0, "p0-1", 1, 2).ack("p0", 2, 0, 1, "p0-2", 1, 2).ack("p1", 1, 0, 1, "p1-1", 8, 9)
	b.poll("a0", "", 3, 4, r(0, 0, "p0-1"), r(0, 1, "p0-2"))
	b.endOffsets(10, map[int32]int64{0: 2})
	b.poll(ProcFinal, "", 10, 11, r(0, 0, "p0-1"), r(0, 1, "p1-1"))
	res := check(t, b)
	expect(t, res, map[string]int{KLost: 1, KInconsistent: 1, KNonlinearizable: res.Counts[KNonlinearizable]}, map[string][]string{
		KLost: {"p0-2", "read by a0 at 4.000s, then gone", "end offset 2"},
	})
}

// TestCheckLostLogShrank: the end offset fell below acknowledged offsets.
func TestCheckLostLogShrank(t *testing.T) {
	b := newHB()
	for i := int64(0); i < 5; i++ {
		b.ack("p0", i+1, 0, i, "p0-"+string(rune('a'+i)), 1, 2)
	}
	b.poll("a0", "", 3, 4, r(0, 0, "p0-a"), r(0, 1, "p0-b"), r(0, 2, "p0-c"), r(0, 3, "p0-d"), r(0, 4, "p0-e"))
	b.endOffsets(10, map[int32]int64{0: 2, 1: 0})
	b.poll(ProcFinal, "", 10, 11, r(0, 0, "p0-a"), r(0, 1, "p0-b"))
	expect(t, check(t, b), map[string]int{KLost: 3}, map[string][]string{
		KLost: {"p0-c", "ended at offset 2 by the final read, below the acknowledged offset"},
	})
}

// TestCheckIncompleteFinalRead: a final read that stopped short judges nothing it did
// not reach.
func TestCheckIncompleteFinalRead(t *testing.T) {
	b := newHB()
	for i := int64(0); i < 5; i++ {
		b.ack("p0", i+1, 0, i, "p0-"+string(rune('a'+i)), 1, 2)
	}
	b.poll("a0", "", 3, 4, r(0, 0, "p0-a"), r(0, 1, "p0-b"), r(0, 2, "p0-c"), r(0, 3, "p0-d"), r(0, 4, "p0-e"))
	b.endOffsets(10, map[int32]int64{0: 5})
	b.poll(ProcFinal, "", 10, 11, r(0, 0, "p0-a"), r(0, 1, "p0-b"))
	expect(t, check(t, b), nil, nil)
}

// TestCheckUnsafeElection: the nemesis's unsafe-election and eligible-after-crash
// events are anomalies of their partitions; a node-exit event is not.
func TestCheckUnsafeElection(t *testing.T) {
	b := newHB()
	b.op(Op{Proc: "nemesis", F: FFault, Status: OK, Start: ns(5), End: ns(10), Fault: &FaultInfo{Kind: "kill-replicas", Nodes: []int{1, 2, 3}}})
	b.op(Op{Proc: "cluster", F: FEvent, Status: Info, Start: ns(6), End: ns(6), V: "node-exit", Parts: []int32{2}, Err: "node 2 exited"})
	b.op(Op{Proc: "nemesis", F: FEvent, Status: Fail, Start: ns(9), End: ns(9), V: EventUnsafeElection, Parts: []int32{1},
		Err: "p1: node 3, out of the ISR before it fell below min.insync.replicas, was elected"})
	b.ack("p0", 1, 0, 0, "p0-1", 1, 2)
	b.poll(ProcFinal, "", 20, 21, r(0, 0, "p0-1"))
	b.op(Op{Proc: "nemesis", F: FEvent, Status: Fail, Start: ns(10), End: ns(10), V: EventEligibleAfterCrash, Parts: []int32{2},
		Err: "p2: node 1, killed, is still an eligible leader replica after its restart"})
	res := check(t, b)
	expect(t, res, map[string]int{KUnsafeElection: 1, KEligibleCrash: 1}, map[string][]string{
		KUnsafeElection: {"node 3", "was elected"}, KEligibleCrash: {"node 1", "killed"}})
	if a := res.Anomalies[0]; a.P != 1 || a.O != -1 {
		t.Errorf("anomaly %+v", a)
	}
}
