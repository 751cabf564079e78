package replication

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ISR changes (Kafka's Partition.maybeExpandIsr / maybeShrinkIsr and its
// AlterPartitionManager), on the leader:
//
//	expand: a follower not in the ISR fetches at or past the HW and past the start of
//	        this leader epoch                ─▶ propose ISR ∪ {follower}
//	shrink: an ISR follower has not caught up for replica.lag.time.max.ms
//	        (MaybeShrinkISR, every lag/2)     ─▶ propose ISR ∖ {laggards} (never empty:
//	                                             the leader stays)
//	proposal ─▶ pending (maximal ISR = the larger set; one per partition at a time)
//	         ─▶ AlterPartition{leader epoch, partition epoch, new ISR with broker epochs}
//	answer NONE / NEW_LEADER_ELECTED          committed: the pending change stays until
//	                                          Apply brings a newer partition epoch
//	INVALID_UPDATE_VERSION, FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_*:
//	                                          the metadata moved on: wait for Apply
//	INELIGIBLE_REPLICA, INVALID_REQUEST, OPERATION_NOT_ATTEMPTED:
//	                                          refused: back to the committed ISR
//	anything else (no answer, NOT_CONTROLLER, timeouts): send again after a backoff
//
// The leader applies only what the metadata commits: a committed change takes effect
// when Apply delivers it, never from the answer, and until then the HW is computed over
// the maximal ISR, so it never counts on a smaller set than the controller may elect from.

// proposesISR reports whether this Manager proposes ISR changes: with an ISRClient, or
// in Manual mode (the caller sends them).
func (m *Manager) proposesISR() bool { return m.cfg.ISR != nil || m.cfg.Manual }

// isrSent is one partition of an AlterPartition in flight.
type isrSent struct {
	p      *Partition
	change *isrChange
}

// proposeExpand proposes adding replica to p's ISR, if p still leads in epoch and has
// no change pending.
func (m *Manager) proposeExpand(p *Partition, epoch, replica int32) {
	if m.closed.Load() {
		return
	}
	p.mu.Lock()
	if p.role != RoleLeader || p.leaderEpoch != epoch || p.pending != nil || slices.Contains(p.isr, replica) {
		p.mu.Unlock()
		return
	}
	proposed := append(slices.Clone(p.isr), replica)
	p.pending = &isrChange{proposed: proposed, maximal: proposed, base: p.partitionEpoch, leaderEpoch: epoch, expand: true}
	p.mu.Unlock()
	m.queueISR(p)
}

// MaybeShrinkISR proposes removing, from every ISR this node leads, the followers that
// have not caught up within replica.lag.time.max.ms. Without an ISRClient it does
// nothing. The Manager calls it every lag/2; in Manual mode the caller does.
func (m *Manager) MaybeShrinkISR() {
	if !m.proposesISR() || m.closed.Load() {
		return
	}
	now := m.clock.Now()
	for _, p := range m.Partitions() {
		if p.Role() == RoleLeader {
			m.maybeShrink(p, now)
		}
	}
}

func (m *Manager) maybeShrink(p *Partition, now time.Time) {
	p.mu.Lock()
	if p.role != RoleLeader || p.pending != nil {
		p.mu.Unlock()
		return
	}
	leo := p.log.LogEndOffset()
	var out []int32
	p.hwMu.Lock()
	for i := range p.followers {
		f := &p.followers[i]
		if slices.Contains(p.isr, f.id) && !f.caughtUp(leo, now, m.cfg.ReplicaLagTimeMax) {
			out = append(out, f.id)
		}
	}
	p.hwMu.Unlock()
	if len(out) == 0 {
		p.mu.Unlock()
		return
	}
	proposed := make([]int32, 0, len(p.isr))
	for _, r := range p.isr {
		if !slices.Contains(out, r) {
			proposed = append(proposed, r)
		}
	}
	if !slices.Contains(proposed, m.cfg.NodeID) {
		proposed = append(proposed, m.cfg.NodeID) // the leader is always in sync with itself
	}
	p.pending = &isrChange{proposed: proposed, maximal: slices.Clone(p.isr), base: p.partitionEpoch, leaderEpoch: p.leaderEpoch}
	p.mu.Unlock()
	m.log.Info("shrinking the ISR", "partition", p.tp.String(), "isr", p.isr, "out", out)
	m.queueISR(p)
}

func (m *Manager) queueISR(p *Partition) {
	m.isrMu.Lock()
	if !slices.Contains(m.isrQueue, p) {
		m.isrQueue = append(m.isrQueue, p)
	}
	m.isrMu.Unlock()
	select {
	case m.isrWake <- struct{}{}:
	default:
	}
}

// TakeAlterPartition returns the AlterPartition request for the ISR changes ready to
// send (nil: none), marking them in flight. Its answer goes to HandleAlterPartition.
// The Manager's ISR goroutine calls it; in Manual mode the caller does. The request
// fills both the v0-v2 fields (topic name, NewISR) and the v3 ones (topic id,
// NewEpochISR); its Version is 3.
func (m *Manager) TakeAlterPartition() *kmsg.AlterPartitionRequest {
	now := m.clock.Now()
	m.isrMu.Lock()
	queue := m.isrQueue
	m.isrQueue = nil
	m.isrMu.Unlock()
	if len(queue) == 0 {
		return nil
	}
	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = 3
	req.BrokerID, req.BrokerEpoch = m.cfg.NodeID, m.brokerEpoch()
	var sent []isrSent
	var later []*Partition
	for _, p := range queue {
		p.mu.Lock()
		c := p.pending
		if c == nil || c.inflight || c.answered || p.role != RoleLeader || p.leaderEpoch != c.leaderEpoch {
			p.mu.Unlock()
			continue
		}
		if now.Before(c.retryAt) {
			p.mu.Unlock()
			later = append(later, p)
			continue
		}
		c.inflight = true
		rp := kmsg.NewAlterPartitionRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch = p.tp.Partition, c.leaderEpoch, c.base
		rp.NewISR = slices.Clone(c.proposed)
		p.hwMu.Lock()
		for _, r := range c.proposed {
			e := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
			e.BrokerID, e.BrokerEpoch = r, -1
			if r == m.cfg.NodeID {
				e.BrokerEpoch = m.brokerEpoch()
			}
			for i := range p.followers {
				if p.followers[i].id == r {
					e.BrokerEpoch = p.followers[i].brokerEpoch
				}
			}
			rp.NewEpochISR = append(rp.NewEpochISR, e)
		}
		p.hwMu.Unlock()
		p.mu.Unlock()
		i := slices.IndexFunc(req.Topics, func(t kmsg.AlterPartitionRequestTopic) bool { return t.Topic == p.tp.Topic })
		if i < 0 {
			t := kmsg.NewAlterPartitionRequestTopic()
			t.Topic, t.TopicID = p.tp.Topic, p.topicID
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		sent = append(sent, isrSent{p: p, change: c})
	}
	m.isrMu.Lock()
	for _, p := range later {
		if !slices.Contains(m.isrQueue, p) {
			m.isrQueue = append(m.isrQueue, p)
		}
	}
	if len(sent) > 0 {
		m.isrInflight[req] = sent
	}
	m.isrMu.Unlock()
	if len(sent) == 0 {
		return nil
	}
	return req
}

// HandleAlterPartition takes the answer (or the failure) of a request
// TakeAlterPartition returned.
func (m *Manager) HandleAlterPartition(req *kmsg.AlterPartitionRequest, resp *kmsg.AlterPartitionResponse, err error) {
	m.isrMu.Lock()
	sent := m.isrInflight[req]
	delete(m.isrInflight, req)
	m.isrMu.Unlock()
	now := m.clock.Now()
	if err == nil && resp != nil && resp.ErrorCode != 0 {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	for _, s := range sent {
		code := int16(-1) // no answer for it
		if err == nil {
			code = findAlterAnswer(resp, s.p)
		}
		m.resolveISR(s, code, now)
	}
}

// findAlterAnswer returns p's error code in resp, -1 when resp does not name p.
func findAlterAnswer(resp *kmsg.AlterPartitionResponse, p *Partition) int16 {
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic != p.tp.Topic && (t.TopidID == [16]byte{} || t.TopidID != p.topicID) {
			continue
		}
		for j := range t.Partitions {
			if t.Partitions[j].Partition == p.tp.Partition {
				return t.Partitions[j].ErrorCode
			}
		}
	}
	return -1
}

func (m *Manager) resolveISR(s isrSent, code int16, now time.Time) {
	p, c := s.p, s.change
	if code == 0 || code == kerr.NewLeaderElected.Code {
		// Committed (Apply may have brought it already).
		if c.expand {
			m.expands.Add(1)
		} else {
			m.shrinks.Add(1)
		}
	}
	p.mu.Lock()
	if p.pending != c {
		p.mu.Unlock() // resolved meanwhile (Apply, a new leadership)
		return
	}
	c.inflight = false
	var moved, requeue bool
	switch code {
	case 0, kerr.NewLeaderElected.Code:
		c.answered = true
	case kerr.InvalidUpdateVersion.Code, kerr.FencedLeaderEpoch.Code, kerr.NotLeaderForPartition.Code,
		kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicID.Code:
		c.answered = true // the metadata moved on; Apply brings it
	case kerr.IneligibleReplica.Code, kerr.InvalidRequest.Code, kerr.OperationNotAttempted.Code:
		p.pending = nil
		p.hwMu.Lock()
		moved = p.maybeIncrementHWLocked()
		p.hwMu.Unlock()
	default:
		c.retryAt = now.Add(m.cfg.AlterPartitionBackoff)
		requeue = true
	}
	p.mu.Unlock()
	if code != 0 {
		m.log.Debug("AlterPartition answered", "partition", p.tp.String(), "code", code)
	}
	if moved {
		m.announce(p)
	}
	if requeue {
		m.queueISR(p)
	}
}

// isrLoop is the ISR goroutine (with an ISRClient, not Manual): shrink checks every
// lag/2, and the AlterPartition requests, one at a time.
func (m *Manager) isrLoop() {
	defer m.wg.Done()
	tick := time.NewTicker(max(m.cfg.ReplicaLagTimeMax/2, time.Millisecond))
	defer tick.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-tick.C:
			m.MaybeShrinkISR()
		case <-m.isrWake:
		case <-retry.C:
		}
		for {
			req := m.TakeAlterPartition()
			if req == nil {
				break
			}
			ctx, cancel := context.WithTimeout(m.ctx, 30*time.Second)
			resp, err := m.cfg.ISR.AlterPartition(ctx, req)
			cancel()
			m.HandleAlterPartition(req, resp, err)
			if m.ctx.Err() != nil {
				return
			}
		}
		m.isrMu.Lock()
		waiting := len(m.isrQueue) > 0
		m.isrMu.Unlock()
		if waiting {
			retry.Reset(m.cfg.AlterPartitionBackoff)
		}
	}
}
