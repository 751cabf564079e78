package controller

import (
	"slices"
	"strings"
	"time"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// electionMode says how partitionChange chooses a leader.
type electionMode int8

const (
	// electKeep keeps the current leader while it may lead (in the ISR, a replica,
	// unfenced, not in controlled shutdown), else elects the first replica, in
	// preference order, that may lead; else none.
	electKeep electionMode = iota
	// electPreferred elects the preferred replica (the first) when it may lead, else
	// as electKeep.
	electPreferred
	// electUnclean is electKeep, then, when no ISR member may lead, the first live
	// replica outside the ISR: it becomes the ISR alone and its leader recovery state
	// RECOVERING (records acknowledged by the old ISR may be lost).
	electUnclean
)

// RecoveryStrategy is KIP-966's unclean.recovery.strategy: what a partition whose
// ISR and ELR hold no replica that may lead does.
type RecoveryStrategy int8

const (
	// RecoveryNone: nothing; the partition waits for an ISR or ELR member.
	RecoveryNone RecoveryStrategy = iota
	// RecoveryBalanced: with ELR on, the last known leader once it is back (an
	// unclean election: it may have lost records); Kafka's behaviour by default.
	RecoveryBalanced
	// RecoveryAggressive: Balanced, then any live replica (unclean.leader.election.enable).
	RecoveryAggressive
)

// ParseRecoveryStrategy reads unclean.recovery.strategy's values (Kafka's names, any
// case); unknown values read as Balanced, the default.
func ParseRecoveryStrategy(v string) RecoveryStrategy {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "none":
		return RecoveryNone
	case "aggressive":
		return RecoveryAggressive
	}
	return RecoveryBalanced
}

// ElectionPolicy is what a topic's elections may do beyond its ISR, resolved from its
// configs: its min.insync.replicas (at eligible.leader.replicas.version 1, a replica
// that leaves an ISR smaller than it stays eligible) and its unclean recovery
// strategy.
type ElectionPolicy struct {
	MinISR   int
	Recovery RecoveryStrategy
}

// PolicyFunc resolves a topic's ElectionPolicy.
type PolicyFunc func(topic string) ElectionPolicy

// partitionChange builds one partition's PartitionChangeRecord, as Kafka's
// PartitionChangeBuilder: the targets (nil: unchanged) are applied, a reassignment
// whose adding replicas are all in the ISR completes, the ELR is kept (at
// eligible.leader.replicas.version 1, below), a leader is chosen by mode, and the
// record carries only what differs. im is the image the change will apply to (it
// says which brokers may lead and whether ELR is on).
//
// With ELR on (KIP-966; Kafka's maybePopulateTargetElr, electLeader and
// maybeUpdateLastKnownLeader):
//
//   - an ISR at or above the effective min ISR (min(min.insync.replicas, replicas))
//     clears the ELR; below it, the ELR is every replica of the old ISR and ELR that
//     is not in the new ISR, but a broker that restarted uncleanly (it may have lost
//     records): the high watermark has not moved since they left, so they hold every
//     committed record;
//   - the ISR may empty (the leader leaves and no member may lead), and a leader is
//     elected from the ISR, then, when the ISR is empty, from the ELR (it becomes the
//     ISR alone and leaves the ELR), then the last known leader (lastKnownLeader: an
//     unclean election, RECOVERING), then, with electUnclean, any live replica;
//   - the last known ELR keeps the last leader while the partition has none: set when
//     the ISR empties, cleared once it has a leader again; an unclean election
//     clears the ELR and the last known ELR.
//
// With ELR off the ISR never empties (its last member stays) and no ELR is kept.
type partitionChange struct {
	im       *metadata.Image
	topicID  metadata.UUID
	index    int32
	cur      metadata.PartitionImage
	isr      []int32 // target ISR; nil: unchanged
	replicas []int32 // target replicas; nil: unchanged
	removing []int32 // target removing replicas; nil: unchanged
	adding   []int32 // target adding replicas; nil: unchanged
	recovery int8    // target leader recovery state; -1: unchanged
	mode     electionMode

	elr             bool  // eligible.leader.replicas.version 1 in im
	minISR          int   // the topic's min.insync.replicas (at least 1)
	lastKnownLeader bool  // with ELR on, the last known leader may be elected (Balanced, Aggressive)
	uncleanShutdown int32 // a broker that restarted uncleanly: out of the ISR and the ELR (-1: none)
	// returned: since when a broker is back from a restart (zero: it is not; nil:
	// none is): FenceBrokerRecordsReturned.
	returned func(id int32) time.Time
}

// newChange starts a change of partition index of t with topic t's policy (nil: min
// ISR 1, Balanced): its min ISR, and its recovery strategy's last known leader (not
// None) and unclean elections (Aggressive turns electKeep into electUnclean).
func newChange(im *metadata.Image, t *metadata.TopicImage, index int32, mode electionMode, policy PolicyFunc) *partitionChange {
	c := &partitionChange{im: im, topicID: t.ID, index: index, cur: t.Partitions[index], recovery: -1, mode: mode,
		elr: im.ELREnabled(), minISR: 1, lastKnownLeader: true, uncleanShutdown: -1}
	if policy != nil {
		p := policy(t.Name)
		c.minISR = max(p.MinISR, 1)
		c.lastKnownLeader = p.Recovery != RecoveryNone
		if p.Recovery == RecoveryAggressive && c.mode == electKeep {
			c.mode = electUnclean
		}
	}
	return c
}

// result is the partition a change leads to.
type changeResult struct {
	replicas, isr, removing, adding []int32
	elr, lastKnownELR               []int32
	leader                          int32
	recovery                        int8
}

// compute applies the targets and the election rules.
func (c *partitionChange) compute() changeResult {
	r := changeResult{replicas: c.cur.Replicas, isr: c.cur.ISR, removing: c.cur.Removing, adding: c.cur.Adding,
		leader: c.cur.Leader, recovery: c.cur.LeaderRecoveryState, elr: c.cur.ELR, lastKnownELR: c.cur.LastKnownELR}
	if c.replicas != nil {
		r.replicas = c.replicas
	}
	if c.isr != nil {
		r.isr = c.isr
	}
	if c.removing != nil {
		r.removing = c.removing
	}
	if c.adding != nil {
		r.adding = c.adding
	}
	if c.recovery >= 0 {
		r.recovery = c.recovery
	}
	if c.uncleanShutdown >= 0 {
		r.isr = without(r.isr, c.uncleanShutdown)
	}
	if len(r.isr) == 0 && !c.elr {
		r.isr = c.cur.ISR // the classic rule: the last member stays
	}
	// A reassignment completes once every replica it adds is in the ISR: the replicas
	// it removes leave the replicas and the ISR (unless that would empty the ISR).
	if (len(r.adding) > 0 || len(r.removing) > 0) && subset(r.adding, r.isr) {
		if isr := minus(r.isr, r.removing); len(isr) > 0 {
			r.replicas, r.isr = minus(r.replicas, r.removing), isr
			r.removing, r.adding = nil, nil
		}
	}
	c.populateELR(&r)
	valid := func(id int32) bool {
		inISR := slices.Contains(r.isr, id) || len(r.isr) == 0 && slices.Contains(r.elr, id)
		return id >= 0 && inISR && slices.Contains(r.replicas, id) && acceptableLeader(c.im, id)
	}
	unclean := false
	switch {
	case c.mode == electPreferred && len(r.replicas) > 0 && valid(r.replicas[0]):
		r.leader = r.replicas[0]
	case valid(r.leader):
	default:
		r.leader = c.firstLeader(r.replicas, valid)
		if r.leader != -1 {
			break
		}
		if l := c.cur.LastKnownELR; c.elr && c.lastKnownLeader && len(r.isr) == 0 && len(r.elr) == 0 && len(l) == 1 &&
			slices.Contains(r.replicas, l[0]) && l[0] != c.uncleanShutdown && acceptableLeader(c.im, l[0]) {
			r.leader, unclean = l[0], true
			break
		}
		if c.mode == electUnclean {
			for _, id := range r.replicas {
				if id != c.uncleanShutdown && acceptableLeader(c.im, id) {
					r.leader, unclean = id, true
					break
				}
			}
		}
	}
	switch {
	case unclean:
		// Records acknowledged by the old ISR may be lost: the new leader is the ISR
		// alone, recovering, and nothing the ELR said holds any more.
		r.isr, r.recovery = []int32{r.leader}, metadata.LeaderRecovering
		r.elr, r.lastKnownELR = nil, nil
	case r.leader >= 0 && len(r.isr) == 0:
		// Elected from the ELR: it holds every committed record.
		r.isr, r.elr = []int32{r.leader}, without(r.elr, r.leader)
	}
	if c.elr && !unclean {
		switch {
		case len(r.isr) == 0 && len(c.cur.ISR) > 0 && c.cur.Leader >= 0 &&
			!(len(c.cur.LastKnownELR) == 1 && c.cur.LastKnownELR[0] == c.cur.Leader):
			// The partition loses its last ISR member: remember who led it.
			r.lastKnownELR = []int32{c.cur.Leader}
		case r.leader >= 0:
			r.lastKnownELR = nil
		}
		if len(r.lastKnownELR) > 0 && !subset(r.lastKnownELR, r.replicas) {
			r.lastKnownELR = nil // the last leader was reassigned away
		}
	}
	return r
}

// firstLeader returns the first of replicas that is valid, in preference order,
// among those not back from a restart (c.returned), else the valid one back the
// longest; -1 when none is valid.
func (c *partitionChange) firstLeader(replicas []int32, valid func(int32) bool) int32 {
	leader, since := int32(-1), time.Time{}
	for _, id := range replicas {
		if !valid(id) {
			continue
		}
		var at time.Time
		if c.returned != nil {
			at = c.returned(id)
		}
		if at.IsZero() {
			return id
		}
		if leader == -1 || at.Before(since) {
			leader, since = id, at
		}
	}
	return leader
}

// populateELR keeps the ELR of r's target ISR (Kafka's maybePopulateTargetElr), or
// clears it with ELR off.
func (c *partitionChange) populateELR(r *changeResult) {
	if !c.elr {
		r.elr, r.lastKnownELR = nil, nil
		return
	}
	if len(r.isr) >= min(c.minISR, len(r.replicas)) {
		r.elr = nil
		return
	}
	var elr []int32
	for _, id := range r.replicas {
		was := slices.Contains(c.cur.ISR, id) || slices.Contains(r.elr, id)
		if was && !slices.Contains(r.isr, id) && id != c.uncleanShutdown {
			elr = append(elr, id)
		}
	}
	r.elr = elr
}

// build returns the record of the change, or nil when nothing changes.
func (c *partitionChange) build() *metadata.PartitionChangeRecord {
	r := c.compute()
	rec := &metadata.PartitionChangeRecord{TopicID: c.topicID, Partition: c.index, Leader: metadata.NoLeaderChange, LeaderRecoveryState: -1}
	changed := false
	if !slices.Equal(r.isr, c.cur.ISR) {
		rec.ISR, changed = orEmpty(slices.Clone(r.isr)), true
	}
	if !slices.Equal(r.replicas, c.cur.Replicas) {
		rec.Replicas, changed = slices.Clone(r.replicas), true
	}
	if !slices.Equal(r.removing, c.cur.Removing) {
		rec.Removing, changed = orEmpty(slices.Clone(r.removing)), true
	}
	if !slices.Equal(r.adding, c.cur.Adding) {
		rec.Adding, changed = orEmpty(slices.Clone(r.adding)), true
	}
	if !slices.Equal(r.elr, c.cur.ELR) {
		rec.ELR, changed = orEmpty(slices.Clone(r.elr)), true
	}
	if !slices.Equal(r.lastKnownELR, c.cur.LastKnownELR) {
		rec.LastKnownELR, changed = orEmpty(slices.Clone(r.lastKnownELR)), true
	}
	if r.leader != c.cur.Leader {
		rec.Leader, changed = r.leader, true
	} else if !subset(c.cur.Replicas, r.replicas) {
		// Replicas leave (a reassignment completes): the same leader is named, so that
		// the leader epoch moves and a fetch a removed replica sent in the old epoch is
		// fenced (FENCED_LEADER_EPOCH) rather than counted should that replica be added
		// again before it arrives (Kafka's
		// triggerLeaderEpochBumpForReplicaReassignmentIfNeeded).
		rec.Leader, changed = r.leader, true
	}
	if r.recovery != c.cur.LeaderRecoveryState {
		rec.LeaderRecoveryState, changed = r.recovery, true
	}
	if !changed {
		return nil
	}
	return rec
}

// removalChanges returns what taking broker id out of service does to every
// partition: id leaves every ISR it is in (with ELR off, not where it is the last
// member: the ISR never empties) and, with ELR on, joins the ELR where the ISR falls
// below min.insync.replicas; a partition it led elects another leader (see
// partitionChange). unclean: id restarted after an unclean shutdown, and leaves the
// ELRs too (with ELR on; it stays the last known leader where it is one: Balanced
// elects it, uncleanly, once it is back). im must already show id fenced or in
// controlled shutdown.
// Topics in name order.
func removalChanges(im *metadata.Image, id int32, policy PolicyFunc, unclean bool, returned func(int32) time.Time) []metadata.Record {
	unclean = unclean && im.ELREnabled()
	var out []metadata.Record
	for _, t := range im.Topics() {
		for i, p := range t.Partitions {
			inELR := unclean && slices.Contains(p.ELR, id)
			if p.Leader != id && !slices.Contains(p.ISR, id) && !inELR {
				continue
			}
			c := newChange(im, t, int32(i), electKeep, policy)
			c.isr = without(p.ISR, id)
			c.returned = returned
			if unclean {
				c.uncleanShutdown = id
			}
			if rec := c.build(); rec != nil {
				out = append(out, rec)
			}
		}
	}
	return out
}

// FenceBrokerRecords returns the records that fence broker id: the fence, then
// removalChanges. It returns nil when id is not registered or already fenced.
func FenceBrokerRecords(im *metadata.Image, id int32, policy PolicyFunc) []metadata.Record {
	b, ok := im.Broker(id)
	if !ok || b.Fenced {
		return nil
	}
	fence := &metadata.BrokerRegistrationChangeRecord{ID: id, Epoch: b.Epoch, Fenced: metadata.FenceFence}
	return withChanges(im, fence, id, policy, false, nil)
}

// FenceBrokerRecordsReturned is FenceBrokerRecords whose elections take returned
// into account: since when a broker is back from a restart (zero: it is not, or
// long enough ago). A leader elected from the ISR is then the first replica, in
// preference order, that may lead and is not back, else the one back the longest.
// Clients reconnect to a restarted broker only as their reconnect backoff allows
// (librdkafka's grows up to reconnect.backoff.max.ms, 10 s, while the broker was
// down, and a broker that leads nothing of theirs is not waited for): a leadership
// moved to it leaves the partition without a producer until then.
func FenceBrokerRecordsReturned(im *metadata.Image, id int32, policy PolicyFunc, returned func(int32) time.Time) []metadata.Record {
	b, ok := im.Broker(id)
	if !ok || b.Fenced {
		return nil
	}
	fence := &metadata.BrokerRegistrationChangeRecord{ID: id, Epoch: b.Epoch, Fenced: metadata.FenceFence}
	return withChanges(im, fence, id, policy, false, returned)
}

// ControlledShutdownRecords returns the records that put broker id in controlled
// shutdown: the flag, then removalChanges (its leaderships move where another ISR
// member may lead; it leaves the ISRs it is not the last member of, with ELR on all
// of them). It returns nil when id is not registered, fenced, or already in
// controlled shutdown.
func ControlledShutdownRecords(im *metadata.Image, id int32, policy PolicyFunc) []metadata.Record {
	b, ok := im.Broker(id)
	if !ok || b.Fenced || b.InControlledShutdown {
		return nil
	}
	mark := &metadata.BrokerRegistrationChangeRecord{ID: id, Epoch: b.Epoch, InControlledShutdown: 1}
	return withChanges(im, mark, id, policy, false, nil)
}

// RegisterBrokerRecords returns the records of a (re-)registration: the
// registration (fenced), then, for a broker already registered, removalChanges (the
// new incarnation may have lost what the old one had: it rejoins ISRs through its
// leaders). clean says the registering process follows a clean shutdown of the
// registered one, or is the registered one (Kafka's isCleanShutdown: the previous
// broker epoch it names is the registered epoch): otherwise, with ELR on, it leaves
// the ELRs and last known ELRs too, as it may have lost records it held.
func RegisterBrokerRecords(im *metadata.Image, reg *metadata.RegisterBrokerRecord, policy PolicyFunc, clean bool) []metadata.Record {
	if _, ok := im.Broker(reg.ID); !ok {
		return []metadata.Record{reg}
	}
	return withChanges(im, reg, reg.ID, policy, !clean, nil)
}

func withChanges(im *metadata.Image, first metadata.Record, id int32, policy PolicyFunc, unclean bool, returned func(int32) time.Time) []metadata.Record {
	next, err := im.Apply(first)
	if err != nil {
		return nil
	}
	return append([]metadata.Record{first}, removalChanges(next, id, policy, unclean, returned)...)
}

// UnfenceBrokerRecords returns the records that unfence broker id: the unfence, then
// a leader for every leaderless partition id is a replica of (elected from the ISR,
// the ELR, the last known leader, or uncleanly, as the topic's policy allows). It
// returns nil when id is not registered or not fenced.
func UnfenceBrokerRecords(im *metadata.Image, id int32, policy PolicyFunc) []metadata.Record {
	b, ok := im.Broker(id)
	if !ok || !b.Fenced {
		return nil
	}
	unfence := &metadata.BrokerRegistrationChangeRecord{ID: id, Epoch: b.Epoch, Fenced: metadata.FenceUnfence}
	next, err := im.Apply(unfence)
	if err != nil {
		return nil
	}
	out := []metadata.Record{unfence}
	for _, t := range next.Topics() {
		for i, p := range t.Partitions {
			if p.Leader != -1 || !slices.Contains(p.Replicas, id) {
				continue
			}
			if rec := newChange(next, t, int32(i), electKeep, policy).build(); rec != nil {
				out = append(out, rec)
			}
		}
	}
	return out
}

// LeadsAny reports whether broker id leads a partition in im.
func LeadsAny(im *metadata.Image, id int32) bool {
	for _, t := range im.Topics() {
		for _, p := range t.Partitions {
			if p.Leader == id {
				return true
			}
		}
	}
	return false
}

// RebalanceRecords returns Kafka's automatic preferred-leader rebalance
// (auto.leader.rebalance.enable): for each broker, the partitions whose preferred
// replica (the first) it is and which it does not lead; when they are more than pct
// percent of the partitions it is preferred for, it takes back the leadership of
// each of them where it may lead (in the ISR, unfenced, not shutting down). At most
// limit records (limit <= 0: no limit); topics in name order. policy keeps each
// topic's ELR.
func RebalanceRecords(im *metadata.Image, pct int, limit int, policy PolicyFunc) []metadata.Record {
	preferred := map[int32]int{}
	notLeading := map[int32]int{}
	for _, t := range im.Topics() {
		for _, p := range t.Partitions {
			if len(p.Replicas) == 0 {
				continue
			}
			pr := p.Replicas[0]
			preferred[pr]++
			if p.Leader != pr {
				notLeading[pr]++
			}
		}
	}
	imbalanced := map[int32]bool{}
	for id, n := range notLeading {
		if n*100 > pct*preferred[id] {
			imbalanced[id] = true
		}
	}
	if len(imbalanced) == 0 {
		return nil
	}
	var out []metadata.Record
	for _, t := range im.Topics() {
		for i, p := range t.Partitions {
			if len(p.Replicas) == 0 || p.Leader == p.Replicas[0] || !imbalanced[p.Replicas[0]] {
				continue
			}
			c := newChange(im, t, int32(i), electPreferred, policy)
			if r := c.compute(); r.leader != p.Replicas[0] {
				continue // the preferred replica may not lead now
			}
			if rec := c.build(); rec != nil {
				out = append(out, rec)
				if limit > 0 && len(out) >= limit {
					return out
				}
			}
		}
	}
	return out
}
