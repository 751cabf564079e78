package chaos

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// The linearizability check runs porcupine over sampled windows of a partition: the
// acknowledged sends whose offsets fall in [From, To) and every read of those offsets,
// against a model of an append-only log restricted to the window:
//
//	state: hi (the next offset an append may take; starts at From) and, per offset of
//	       the window, the value known there (or none)
//	append(v) -> o   legal iff o >= hi, nothing is known at o, and no acknowledged
//	                 append of the window has an offset in [hi, o) (appends take offsets
//	                 in offset order); then o holds v, hi = o+1
//	read(o) -> v     legal iff o holds v; or nothing is known at o, v's send was not
//	                 acknowledged at o (an unacknowledged send, or one acknowledged
//	                 elsewhere) and, if o >= hi, no acknowledged append has an offset
//	                 in [hi, o): then o holds v and hi = max(hi, o+1)
//
// So appends take offsets in real-time order, reads never see an acknowledged value
// before its append, never see two values at one offset, and an offset read before an
// append began cannot be taken by it. Sampling keeps the search small; a window that
// porcupine cannot decide within the timeout counts as unknown, not as a failure.

// LinearOptions configure the sample.
type LinearOptions struct {
	// Windows is how many windows to check; 0 means 8, negative turns the check off.
	Windows int
	// Width is the number of offsets per window; 0 means 24.
	Width int64
	// Timeout bounds porcupine per window; 0 means 2s.
	Timeout time.Duration
	// Seed chooses the windows; 0 takes the header's seed.
	Seed int64
	// VisualizeDir, when set, receives porcupine's HTML visualization of each window
	// found illegal.
	VisualizeDir string
}

// LinearWindow is one checked window.
type LinearWindow struct {
	P      int32  `json:"p"`
	From   int64  `json:"from"`
	To     int64  `json:"to"`
	Ops    int    `json:"ops"`
	Result string `json:"result"` // Ok, Illegal, Unknown
	File   string `json:"file,omitempty"`
}

// LinearResult sums up the check.
type LinearResult struct {
	Ok      int            `json:"ok"`
	Illegal int            `json:"illegal"`
	Unknown int            `json:"unknown"`
	Windows []LinearWindow `json:"windows"`
}

type linIn struct {
	read  bool
	v     int32 // append: the value
	o     int64 // read: the offset
	acked bool  // read: v's send was acknowledged at o
}

type linState struct {
	hi   int64
	from int64
	vals []int32 // per offset - from; 0 unknown
}

// logModel is the model of the window [from, from+len(acked)); acked[i] says that an
// acknowledged append of the window took offset from+i.
func logModel(from int64, acked []bool) porcupine.Model {
	width := int64(len(acked))
	// gapFree reports whether no acknowledged append has an offset in [a, b).
	gapFree := func(a, b int64) bool {
		for o := max(a, from); o < b && o < from+width; o++ {
			if acked[o-from] {
				return false
			}
		}
		return true
	}
	return porcupine.Model{
		Init: func() interface{} { return linState{hi: from, from: from, vals: make([]int32, width)} },
		Step: func(state, input, output interface{}) (bool, interface{}) {
			s := state.(linState)
			in := input.(linIn)
			if !in.read {
				o := output.(int64)
				i := o - s.from
				if o < s.hi || i < 0 || i >= int64(len(s.vals)) || s.vals[i] != 0 || !gapFree(s.hi, o) {
					return false, nil
				}
				n := linState{hi: o + 1, from: s.from, vals: append([]int32(nil), s.vals...)}
				n.vals[i] = in.v
				return true, n
			}
			v := output.(int32)
			i := in.o - s.from
			if i < 0 || i >= int64(len(s.vals)) {
				return false, nil
			}
			switch {
			case s.vals[i] == v:
				return true, s
			case s.vals[i] != 0 || in.acked || (in.o >= s.hi && !gapFree(s.hi, in.o)):
				return false, nil
			}
			n := linState{hi: max(s.hi, in.o+1), from: s.from, vals: append([]int32(nil), s.vals...)}
			n.vals[i] = v
			return true, n
		},
		Equal: func(a, b interface{}) bool {
			x, y := a.(linState), b.(linState)
			if x.hi != y.hi {
				return false
			}
			for i := range x.vals {
				if x.vals[i] != y.vals[i] {
					return false
				}
			}
			return true
		},
		Hash: func(state interface{}) uint64 {
			s := state.(linState)
			h := fnv.New64a()
			var b [8]byte
			put := func(x uint64) {
				for i := range b {
					b[i] = byte(x >> (8 * i))
				}
				h.Write(b[:])
			}
			put(uint64(s.hi))
			for _, v := range s.vals {
				put(uint64(v))
			}
			return h.Sum64()
		},
		DescribeOperation: func(input, output interface{}) string {
			in := input.(linIn)
			if in.read {
				return fmt.Sprintf("read(%d) -> v%d", in.o, output)
			}
			return fmt.Sprintf("append(v%d) -> %d", in.v, output)
		},
		DescribeState: func(state interface{}) string {
			s := state.(linState)
			return fmt.Sprintf("hi=%d %v", s.hi, s.vals)
		},
	}
}

// linWindow builds the porcupine history of one window, and which of its offsets
// acknowledged appends took.
func (c *checker) linWindow(p int32, from, to int64) ([]porcupine.Operation, []bool) {
	acked := make([]bool, to-from)
	ids := map[string]int32{}
	id := func(v string) int32 {
		if x, ok := ids[v]; ok {
			return x
		}
		x := int32(len(ids) + 1)
		ids[v] = x
		return x
	}
	clients := map[string]int{}
	client := func(proc string) int {
		if x, ok := clients[proc]; ok {
			return x
		}
		clients[proc] = len(clients)
		return len(clients) - 1
	}
	var ops []porcupine.Operation
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		switch op.F {
		case FSend:
			if op.Status == OK && op.P == p && op.O >= from && op.O < to && c.sends[op.V] == op {
				ops = append(ops, porcupine.Operation{ClientId: client(op.Proc), Input: linIn{v: id(op.V)}, Call: op.Start, Output: op.O, Return: op.End})
				acked[op.O-from] = true
			}
		case FPoll:
			for _, r := range op.Recs {
				if r.P != p || r.O < from || r.O >= to {
					continue
				}
				s := c.sends[r.V]
				acked := s != nil && s.Status == OK && s.P == r.P && s.O == r.O
				ops = append(ops, porcupine.Operation{ClientId: client(op.Proc), Input: linIn{read: true, o: r.O, acked: acked}, Call: op.Start, Output: id(r.V), Return: op.End})
			}
		}
	}
	return ops, acked
}

func checkLinear(c *checker, opt LinearOptions) LinearResult {
	var res LinearResult
	if opt.Windows < 0 {
		return res
	}
	if opt.Windows == 0 {
		opt.Windows = 8
	}
	if opt.Width <= 0 {
		opt.Width = 24
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 2 * time.Second
	}
	if opt.Seed == 0 {
		opt.Seed = c.h.Header.Seed
	}
	for _, w := range chooseWindows(c, opt) {
		ops, acked := c.linWindow(w.p, w.from, w.to)
		model := logModel(w.from, acked)
		r, info := porcupine.CheckOperationsVerbose(model, ops, opt.Timeout)
		lw := LinearWindow{P: w.p, From: w.from, To: w.to, Ops: len(ops), Result: string(r)}
		switch r {
		case porcupine.Ok:
			res.Ok++
		case porcupine.Illegal:
			res.Illegal++
			if opt.VisualizeDir != "" {
				path := filepath.Join(opt.VisualizeDir, fmt.Sprintf("porcupine-p%d-%d.html", w.p, w.from))
				if err := porcupine.VisualizePath(model, info, path); err == nil {
					lw.File = path
				}
			}
			detail := fmt.Sprintf("no linearization of the %d ops on offsets [%d, %d) of p%d as an append-only log", len(ops), w.from, w.to, w.p)
			if lw.File != "" {
				detail += "; see " + lw.File
			}
			c.add(Anomaly{Kind: KNonlinearizable, P: w.p, O: w.from, Detail: detail})
		default:
			res.Unknown++
		}
		res.Windows = append(res.Windows, lw)
	}
	return res
}

// offsetWindow is a window of offsets [from, to) of partition p.
type offsetWindow struct {
	p        int32
	from, to int64
}

// chooseWindows chooses, seeded, up to opt.Windows windows of opt.Width offsets
// over the partitions with known offsets: half where faults began (from the first
// offset acknowledged after one), the rest at random known offsets. They come
// sorted by partition and offset.
func chooseWindows(c *checker, opt LinearOptions) []offsetWindow {
	parts := sortedParts(c.parts)
	var usable []int32
	for _, p := range parts {
		if len(c.parts[p].known) > 0 {
			usable = append(usable, p)
		}
	}
	if len(usable) == 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(uint64(opt.Seed), 0x6c696e))
	seen := map[offsetWindow]bool{}
	var wins []offsetWindow
	addWin := func(p int32, from int64) {
		known := c.parts[p].known
		lo, hi := known[0], known[len(known)-1]
		if lo < 0 || hi > math.MaxInt64/2 {
			return // offsets no log has: nothing to sample
		}
		from = max(lo, min(from, hi-opt.Width+1))
		w := offsetWindow{p, from, from + opt.Width}
		if !seen[w] {
			seen[w] = true
			wins = append(wins, w)
		}
	}
	// Half the windows start where faults began: the first offset acknowledged after.
	var faults []*Op
	for i := range c.h.Ops {
		if c.h.Ops[i].F == FFault {
			faults = append(faults, &c.h.Ops[i])
		}
	}
	rng.Shuffle(len(faults), func(i, j int) { faults[i], faults[j] = faults[j], faults[i] })
	for _, f := range faults {
		if len(wins) >= opt.Windows/2 {
			break
		}
		p := usable[rng.IntN(len(usable))]
		first := int64(-1)
		for _, s := range c.sends {
			if s.Status == OK && s.P == p && s.Start >= f.Start && (first < 0 || s.O < first) {
				first = s.O
			}
		}
		if first >= 0 {
			addWin(p, first-opt.Width/2)
		}
	}
	for tries := 0; len(wins) < opt.Windows && tries < 4*opt.Windows; tries++ {
		p := usable[rng.IntN(len(usable))]
		known := c.parts[p].known
		addWin(p, known[rng.IntN(len(known))])
	}
	sort.Slice(wins, func(i, j int) bool {
		if wins[i].p != wins[j].p {
			return wins[i].p < wins[j].p
		}
		return wins[i].from < wins[j].from
	})
	return wins
}
