package group

import (
	"slices"
	"sort"
)

// The sticky task assignor of streams groups (Kafka's StickyTaskAssignor, "sticky"):
// a pure function from the members (with their process and previous target) and the
// subtopologies (with their task counts) to each member's active and standby tasks.
//
// Invariants of its answer (streams_assignor_test.go checks them):
//
//  1. Every task is active on exactly one member.
//  2. Active tasks are balanced over members: their counts differ by at most one (and
//     so over processes, in proportion to their members).
//  3. Sticky: a task stays active on its previous member whenever that member still
//     has room under (2); otherwise it goes, when possible, to a member that held it as
//     a standby or warm-up (its state is there).
//  4. A standby of a task is never on the process holding the task active, and no
//     process holds two standbys of one task; each stateful task gets numStandbys
//     standbys when there are processes enough, else as many as there are.
//  5. Standbys prefer members that held the task before (standby, warm-up, active),
//     then the least loaded process; the total tasks per member stay balanced.
//
// Warm-up tasks (KIP-1071's movement of a stateful task to a caught-up member through a
// warm-up) are not built: the assignor never assigns any.

// stickyMember is one member as the assignor sees it.
type stickyMember struct {
	id      string
	process string
	prev    tasks // the member's previous target assignment
}

// stickySub is one subtopology: its id, task count and whether it has state (changelog
// topics: only those get standbys).
type stickySub struct {
	id       string
	tasks    int32
	stateful bool
}

// stickySpec is the assignor's input.
type stickySpec struct {
	members  []stickyMember
	subs     []stickySub
	standbys int // streams.num.standby.replicas
}

// assignTasks runs the sticky assignor. Every member of spec has an entry in the answer.
func assignTasks(spec *stickySpec) map[string]tasks {
	members := slices.Clone(spec.members)
	sort.Slice(members, func(i, j int) bool { return members[i].id < members[j].id })
	out := make(map[string]tasks, len(members))
	for _, m := range members {
		out[m.id] = newTasks()
	}
	if len(members) == 0 {
		return out
	}
	subs := slices.Clone(spec.subs)
	sort.Slice(subs, func(i, j int) bool { return subs[i].id < subs[j].id })
	var all, stateful []taskID
	for _, s := range subs {
		for p := int32(0); p < s.tasks; p++ {
			all = append(all, taskID{s.id, p})
			if s.stateful {
				stateful = append(stateful, taskID{s.id, p})
			}
		}
	}
	a := newStickyState(members)
	a.assignActive(all, out)
	if spec.standbys > 0 {
		a.assignStandbys(stateful, spec.standbys, len(all), out)
	}
	return out
}

// stickyState is the assignor's bookkeeping.
type stickyState struct {
	members    []stickyMember
	index      map[string]int
	processOf  []string
	perProcess map[string]int // members per process
	active     []int          // active tasks per member
	total      []int          // active + standby tasks per member
	procActive map[string]int
	procTotal  map[string]int
	prevActive map[taskID]int   // member that had the task active
	prevState  map[taskID][]int // members that had it as standby or warm-up, by id
}

func newStickyState(members []stickyMember) *stickyState {
	a := &stickyState{
		members: members, index: map[string]int{}, perProcess: map[string]int{},
		active: make([]int, len(members)), total: make([]int, len(members)),
		procActive: map[string]int{}, procTotal: map[string]int{},
		prevActive: map[taskID]int{}, prevState: map[taskID][]int{},
	}
	for i, m := range members {
		a.index[m.id] = i
		a.processOf = append(a.processOf, m.process)
		a.perProcess[m.process]++
		m.prev.active.each(func(t taskID) {
			if _, taken := a.prevActive[t]; !taken {
				a.prevActive[t] = i
			}
		})
		add := func(t taskID) {
			if !slices.Contains(a.prevState[t], i) {
				a.prevState[t] = append(a.prevState[t], i)
			}
		}
		m.prev.standby.each(add)
		m.prev.warmup.each(add)
	}
	return a
}

// assignActive places every task active (invariants 1-3): each member gets base tasks,
// extra of them one more.
func (a *stickyState) assignActive(all []taskID, out map[string]tasks) {
	n := len(a.members)
	base, extra := len(all)/n, len(all)%n
	extraUsed := 0
	canTake := func(i int) bool { return a.active[i] < base || (a.active[i] == base && extraUsed < extra) }
	take := func(i int, t taskID) {
		a.active[i]++
		a.total[i]++
		if a.active[i] == base+1 {
			extraUsed++
		}
		p := a.processOf[i]
		a.procActive[p]++
		a.procTotal[p]++
		out[a.members[i].id].active.add(t.sub, t.p)
	}
	var rest []taskID
	for _, t := range all { // 1. where it was active
		if i, ok := a.prevActive[t]; ok && canTake(i) {
			take(i, t)
			continue
		}
		rest = append(rest, t)
	}
	var rest2 []taskID
	for _, t := range rest { // 2. where its state is (a previous standby or warm-up)
		best := -1
		for _, i := range a.prevState[t] {
			if canTake(i) && (best < 0 || a.active[i] < a.active[best]) {
				best = i
			}
		}
		if best >= 0 {
			take(best, t)
			continue
		}
		rest2 = append(rest2, t)
	}
	for _, t := range rest2 { // 3. the least loaded process, its least loaded member
		best := -1
		for i := range a.members {
			if !canTake(i) {
				continue
			}
			if best < 0 || a.lessLoaded(i, best, a.procActive, a.active) {
				best = i
			}
		}
		take(best, t)
	}
}

// lessLoaded orders members by their process's load (tasks per member of the process),
// then their own count, then id (members are sorted by id, so by index).
func (a *stickyState) lessLoaded(i, j int, proc map[string]int, own []int) bool {
	pi, pj := a.processOf[i], a.processOf[j]
	li := float64(proc[pi]) / float64(a.perProcess[pi])
	lj := float64(proc[pj]) / float64(a.perProcess[pj])
	if li != lj {
		return li < lj
	}
	if own[i] != own[j] {
		return own[i] < own[j]
	}
	return i < j
}

// assignStandbys places up to standbys standbys of each stateful task (invariants 4-5).
func (a *stickyState) assignStandbys(stateful []taskID, standbys, numActive int, out map[string]tasks) {
	n := len(a.members)
	quota := (numActive + len(stateful)*standbys + n - 1) / n
	for _, t := range stateful {
		holders := map[string]bool{} // processes holding t
		for i, m := range a.members {
			if out[m.id].active.has(t.sub, t.p) {
				holders[a.processOf[i]] = true
			}
		}
		for r := 0; r < standbys; r++ {
			eligible := func(i int) bool { return !holders[a.processOf[i]] }
			best := -1
			// Sticky: a previous holder of the task's state, under the quota.
			cands := slices.Clone(a.prevState[t])
			if i, ok := a.prevActive[t]; ok {
				cands = append(cands, i)
			}
			for _, i := range cands {
				if eligible(i) && a.total[i] < quota && (best < 0 || a.total[i] < a.total[best]) {
					best = i
				}
			}
			if best < 0 {
				for i := range a.members {
					if eligible(i) && (best < 0 || a.lessLoaded(i, best, a.procTotal, a.total)) {
						best = i
					}
				}
			}
			if best < 0 {
				break // every process already holds the task
			}
			a.total[best]++
			a.procTotal[a.processOf[best]]++
			holders[a.processOf[best]] = true
			out[a.members[best].id].standby.add(t.sub, t.p)
		}
	}
}
