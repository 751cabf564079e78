package replication

import (
	"slices"
	"time"

	"github.com/samsa-broker/samsa/engine"
)

// Stats is a snapshot of the replica manager, for metrics (the net layer exports them
// to Prometheus) and operator tools.
type Stats struct {
	Leaders, Followers int
	// UnderReplicated counts led partitions whose ISR is smaller than their replica
	// set; UnderMinISR those whose ISR is below min.insync.replicas.
	UnderReplicated, UnderMinISR int
	// ISRShrinks and ISRExpands count the ISR changes this node proposed that the
	// controller accepted, since the Manager started.
	ISRShrinks, ISRExpands int64
	// Lags has one entry per follower of every led partition.
	Lags []FollowerLag
	// Fetchers is the number of follower fetchers; FetcherLag one entry per followed
	// partition: the leader's HW minus this replica's log end, as of the last answer.
	Fetchers   int
	FetcherLag []PartitionLag
	// WaitingProduces is the number of acks=all produces waiting for the HW.
	WaitingProduces int
}

// FollowerLag is the leader's view of one follower.
type FollowerLag struct {
	TP      engine.TopicPartition
	Replica int32
	InISR   bool
	// Lag is the leader's log end offset minus the follower's fetch offset (-1: it has
	// not fetched in this leader epoch).
	Lag int64
	// CaughtUpAgo is the time since the follower was last caught up (-1: never).
	CaughtUpAgo time.Duration
}

// PartitionLag is a follower's distance from its leader.
type PartitionLag struct {
	TP     engine.TopicPartition
	Leader int32
	Lag    int64
}

// Stats returns a snapshot.
func (m *Manager) Stats() Stats {
	now := m.clock.Now()
	s := Stats{ISRShrinks: m.shrinks.Load(), ISRExpands: m.expands.Load(), WaitingProduces: m.produceWaits.Delayed()}
	for _, p := range m.Partitions() {
		p.mu.RLock()
		switch p.role {
		case RoleLeader:
			s.Leaders++
			if len(p.isr) < len(p.replicas) {
				s.UnderReplicated++
			}
			if len(p.isr) < p.minISR {
				s.UnderMinISR++
			}
			leo := p.log.LogEndOffset()
			p.hwMu.Lock()
			for _, f := range p.followers {
				fl := FollowerLag{TP: p.tp, Replica: f.id, InISR: slices.Contains(p.isr, f.id), Lag: -1, CaughtUpAgo: -1}
				if f.fetchOffset >= 0 {
					fl.Lag = leo - f.fetchOffset
				}
				if at := f.caughtUpAt(); !at.IsZero() {
					fl.CaughtUpAgo = now.Sub(at)
				}
				s.Lags = append(s.Lags, fl)
			}
			p.hwMu.Unlock()
		case RoleFollower:
			s.Followers++
		}
		p.mu.RUnlock()
	}
	for _, f := range m.Fetchers() {
		s.Fetchers++
		f.mu.Lock()
		for _, fp := range f.parts {
			s.FetcherLag = append(s.FetcherLag, PartitionLag{TP: fp.tp, Leader: f.key.Source, Lag: fp.lag})
		}
		f.mu.Unlock()
	}
	return s
}
