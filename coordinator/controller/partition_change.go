package controller

import (
	"slices"

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

// partitionChange builds one partition's PartitionChangeRecord, as Kafka's
// PartitionChangeBuilder: the targets (nil: unchanged) are applied, a reassignment
// whose adding replicas are all in the ISR completes, a leader is chosen by mode, and
// the record carries only what differs. im is the image the change will apply to
// (it says which brokers may lead).
type partitionChange struct {
	im       *metadata.Image
	topicID  metadata.UUID
	index    int32
	cur      metadata.PartitionImage
	isr      []int32 // target ISR; nil: unchanged; never empty
	replicas []int32 // target replicas; nil: unchanged
	removing []int32 // target removing replicas; nil: unchanged
	adding   []int32 // target adding replicas; nil: unchanged
	recovery int8    // target leader recovery state; -1: unchanged
	mode     electionMode
}

func newChange(im *metadata.Image, t *metadata.TopicImage, index int32, mode electionMode) *partitionChange {
	return &partitionChange{im: im, topicID: t.ID, index: index, cur: t.Partitions[index], recovery: -1, mode: mode}
}

// result is the partition a change leads to.
type changeResult struct {
	replicas, isr, removing, adding []int32
	leader                          int32
	recovery                        int8
}

// compute applies the targets and the election rules.
func (c *partitionChange) compute() changeResult {
	r := changeResult{replicas: c.cur.Replicas, isr: c.cur.ISR, removing: c.cur.Removing, adding: c.cur.Adding,
		leader: c.cur.Leader, recovery: c.cur.LeaderRecoveryState}
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
	// A reassignment completes once every replica it adds is in the ISR: the replicas
	// it removes leave the replicas and the ISR (unless that would empty the ISR).
	if (len(r.adding) > 0 || len(r.removing) > 0) && subset(r.adding, r.isr) {
		if isr := minus(r.isr, r.removing); len(isr) > 0 {
			r.replicas, r.isr = minus(r.replicas, r.removing), isr
			r.removing, r.adding = nil, nil
		}
	}
	valid := func(id int32) bool {
		return id >= 0 && slices.Contains(r.isr, id) && slices.Contains(r.replicas, id) && acceptableLeader(c.im, id)
	}
	switch {
	case c.mode == electPreferred && len(r.replicas) > 0 && valid(r.replicas[0]):
		r.leader = r.replicas[0]
	case valid(r.leader):
	default:
		r.leader = -1
		for _, id := range r.replicas {
			if valid(id) {
				r.leader = id
				break
			}
		}
		if r.leader == -1 && c.mode == electUnclean {
			for _, id := range r.replicas {
				if acceptableLeader(c.im, id) {
					r.leader, r.isr, r.recovery = id, []int32{id}, metadata.LeaderRecovering
					break
				}
			}
		}
	}
	return r
}

// build returns the record of the change, or nil when nothing changes.
func (c *partitionChange) build() *metadata.PartitionChangeRecord {
	r := c.compute()
	rec := &metadata.PartitionChangeRecord{TopicID: c.topicID, Partition: c.index, Leader: metadata.NoLeaderChange, LeaderRecoveryState: -1}
	changed := false
	if !slices.Equal(r.isr, c.cur.ISR) {
		rec.ISR, changed = slices.Clone(r.isr), true
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

// UncleanFunc reports whether a topic allows unclean leader election
// (unclean.leader.election.enable, resolved for the topic).
type UncleanFunc func(topic string) bool

func modeFor(unclean UncleanFunc, topic string) electionMode {
	if unclean != nil && unclean(topic) {
		return electUnclean
	}
	return electKeep
}

// removalChanges returns what taking broker id out of service does to every
// partition (Kafka's classic rule): id leaves every ISR it is in, except where it is
// the last member (the ISR never empties); a partition it led elects another leader
// from its ISR, or has none (or, where the topic allows it, elects uncleanly). im
// must already show id fenced or in controlled shutdown. Topics in name order.
func removalChanges(im *metadata.Image, id int32, unclean UncleanFunc) []metadata.Record {
	var out []metadata.Record
	for _, t := range im.Topics() {
		for i, p := range t.Partitions {
			if p.Leader != id && !slices.Contains(p.ISR, id) {
				continue
			}
			c := newChange(im, t, int32(i), modeFor(unclean, t.Name))
			if isr := without(p.ISR, id); len(isr) > 0 {
				c.isr = isr
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
func FenceBrokerRecords(im *metadata.Image, id int32, unclean UncleanFunc) []metadata.Record {
	b, ok := im.Broker(id)
	if !ok || b.Fenced {
		return nil
	}
	fence := &metadata.BrokerRegistrationChangeRecord{ID: id, Epoch: b.Epoch, Fenced: metadata.FenceFence}
	return withChanges(im, fence, id, unclean)
}

// ControlledShutdownRecords returns the records that put broker id in controlled
// shutdown: the flag, then removalChanges (its leaderships move where another ISR
// member may lead; it leaves the ISRs it is not the last member of). It returns nil
// when id is not registered, fenced, or already in controlled shutdown.
func ControlledShutdownRecords(im *metadata.Image, id int32, unclean UncleanFunc) []metadata.Record {
	b, ok := im.Broker(id)
	if !ok || b.Fenced || b.InControlledShutdown {
		return nil
	}
	mark := &metadata.BrokerRegistrationChangeRecord{ID: id, Epoch: b.Epoch, InControlledShutdown: 1}
	return withChanges(im, mark, id, unclean)
}

// RegisterBrokerRecords returns the records of a (re-)registration: the
// registration (fenced), then, for a broker already registered, removalChanges (the
// new incarnation may have lost what the old one had: it rejoins ISRs through its
// leaders).
func RegisterBrokerRecords(im *metadata.Image, reg *metadata.RegisterBrokerRecord, unclean UncleanFunc) []metadata.Record {
	if _, ok := im.Broker(reg.ID); !ok {
		return []metadata.Record{reg}
	}
	return withChanges(im, reg, reg.ID, unclean)
}

func withChanges(im *metadata.Image, first metadata.Record, id int32, unclean UncleanFunc) []metadata.Record {
	next, err := im.Apply(first)
	if err != nil {
		return nil
	}
	return append([]metadata.Record{first}, removalChanges(next, id, unclean)...)
}

// UnfenceBrokerRecords returns the records that unfence broker id: the unfence, then
// a leader for every leaderless partition id is a replica of (elected from the ISR,
// or uncleanly where the topic allows it). It returns nil when id is not registered
// or not fenced.
func UnfenceBrokerRecords(im *metadata.Image, id int32, unclean UncleanFunc) []metadata.Record {
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
			if rec := newChange(next, t, int32(i), modeFor(unclean, t.Name)).build(); rec != nil {
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
// limit records (limit <= 0: no limit); topics in name order.
func RebalanceRecords(im *metadata.Image, pct int, limit int) []metadata.Record {
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
			c := newChange(im, t, int32(i), electPreferred)
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
