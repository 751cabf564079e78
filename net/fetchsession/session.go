package fetchsession

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/replication"
)

// Key names a partition in a session.
type Key struct {
	Topic     string        // before v13
	ID        metadata.UUID // v13+
	Partition int32
}

func keyOf(topicIDs bool, topic string, id [16]byte, partition int32) Key {
	if topicIDs {
		return Key{ID: id, Partition: partition}
	}
	return Key{Topic: topic, Partition: partition}
}

// Fetch is what the client last asked of a partition of its session.
type Fetch struct {
	Key
	Offset             int64
	MaxBytes           int32
	CurrentLeaderEpoch int32
	LastFetchedEpoch   int32
}

// Sent is what an answer told the client of a partition: its HW, LSO and log start
// (-1 before the first answer that carried it).
type Sent struct {
	HighWatermark, LastStableOffset, LogStartOffset int64
}

// Part is one partition of a session. Its fields are guarded by the session's lock.
type Part struct {
	f       Fetch
	sent    Sent
	removed bool // forgotten by a later request

	sess  *Session
	quiet bool // left out of requests until woken (see the package doc)
	// awakeAt is its index in the session's awake list (not quiet, not removed), or -1.
	awakeAt int
	qlog    *engine.Log            // while quiet: its log, where the quiet list lists it
	qrep    *replication.Partition // while quiet: its replica (FollowerQuiet was told)
}

// CarryLocked decides whether an incremental answer carries p: when must (records,
// an error, a diverging epoch, a full answer), or when st differs from what was last
// sent. A carried p, still in its session, remembers st. live reports that p is still
// in its session (a later request did not forget it). Caller holds the session's
// lock.
func (p *Part) CarryLocked(must bool, st Sent) (carry, live bool) {
	carry = must || p.sent != st
	if carry && !p.removed {
		p.sent = st
	}
	return carry, !p.removed
}

// Parked is a session's parked long poll: a quiet partition that wakes completes it.
type Parked interface {
	ForceComplete() bool
}

// Session is one KIP-227 session.
type Session struct {
	id       int32
	topicIDs bool

	mu    sync.Mutex
	epoch int32 // the epoch the next incremental request must carry
	parts []*Part
	idx   map[Key]*Part
	// awake is the parts neither quiet nor removed, in no particular order: what a
	// request of a session with quiet parts serves, without a walk over all of them.
	awake    []*Part
	lastUsed time.Time

	// Its quiet partitions: a follower's (replicaID >= 0) or a consumer's (-1).
	replicaID int32
	quiet     *quietParts // the cache's followers' list or, for a consumer's, consumers'
	nquiet    int
	woken     atomic.Bool     // a partition woke since the last request collected them
	parked    Parked          // the session's long poll, while parked
	im        *metadata.Image // the image the quiet partitions were served in
	scanned   time.Time       // when a request last served every partition
	clock     atomic.Int64    // its latest request's time (FollowerQuiet's clock)
	rescan    time.Duration
}

// ID is the session's id, which its answers carry.
func (s *Session) ID() int32 { return s.id }

// ReplicaID is the follower whose session it is, or -1 for a consumer's.
func (s *Session) ReplicaID() int32 { return s.replicaID }

// Lock takes the session's lock, for the methods ending in Locked.
func (s *Session) Lock() { s.mu.Lock() }

// Unlock releases the session's lock.
func (s *Session) Unlock() { s.mu.Unlock() }

// drop wakes the quiet partitions of a session leaving the cache, so that the quiet
// list no longer lists them (its clock stops: replication counts no more of its
// fetches).
func (s *Session) drop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nquiet == 0 {
		return
	}
	for _, sp := range s.parts {
		s.unquietLocked(sp)
	}
}

// upsertLocked adds or updates a partition from a request.
func (s *Session) upsertLocked(k Key, p *kmsg.FetchRequestTopicPartition) {
	sp := s.idx[k]
	if sp == nil {
		k.Topic = strings.Clone(k.Topic) // the request's name aliases its frame
		sp = &Part{f: Fetch{Key: k}, sent: Sent{-1, -1, -1}, sess: s, awakeAt: -1}
		s.idx[k] = sp
		s.parts = append(s.parts, sp)
		s.awakeAddLocked(sp)
	}
	s.unquietLocked(sp) // the follower's state of it changed: served by this request
	sp.f.Offset, sp.f.MaxBytes = p.FetchOffset, p.PartitionMaxBytes
	sp.f.CurrentLeaderEpoch, sp.f.LastFetchedEpoch = p.CurrentLeaderEpoch, p.LastFetchedEpoch
}

// forgetLocked removes a partition.
func (s *Session) forgetLocked(k Key) {
	sp := s.idx[k]
	if sp == nil {
		return
	}
	delete(s.idx, k)
	s.unquietLocked(sp)
	s.awakeDelLocked(sp)
	sp.removed = true
	for i, q := range s.parts {
		if q == sp {
			s.parts = append(s.parts[:i], s.parts[i+1:]...)
			break
		}
	}
}

// unquietLocked wakes sp if it is quiet, taking it off the quiet list and ending its
// replica's quiet state (the fetches until now count).
func (s *Session) unquietLocked(sp *Part) {
	if !sp.quiet {
		return
	}
	s.quiet.remove(sp.qlog, sp)
	if sp.qrep != nil {
		sp.qrep.FollowerAwake(s.replicaID, &s.clock)
	}
	sp.quiet, sp.qlog, sp.qrep = false, nil, nil
	s.nquiet--
	s.awakeAddLocked(sp)
}

// awakeAddLocked lists sp as awake.
func (s *Session) awakeAddLocked(sp *Part) {
	if sp.awakeAt < 0 && !sp.removed {
		sp.awakeAt = len(s.awake)
		s.awake = append(s.awake, sp)
	}
}

// awakeDelLocked takes sp off the awake list (the last one takes its place).
func (s *Session) awakeDelLocked(sp *Part) {
	i := sp.awakeAt
	if i < 0 {
		return
	}
	last := len(s.awake) - 1
	s.awake[i] = s.awake[last]
	s.awake[i].awakeAt = i
	s.awake[last] = nil
	s.awake = s.awake[:last]
	sp.awakeAt = -1
}

// Collect calls fn, under the session's lock, for each partition a request serves, in
// the session's order: every partition; or, when quiet (a follower's fetch in its own
// session, or a consumer's in a consumer's session), those not quiet, unless im is
// not the image the quiet ones were served in or rescan has passed since now last
// served them all, which wakes them all.
func (s *Session) Collect(quiet bool, im *metadata.Image, now time.Time, fn func(p *Part, f Fetch)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	parts := s.parts
	if quiet {
		parts = s.collectLocked(im, now)
	}
	for _, sp := range parts {
		fn(sp, sp.f)
	}
}

// collectLocked returns the partitions a request of a quiet session serves: the
// ones not quiet, or all of them after a metadata change or the rescan interval.
func (s *Session) collectLocked(im *metadata.Image, now time.Time) []*Part {
	s.woken.Store(false)
	if s.nquiet == 0 {
		s.im, s.scanned = im, now
		return s.parts
	}
	if s.im != im || now.Sub(s.scanned) >= s.rescan {
		for _, sp := range s.parts {
			s.unquietLocked(sp)
		}
		s.im, s.scanned = im, now
		return s.parts
	}
	return s.awake
}

// Woken reports whether a quiet partition woke since the last request collected them.
func (s *Session) Woken() bool { return s.woken.Load() }

// SetClock records the time of a follower's request, on the replica manager's clock
// (replication.Manager.Now): the fetches of its quiet partitions count from then.
func (s *Session) SetClock(now time.Time) { s.clock.Store(now.UnixNano()) }

// HasQuiet reports whether the session has quiet partitions (a long poll then waits
// for them even when it reads no log).
func (s *Session) HasQuiet() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nquiet > 0
}

// Park records op as the session's parked long poll.
func (s *Session) Park(op Parked) {
	s.mu.Lock()
	s.parked = op
	s.mu.Unlock()
}

// Unpark forgets op as the session's parked long poll.
func (s *Session) Unpark(op Parked) {
	s.mu.Lock()
	if s.parked == op {
		s.parked = nil
	}
	s.mu.Unlock()
}

// Idle is a partition an answer had nothing to send, its reader at the end of what
// it reads: a follower at the log end, a consumer at the HW (read_committed: the LSO)
// of a partition this broker leads.
type Idle struct {
	Part   *Part
	Log    *engine.Log
	Rep    *replication.Partition // its leader replica, which a follower's session asks
	Offset int64                  // the fetch offset answered
	Sent                          // what the answer carried, or would have
}

// Quiet makes quiet the idle partitions of an answer of the session's: those
// replication agrees to (FollowerQuiet; a consumer's need no agreement) leave the
// session's requests until woken. Call it before the answer is sent, so the next
// request finds them quiet.
func (s *Session) Quiet(idle []Idle) {
	replica := s.replicaID >= 0
	if replica {
		ok := idle[:0]
		for _, p := range idle {
			if p.Rep.FollowerQuiet(s.replicaID, p.Offset, &s.clock) {
				ok = append(ok, p)
			}
		}
		idle = ok
	}
	if len(idle) == 0 {
		return
	}
	s.mu.Lock()
	for i := range idle {
		p := &idle[i]
		sp := p.Part
		if sp.removed || sp.quiet || sp.f.Offset != p.Offset {
			continue
		}
		sp.quiet, sp.qlog, sp.qrep = true, p.Log, nil
		if replica {
			sp.qrep = p.Rep // FollowerQuiet was told: FollowerAwake ends it
		}
		s.awakeDelLocked(sp)
		s.nquiet++
		s.quiet.add(p.Log, sp)
	}
	s.mu.Unlock()
	// A change between the gather and the listing above woke nobody: look again.
	for i := range idle {
		p := &idle[i]
		moved := p.Log.HighWatermark() != p.HighWatermark || p.Log.LogStartOffset() != p.LogStartOffset
		if replica {
			moved = moved || p.Log.LogEndOffset() != p.Offset
		} else {
			moved = moved || p.Log.LastStableOffset() != p.LastStableOffset
		}
		if moved {
			s.quiet.wake(p.Log)
		}
	}
}
