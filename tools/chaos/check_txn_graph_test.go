package chaos

import (
	"strings"
	"testing"
)

// gtx is a transaction of a planted history: [start, end], its records (at their
// acknowledged offsets) and what its poll returned.
func gtx(id int64, proc string, seq int64, st Status, start, end int64, recs []Rec, reads ...Rec) Op {
	return Op{ID: id, Proc: proc, F: FTxn, Status: st, Seq: seq, Start: start, End: end, Recs: recs, Reads: reads}
}

func recs(r ...Rec) []Rec { return r }

func checkGraph(t *testing.T, ops ...Op) *Result {
	t.Helper()
	return Check(&History{Header: Header{Topic: "chaos", Partitions: 2}, Ops: ops}, Options{})
}

func TestTxnGraphSerial(t *testing.T) {
	// One transaction after another, each consume-transform-produce one reading
	// the records of those before it: no cycle of any kind.
	res := checkGraph(t,
		gtx(1, "t0", 1, OK, 0, 10, recs(Rec{0, 0, "t0-1-0"}, Rec{1, 0, "t0-1-1"})),
		gtx(2, "x0", 1, OK, 20, 30, recs(Rec{0, 1, "x0-1-0"}), Rec{0, 0, "t0-1-0"}, Rec{1, 0, "t0-1-1"}),
		gtx(3, "t0", 2, OK, 40, 50, recs(Rec{1, 1, "t0-2-0"}, Rec{0, 2, "t0-2-1"})),
		gtx(4, "x0", 2, OK, 60, 70, recs(Rec{1, 2, "x0-2-0"}, Rec{0, 3, "x0-2-1"}), Rec{0, 1, "x0-1-0"}, Rec{1, 1, "t0-2-0"}, Rec{0, 2, "t0-2-1"}),
		gtx(5, "t0", 3, Fail, 80, 90, recs(Rec{0, 4, "t0-3-0"})), // aborted: not in the graph
	)
	if !res.Valid {
		t.Fatalf("serial history: %s %+v", res.Summary(), res.Anomalies)
	}
	g := res.Txn.Graph
	if g.Txns != 4 || g.Readers != 2 || g.WW == 0 || g.WR != 3 || g.WWCycles != 0 || g.WWWRCycles != 0 {
		t.Fatalf("graph %+v", g)
	}
}

func TestTxnGraphConcurrentWriteCycleAllowed(t *testing.T) {
	// Two overlapping transactions ordered one way in p0 and the other in p1: Elle's
	// G0, which Kafka allows (records are appended as they are produced). Counted,
	// not reported.
	res := checkGraph(t,
		gtx(1, "t0", 1, OK, 0, 100, recs(Rec{0, 0, "t0-1-0"}, Rec{1, 1, "t0-1-1"})),
		gtx(2, "t1", 1, OK, 10, 90, recs(Rec{0, 1, "t1-1-0"}, Rec{1, 0, "t1-1-1"})),
		// A reader of both, overlapping them too: a ww+wr component, allowed as well.
		gtx(3, "x0", 1, OK, 5, 120, recs(Rec{0, 2, "x0-1-0"}), Rec{0, 0, "t0-1-0"}),
	)
	if !res.Valid {
		t.Fatalf("concurrent write cycle reported: %s %+v", res.Summary(), res.Anomalies)
	}
	if g := res.Txn.Graph; g.WWCycles != 1 {
		t.Fatalf("graph %+v: want one ww cycle counted", g)
	}
}

func TestTxnGraphG0(t *testing.T) {
	// t1/1 committed (answered at 30) before t0/1 began (40), yet t0/1's record
	// is before t1/1's in p0: ww t0/1 -> t1/1, rt t1/1 -> t0/1.
	res := checkGraph(t,
		gtx(1, "t1", 1, OK, 0, 30, recs(Rec{0, 1, "t1-1-0"})),
		gtx(2, "t0", 1, OK, 40, 50, recs(Rec{0, 0, "t0-1-0"})),
	)
	if res.Counts[KG0] != 1 || res.Total() != 1 {
		t.Fatalf("want one G0: %v %+v", res.Counts, res.Anomalies)
	}
	a := res.Anomalies[0]
	if len(a.Ops) != 2 || !strings.Contains(a.Detail, "-ww p0: 0 before 1->") || !strings.Contains(a.Detail, "-rt committed at") {
		t.Fatalf("G0 anomaly: %+v", a)
	}
	// The same with the first transaction's outcome unknown (info) but its record
	// read: its commit may have come after its op ended, so no rt edge leaves it.
	res = checkGraph(t,
		gtx(1, "t1", 1, Info, 0, 30, recs(Rec{0, 1, "t1-1-0"})),
		gtx(2, "t0", 1, OK, 40, 50, recs(Rec{0, 0, "t0-1-0"})),
		Op{ID: 3, Proc: "r0", F: FTxnPoll, Status: OK, Start: 60, End: 70, Recs: []Rec{{0, 0, "t0-1-0"}, {0, 1, "t1-1-0"}}},
	)
	if !res.Valid || res.Txn.Graph.Txns != 2 {
		t.Fatalf("info transaction: %s %+v %+v", res.Summary(), res.Anomalies, res.Txn.Graph)
	}
}

func TestTxnGraphG1c(t *testing.T) {
	// Each of two consume-transform-produce transactions read the other's record:
	// each committed before the other read, which read before it committed.
	res := checkGraph(t,
		gtx(1, "x0", 1, OK, 0, 50, recs(Rec{0, 0, "x0-1-0"}), Rec{1, 0, "x1-1-0"}),
		gtx(2, "x1", 1, OK, 0, 50, recs(Rec{1, 0, "x1-1-0"}), Rec{0, 0, "x0-1-0"}),
	)
	if res.Counts[KG1c] != 1 || res.Total() != 1 {
		t.Fatalf("want one G1c: %v %+v", res.Counts, res.Anomalies)
	}
	if a := res.Anomalies[0]; len(a.Ops) != 2 || strings.Count(a.Detail, "-wr ") != 2 {
		t.Fatalf("G1c anomaly: %+v", a)
	}
	// A transaction that read t0/1's committed record and then wrote a record
	// ordered before it in the same partition: wr t0/1 -> x0/1, ww x0/1 -> t0/1.
	res = checkGraph(t,
		gtx(1, "t0", 1, OK, 0, 100, recs(Rec{0, 5, "t0-1-0"})),
		gtx(2, "x0", 1, OK, 0, 100, recs(Rec{0, 3, "x0-1-0"}), Rec{0, 5, "t0-1-0"}),
	)
	if res.Counts[KG1c] != 1 || res.Total() != 1 {
		t.Fatalf("want one G1c: %v %+v", res.Counts, res.Anomalies)
	}
	if a := res.Anomalies[0]; !strings.Contains(a.Detail, "-wr t0-1-0->") || !strings.Contains(a.Detail, "-ww p0: 3 before 5->") {
		t.Fatalf("G1c anomaly: %+v", a)
	}
	// The reader wrote after the record it read: no cycle.
	res = checkGraph(t,
		gtx(1, "t0", 1, OK, 0, 100, recs(Rec{0, 5, "t0-1-0"})),
		gtx(2, "x0", 1, OK, 0, 100, recs(Rec{0, 6, "x0-1-0"}), Rec{0, 5, "t0-1-0"}),
	)
	if !res.Valid {
		t.Fatalf("read then wrote after: %s %+v", res.Summary(), res.Anomalies)
	}
}

func TestSCCs(t *testing.T) {
	// 0 -> 1 -> 2 -> 0, 2 -> 3, 3 -> 4 -> 3, 5 alone.
	got := sccs([][]int32{{1}, {2}, {0, 3}, {4}, {3}, nil})
	sizes := map[int]int{}
	for _, c := range got {
		sizes[len(c)]++
	}
	if len(got) != 3 || sizes[3] != 1 || sizes[2] != 1 || sizes[1] != 1 {
		t.Fatalf("components %v", got)
	}
}
