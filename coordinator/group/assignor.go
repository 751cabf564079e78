package group

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The server-side assignors of the consumer protocol (KIP-848), named as clients name
// them in ConsumerGroupHeartbeat.ServerAssignor and as group.consumer.assignors lists
// them:
//
//   - uniform: every subscribed partition goes to exactly one member subscribed to its
//     topic; the assignment is balanced (no partition could move from a member to
//     another member subscribed to its topic that has two or more fewer partitions)
//     and sticky (a member keeps the partitions of its previous target unless keeping
//     them unbalances the group). Kafka's UniformAssignor gives the same guarantees;
//     the exact choice of partitions may differ.
//   - range: per topic, the members subscribed to it in order of their instance id
//     (static members) or member id, each taking a contiguous range of partitions, the
//     first (partitions mod members) taking one more; members subscribed to the same
//     topics with equal partition counts get the same partition numbers of each
//     (co-partitioning), as Kafka's RangeAssignor. It is not sticky.
//
// The first assignor of Config.ConsumerAssignors is used when no member names one; when
// members name different ones, the one most members name wins (ties: the earlier in
// Config.ConsumerAssignors).

// Assignor names.
const (
	AssignorUniform = "uniform"
	AssignorRange   = "range"
)

// knownAssignor reports whether name is a server-side assignor this package has.
func knownAssignor(name string) bool { return name == AssignorUniform || name == AssignorRange }

// ParseAssignors validates a group.consumer.assignors value: names (or Kafka's class
// names, org.apache.kafka.coordinator.group.assignor.UniformAssignor and RangeAssignor)
// separated by commas.
func ParseAssignors(v string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		switch s {
		case "":
			continue
		case "org.apache.kafka.coordinator.group.assignor.UniformAssignor":
			s = AssignorUniform
		case "org.apache.kafka.coordinator.group.assignor.RangeAssignor":
			s = AssignorRange
		}
		if !knownAssignor(s) {
			return nil, fmt.Errorf("group: unknown server assignor %q (served: uniform, range)", s)
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("group: group.consumer.assignors is empty")
	}
	return out, nil
}

// assignMember is one member as an assignor sees it.
type assignMember struct {
	id         string
	sortKey    string            // instance id for static members, else member id
	subscribed map[[16]byte]bool // subscribed topics that exist
	current    assignment        // the member's previous target (stickiness)
}

// assignSpec is an assignor's input: members sorted by id, the subscribed topics'
// partition counts.
type assignSpec struct {
	members []assignMember
	topics  map[[16]byte]int32
}

// runAssignor computes the target assignment of every member of spec by name.
func runAssignor(name string, spec *assignSpec) map[string]assignment {
	if name == AssignorRange {
		return assignRange(spec)
	}
	return assignUniform(spec)
}

func sortedTopicIDs(topics map[[16]byte]int32) [][16]byte {
	ids := make([][16]byte, 0, len(topics))
	for id := range topics {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, compareUUID)
	return ids
}

func assignRange(spec *assignSpec) map[string]assignment {
	out := make(map[string]assignment, len(spec.members))
	for _, m := range spec.members {
		out[m.id] = assignment{}
	}
	for _, id := range sortedTopicIDs(spec.topics) {
		var ms []*assignMember
		for i := range spec.members {
			if spec.members[i].subscribed[id] {
				ms = append(ms, &spec.members[i])
			}
		}
		if len(ms) == 0 {
			continue
		}
		sort.Slice(ms, func(i, j int) bool {
			if ms[i].sortKey != ms[j].sortKey {
				return ms[i].sortKey < ms[j].sortKey
			}
			return ms[i].id < ms[j].id
		})
		n := spec.topics[id]
		q, extra := n/int32(len(ms)), n%int32(len(ms))
		start := int32(0)
		for i, m := range ms {
			size := q
			if int32(i) < extra {
				size++
			}
			for p := start; p < start+size; p++ {
				out[m.id].add(id, p)
			}
			start += size
		}
	}
	return out
}

func assignUniform(spec *assignSpec) map[string]assignment {
	type state struct {
		id    string
		count int
		parts assignment
	}
	ms := make([]*state, len(spec.members))
	byID := make(map[string]*state, len(spec.members))
	for i, m := range spec.members {
		ms[i] = &state{id: m.id, parts: assignment{}}
		byID[m.id] = ms[i]
	}
	// Eligible members per topic, in id order.
	eligible := map[[16]byte][]*state{}
	for i, m := range spec.members {
		for id := range m.subscribed {
			if _, ok := spec.topics[id]; ok {
				eligible[id] = append(eligible[id], ms[i])
			}
		}
	}
	owner := map[tpKey]*state{}
	// 1. Keep what each member had, where still valid.
	for i, m := range spec.members {
		m.current.each(func(id [16]byte, p int32) {
			n, ok := spec.topics[id]
			if !ok || !m.subscribed[id] || p < 0 || p >= n {
				return
			}
			k := tpKey{id, p}
			if owner[k] != nil {
				return
			}
			owner[k] = ms[i]
			ms[i].parts.add(id, p)
			ms[i].count++
		})
	}
	minOf := func(id [16]byte) *state {
		var best *state
		for _, s := range eligible[id] {
			if best == nil || s.count < best.count {
				best = s
			}
		}
		return best
	}
	// 2. Give every unowned partition to the eligible member with the fewest.
	for _, id := range sortedTopicIDs(spec.topics) {
		for p := int32(0); p < spec.topics[id]; p++ {
			k := tpKey{id, p}
			if owner[k] != nil {
				continue
			}
			s := minOf(id)
			if s == nil {
				continue
			}
			owner[k] = s
			s.parts.add(id, p)
			s.count++
		}
	}
	// 3. Move one partition at a time from the fullest member that can give one to an
	// eligible member with two or more fewer, until none can: with homogeneous
	// subscriptions this is the fewest moves that balance the group. Each move lowers
	// the sum of squared counts, so this ends.
	for {
		order := slices.Clone(ms)
		sort.SliceStable(order, func(i, j int) bool { return order[i].count > order[j].count })
		moved := false
		for _, a := range order {
			var parts []tpKey
			a.parts.each(func(id [16]byte, p int32) { parts = append(parts, tpKey{id, p}) })
			for i := len(parts) - 1; i >= 0 && !moved; i-- { // give away the highest partitions first
				k := parts[i]
				b := minOf(k.id)
				if b == nil || b == a || a.count-b.count < 2 {
					continue
				}
				a.parts.remove(k.id, k.p)
				a.count--
				b.parts.add(k.id, k.p)
				b.count++
				owner[k] = b
				moved = true
			}
			if moved {
				break
			}
		}
		if !moved {
			break
		}
	}
	out := make(map[string]assignment, len(ms))
	for _, s := range ms {
		out[s.id] = s.parts
	}
	return out
}
