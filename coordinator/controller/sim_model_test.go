package controller

import "time"

// simBackend is the metadata quorum under a simulation: the model (MemLog) or the
// real raft voters (coordinator/controller/quorum).
type simBackend interface {
	// voter returns voter id's current incarnation as the controller's Quorum and
	// the metadata fetch's CommittedLog.
	voter(id int32) (Quorum, CommittedLog)
	// start schedules the backend's own events.
	start()
	// crash and restart the voter's process (it keeps what it made durable).
	crash(id int32)
	restart(id int32)
	// fault injects a fault of the backend's own, chosen by r.
	fault(r int)
}

// modelBackend drives a MemLog with lagging views: elections when the leader is
// down or cut from a majority, commits only through a connected majority, voters
// catching up at their own pace, a deposed leader stepping down after an election
// timeout without a majority.
type modelBackend struct {
	s            *sim
	log          *MemLog
	electionAt   time.Time
	lastMajority map[int32]time.Time
}

func newModelBackend(s *sim) *modelBackend {
	log := NewMemLog(s.voterIDs...)
	log.SetLaggingViews(true)
	return &modelBackend{s: s, log: log, lastMajority: map[int32]time.Time{}}
}

func (b *modelBackend) voter(id int32) (Quorum, CommittedLog) {
	v := b.log.Voter(id)
	return v, v
}

func (b *modelBackend) start() {
	var loop func()
	loop = func() {
		b.step()
		b.s.after(quorumStep, loop)
	}
	b.s.after(quorumStep, loop)
}

func (b *modelBackend) crash(id int32) { b.log.Voter(id).Crash() }

func (b *modelBackend) restart(id int32) {
	b.log.Voter(id).Restart()
	delete(b.lastMajority, id)
}

func (b *modelBackend) fault(r int) {
	s := b.s
	switch r % 3 {
	case 0:
		// The leader loses its term (a new election among the live voters).
		b.log.Elect(-1, s.rng.IntN(b.log.PendingCount()+1))
		s.tracef("leader deposed")
	case 1:
		b.log.Compact()
		s.tracef("log compacted at %d", b.log.End())
	}
}

func (b *modelBackend) step() {
	s := b.s
	now := s.clock.Now()
	term, leader := b.log.Term()
	if leader >= 0 && !s.ctrls[leader].down && s.majority(leader) {
		b.electionAt = time.Time{}
		if n := b.log.PendingCount(); n > 0 {
			b.log.Commit(s.rng.IntN(n + 1))
		}
		end := b.log.End()
		for _, id := range s.voterIDs {
			if s.ctrls[id].down || s.cut(leader, id) {
				continue
			}
			b.lastMajority[id] = now
			v := b.log.Voter(id)
			upTo := end
			if id != leader && s.rng.IntN(4) == 0 {
				_, applied := v.appliedOffset()
				upTo = applied + uint64(s.rng.IntN(int(end-applied)+1))
			}
			v.CatchUp(upTo)
		}
	} else {
		if b.electionAt.IsZero() {
			b.electionAt = now.Add(electionMin + time.Duration(s.rng.IntN(1000))*time.Millisecond)
		} else if !now.Before(b.electionAt) {
			var cands []int32
			for _, id := range s.voterIDs {
				if !s.ctrls[id].down && s.majority(id) {
					cands = append(cands, id)
				}
			}
			if len(cands) > 0 {
				next := cands[s.rng.IntN(len(cands))]
				keep := s.rng.IntN(b.log.PendingCount() + 1)
				s.tracef("election: term %d leader %d (was %d), keeping %d of %d pending", term+1, next, leader, keep, b.log.PendingCount())
				b.log.Elect(next, keep)
				b.log.Voter(next).CatchUp(b.log.End())
			}
			b.electionAt = time.Time{}
		}
	}
	// A voter that believes it leads but has had no majority for an election timeout
	// steps down (raft's CheckQuorum).
	for _, id := range s.voterIDs {
		if s.ctrls[id].down {
			continue
		}
		v := b.log.Voter(id)
		if l := v.CurrentLeadership(); l.IsLeader && !s.majority(id) {
			if _, ok := b.lastMajority[id]; !ok {
				b.lastMajority[id] = now
			}
			if now.Sub(b.lastMajority[id]) > electionMin {
				s.tracef("voter %d steps down", id)
				v.StepDown()
			}
		}
	}
	s.pollControllers()
}
