package chaos

import (
	"slices"
	"testing"
)

// The transactional checks find each of their anomalies in a hand-made history, and
// nothing in a clean one.
func TestCheckTxn(t *testing.T) {
	txn := func(id int64, proc string, seq int64, st Status, recs ...Rec) Op {
		return Op{ID: id, Proc: proc, F: FTxn, Status: st, Seq: seq, Start: id * 10, End: id*10 + 5, Recs: recs}
	}
	poll := func(id int64, proc string, recs ...Rec) Op {
		return Op{ID: id, Proc: proc, F: FTxnPoll, Status: OK, Start: id * 10, End: id*10 + 5, Recs: recs}
	}
	drained := Op{ID: 99, Proc: ProcFinalTxn, F: FEvent, Status: OK, V: "drained", Start: 990, End: 990}
	committed := txn(1, "t0", 1, OK, Rec{0, 0, "t0-1-0"}, Rec{1, 0, "t0-1-1"})
	aborted := txn(2, "t0", 2, Fail, Rec{0, 1, "t0-2-0"})
	unknown := txn(3, "t1", 1, Info, Rec{0, 3, "t1-1-0"}, Rec{1, 2, "t1-1-1"})

	clean := &History{Header: Header{Topic: "chaos", Partitions: 1}, Ops: []Op{committed, aborted, unknown,
		poll(4, "r0", Rec{0, 0, "t0-1-0"}, Rec{1, 0, "t0-1-1"}),
		poll(5, ProcFinalTxn, Rec{0, 0, "t0-1-0"}, Rec{1, 0, "t0-1-1"}, Rec{0, 3, "t1-1-0"}, Rec{1, 2, "t1-1-1"}),
		drained}}
	res := Check(clean, Options{})
	if !res.Valid {
		t.Fatalf("clean history: %s %+v", res.Summary(), res.Anomalies)
	}
	if st := res.Txn; st.Txns != 3 || st.Committed != 1 || st.Aborted != 1 || st.Unknown != 1 || st.Records != 5 || st.Reads != 6 || !st.Drained {
		t.Fatalf("stats %+v", st)
	}

	bad := &History{Header: Header{Topic: "chaos", Partitions: 1}, Ops: []Op{committed, aborted, unknown,
		poll(4, "r0", Rec{0, 1, "t0-2-0"}, Rec{0, 0, "t0-1-0"}),                 // an aborted record read
		poll(5, ProcFinalTxn, Rec{0, 0, "t0-1-0"}, Rec{0, 3, "t1-1-0"}),         // t0-1-1 lost; t1/1 partial
		poll(6, "r1", Rec{0, 7, "nobody"}, Rec{0, 5, "t0-1-0"}, Rec{0, 0, "x"}), // phantom, duplicate, inconsistent
		drained}}
	res = Check(bad, Options{})
	kinds := map[string][]string{}
	for _, a := range res.Anomalies {
		kinds[a.Kind] = append(kinds[a.Kind], a.Value)
	}
	for kind, want := range map[string][]string{
		KAbortedRead:  {"t0-2-0"},
		KTxnLost:      {"t0-1-1"},
		KTxnPartial:   {"t0-1-1", "t1-1-1"}, // the missing record each names
		KPhantom:      {"nobody", "x"},
		KDuplicate:    {"t0-1-0"},
		KInconsistent: {"t0-1-0", "x"}, // read off its acknowledged offset; two values at p0/0
	} {
		got := kinds[kind]
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", kind, got, want)
		}
	}
	// Without a complete final drain, losses are not judged.
	bad.Ops = bad.Ops[:len(bad.Ops)-1]
	if res := Check(bad, Options{}); res.Counts[KTxnLost] != 0 || res.Counts[KTxnPartial] != 0 || res.Counts[KAbortedRead] != 1 {
		t.Errorf("without the drain: %v", res.Counts)
	}
}
