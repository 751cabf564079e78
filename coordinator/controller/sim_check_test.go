package controller

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// The simulation's checkers: the invariants after every event, the answers against
// the committed log, liveness after the heal.

// checkResponse checks an answer against the committed log: a success means the
// change committed.
func (s *sim) checkResponse(req kmsg.Request, resp kmsg.Response) {
	if s.t.Failed() {
		return
	}
	s.extendReference()
	switch r := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		for _, t := range r.Topics {
			if t.ErrorCode == 0 && !req.(*kmsg.CreateTopicsRequest).ValidateOnly && !s.everTopics[metadata.UUID(t.TopicID)] {
				s.failf("CreateTopics answered success for %s (id %s) that never committed", t.Topic, metadata.UUID(t.TopicID))
			}
		}
	case *kmsg.BrokerRegistrationResponse:
		if r.ErrorCode == 0 {
			id := req.(*kmsg.BrokerRegistrationRequest).BrokerID
			if got, ok := s.everEpochs[r.BrokerEpoch]; !ok || got != id {
				s.failf("registration of broker %d answered epoch %d, which never committed", id, r.BrokerEpoch)
			}
		}
	}
}

// extendReference follows the committed log as the voters have applied it: it
// reads each voter's new entries, checks that no two voters (and no later read)
// disagree on an offset — a committed entry never changes — and records every new
// entry with the reference image at its offset, checking each image.
func (s *sim) extendReference() {
	for _, id := range s.voterIDs {
		sc := s.ctrls[id]
		if sc.log == nil {
			continue
		}
		for {
			res, err := sc.log.ReadCommitted(sc.read+1, 1<<20)
			if err != nil {
				break // a stopped voter
			}
			if res.SnapshotNeeded {
				if s.refEnd == 0 && res.SnapshotOffset == 1 {
					// The raft log starts with its bootstrap snapshot at offset 1.
					_, _, data, err := sc.log.Snapshot()
					im, derr := metadata.DecodeSnapshot(data)
					if err != nil || derr != nil {
						s.failf("voter %d's bootstrap snapshot: %v %v", id, err, derr)
						return
					}
					s.refImages[1], s.refEnd, s.seen[1] = im, 1, nil
					s.checkImage(1, im)
				}
				// Compacted behind what the checker read of this voter: its image at
				// its offset is checked against the reference in checkInvariants.
				if res.SnapshotOffset > s.refEnd {
					s.failf("voter %d compacted up to %d, beyond what any voter showed the checker (%d)", id, res.SnapshotOffset, s.refEnd)
					return
				}
				sc.read = res.SnapshotOffset
				continue
			}
			if len(res.Entries) == 0 {
				break
			}
			for _, e := range res.Entries {
				sc.read = e.Offset
				if e.Offset <= s.refEnd {
					if string(s.seen[e.Offset]) != string(e.Data) {
						s.failf("voter %d's committed entry %d differs from the one seen before", id, e.Offset)
					}
					continue
				}
				if e.Offset != s.refEnd+1 {
					s.failf("voter %d shows entry %d after %d", id, e.Offset, s.refEnd)
					return
				}
				im := s.refImages[s.refEnd]
				if e.Data != nil {
					if next, err := applyEntry(im, e.Data); err == nil {
						im = next
					} else {
						s.failf("committed entry %d rejected by the state machine: %v", e.Offset, err)
					}
				}
				s.seen[e.Offset] = e.Data
				s.refImages[e.Offset] = im
				s.refEnd = e.Offset
				s.checkImage(e.Offset, im)
			}
		}
	}
}

// checkImage checks one committed image: a fenced broker leads nothing; every
// leader is in its ISR; a leader epoch has one leader.
func (s *sim) checkImage(off uint64, im *metadata.Image) {
	for _, b := range im.Brokers() {
		s.everEpochs[b.Epoch] = b.ID
	}
	for _, t := range im.Topics() {
		s.everTopics[t.ID] = true
		for i, p := range t.Partitions {
			if p.Leader < 0 {
				continue
			}
			if b, ok := im.Broker(p.Leader); !ok || b.Fenced || b.InControlledShutdown {
				s.failf("offset %d: %s-%d led by fenced, shutting-down or unregistered broker %d", off, t.Name, i, p.Leader)
			}
			if !slices.Contains(p.ISR, p.Leader) {
				s.failf("offset %d: %s-%d leader %d not in ISR %v", off, t.Name, i, p.Leader, p.ISR)
			}
			k := leaderKey{t.ID, int32(i), p.LeaderEpoch}
			if other, ok := s.epochLeader[k]; ok && other != p.Leader {
				s.failf("offset %d: %s-%d leader epoch %d led by %d and %d", off, t.Name, i, p.LeaderEpoch, other, p.Leader)
			}
			s.epochLeader[k] = p.Leader
		}
	}
}

func (s *sim) checkInvariants() {
	if s.t.Failed() {
		return
	}
	s.extendReference()
	if s.t.Failed() {
		return
	}
	// At most one leader per term, among the voters' beliefs.
	for _, id := range s.voterIDs {
		sc := s.ctrls[id]
		if sc.down {
			continue
		}
		l := sc.q.CurrentLeadership()
		if !l.IsLeader {
			continue
		}
		if other, ok := s.termLeader[l.Term]; ok && other != id {
			s.failf("voters %d and %d both lead term %d", other, id, l.Term)
		}
		s.termLeader[l.Term] = id
	}
	// Committed entries never change; every voter's and broker's image is the image
	// of a prefix of the committed log.
	for _, id := range s.voterIDs {
		sc := s.ctrls[id]
		if sc.down {
			continue
		}
		off, im := sc.q.Committed()
		if s.checked[id] == im {
			continue
		}
		if ref, ok := s.refImages[off]; !ok || !s.sameCached(im, ref) {
			s.failf("voter %d's image at %d is not the committed log's", id, off)
		}
		s.checked[id] = im
	}
	ids := make([]int32, 0, len(s.brokers))
	for id := range s.brokers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		b := s.brokers[id]
		if b.down {
			continue
		}
		off, im := b.fol.Image()
		if s.checked[id] == im {
			continue
		}
		if ref, ok := s.refImages[off]; !ok || !s.sameCached(im, ref) {
			s.failf("broker %d's image at %d is not the committed log's", id, off)
		}
		s.checked[id] = im
	}
}

// sameCached compares images, fast when they are the same pointer.
func (s *sim) sameCached(a, b *metadata.Image) bool {
	return a == b || sameImages(a, b)
}

// checkLiveness: after the heal, one active controller; every broker registered
// with its lifecycle's epoch, unfenced, running and at the log's end; every
// partition led; the topic created after the heal exists.
func (s *sim) checkLiveness() {
	s.extendReference()
	if s.t.Failed() {
		return
	}
	active := 0
	for _, id := range s.voterIDs {
		if s.ctrls[id].c.Active() {
			active++
		}
	}
	var leader int32 = -1
	var term uint64
	for _, id := range s.voterIDs {
		if l := s.ctrls[id].q.CurrentLeadership(); l.IsLeader && l.ReadyForWrites && l.Term >= term {
			leader, term = id, l.Term
		}
	}
	if active != 1 || leader < 0 || !s.ctrls[leader].c.Active() {
		s.failf("after heal: %d active controllers, leader %d", active, leader)
	}
	end, im := s.refEnd, s.latest()
	if off, _ := s.ctrls[leader].q.Committed(); leader >= 0 && off != end {
		s.failf("after heal: the leader applied %d, the log is at %d", off, end)
	}
	for _, id := range sortedKeys(s.brokers) {
		b := s.brokers[id]
		br, ok := im.Broker(id)
		if st := b.life.State(); st != StateRunning || !ok || br.Fenced || br.Epoch != b.life.Epoch() {
			s.failf("after heal: broker %d state %v epoch %d, registration %+v (registered %v)", id, st, b.life.Epoch(), br, ok)
		}
		if off, _ := b.fol.Image(); off != end {
			s.failf("after heal: broker %d at offset %d, log at %d", id, off, end)
		}
	}
	found := false
	for _, t := range im.Topics() {
		if strings.HasPrefix(t.Name, "after-heal-") {
			found = true
		}
		for i, p := range t.Partitions {
			if p.Leader < 0 {
				s.failf("after heal: %s-%d has no leader: %+v", t.Name, i, p)
			}
		}
	}
	if !found {
		s.failf("after heal: the topic created after the heal did not commit")
	}
	if s.t.Failed() {
		s.t.Logf("events %d, client ops %d (answered %d), log end %d", s.events, s.clientOps, s.clientAnswer, end)
	}
}
