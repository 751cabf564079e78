package chaos

import (
	"fmt"
	"sort"
	"strings"
)

// sendOrder: one producer's acknowledged offsets in a partition increase in the order
// it sent (an idempotent producer's batches are appended in sequence order). A send
// that failed or whose outcome is unknown starts a new run: the client may have
// reset its producer id there.
func (c *checker) sendOrder() {
	type key struct {
		proc string
		p    int32
	}
	by := map[key][]*Op{}
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		if op.F == FSend {
			by[key{op.Proc, op.P}] = append(by[key{op.Proc, op.P}], op)
		}
	}
	keys := make([]key, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].proc != keys[j].proc {
			return keys[i].proc < keys[j].proc
		}
		return keys[i].p < keys[j].p
	})
	for _, k := range keys {
		ops := by[k]
		sort.SliceStable(ops, func(i, j int) bool {
			if ops[i].Seq != ops[j].Seq {
				return ops[i].Seq < ops[j].Seq
			}
			return ops[i].Start < ops[j].Start
		})
		var last *Op
		for _, op := range ops {
			if op.Status != OK {
				last = nil
				continue
			}
			if last != nil && op.O <= last.O {
				c.add(Anomaly{Kind: KNonmonotonicSnd, P: op.P, O: op.O, Value: op.V, Proc: op.Proc, Time: op.End,
					Detail: fmt.Sprintf("sent after %q (seq %d, offset %d) but acknowledged at offset %d (seq %d)", last.V, last.Seq, last.O, op.O, op.Seq),
					Ops:    []int64{last.ID, op.ID}})
			}
			last = op
		}
	}
}

// pollOrder: within one assignment, a consumer's reads of a partition go forward,
// one record after another of the version order. An assign, revoke or open of the
// process resets its position in the partitions it names (all, when it names none).
func (c *checker) pollOrder() {
	by := map[string][]*Op{}
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		switch op.F {
		case FPoll, FAssign, FRevoke, FOpen:
			by[op.Proc] = append(by[op.Proc], op)
		}
	}
	for _, proc := range sortedKeys(by) {
		ops := by[proc]
		sort.SliceStable(ops, func(i, j int) bool { return ops[i].Start < ops[j].Start })
		type cursor struct {
			o  int64
			v  string
			op *Op
		}
		cur := map[int32]cursor{}
		for _, op := range ops {
			if op.F != FPoll {
				if len(op.Parts) == 0 {
					cur = map[int32]cursor{}
				}
				for _, p := range op.Parts {
					delete(cur, p)
				}
				continue
			}
			for _, r := range op.Recs {
				last, ok := cur[r.P]
				cur[r.P] = cursor{r.O, r.V, op}
				if !ok {
					continue
				}
				if r.O <= last.o {
					c.add(Anomaly{Kind: KNonmonotonicPol, P: r.P, O: r.O, Value: r.V, Proc: proc, Time: op.End,
						Detail: fmt.Sprintf("read offset %d after offset %d (%q, op %d) with no assignment change", r.O, last.o, last.v, last.op.ID),
						Ops:    []int64{last.op.ID, op.ID}})
					continue
				}
				ps := c.parts[r.P]
				lo := sort.Search(len(ps.known), func(i int) bool { return ps.known[i] > last.o })
				hi := sort.Search(len(ps.known), func(i int) bool { return ps.known[i] >= r.O })
				if hi <= lo {
					continue
				}
				var skipped []string
				for i := lo; i < hi && len(skipped) < 5; i++ {
					skipped = append(skipped, fmt.Sprintf("%d=%q", ps.known[i], ps.offs[ps.known[i]].vals[0]))
				}
				more := ""
				if hi-lo > len(skipped) {
					more = fmt.Sprintf(" and %d more", hi-lo-len(skipped))
				}
				c.add(Anomaly{Kind: KPollSkip, P: r.P, O: r.O, Value: r.V, Proc: proc, Time: op.End,
					Detail: fmt.Sprintf("read offset %d right after offset %d, skipping %d record(s): %s%s", r.O, last.o, hi-lo, strings.Join(skipped, ", "), more),
					Ops:    []int64{last.op.ID, op.ID}})
			}
		}
	}
}

// realtime: in a partition, a send acknowledged before another was invoked has the
// lower offset (the log is linearizable: appends take offsets in real-time order).
func (c *checker) realtime() {
	by := map[int32][]*Op{}
	for _, op := range c.sends {
		if op.Status == OK {
			by[op.P] = append(by[op.P], op)
		}
	}
	for _, p := range sortedParts(by) {
		ops := by[p]
		sort.Slice(ops, func(i, j int) bool {
			if ops[i].O != ops[j].O {
				return ops[i].O > ops[j].O
			}
			return ops[i].ID < ops[j].ID
		})
		// Walking down the offsets, minEnd is the earliest completion among the sends at
		// higher offsets: a send invoked after it took a lower offset.
		var minEnd *Op
		for i := 0; i < len(ops); {
			j := i
			for j < len(ops) && ops[j].O == ops[i].O {
				j++
			}
			for _, op := range ops[i:j] {
				if minEnd != nil && op.Start > minEnd.End {
					c.add(Anomaly{Kind: KRealtime, P: p, O: op.O, Value: op.V, Proc: op.Proc, Time: op.Start,
						Detail: fmt.Sprintf("invoked at %s, after %q was acknowledged at the higher offset %d (%s, at %s)", fmtT(op.Start), minEnd.V, minEnd.O, minEnd.Proc, fmtT(minEnd.End)),
						Ops:    []int64{minEnd.ID, op.ID}})
				}
			}
			for _, op := range ops[i:j] {
				if minEnd == nil || op.End < minEnd.End {
					minEnd = op
				}
			}
			i = j
		}
	}
}

type commitAt struct {
	off int64
	op  *Op
}

// commits: a group's committed offset of a partition does not go backwards. A
// successful commit lower than one that completed before it began is one anomaly; a
// member that, newly assigned a partition, reads first below an offset committed
// before the assignment is another (the committed offset it was given went back).
func (c *checker) commits() {
	ended := c.commitsForward()
	c.resumptions(ended)
}

// groupPart is a group and a partition.
type groupPart struct {
	g string
	p int32
}

// commitRuns holds, per group and partition, the commits sorted by End with the
// running maximum offset, for "the highest offset committed before time t".
type commitRuns map[groupPart][]commitAt

// before is the highest offset group g committed for partition p before time t.
func (e commitRuns) before(g string, p int32, t int64) (commitAt, bool) {
	run := e[groupPart{g, p}]
	n := sort.Search(len(run), func(i int) bool { return run[i].op.End >= t })
	if n == 0 {
		return commitAt{}, false
	}
	return run[n-1], true
}

// commitsForward reports each successful commit lower than one that completed
// before it began, and returns the commits in order of their ends.
func (c *checker) commitsForward() commitRuns {
	by := map[groupPart][]commitAt{}
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		if op.F != FCommit || op.Group == "" {
			continue
		}
		for p, off := range op.Offs {
			if _, bad := op.PartErr[p]; bad || (op.Status != OK && op.PartErr == nil) {
				continue
			}
			by[groupPart{op.Group, p}] = append(by[groupPart{op.Group, p}], commitAt{off, op})
		}
	}
	keys := make([]groupPart, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].g != keys[j].g {
			return keys[i].g < keys[j].g
		}
		return keys[i].p < keys[j].p
	})
	ended := commitRuns{}
	for _, k := range keys {
		cs := append([]commitAt(nil), by[k]...)
		sort.SliceStable(cs, func(i, j int) bool { return cs[i].op.End < cs[j].op.End })
		run := make([]commitAt, len(cs))
		for i, x := range cs {
			run[i] = x
			if i > 0 && run[i-1].off > x.off {
				run[i] = run[i-1]
			}
		}
		ended[k] = run
		ends := cs
		for _, b := range by[k] {
			n := sort.Search(len(ends), func(i int) bool { return ends[i].op.End >= b.op.Start })
			if n == 0 {
				continue
			}
			if m := run[n-1]; m.off > b.off {
				c.add(Anomaly{Kind: KCommitBackwards, P: k.p, O: b.off, Proc: b.op.Proc, Time: b.op.End,
					Detail: fmt.Sprintf("group %s committed offset %d at %s, below offset %d committed by %s at %s", k.g, b.off, fmtT(b.op.End), m.off, m.op.Proc, fmtT(m.op.End)),
					Ops:    []int64{m.op.ID, b.op.ID}})
			}
		}
	}
	return ended
}

// resumptions reports a member that, newly assigned a partition, read first below
// an offset its group committed before the assignment.
func (c *checker) resumptions(ended commitRuns) {
	procOps := map[string][]*Op{}
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		if op.Group != "" && (op.F == FAssign || op.F == FRevoke || op.F == FPoll) {
			procOps[op.Proc] = append(procOps[op.Proc], op)
		}
	}
	for _, proc := range sortedKeys(procOps) {
		ops := procOps[proc]
		sort.SliceStable(ops, func(i, j int) bool { return ops[i].Start < ops[j].Start })
		pending := map[int32]*Op{} // partition -> the assign awaiting its first read
		for _, op := range ops {
			switch op.F {
			case FAssign:
				for _, p := range op.Parts {
					pending[p] = op
				}
			case FRevoke:
				for _, p := range op.Parts {
					delete(pending, p)
				}
			case FPoll:
				for _, r := range op.Recs {
					as, ok := pending[r.P]
					if !ok {
						continue
					}
					delete(pending, r.P)
					m, ok := ended.before(as.Group, r.P, as.Start)
					if ok && r.O < m.off {
						c.add(Anomaly{Kind: KCommitBackwards, P: r.P, O: r.O, Value: r.V, Proc: proc, Time: op.End,
							Detail: fmt.Sprintf("assigned p%d at %s, resumed at offset %d below offset %d that group %s committed at %s (%s)", r.P, fmtT(as.Start), r.O, m.off, as.Group, fmtT(m.op.End), m.op.Proc),
							Ops:    []int64{m.op.ID, as.ID, op.ID}})
					}
				}
			}
		}
	}
}
