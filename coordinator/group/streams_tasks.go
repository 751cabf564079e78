package group

import (
	"slices"
	"sort"
)

// taskID names one task of a streams group: a subtopology and a partition (Kafka's
// TaskId: the task processes that partition of every source topic of the subtopology).
type taskID struct {
	sub string
	p   int32
}

func compareTaskIDs(a, b taskID) int {
	if a.sub != b.sub {
		if a.sub < b.sub {
			return -1
		}
		return 1
	}
	return int(a.p) - int(b.p)
}

// taskSet maps a subtopology id to its partitions, sorted and without duplicates. A
// subtopology with no partitions is absent. Values are owned by the map: copy before
// sharing.
type taskSet map[string][]int32

func (s taskSet) add(sub string, p int32) {
	ps := s[sub]
	i, found := slices.BinarySearch(ps, p)
	if found {
		return
	}
	s[sub] = slices.Insert(ps, i, p)
}

func (s taskSet) has(sub string, p int32) bool {
	_, found := slices.BinarySearch(s[sub], p)
	return found
}

func (s taskSet) count() int {
	n := 0
	for _, ps := range s {
		n += len(ps)
	}
	return n
}

func (s taskSet) clone() taskSet {
	out := make(taskSet, len(s))
	for sub, ps := range s {
		out[sub] = slices.Clone(ps)
	}
	return out
}

func (s taskSet) equal(o taskSet) bool {
	if len(s) != len(o) {
		return false
	}
	for sub, ps := range s {
		if !slices.Equal(ps, o[sub]) {
			return false
		}
	}
	return true
}

// subtopologies returns the set's subtopology ids, sorted.
func (s taskSet) subtopologies() []string {
	subs := make([]string, 0, len(s))
	for sub := range s {
		subs = append(subs, sub)
	}
	sort.Strings(subs)
	return subs
}

// each calls fn for every task in subtopology then partition order.
func (s taskSet) each(fn func(t taskID)) {
	for _, sub := range s.subtopologies() {
		for _, p := range s[sub] {
			fn(taskID{sub, p})
		}
	}
}

// intersects reports whether s and o have a task in common.
func (s taskSet) intersects(o taskSet) bool {
	for sub, ps := range s {
		for _, p := range ps {
			if o.has(sub, p) {
				return true
			}
		}
	}
	return false
}

// tasks is a member's active, standby and warm-up tasks (Kafka's TasksTuple).
type tasks struct {
	active, standby, warmup taskSet
}

func newTasks() tasks { return tasks{active: taskSet{}, standby: taskSet{}, warmup: taskSet{}} }

func (t tasks) clone() tasks {
	return tasks{active: t.active.clone(), standby: t.standby.clone(), warmup: t.warmup.clone()}
}

func (t tasks) equal(o tasks) bool {
	return t.active.equal(o.active) && t.standby.equal(o.standby) && t.warmup.equal(o.warmup)
}

func (t tasks) empty() bool { return len(t.active) == 0 && len(t.standby) == 0 && len(t.warmup) == 0 }

// intersects reports whether t and o share a task of the same role.
func (t tasks) intersects(o tasks) bool {
	return t.active.intersects(o.active) || t.standby.intersects(o.standby) || t.warmup.intersects(o.warmup)
}

// contains reports whether every task of o is in t, role by role.
func (t tasks) contains(o tasks) bool {
	in := func(s, sub taskSet) bool {
		ok := true
		sub.each(func(id taskID) { ok = ok && s.has(id.sub, id.p) })
		return ok
	}
	return in(t.active, o.active) && in(t.standby, o.standby) && in(t.warmup, o.warmup)
}

// roles returns t's three sets with their role, in Kafka's order.
func (t tasks) roles() [3]taskSet { return [3]taskSet{t.active, t.standby, t.warmup} }
