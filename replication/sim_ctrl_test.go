package replication

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

// --- the controller model ----------------------------------------------------------

// simCtrl is a small model of the controller: broker registrations with epochs,
// fencing after the session timeout, elections from the ISR (classic rule), and
// AlterPartition checked against the leader epoch, partition epoch and broker epochs.
type simCtrl struct {
	s        *sim
	parts    []*ctrlPart
	brokers  map[int32]*ctrlBroker
	maxEpoch int64
}

type ctrlPart struct {
	tp             engine.TopicPartition
	replicas, isr  []int32
	adding         []int32 // being added by a reassignment (reassign)
	leader         int32
	leaderEpoch    int32
	partitionEpoch int32
}

type ctrlBroker struct {
	epoch       int64
	fenced      bool
	lastContact time.Time
}

func newSimCtrl(s *sim) *simCtrl {
	c := &simCtrl{s: s, brokers: map[int32]*ctrlBroker{}}
	for i := range s.cfg.partitions {
		var reps []int32
		for j := range s.cfg.rf {
			reps = append(reps, int32((i+j)%s.cfg.brokers)+1)
		}
		c.parts = append(c.parts, &ctrlPart{tp: s.tp(int32(i)), replicas: reps, isr: slices.Clone(reps), leader: reps[0]})
	}
	return c
}

func (c *simCtrl) part(tp engine.TopicPartition) *ctrlPart { return c.parts[tp.Partition] }

// allHealthy reports whether every broker is unfenced and heartbeating (none is about
// to be fenced).
func (c *simCtrl) allHealthy() bool {
	for id := int32(1); id < int32(len(c.s.nodes)); id++ {
		b := c.brokers[id]
		if b == nil || b.fenced || c.s.now.Sub(b.lastContact) > 2*simHeartbeat {
			return false
		}
	}
	return true
}

// notSoleISR reports whether every ISR holding id holds another replica too.
func (c *simCtrl) notSoleISR(id int32) bool {
	for _, cp := range c.parts {
		if slices.Contains(cp.isr, id) && len(cp.isr) < 2 {
			return false
		}
	}
	return true
}

func (c *simCtrl) state(cp *ctrlPart) PartitionState {
	return PartitionState{Topic: cp.tp.Topic, TopicID: c.s.topicID, Partition: cp.tp.Partition,
		Replicas: slices.Clone(cp.replicas), ISR: slices.Clone(cp.isr), Adding: slices.Clone(cp.adding), Leader: cp.leader, LeaderEpoch: cp.leaderEpoch,
		PartitionEpoch: cp.partitionEpoch, MinISR: c.s.cfg.minISR}
}

// deltaFor is what node id must do for cp (ReplicaDelta's job in the real code).
func (c *simCtrl) deltaFor(cp *ctrlPart, id int32) Delta {
	st := c.state(cp)
	if cp.leader == id {
		return Delta{Leaders: []PartitionState{st}}
	}
	return Delta{Followers: []PartitionState{st}}
}

func (c *simCtrl) publish(cp *ctrlPart) {
	c.s.tracef("ctrl %s leader %d epoch %d isr %v pe %d", cp.tp, cp.leader, cp.leaderEpoch, cp.isr, cp.partitionEpoch)
	for _, id := range cp.replicas {
		c.s.sendMeta(id, c.deltaFor(cp, id))
	}
}

// register is a broker starting: a registration still live from its previous
// incarnation is fenced first (its replicas leave the ISRs), then the broker gets a new
// epoch and, fenced until its first heartbeat, the state of its partitions. The
// cluster's first registrations are unfenced at once (the initial assignment names
// them leaders).
func (c *simCtrl) register(id int32, initial bool) int64 {
	if b := c.brokers[id]; b != nil && !b.fenced {
		c.fence(id)
	}
	c.maxEpoch++
	c.brokers[id] = &ctrlBroker{epoch: c.maxEpoch, fenced: !initial, lastContact: c.s.now}
	n := c.s.nodes[id]
	var d Delta
	for _, cp := range c.parts {
		if !slices.Contains(cp.replicas, id) {
			continue
		}
		part := c.deltaFor(cp, id)
		d.Leaders = append(d.Leaders, part.Leaders...)
		d.Followers = append(d.Followers, part.Followers...)
	}
	n.metaQ = append(n.metaQ, metaItem{d: d, inc: n.inc})
	c.s.after(c.s.delay(), func() { c.s.deliverMeta(n) })
	return c.maxEpoch
}

func (c *simCtrl) heartbeat(id int32, epoch int64) {
	b := c.brokers[id]
	if b == nil || b.epoch != epoch {
		return
	}
	b.lastContact = c.s.now
	if b.fenced {
		b.fenced = false
		c.s.tracef("ctrl unfence %d", id)
		for _, cp := range c.parts {
			if cp.leader < 0 && slices.Contains(cp.isr, id) {
				cp.leader = id
				cp.leaderEpoch++
				cp.partitionEpoch++
				c.publish(cp)
			}
		}
	}
}

func (c *simCtrl) checkSessions() {
	for id := int32(1); id < int32(len(c.s.nodes)); id++ {
		if b := c.brokers[id]; b != nil && !b.fenced && c.s.now.Sub(b.lastContact) > simSessionTimeout {
			c.fence(id)
		}
	}
}

// fence removes id from every ISR (unless it is the last member: Kafka's classic rule)
// and moves its leaderships to another ISR member that is not fenced (or none).
func (c *simCtrl) fence(id int32) {
	c.brokers[id].fenced = true
	c.s.tracef("ctrl fence %d", id)
	for _, cp := range c.parts {
		changed := false
		if slices.Contains(cp.isr, id) && len(cp.isr) > 1 {
			cp.isr = slices.DeleteFunc(slices.Clone(cp.isr), func(r int32) bool { return r == id })
			changed = true
		}
		if cp.leader == id {
			cp.leader = -1
			for _, r := range cp.isr {
				if b := c.brokers[r]; r != id && b != nil && !b.fenced {
					cp.leader = r
					break
				}
			}
			cp.leaderEpoch++
			changed = true
		}
		if changed {
			cp.partitionEpoch++
			c.publish(cp)
		}
	}
}

// fenceLeader makes the controller move tp's leadership away now (scenario tests).
func (c *simCtrl) elect(tp engine.TopicPartition, leader int32) {
	cp := c.part(tp)
	cp.leader = leader
	cp.leaderEpoch++
	cp.partitionEpoch++
	c.publish(cp)
}

func (c *simCtrl) alterPartition(req *kmsg.AlterPartitionRequest) *kmsg.AlterPartitionResponse {
	resp := kmsg.NewPtrAlterPartitionResponse()
	resp.Version = req.Version
	if b := c.brokers[req.BrokerID]; b == nil || b.epoch != req.BrokerEpoch {
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		return resp
	}
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionResponseTopic()
		rt.Topic, rt.TopidID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = c.alterOne(req.BrokerID, t.Topic, p, &rp)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (c *simCtrl) alterOne(from int32, topic string, p kmsg.AlterPartitionRequestTopicPartition, rp *kmsg.AlterPartitionResponseTopicPartition) int16 {
	if topic != c.s.topic || int(p.Partition) >= len(c.parts) {
		return kerr.UnknownTopicOrPartition.Code
	}
	cp := c.parts[p.Partition]
	rp.LeaderID, rp.LeaderEpoch, rp.ISR, rp.PartitionEpoch = cp.leader, cp.leaderEpoch, cp.isr, cp.partitionEpoch
	switch {
	case p.LeaderEpoch != cp.leaderEpoch:
		return kerr.FencedLeaderEpoch.Code
	case from != cp.leader:
		return kerr.InvalidRequest.Code
	case p.PartitionEpoch != cp.partitionEpoch:
		return kerr.InvalidUpdateVersion.Code
	}
	var isr []int32
	for _, e := range p.NewEpochISR {
		b := c.brokers[e.BrokerID]
		if !slices.Contains(cp.replicas, e.BrokerID) || slices.Contains(isr, e.BrokerID) {
			return kerr.InvalidRequest.Code
		}
		if e.BrokerID != from && (b == nil || b.fenced || b.epoch != e.BrokerEpoch) {
			return kerr.IneligibleReplica.Code // KIP-903: not this incarnation
		}
		isr = append(isr, e.BrokerID)
	}
	if !slices.Contains(isr, cp.leader) {
		return kerr.InvalidRequest.Code
	}
	cp.isr = isr
	if !slices.ContainsFunc(cp.adding, func(r int32) bool { return !slices.Contains(isr, r) }) {
		cp.adding = nil // the reassignment completes: every replica it adds is in the ISR
	}
	cp.partitionEpoch++
	rp.ISR, rp.PartitionEpoch = cp.isr, cp.partitionEpoch
	c.publish(cp)
	return 0
}

// reassign moves tp to the replicas target within its leader epoch, as a reassignment
// does (only the partition epoch moves): replicas that target drops leave the replicas
// and the ISR at once and are stopped with their logs deleted; the new ones are adding,
// outside the ISR until their leader's AlterPartition brings them in. The leader must
// stay a replica.
func (c *simCtrl) reassign(tp engine.TopicPartition, target []int32) {
	cp := c.part(tp)
	removed := slices.DeleteFunc(slices.Clone(cp.replicas), func(r int32) bool { return slices.Contains(target, r) })
	var adding []int32
	for _, r := range target {
		if !slices.Contains(cp.replicas, r) {
			adding = append(adding, r)
		}
	}
	cp.replicas = slices.Clone(target)
	cp.isr = slices.DeleteFunc(slices.Clone(cp.isr), func(r int32) bool { return !slices.Contains(target, r) })
	cp.adding = adding
	cp.partitionEpoch++
	c.publish(cp)
	for _, id := range removed {
		c.s.sendMeta(id, Delta{Stopped: []Stop{{TP: tp, Delete: true}}})
	}
}
