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

// assignUniform is the uniform assignor (see the file's comment): it keeps what
// each member had where still valid, gives every unowned partition to the
// eligible member with the fewest, then balances by single moves.
func assignUniform(spec *assignSpec) map[string]assignment {
	u := newUniform(spec)
	u.keepCurrent(spec)
	u.placeUnowned(spec)
	u.balance()
	out := make(map[string]assignment, len(u.ms))
	for _, s := range u.ms {
		out[s.id] = s.parts
	}
	return out
}

// uniformMember is a member as the uniform assignor fills it.
type uniformMember struct {
	id    string
	count int
	parts assignment
}

// uniform is the uniform assignor's state: the members, the members eligible
// for each topic (subscribed to it, in id order) and each partition's owner.
type uniform struct {
	ms       []*uniformMember
	eligible map[[16]byte][]*uniformMember
	owner    map[tpKey]*uniformMember
}

func newUniform(spec *assignSpec) *uniform {
	u := &uniform{ms: make([]*uniformMember, len(spec.members)), eligible: map[[16]byte][]*uniformMember{}, owner: map[tpKey]*uniformMember{}}
	for i, m := range spec.members {
		u.ms[i] = &uniformMember{id: m.id, parts: assignment{}}
	}
	for i, m := range spec.members {
		for id := range m.subscribed {
			if _, ok := spec.topics[id]; ok {
				u.eligible[id] = append(u.eligible[id], u.ms[i])
			}
		}
	}
	return u
}

// keepCurrent keeps what each member had, where still valid (the topic exists,
// the member is subscribed to it, the partition is in range and not kept by
// another member already).
func (u *uniform) keepCurrent(spec *assignSpec) {
	for i, m := range spec.members {
		m.current.each(func(id [16]byte, p int32) {
			n, ok := spec.topics[id]
			if !ok || !m.subscribed[id] || p < 0 || p >= n {
				return
			}
			k := tpKey{id, p}
			if u.owner[k] != nil {
				return
			}
			u.owner[k] = u.ms[i]
			u.ms[i].parts.add(id, p)
			u.ms[i].count++
		})
	}
}

// minOf is the member eligible for topic id with the fewest partitions (the
// first in id order among equals), nil if none.
func (u *uniform) minOf(id [16]byte) *uniformMember {
	var best *uniformMember
	for _, s := range u.eligible[id] {
		if best == nil || s.count < best.count {
			best = s
		}
	}
	return best
}

// placeUnowned gives every unowned partition to the eligible member with the
// fewest.
func (u *uniform) placeUnowned(spec *assignSpec) {
	for _, id := range sortedTopicIDs(spec.topics) {
		for p := int32(0); p < spec.topics[id]; p++ {
			k := tpKey{id, p}
			if u.owner[k] != nil {
				continue
			}
			s := u.minOf(id)
			if s == nil {
				continue
			}
			u.owner[k] = s
			s.parts.add(id, p)
			s.count++
		}
	}
}

// balance moves one partition at a time from the fullest member that can give
// one to an eligible member with two or more fewer, until none can: with
// homogeneous subscriptions this is the fewest moves that balance the group.
// Each move lowers the sum of squared counts, so this ends.
func (u *uniform) balance() {
	for {
		order := slices.Clone(u.ms)
		sort.SliceStable(order, func(i, j int) bool { return order[i].count > order[j].count })
		moved := false
		for _, a := range order {
			var parts []tpKey
			a.parts.each(func(id [16]byte, p int32) { parts = append(parts, tpKey{id, p}) })
			for i := len(parts) - 1; i >= 0 && !moved; i-- { // give away the highest partitions first
				k := parts[i]
				b := u.minOf(k.id)
				if b == nil || b == a || a.count-b.count < 2 {
					continue
				}
				a.parts.remove(k.id, k.p)
				a.count--
				b.parts.add(k.id, k.p)
				b.count++
				u.owner[k] = b
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
}
