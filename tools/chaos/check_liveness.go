package chaos

import (
	"fmt"
	"sort"
)

// liveness: once the last fault has healed (LastHeal, H), the system must make
// progress within the bound B:
//
//  1. every send outstanding after H completes, acknowledged, within B of
//     max(its start, H); a send that ends without an acknowledgement (error or
//     unknown) after that time counts from max(start, H) to its end;
//  2. every acknowledged value is read by every reader (an assigned consumer, or a
//     group as a whole) within B of max(its acknowledgement, H), provided the reader
//     was running from that time until B later; a value it never read counts until
//     the reader stopped.
//
// A run without faults checks from its start. Findings are grouped: one anomaly per
// producer and per (reader, partition), naming the worst case and the count.
func (c *checker) liveness() {
	c.livenessSends()
	c.livenessReads(lifetimes(c.h.Ops))
}

// life is a process's lifetime: its first open and its last close (-1 if none).
type life struct{ open, close int64 }

// lifetimes finds each process's lifetime, and each group's, from open and close.
func lifetimes(ops []Op) map[string]*life {
	lives := map[string]*life{}
	lifeOf := func(name string) *life {
		l := lives[name]
		if l == nil {
			l = &life{open: -1, close: -1}
			lives[name] = l
		}
		return l
	}
	for i := range ops {
		op := &ops[i]
		var names []string
		switch op.F {
		case FOpen, FClose:
			names = []string{op.Proc}
			if op.Group != "" {
				names = append(names, "group:"+op.Group)
			}
		default:
			continue
		}
		for _, n := range names {
			l := lifeOf(n)
			if op.F == FOpen && (l.open < 0 || op.Start < l.open) {
				l.open = op.Start
			}
			if op.F == FClose && op.End > l.close {
				l.close = op.End
			}
		}
	}
	return lives
}

// lateWorst counts the late cases of one producer or (reader, partition) and keeps
// the worst.
type lateWorst struct {
	n     int
	d     int64
	op    *Op
	what  string
	never bool
}

// livenessSends checks 1: one anomaly per producer with sends outstanding longer
// than the bound after the faults ended.
func (c *checker) livenessSends() {
	h := c.res.LastHeal
	b := c.res.Liveness
	byProd := map[string]*lateWorst{}
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		if op.F != FSend || op.End <= h {
			continue
		}
		d := op.End - max(op.Start, h)
		if d <= b {
			continue
		}
		w := byProd[op.Proc]
		if w == nil {
			w = &lateWorst{}
			byProd[op.Proc] = w
		}
		w.n++
		if d > w.d {
			w.d, w.op = d, op
			w.what = "acknowledged"
			if op.Status != OK {
				w.what = fmt.Sprintf("ended %s (%s)", op.Status, op.Err)
			}
		}
	}
	for _, proc := range sortedKeys(byProd) {
		w := byProd[proc]
		op := w.op
		c.add(Anomaly{Kind: KLivenessSend, P: op.P, O: -1, Value: op.V, Proc: proc, Time: op.End,
			Detail: fmt.Sprintf("%d send(s) outstanding longer than %s after the faults ended at %s; worst %q sent at %s, %s after %s", w.n, fmtD(b), fmtT(h), op.V, fmtT(op.Start), w.what, fmtD(w.d)),
			Ops:    []int64{op.ID}})
	}
}

// readerPart is a reader and a partition.
type readerPart struct {
	r string
	p int32
}

// livenessReads checks 2: one anomaly per (reader, partition) with acknowledged
// values not read within the bound by a reader running over the whole window.
func (c *checker) livenessReads(lives map[string]*life) {
	h := c.res.LastHeal
	b := c.res.Liveness
	late := map[readerPart]*lateWorst{}
	for _, v := range sortedKeys(c.vals) {
		vs := c.vals[v]
		s := vs.send
		if s == nil || s.Status != OK {
			continue
		}
		t0 := max(s.End, h)
		for ri, r := range c.readers {
			l := lives[r]
			if l == nil || l.open < 0 || l.open > t0 || l.close < 0 || l.close < t0+b {
				continue // not running over the whole window
			}
			at := int64(-1)
			if ri < len(vs.readAt) {
				at = vs.readAt[ri]
			}
			var d int64
			what := ""
			if at < 0 {
				d = l.close - t0
				what = "never read"
			} else {
				d = at - t0
				what = "read at " + fmtT(at)
			}
			if d <= b {
				continue
			}
			k := readerPart{r, s.P}
			w := late[k]
			if w == nil {
				w = &lateWorst{}
				late[k] = w
			}
			w.n++
			never := at < 0
			if w.op == nil || (never && !w.never) || (never == w.never && d > w.d) {
				w.d, w.op, w.what, w.never = d, s, what, never
			}
		}
	}
	keys := make([]readerPart, 0, len(late))
	for k := range late {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].r != keys[j].r {
			return keys[i].r < keys[j].r
		}
		return keys[i].p < keys[j].p
	})
	for _, k := range keys {
		w := late[k]
		s := w.op
		c.add(Anomaly{Kind: KLivenessRead, P: k.p, O: s.O, Value: s.V, Proc: k.r, Time: max(s.End, h) + b,
			Detail: fmt.Sprintf("%s: %d acknowledged value(s) of p%d not read within %s of max(ack, faults ended %s); worst %q at offset %d, acknowledged %s, %s", k.r, w.n, k.p, fmtD(b), fmtT(h), s.V, s.O, fmtT(s.End), w.what),
			Ops:    []int64{s.ID}})
	}
}

func fmtD(ns int64) string { return fmt.Sprintf("%.1fs", float64(ns)/1e9) }
