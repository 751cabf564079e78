package group

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The three steps of a consumer-group heartbeat, after the member's own fields:
//
//	subscription   members' topic names and resolved regexes -> the subscribed topics
//	               that exist, with partition counts (PartitionMetadata). A change
//	               bumps the group epoch.
//	target         group epoch > assignment epoch -> the assignor's target for every
//	               member (TargetAssignmentMember records for those that changed, then
//	               TargetAssignmentMetadata); assignment epoch = group epoch.
//	reconcile      the member's current assignment moves towards its target: first it
//	               revokes what it must give up (UNREVOKED_PARTITIONS, same epoch),
//	               then it moves to the target's epoch with what it keeps plus what is
//	               free (UNRELEASED_PARTITIONS while a partition is still held by
//	               another member, else STABLE) (CurrentMemberAssignment record).

// subscribedNamesLocked is every topic name some member subscribes to, by name or by a
// resolved regex.
func (g *group) subscribedNamesLocked() map[string]struct{} {
	cg := g.cg
	out := map[string]struct{}{}
	for _, m := range cg.members {
		for _, n := range m.names {
			out[n] = struct{}{}
		}
		if m.regex != nil {
			if res := cg.regexes[*m.regex]; res != nil {
				for _, n := range res.topics {
					out[n] = struct{}{}
				}
			}
		}
	}
	return out
}

// memberTopicIDsLocked is the set of subscribed topics of m that exist in the group's
// subscription metadata.
func (g *group) memberTopicIDsLocked(m *cmember) map[[16]byte]bool {
	cg := g.cg
	out := map[[16]byte]bool{}
	add := func(n string) {
		if t, ok := cg.subMeta[n]; ok {
			out[t.TopicID] = true
		}
	}
	for _, n := range m.names {
		add(n)
	}
	if m.regex != nil {
		if res := cg.regexes[*m.regex]; res != nil {
			for _, n := range res.topics {
				add(n)
			}
		}
	}
	return out
}

// refreshSubscriptionLocked recomputes the regexes' topics and the subscription
// metadata when force is set or the topic image moved since the last refresh. It
// returns whether the subscribed topics changed (the group epoch must move).
func (g *group) refreshSubscriptionLocked(force bool, recs *[]Record) bool {
	cg := g.cg
	im := g.c.topics.load()
	if !force && cg.currentAt(im.version) {
		return false
	}
	changed := false
	now := g.c.clock.Now().UnixMilli()
	used := map[string]bool{}
	for _, m := range cg.members {
		if m.regex != nil {
			used[*m.regex] = true
		}
	}
	for re := range used {
		res := cg.regexes[re]
		if res != nil && cg.refreshed && res.version == int64(im.version) {
			continue
		}
		var topics []string
		if rx, err := compileRegex(re); err == nil {
			for _, n := range im.names {
				if rx.MatchString(n) {
					topics = append(topics, n)
				}
			}
		}
		if res == nil || !slices.Equal(res.topics, topics) {
			changed = true
			v := RegexValue{Topics: topics, Version: int64(im.version), Timestamp: now}
			*recs = append(*recs, Record{Timestamp: now,
				Key:   appendGroupTypedKey(nil, recConsumerRegularExpression, g.id, re),
				Value: appendRegexValue(nil, &v)})
		}
		cg.regexes[re] = &regexResolution{topics: topics, version: int64(im.version), timestamp: now}
	}
	for re := range cg.regexes {
		if !used[re] {
			delete(cg.regexes, re)
			*recs = append(*recs, Record{Timestamp: now, Key: appendGroupTypedKey(nil, recConsumerRegularExpression, g.id, re)})
		}
	}
	if cg.setLocked(g, recConsumerPartitionMetadata, im, maps.Keys(g.subscribedNamesLocked()), recs) {
		changed = true
	}
	return changed
}

// assignorLocked is the server assignor of the group: the one most members ask for,
// else the configured default.
func (g *group) assignorLocked() string {
	votes := map[string]int{}
	for _, m := range g.cg.members {
		if m.assignor != nil {
			votes[*m.assignor]++
		}
	}
	best := ""
	for _, name := range g.c.cfg.ConsumerAssignors {
		if votes[name] > votes[best] || (best == "" && votes[name] > 0) {
			best = name
		}
	}
	if best == "" {
		return g.c.cfg.ConsumerAssignors[0]
	}
	return best
}

// computeTargetLocked computes the target assignment of the group epoch.
func (g *group) computeTargetLocked(recs *[]Record) {
	cg := g.cg
	spec := &assignSpec{topics: map[[16]byte]int32{}}
	for _, t := range cg.subMeta {
		spec.topics[t.TopicID] = t.NumPartitions
	}
	ids := cg.sortedIDs()
	for _, id := range ids {
		m := cg.members[id]
		key := id
		if m.instanceID != nil {
			key = *m.instanceID
		}
		spec.members = append(spec.members, assignMember{id: id, sortKey: key, subscribed: g.memberTopicIDsLocked(m), current: cg.target[id]})
	}
	out := runAssignor(g.assignorLocked(), spec)
	cg.installTargetLocked(g, ids, func(id string) assignment { return out[id] }, recs)
}

// ownsAny reports whether the owned partitions a request lists hold any of a; a request
// that does not list them (ownedSet false) is taken to still hold everything.
func ownsAny(owned []kmsg.ConsumerGroupHeartbeatRequestTopic, ownedSet bool, a assignment) bool {
	if !ownedSet {
		return true
	}
	for _, t := range owned {
		for _, p := range t.Partitions {
			if a.has(t.TopicID, p) {
				return true
			}
		}
	}
	return false
}

// nextAssignment is a consumer-group member's reconciled state.
type nextAssignment = reconciled[assignment]

// reconcileLocked moves m towards its target (Kafka's CurrentAssignmentBuilder) and
// records the change. A member in an unknown state is fenced unless it owns nothing.
func (g *group) reconcileLocked(m *cmember, owned []kmsg.ConsumerGroupHeartbeatRequestTopic, ownedSet bool, recs *[]Record) (int16, string) {
	cg := g.cg
	stillOwns := func(a assignment) bool { return ownsAny(owned, ownedSet, a) }
	next := func(epoch int32) nextAssignment { return g.computeNext(m, epoch, cg.assignmentEpoch, owned, ownedSet) }
	if cg.reconcileLocked(g, m, stillOwns, ownedSet && len(owned) == 0, next, recs) {
		return kerr.FencedMemberEpoch.Code, "The consumer group member is in an unknown state. The member must abandon all its partitions and rejoin."
	}
	return 0, ""
}

// computeNext is the reconciliation step from m's assigned partitions at epoch towards
// its target at the target epoch te.
func (g *group) computeNext(m *cmember, epoch, te int32, owned []kmsg.ConsumerGroupHeartbeatRequestTopic, ownedSet bool) nextAssignment {
	cg := g.cg
	target := cg.target[m.id]
	keep, revoke, add := assignment{}, assignment{}, assignment{}
	unreleased := false
	m.assigned.each(func(id [16]byte, p int32) {
		if target.has(id, p) {
			keep.add(id, p)
		} else {
			revoke.add(id, p)
		}
	})
	target.each(func(id [16]byte, p int32) {
		if keep.has(id, p) {
			return
		}
		if o, held := cg.owners[tpKey{id, p}]; held && o != m.id {
			unreleased = true
			return
		}
		add.add(id, p)
	})
	revoking := len(revoke) > 0 && ownsAny(owned, ownedSet, revoke)
	if !revoking {
		add.each(keep.add)
	}
	return nextReconciled(epoch, te, keep, revoke, assignment{}, revoking, unreleased)
}

// setMemberAssignmentLocked installs m's new epochs, state and partitions, keeping the
// owners map (consumerState invariant 1) and the per-partition assignment epochs.
func (g *group) setMemberAssignmentLocked(m *cmember, epoch, prev int32, state memberState, assigned, pending assignment) {
	cg := g.cg
	g.releaseLocked(m)
	if m.assignedAt == nil {
		m.assignedAt = map[tpKey]int32{}
	}
	for k := range m.assignedAt {
		if !assigned.has(k.id, k.p) {
			delete(m.assignedAt, k)
		}
	}
	assigned.each(func(id [16]byte, p int32) {
		if !m.assigned.has(id, p) {
			m.assignedAt[tpKey{id, p}] = epoch
		}
	})
	m.epoch, m.prevEpoch, m.state = epoch, prev, state
	m.assigned, m.pending = assigned, pending
	cg.claim(m)
}
