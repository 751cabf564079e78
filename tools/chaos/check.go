package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Anomaly kinds (see the package doc for their definitions).
const (
	KLost            = "lost"
	KUnseen          = "unseen"
	KDuplicate       = "duplicate"
	KInconsistent    = "inconsistent-offsets"
	KPhantom         = "phantom"
	KFutureRead      = "future-read"
	KNonmonotonicSnd = "nonmonotonic-send"
	KNonmonotonicPol = "nonmonotonic-poll"
	KPollSkip        = "poll-skip"
	KRealtime        = "realtime-order"
	KCommitBackwards = "commit-backwards"
	KLivenessSend    = "liveness-send"
	KLivenessRead    = "liveness-read"
	KNonlinearizable = "nonlinearizable"
	KUnsafeElection  = "unsafe-election"
	KEligibleCrash   = "eligible-after-crash"
)

// The events the nemesis records when kill-replicas sees a partition led by a replica
// that lacks committed records, or a replica that was killed still eligible to lead
// after its restart; each is an anomaly of its kind.
const (
	EventUnsafeElection     = KUnsafeElection
	EventEligibleAfterCrash = KEligibleCrash
)

// Kinds lists every anomaly kind in the order reports show them.
var Kinds = []string{
	KLost, KUnseen, KDuplicate, KInconsistent, KPhantom, KFutureRead,
	KNonmonotonicSnd, KNonmonotonicPol, KPollSkip, KRealtime, KCommitBackwards,
	KLivenessSend, KLivenessRead, KNonlinearizable, KUnsafeElection, KEligibleCrash,
	KAbortedRead, KTxnLost, KTxnPartial, KG0, KG1c,
	KISRBehindHW, KAuthFailure,
}

// ProcFinal is the process of the final drain: it reads every partition from its
// start after the quiet period. It counts as a reader for lost and unseen, not for
// liveness.
const ProcFinal = "final"

// DefaultLiveness is the liveness bound when neither the options nor the header set one.
const DefaultLiveness = 30 * time.Second

// Options tune a check.
type Options struct {
	// Liveness bounds the liveness checks; 0 takes the header's, else DefaultLiveness.
	Liveness time.Duration
	// MaxPerKind bounds the anomalies listed per kind (all are counted); 0 means 20.
	MaxPerKind int
	// Linear configures the porcupine sample.
	Linear LinearOptions
}

// Anomaly is one finding. P and O are -1 when the anomaly has no single position.
type Anomaly struct {
	Kind   string  `json:"kind"`
	P      int32   `json:"p"`
	O      int64   `json:"o"`
	Value  string  `json:"value,omitempty"`
	Proc   string  `json:"proc,omitempty"`
	Time   int64   `json:"time"` // ns since the run's start: when it was seen
	Detail string  `json:"detail"`
	Ops    []int64 `json:"ops,omitempty"`
}

// Stats counts what a history holds.
type Stats struct {
	Ops           int `json:"ops"`
	Sends         int `json:"sends"`
	Acked         int `json:"acked"`
	Indeterminate int `json:"indeterminate"`
	Failed        int `json:"failed"`
	Polls         int `json:"polls"`
	Reads         int `json:"reads"`         // records returned by polls, all readers
	DistinctRead  int `json:"distinct_read"` // distinct values read
	AckedRead     int `json:"acked_read"`    // acknowledged values read by someone
	Commits       int `json:"commits"`
	CommitsOK     int `json:"commits_ok"`
	Faults        int `json:"faults"`
	Events        int `json:"events"` // what the harness saw happen (a node exiting on its own)
}

// Result is a check's verdict.
type Result struct {
	Valid bool `json:"valid"`
	// Counts holds every anomaly per kind, also those beyond the listed ones.
	Counts    map[string]int `json:"counts"`
	Anomalies []Anomaly      `json:"anomalies"`
	Stats     Stats          `json:"stats"`
	// Txn counts the transactional workload's operations (zero without it).
	Txn    TxnStats     `json:"txn"`
	Linear LinearResult `json:"linear"`
	// Replicas is what the replica monitor saw (zero when it did not run).
	Replicas ReplicaStats `json:"replicas"`
	// Auth counts failed authentications and authorizations (secured runs).
	Auth AuthStats `json:"auth"`
	// LastHeal is when the last fault finished healing (ns since start); the
	// liveness checks start there. 0 when the run had no faults.
	LastHeal int64 `json:"last_heal"`
	Liveness int64 `json:"liveness_ns"`
}

// Total is the number of anomalies of every kind.
func (r *Result) Total() int {
	n := 0
	for _, c := range r.Counts {
		n += c
	}
	return n
}

// Summary is the anomaly counts as "3 lost, 1 duplicate" in Kinds order.
func (r *Result) Summary() string {
	var parts []string
	for _, k := range Kinds {
		if n := r.Counts[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	if len(parts) == 0 {
		return "no anomalies"
	}
	return strings.Join(parts, ", ")
}

type pos struct {
	p int32
	o int64
}

// valState is what is known of one value.
type valState struct {
	send   *Op
	pos    []pos          // distinct positions: the ack's first when acknowledged
	posOp  []int64        // op of the first evidence of each position
	prod   map[pos]string // producer "<id>/<epoch>" a reader saw at a position
	read   bool
	readAt []int64 // per reader index: End of the first poll that read it; -1 never
	first  *Op     // the first poll (by end) that read it
	final  bool    // the final drain read it
}

// offState is what is known of one offset of a partition.
type offState struct {
	vals  []string
	ops   []int64 // first op per value
	procs []string
}

type partState struct {
	offs      map[int64]*offState
	known     []int64 // sorted offsets holding a record
	maxRead   int64
	maxReadOp *Op
}

type checker struct {
	h       *History
	opt     Options
	res     *Result
	sends   map[string]*Op
	vals    map[string]*valState
	parts   map[int32]*partState
	readers []string // "a0", "group:chaos-g", ...
	rIdx    map[string]int
	shown   map[string]int
	// The final drain: per partition, the end offset it was to read up to, and one
	// past the highest offset it read.
	finalEnd map[int32]int64
	finalMax map[int32]int64
}

// Check judges a history.
func Check(h *History, opt Options) *Result {
	if opt.MaxPerKind <= 0 {
		opt.MaxPerKind = 20
	}
	if opt.Liveness <= 0 {
		opt.Liveness = time.Duration(h.Header.Liveness)
	}
	if opt.Liveness <= 0 {
		opt.Liveness = DefaultLiveness
	}
	c := &checker{
		h: h, opt: opt,
		res:   &Result{Counts: map[string]int{}, Liveness: int64(opt.Liveness)},
		sends: map[string]*Op{},
		vals:  map[string]*valState{},
		parts: map[int32]*partState{},
		rIdx:  map[string]int{},
		shown: map[string]int{},

		finalEnd: map[int32]int64{},
		finalMax: map[int32]int64{},
	}
	c.index()
	c.positions()
	c.lostUnseen()
	c.sendOrder()
	c.pollOrder()
	c.realtime()
	c.commits()
	c.liveness()
	c.checkTxn()
	c.checkAuth()
	c.res.Linear = checkLinear(c, opt.Linear)
	sort.SliceStable(c.res.Anomalies, func(i, j int) bool {
		a, b := c.res.Anomalies[i], c.res.Anomalies[j]
		if a.Kind != b.Kind {
			return kindRank(a.Kind) < kindRank(b.Kind)
		}
		if a.P != b.P {
			return a.P < b.P
		}
		if a.O != b.O {
			return a.O < b.O
		}
		return a.Time < b.Time
	})
	c.res.Valid = c.res.Total() == 0
	return c.res
}

func kindRank(k string) int {
	for i, x := range Kinds {
		if x == k {
			return i
		}
	}
	return len(Kinds)
}

func (c *checker) add(a Anomaly) {
	c.res.Counts[a.Kind]++
	if c.shown[a.Kind] >= c.opt.MaxPerKind {
		return
	}
	c.shown[a.Kind]++
	c.res.Anomalies = append(c.res.Anomalies, a)
}

func (c *checker) part(p int32) *partState {
	ps := c.parts[p]
	if ps == nil {
		ps = &partState{offs: map[int64]*offState{}, maxRead: -1}
		c.parts[p] = ps
	}
	return ps
}

func (c *checker) val(v string) *valState {
	vs := c.vals[v]
	if vs == nil {
		vs = &valState{}
		c.vals[v] = vs
	}
	return vs
}

// readerOf names the reader a poll counts for: its group, or the process itself.
func readerOf(op *Op) string {
	if op.Group != "" {
		return "group:" + op.Group
	}
	return op.Proc
}

func (c *checker) reader(name string) int {
	if i, ok := c.rIdx[name]; ok {
		return i
	}
	c.rIdx[name] = len(c.readers)
	c.readers = append(c.readers, name)
	return len(c.readers) - 1
}

// index collects the sends, the faults and the readers, and counts.
func (c *checker) index() {
	st := &c.res.Stats
	st.Ops = len(c.h.Ops)
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		switch op.F {
		case FSend:
			st.Sends++
			switch op.Status {
			case OK:
				st.Acked++
			case Fail:
				st.Failed++
			default:
				st.Indeterminate++
			}
			if prev, dup := c.sends[op.V]; dup {
				c.add(Anomaly{Kind: KDuplicate, P: -1, O: -1, Value: op.V, Proc: op.Proc, Time: op.Start,
					Detail: fmt.Sprintf("value sent twice (ops %d and %d): the workload's values are not unique", prev.ID, op.ID), Ops: []int64{prev.ID, op.ID}})
				continue
			}
			c.sends[op.V] = op
		case FPoll:
			st.Polls++
			st.Reads += len(op.Recs)
			if op.Proc != ProcFinal {
				c.reader(readerOf(op))
			}
		case FCommit:
			st.Commits++
			if op.Status == OK {
				st.CommitsOK++
			}
		case FFault:
			st.Faults++
			if op.End > c.res.LastHeal {
				c.res.LastHeal = op.End
			}
		case FReplica:
			c.replicaOp(op)
		case FEvent:
			if op.Proc == ProcFinalTxn {
				continue // the transactional drain's marks (checkTxn)
			}
			if op.V == EventAuthFailed {
				continue // judged by checkAuth, not a node exit
			}
			if op.Proc == ProcFinal && op.V == "end-offsets" {
				for p, e := range op.Offs {
					c.finalEnd[p] = e
				}
				continue
			}
			if op.Proc == "nemesis" && (op.V == EventUnsafeElection || op.V == EventEligibleAfterCrash) {
				p := int32(-1)
				if len(op.Parts) > 0 {
					p = op.Parts[0]
				}
				c.add(Anomaly{Kind: op.V, P: p, O: -1, Proc: op.Proc, Time: op.Start, Detail: op.Err, Ops: []int64{op.ID}})
			}
			st.Events++
		}
	}
}

func (c *checker) addPos(v string, vs *valState, p pos, op *Op) {
	for _, q := range vs.pos {
		if q == p {
			goto offset
		}
	}
	vs.pos = append(vs.pos, p)
	vs.posOp = append(vs.posOp, op.ID)
offset:
	os := c.part(p.p).offs[p.o]
	if os == nil {
		os = &offState{}
		c.part(p.p).offs[p.o] = os
	}
	for _, x := range os.vals {
		if x == v {
			return
		}
	}
	os.vals = append(os.vals, v)
	os.ops = append(os.ops, op.ID)
	os.procs = append(os.procs, op.Proc)
}

// positions records every (partition, offset, value) the acks and reads claim, and
// reports duplicates, inconsistent offsets, phantoms and future reads.
func (c *checker) positions() {
	ops := c.h.Ops
	for i := range ops {
		op := &ops[i]
		if op.F == FSend && op.Status == OK && c.sends[op.V] == op {
			c.addPos(op.V, c.val(op.V), pos{op.P, op.O}, op)
		}
	}
	phantoms := map[string]bool{}
	for i := range ops {
		op := &ops[i]
		if op.F != FPoll {
			continue
		}
		ri := -1
		if op.Proc != ProcFinal {
			ri = c.reader(readerOf(op))
		}
		for j, r := range op.Recs {
			c.pollRecord(op, r, ri, phantoms)
			if j < len(op.Prods) && op.Prods[j] != "" {
				vs := c.val(r.V)
				if vs.prod == nil {
					vs.prod = map[pos]string{}
				}
				if _, ok := vs.prod[pos{r.P, r.O}]; !ok {
					vs.prod[pos{r.P, r.O}] = op.Prods[j]
				}
			}
		}
	}
	c.reportDuplicates()
	c.reportInconsistent()
	for _, vs := range c.vals {
		if vs.read && vs.send != nil && vs.send.Status == OK {
			c.res.Stats.AckedRead++
		}
	}
	c.res.Stats.DistinctRead = 0
	for _, vs := range c.vals {
		if vs.read {
			c.res.Stats.DistinctRead++
		}
	}
}

// pollRecord notes one record a poll returned (ri: the reader's index, -1 for the
// final read): its position, when the reader first read it, the highest offset read;
// a value no producer sent is a phantom (reported once), one read before its send
// began a future read.
func (c *checker) pollRecord(op *Op, r Rec, ri int, phantoms map[string]bool) {
	vs := c.val(r.V)
	send := c.sends[r.V]
	vs.send = send
	if send == nil && !phantoms[r.V] {
		phantoms[r.V] = true
		c.add(Anomaly{Kind: KPhantom, P: r.P, O: r.O, Value: r.V, Proc: op.Proc, Time: op.End,
			Detail: "read a value that no producer sent", Ops: []int64{op.ID}})
	}
	if send != nil && send.Start > op.End {
		c.add(Anomaly{Kind: KFutureRead, P: r.P, O: r.O, Value: r.V, Proc: op.Proc, Time: op.End,
			Detail: fmt.Sprintf("poll ended at %s, before %s began sending the value at %s", fmtT(op.End), send.Proc, fmtT(send.Start)),
			Ops:    []int64{op.ID, send.ID}})
	}
	vs.read = true
	if vs.first == nil || op.End < vs.first.End {
		vs.first = op
	}
	if op.Proc == ProcFinal {
		vs.final = true
		fm := c.finalMax[r.P]
		if r.O+1 > fm {
			c.finalMax[r.P] = r.O + 1
		}
	}
	if ri >= 0 {
		for len(vs.readAt) < len(c.readers) {
			vs.readAt = append(vs.readAt, -1)
		}
		if vs.readAt[ri] < 0 || op.End < vs.readAt[ri] {
			vs.readAt[ri] = op.End
		}
	}
	c.addPos(r.V, vs, pos{r.P, r.O}, op)
	ps := c.part(r.P)
	if r.O > ps.maxRead {
		ps.maxRead, ps.maxReadOp = r.O, op
	}
}

// reportDuplicates reports each value found at more than one position.
func (c *checker) reportDuplicates() {
	for _, v := range sortedKeys(c.vals) {
		vs := c.vals[v]
		if vs.send == nil {
			vs.send = c.sends[v]
		}
		if len(vs.pos) > 1 {
			var ps []string
			for i, p := range vs.pos {
				ps = append(ps, fmt.Sprintf("p%d@%d (op %d)", p.p, p.o, vs.posOp[i]))
			}
			detail := "value at " + strings.Join(ps, ", ")
			if why := duplicateCause(vs); why != "" {
				detail += "; " + why
			}
			a := Anomaly{Kind: KDuplicate, P: vs.pos[0].p, O: vs.pos[0].o, Value: v,
				Detail: detail, Ops: append([]int64(nil), vs.posOp...)}
			if vs.send != nil {
				a.Proc, a.Time = vs.send.Proc, vs.send.Start
			}
			c.add(a)
		}
	}
}

// duplicateCause tells, from the producer the readers saw at each of a value's
// positions, which kind of duplicate it is (empty when a position's producer is
// unknown):
//
//   - the same producer id and epoch at each: a retry the broker wrote again, a
//     failure of its idempotence (it dedupes a producer's last five batches);
//   - one producer id at several epochs: the client wrote the records again after
//     bumping its epoch, which no broker dedupes; franz-go and Kafka's producer do
//     so when a retry is answered OUT_OF_ORDER_SEQUENCE_NUMBER (a broker that
//     forgot the batch the retry repeats) and after a batch failed;
//   - different producer ids: written by two producers.
func duplicateCause(vs *valState) string {
	var prods []string
	for _, p := range vs.pos {
		s, ok := vs.prod[p]
		if !ok {
			return ""
		}
		prods = append(prods, s)
	}
	id := func(s string) string { return s[:max(0, strings.IndexByte(s, '/'))] }
	sameID, same := true, true
	for _, s := range prods[1:] {
		sameID = sameID && id(s) == id(prods[0])
		same = same && s == prods[0]
	}
	list := strings.Join(prods, ", ")
	switch {
	case same:
		return "producer " + prods[0] + " (id/epoch) at each: a retry the broker did not recognise as a duplicate"
	case sameID:
		return "producer (id/epoch) " + list + ": written again by the client under a new epoch, which a broker cannot dedupe (after a retry answered OUT_OF_ORDER_SEQUENCE_NUMBER, or a failed batch)"
	default:
		return "producers (id/epoch) " + list + ": written by different producer ids"
	}
}

// reportInconsistent sorts each partition's known offsets and reports each offset
// at which more than one value was found.
func (c *checker) reportInconsistent() {
	for _, p := range sortedParts(c.parts) {
		ps := c.parts[p]
		ps.known = make([]int64, 0, len(ps.offs))
		for o := range ps.offs {
			ps.known = append(ps.known, o)
		}
		sort.Slice(ps.known, func(i, j int) bool { return ps.known[i] < ps.known[j] })
		for _, o := range ps.known {
			os := ps.offs[o]
			if len(os.vals) < 2 {
				continue
			}
			var vs []string
			for i, v := range os.vals {
				vs = append(vs, fmt.Sprintf("%q (%s, op %d)", v, os.procs[i], os.ops[i]))
			}
			c.add(Anomaly{Kind: KInconsistent, P: p, O: o, Value: os.vals[0], Proc: os.procs[1], Time: c.opTime(os.ops[1]),
				Detail: "values at one offset: " + strings.Join(vs, ", "), Ops: append([]int64(nil), os.ops...)})
		}
	}
}

// opTime is the End of the op with the given id (ids follow completion order, so
// a binary search over the ops finds it when the history is in file order).
func (c *checker) opTime(id int64) int64 {
	ops := c.h.Ops
	i := sort.Search(len(ops), func(i int) bool { return ops[i].ID >= id })
	if i < len(ops) && ops[i].ID == id {
		return ops[i].End
	}
	for j := range ops {
		if ops[j].ID == id {
			return ops[j].End
		}
	}
	return 0
}

// lostUnseen reports acknowledged values that are not there to read. When the final
// drain read a partition to the end offset it was given, every acknowledged value of
// that partition it did not read is lost (also one that readers had seen before: it
// left the log). Otherwise, a value nobody read is lost when a later offset of its
// partition was read, else unseen.
func (c *checker) lostUnseen() {
	var acked []*Op
	for _, op := range c.sends {
		if op.Status == OK {
			acked = append(acked, op)
		}
	}
	sort.Slice(acked, func(i, j int) bool {
		if acked[i].P != acked[j].P {
			return acked[i].P < acked[j].P
		}
		return acked[i].O < acked[j].O
	})
	for _, op := range acked {
		vs := c.vals[op.V]
		end, drained := c.finalEnd[op.P]
		drained = drained && (end == 0 || c.finalMax[op.P] >= end)
		if drained {
			if vs != nil && vs.final {
				continue
			}
			where := fmt.Sprintf("the final read of p%d to its end offset %d did not return it", op.P, end)
			if op.O >= end {
				where = fmt.Sprintf("the log of p%d ended at offset %d by the final read, below the acknowledged offset", op.P, end)
			}
			seen := "never read"
			ops := []int64{op.ID}
			if vs != nil && vs.first != nil {
				seen = fmt.Sprintf("read by %s at %s, then gone", vs.first.Proc, fmtT(vs.first.End))
				ops = append(ops, vs.first.ID)
			}
			c.add(Anomaly{Kind: KLost, P: op.P, O: op.O, Value: op.V, Proc: op.Proc, Time: op.End,
				Detail: fmt.Sprintf("acknowledged at %s, %s: %s", fmtT(op.End), seen, where), Ops: ops})
			continue
		}
		if vs != nil && vs.read {
			continue
		}
		ps := c.parts[op.P]
		if ps != nil && ps.maxRead > op.O {
			m := ps.maxReadOp
			c.add(Anomaly{Kind: KLost, P: op.P, O: op.O, Value: op.V, Proc: op.Proc, Time: op.End,
				Detail: fmt.Sprintf("acknowledged at %s, never read; %s read p%d up to offset %d (poll ended %s)", fmtT(op.End), m.Proc, op.P, ps.maxRead, fmtT(m.End)),
				Ops:    []int64{op.ID, m.ID}})
			continue
		}
		upTo := "nothing"
		if ps != nil && ps.maxRead >= 0 {
			upTo = fmt.Sprintf("up to offset %d", ps.maxRead)
		}
		c.add(Anomaly{Kind: KUnseen, P: op.P, O: op.O, Value: op.V, Proc: op.Proc, Time: op.End,
			Detail: fmt.Sprintf("acknowledged at %s, never read (readers saw p%d %s)", fmtT(op.End), op.P, upTo),
			Ops:    []int64{op.ID}})
	}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func sortedParts[V any](m map[int32]V) []int32 {
	ks := make([]int32, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	return ks
}

// fmtT renders ns since the start as seconds with milliseconds.
func fmtT(ns int64) string { return fmt.Sprintf("%.3fs", float64(ns)/1e9) }
