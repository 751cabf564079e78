package chaos

import (
	"fmt"
	"sort"
	"strings"
)

// The dependency-graph checks of the transactional workload: G0 (write cycles) and
// G1c (cyclic information flow), in the sense of Adya and of Elle (the checker of
// jepsen.tests.kafka), restricted to what Kafka's transactions actually promise.
//
// Elle's graph over the committed transactions has an edge Ti -> Tj for
//
//	ww  a record of Ti directly before a record of Tj in one partition's offset order
//	wr  Tj's read_committed poll returned a record Ti wrote
//	rt  Ti's commit was answered before Tj began (real time)
//
// and reports a cycle of ww edges as G0, one of ww and wr edges with a wr edge as
// G1c. Kafka does not forbid every such cycle: a transaction's records are appended
// to each partition when they are produced, not when the transaction commits, so two
// concurrent transactions writing to partitions p and q can be ordered one way in p
// and the other way in q, and both commit (Jepsen's Redpanda 21.10.1 analysis found
// such write cycles in Kafka itself, and Kafka's documentation does not promise
// otherwise). Reported as anomalies, those cycles would fail every run of a correct
// broker.
//
// What Kafka does promise is an order of events in time, and that is what is
// checked. For each committed transaction T there are the moments s(T) (its op
// began), r(T) (the fetch its poll returned was answered, if it read; maybe before
// s, the client fetching ahead), a(w) (each of its records was appended: produced
// after s and after the poll, acknowledged before the commit), and c(T) (the
// coordinator decided to commit: before the commit was answered). The edges say
//
//	ww  a(wi) < a(wj)   the log appends in offset order
//	wr  c(Ti) < r(Tj)   read_committed returns only records of decided transactions
//	rt  c(Ti) < s(Tj)   only for a transaction whose commit was answered (ok)
//
// and within each transaction s(T) < a(w), r(T) < a(w), a(w) < c(T). A cycle in this graph of
// moments is impossible in any run: the log, the last stable offset or the commit
// protocol broke. Such a cycle is reported as G0 when its transactions are linked
// by ww and rt edges only (a record appended before one of a transaction that had
// finished before it began, where offsets say the other way), and as G1c when a
// wr edge is in it (a transaction that read another's committed record and
// wrote a record ordered before it, or two transactions each reading the other's
// record). A pure ww cycle has no such cycle of moments, so it is counted
// (TxnGraphStats.WWCycles, Elle's G0) and not reported.
//
// Transactions in the graph: committed (ok), and those of unknown outcome (info)
// of which a read_committed read returned a record (committed, since the
// transaction is all or nothing: txn-partial checks that); an info transaction's
// commit may have been decided after its op ended, so no rt edge leaves it. A
// record's position is where reads returned it (its acknowledged offset if none
// did).
const (
	KG0  = "G0"
	KG1c = "G1c"
)

// TxnGraphStats describes the dependency graph of the committed transactions.
type TxnGraphStats struct {
	Txns int `json:"txns"` // transactions in the graph (committed)
	WW   int `json:"ww"`   // ww edges between transactions (consecutive records in a partition)
	WR   int `json:"wr"`   // wr edges (writer, reader) pairs
	// Readers: transactions that read (consume-transform-produce); without them no
	// wr edge, and G1c cannot be judged.
	Readers int `json:"readers"`
	// WWCycles and WWWRCycles: strongly connected components of Elle's graph of ww
	// edges (G0 as Adya defines it) and of ww and wr edges with a wr edge in them
	// (G1c), among transactions that overlapped in time: Kafka allows them (see
	// above), so they are counted, not reported.
	WWCycles   int `json:"ww_cycles"`
	WWWRCycles int `json:"wwwr_cycles"`
}

// The kinds of moments of the graph.
const (
	mStart uint8 = iota
	mRead
	mAppend
	mCommit
	mClock
)

type moments struct {
	adj   [][]int32
	kind  []uint8
	owner []int32 // transaction index; -1 for clock moments
	at    []pos   // an append's position
	wrVal map[[2]int32]string
}

func (g *moments) node(kind uint8, owner int32) int32 {
	g.adj = append(g.adj, nil)
	g.kind = append(g.kind, kind)
	g.owner = append(g.owner, owner)
	g.at = append(g.at, pos{})
	return int32(len(g.adj) - 1)
}

func (g *moments) edge(a, b int32) { g.adj[a] = append(g.adj[a], b) }

type graphTxn struct {
	op      *Op
	s, r, c int32 // moments; r is -1 without reads
	ok      bool  // its commit was answered: rt edges leave it
}

// txnGraph builds the graph of moments of the committed transactions and reports
// its cycles (G0, G1c); it counts the cycles of Elle's graph that Kafka allows.
func (c *checker) txnGraph(txns []*Op, vals map[string]*txnVal) {
	st := &c.res.Txn.Graph
	g := &moments{wrVal: map[[2]int32]string{}}
	gt, index := g.addTxns(txns, vals, st)
	st.Txns = len(gt)
	if len(gt) == 0 {
		return
	}
	ww := g.addAppends(gt, vals, st)
	wr := g.addReads(gt, index, vals, st)
	g.addRealTime(gt)
	for _, scc := range sccs(g.adj) {
		if len(scc) > 1 {
			c.reportCycle(g, gt, scc)
		}
	}
	countElleCycles(st, ww, wr)
}

// addTxns adds the moments s, r (for a transaction that read) and c of each
// committed transaction, ok or info with a record a read_committed read returned,
// and returns them with each one's index.
func (g *moments) addTxns(txns []*Op, vals map[string]*txnVal, st *TxnGraphStats) ([]graphTxn, map[*Op]int32) {
	var gt []graphTxn
	index := map[*Op]int32{}
	for _, t := range txns {
		committed := t.Status == OK
		if t.Status == Info {
			for _, r := range t.Recs {
				if tv := vals[r.V]; tv != nil && tv.op == t && len(tv.pos) > 0 {
					committed = true
					break
				}
			}
		}
		if !committed {
			continue
		}
		i := int32(len(gt))
		index[t] = i
		x := graphTxn{op: t, r: -1, ok: t.Status == OK}
		x.s = g.node(mStart, i)
		x.c = g.node(mCommit, i)
		g.edge(x.s, x.c)
		if len(t.Reads) > 0 {
			// No s -> r: the poll may return records fetched in the background
			// before the op began; r's only moments before it are the commits of
			// what it read.
			x.r = g.node(mRead, i)
			g.edge(x.r, x.c)
			st.Readers++
		}
		gt = append(gt, x)
	}
	return gt, index
}

// addAppends adds a moment per record appended, between its transaction's s (and
// r) and c, and the ww edges in each partition's offset order. It returns Elle's
// transaction-level ww edges, for the counts of the cycles Kafka allows.
func (g *moments) addAppends(gt []graphTxn, vals map[string]*txnVal, st *TxnGraphStats) [][]int32 {
	type app struct {
		o    int64
		node int32
	}
	byPart := map[int32][]app{}
	for i, x := range gt {
		for _, r := range x.op.Recs {
			tv := vals[r.V]
			if tv == nil || tv.op != x.op {
				continue
			}
			at, ok := recordPos(r, tv)
			if !ok {
				continue
			}
			n := g.node(mAppend, int32(i))
			g.at[n] = at
			g.edge(x.s, n)
			if x.r >= 0 {
				g.edge(x.r, n)
			}
			g.edge(n, x.c)
			byPart[at.p] = append(byPart[at.p], app{at.o, n})
		}
	}
	ww := make([][]int32, len(gt))
	for _, as := range byPart {
		sort.Slice(as, func(i, j int) bool { return as[i].o < as[j].o })
		// Groups of one offset (two values at one offset are inconsistent-offsets,
		// reported already): every append of a group before every one of the next.
		for i := 0; i < len(as); {
			j := i
			for j < len(as) && as[j].o == as[i].o {
				j++
			}
			k := j
			for k < len(as) && as[k].o == as[j].o {
				k++
			}
			for _, a := range as[i:j] {
				for _, b := range as[j:k] {
					g.edge(a.node, b.node)
					if ta, tb := g.owner[a.node], g.owner[b.node]; ta != tb && !containsInt32(ww[ta], tb) {
						ww[ta] = append(ww[ta], tb)
						st.WW++
					}
				}
			}
			i = j
		}
	}
	return ww
}

// addReads adds the wr edges: the commit of the writer of each record a
// transaction's poll returned, before that poll's r. It returns them by writer.
func (g *moments) addReads(gt []graphTxn, index map[*Op]int32, vals map[string]*txnVal, st *TxnGraphStats) [][]int32 {
	wr := make([][]int32, len(gt))
	for j, x := range gt {
		for _, r := range x.op.Reads {
			tv := vals[r.V]
			if tv == nil {
				continue
			}
			i, ok := index[tv.op]
			if !ok || i == int32(j) {
				continue
			}
			key := [2]int32{gt[i].c, x.r}
			if _, dup := g.wrVal[key]; dup {
				continue
			}
			g.wrVal[key] = r.V
			g.edge(gt[i].c, x.r)
			wr[i] = append(wr[i], int32(j))
			st.WR++
		}
	}
	return wr
}

// addRealTime adds real time: a chain of clock moments, one per event in time order
// (at equal times a start before an end, so that only an end strictly before a
// start reaches it).
func (g *moments) addRealTime(gt []graphTxn) {
	type event struct {
		t   int64
		end bool
		txn int32
	}
	var evs []event
	for i, x := range gt {
		evs = append(evs, event{x.op.Start, false, int32(i)})
		if x.ok {
			evs = append(evs, event{x.op.End, true, int32(i)})
		}
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].t != evs[j].t {
			return evs[i].t < evs[j].t
		}
		return !evs[i].end && evs[j].end
	})
	prev := int32(-1)
	for _, e := range evs {
		k := g.node(mClock, -1)
		if prev >= 0 {
			g.edge(prev, k)
		}
		prev = k
		if e.end {
			g.edge(gt[e.txn].c, k)
		} else {
			g.edge(k, gt[e.txn].s)
		}
	}
}

// countElleCycles counts the cycles of Elle's transaction-level graph that Kafka
// allows: of ww edges (G0), and of ww and wr edges with a wr edge in them (G1c).
func countElleCycles(st *TxnGraphStats, ww, wr [][]int32) {
	both := make([][]int32, len(ww))
	for i := range ww {
		both[i] = append(append([]int32(nil), ww[i]...), wr[i]...)
	}
	for _, scc := range sccs(ww) {
		if len(scc) > 1 {
			st.WWCycles++
		}
	}
	for _, scc := range sccs(both) {
		if len(scc) < 2 {
			continue
		}
		in := map[int32]bool{}
		for _, n := range scc {
			in[n] = true
		}
	wrIn:
		for _, a := range scc {
			for _, b := range wr[a] {
				if in[b] {
					st.WWWRCycles++
					break wrIn
				}
			}
		}
	}
}

// recordPos is where a transaction's record is in its partition: the lowest
// position reads returned it at in its partition, else its acknowledged offset.
func recordPos(r Rec, tv *txnVal) (pos, bool) {
	best, found := pos{}, false
	for at := range tv.pos {
		if at.p == r.P && (!found || at.o < best.o) {
			best, found = at, true
		}
	}
	if found {
		return best, true
	}
	if tv.ack >= 0 {
		return pos{p: r.P, o: tv.ack}, true
	}
	return pos{}, false
}

func containsInt32(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// reportCycle finds one cycle through the strongly connected component scc of the
// graph of moments and reports it with the transactions and edges it goes through.
func (c *checker) reportCycle(g *moments, gt []graphTxn, scc []int32) {
	in := make(map[int32]bool, len(scc))
	start := int32(-1)
	for _, n := range scc {
		in[n] = true
		if g.kind[n] == mCommit && (start < 0 || n < start) {
			start = n // every cycle goes through a commit moment
		}
	}
	if start < 0 {
		return
	}
	// The shortest path from start back to it, within the component.
	parent := map[int32]int32{start: -1}
	queue := []int32{start}
	last := int32(-1)
	for len(queue) > 0 && last < 0 {
		u := queue[0]
		queue = queue[1:]
		for _, v := range g.adj[u] {
			if v == start {
				last = u
				break
			}
			if _, seen := parent[v]; !seen && in[v] {
				parent[v] = u
				queue = append(queue, v)
			}
		}
	}
	if last < 0 {
		return
	}
	var path []int32
	for n := last; n >= 0; n = parent[n] {
		path = append(path, n)
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	path = append(path, start)

	name := func(t int32) string {
		op := gt[t].op
		return fmt.Sprintf("%s/%d (%s)", op.Proc, op.Seq, op.Status)
	}
	var steps []string
	first := g.owner[start]
	ops := []int64{gt[first].op.ID}
	hasWR := false
	rtFrom := int32(-1)
	for i := 0; i+1 < len(path); i++ {
		u, v := path[i], path[i+1]
		to := g.owner[v]
		switch {
		case g.kind[u] == mAppend && g.kind[v] == mAppend && g.owner[u] != to:
			steps = append(steps, fmt.Sprintf("-ww p%d: %d before %d-> %s", g.at[u].p, g.at[u].o, g.at[v].o, name(to)))
		case g.kind[u] == mCommit && g.kind[v] == mRead:
			hasWR = true
			steps = append(steps, fmt.Sprintf("-wr %s-> %s", g.wrVal[[2]int32{u, v}], name(to)))
		case g.kind[u] == mCommit && g.kind[v] == mClock:
			rtFrom = g.owner[u]
			continue
		case g.kind[u] == mClock && g.kind[v] == mStart:
			steps = append(steps, fmt.Sprintf("-rt committed at %s, before it began at %s-> %s",
				fmtT(gt[rtFrom].op.End), fmtT(gt[to].op.Start), name(to)))
		default:
			continue
		}
		ops = append(ops, gt[to].op.ID)
	}
	ops = uniqueSorted(ops)
	kind, what := KG0, "a write order no execution allows"
	if hasWR {
		kind, what = KG1c, "cyclic information flow"
	}
	op := gt[first].op
	c.add(Anomaly{Kind: kind, P: -1, O: -1, Value: firstValue(op), Proc: op.Proc, Time: op.End,
		Detail: fmt.Sprintf("%s over %d transactions: %s %s", what, len(ops), name(first), strings.Join(steps, " ")),
		Ops:    ops})
}

func firstValue(op *Op) string {
	if len(op.Recs) > 0 {
		return op.Recs[0].V
	}
	return ""
}

func uniqueSorted(s []int64) []int64 {
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// sccs returns the strongly connected components of the graph adj (Tarjan's
// algorithm, iterative: a long run's graph is deeper than a goroutine's stack
// should be asked to go).
func sccs(adj [][]int32) [][]int32 {
	n := len(adj)
	index := make([]int32, n)
	low := make([]int32, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int32
	var out [][]int32
	next := int32(0)
	type frame struct {
		v int32
		i int
	}
	for root := range n {
		if index[root] >= 0 {
			continue
		}
		call := []frame{{int32(root), 0}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, int32(root))
		onStack[root] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			v := f.v
			if f.i < len(adj[v]) {
				w := adj[v][f.i]
				f.i++
				if index[w] < 0 {
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{w, 0})
				} else if onStack[w] && index[w] < low[v] {
					low[v] = index[w]
				}
				continue
			}
			call = call[:len(call)-1]
			if len(call) > 0 {
				if u := call[len(call)-1].v; low[v] < low[u] {
					low[u] = low[v]
				}
			}
			if low[v] == index[v] {
				var comp []int32
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp = append(comp, w)
					if w == v {
						break
					}
				}
				out = append(out, comp)
			}
		}
	}
	return out
}
