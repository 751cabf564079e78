package share

import (
	"errors"
	"slices"
	"time"
)

// State is a record's delivery state, with Kafka's numbers (the DeliveryState of
// WriteShareGroupState's state batches).
type State int8

// The delivery states.
const (
	Available    State = 0 // may be acquired (never delivered, released, or its lock expired)
	Acquired     State = 1 // held by one member until its lock's deadline
	Acknowledged State = 2 // accepted: done
	Archived     State = 4 // rejected, a gap, over the delivery limit, or below the log start: done
)

func (s State) String() string {
	switch s {
	case Available:
		return "available"
	case Acquired:
		return "acquired"
	case Acknowledged:
		return "acknowledged"
	case Archived:
		return "archived"
	}
	return "state(?)"
}

func (s State) done() bool { return s == Acknowledged || s == Archived }

// AckType is an acknowledgement's type, with Kafka's numbers.
type AckType int8

// The acknowledgement types (ShareFetch/ShareAcknowledge AcknowledgeTypes).
const (
	AckGap     AckType = 0 // the offset holds no record the client was given: archived
	AckAccept  AckType = 1
	AckRelease AckType = 2
	AckReject  AckType = 3
	AckRenew   AckType = 4 // KIP-1222: extend the lock (ShareFetch/ShareAcknowledge v2)
)

// Errors of a Partition's operations; the net edge maps them to Kafka's codes.
var (
	// ErrInvalidRecordState: an acknowledgement names an offset the member does not
	// hold (never acquired, acquired by another member, lock expired, already done).
	ErrInvalidRecordState = errors.New("share: record not acquired by this member")
	// ErrInvalidRequest: a malformed acknowledgement batch (last before first, the
	// wrong number of types, an unknown type).
	ErrInvalidRequest = errors.New("share: invalid acknowledgement batch")
)

// Config is a share partition's limits, Kafka 4.1's keys and defaults.
type Config struct {
	// LockDuration is group.share.record.lock.duration.ms (30 s): how long a member
	// holds an acquired record.
	LockDuration time.Duration
	// DeliveryLimit is group.share.delivery.count.limit (5): a record whose delivery
	// count reached it is archived instead of being made available again.
	DeliveryLimit int
	// MaxInFlight is group.share.partition.max.record.locks (2000 in Kafka 4.1;
	// KIP-932 said 200): at most that many offsets between the share-partition start
	// offset and the end are tracked, so no new record is acquired past
	// start+MaxInFlight until the start moves.
	MaxInFlight int
	// RenewDisabled is share.renew.acknowledge.enable=false (a GROUP key, default
	// true, with no broker key behind it in Kafka 4.4): a renew acknowledgement
	// (KIP-1222) is refused with ErrInvalidRecordState, as Kafka's share partition
	// refuses it.
	RenewDisabled bool
}

func (c *Config) fill() {
	if c.LockDuration <= 0 {
		c.LockDuration = 30 * time.Second
	}
	if c.DeliveryLimit <= 0 {
		c.DeliveryLimit = 5
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 2000
	}
}

// Range is an acquired run of offsets handed to one member, all with one delivery
// count (ShareFetch's AcquiredRecords).
type Range struct {
	First, Last   int64
	DeliveryCount int16
}

type inflight struct {
	state    State
	count    int16 // deliveries so far
	member   string
	deadline time.Time // while Acquired
}

// Partition is one share partition's state: the share-partition start offset (SPSO)
// and the in-flight records above it. It does no I/O and reads no clock: every
// operation takes now. Not safe for concurrent use (its owner's lock guards it).
//
// Invariants:
//  1. start <= end; end-start <= MaxInFlight, except just after Restore of a larger
//     persisted window.
//  2. recs[i] is the state of offset start+i; every offset in [start, end) has one
//     (offsets holding no record, such as control records or compacted ones, are
//     acquired like the others and archived by the client's gap acknowledgement).
//  3. recs[0] is never done (Acknowledged or Archived): the start moves past every
//     done record at the head.
//  4. An Acquired record has a member and a deadline; no other record has a member.
//  5. No record's count exceeds DeliveryLimit, but an Acquired one's after SetConfig
//     lowered the limit (it is archived when released).
type Partition struct {
	cfg   Config
	start int64
	recs  []inflight
}

// NewPartition returns the state of a share partition whose start offset is start,
// with nothing in flight.
func NewPartition(cfg Config, start int64) *Partition {
	cfg.fill()
	return &Partition{cfg: cfg, start: start}
}

// SetConfig replaces the limits (a group config changed): the next acquisition takes
// locks of the new duration and the window's new size; records in flight keep their
// state, but an available record whose deliveries reached a lowered delivery limit is
// archived (archived reports it: a change to persist), and a record acquired past it
// is archived when released. Locks already taken keep their deadlines.
func (p *Partition) SetConfig(cfg Config) (archived bool) {
	cfg.fill()
	lowered := cfg.DeliveryLimit < p.cfg.DeliveryLimit
	p.cfg = cfg
	if !lowered {
		return false
	}
	for i := range p.recs {
		r := &p.recs[i]
		if r.state == Available && int(r.count) >= cfg.DeliveryLimit {
			p.finish(r, Archived)
			archived = true
		}
	}
	p.advance()
	return archived
}

// ArchiveAcquired archives the records of first..last that member holds (records of
// an aborted transaction a read_committed share group acquired: Kafka archives them
// instead of delivering them); changed reports a record archived.
func (p *Partition) ArchiveAcquired(member string, first, last int64) (changed bool) {
	first, last = max(first, p.start), min(last, p.End()-1)
	for o := first; o <= last; o++ {
		r := &p.recs[o-p.start]
		if r.state == Acquired && r.member == member {
			p.finish(r, Archived)
			changed = true
		}
	}
	p.advance()
	return changed
}

// Start is the share-partition start offset: every offset below it is done.
func (p *Partition) Start() int64 { return p.start }

// End is one past the last offset tracked: records at or above it were never
// acquired.
func (p *Partition) End() int64 { return p.start + int64(len(p.recs)) }

// StateOf returns the state and delivery count of offset o: below the start, Archived
// or Acknowledged cannot be told apart and Acknowledged is reported; at or above the
// end, Available with count 0.
func (p *Partition) StateOf(o int64) (State, int16) {
	switch {
	case o < p.start:
		return Acknowledged, 0
	case o >= p.End():
		return Available, 0
	}
	r := p.recs[o-p.start]
	return r.state, r.count
}

// NextFetchOffset is the lowest offset a fetch could acquire: the first Available
// record in flight, else the end; -1 when nothing can be acquired (every tracked
// record held and the window full).
func (p *Partition) NextFetchOffset() int64 {
	for i := range p.recs {
		if p.recs[i].state == Available {
			return p.start + int64(i)
		}
	}
	if len(p.recs) >= p.cfg.MaxInFlight {
		return -1
	}
	return p.End()
}

// Acquire hands member the acquirable offsets of [from, to) (the log holds records up
// to to, and the fetch read the batches from from), at most max of them (max <= 0: no
// limit), each with its delivery count raised by one and a lock until now plus the
// lock duration. Offsets at or above the end are new: they are acquirable while the
// window has room.
func (p *Partition) Acquire(member string, from, to int64, max int, now time.Time) []Range {
	if from < p.start {
		from = p.start
	}
	deadline := now.Add(p.cfg.LockDuration)
	var out []Range
	n := 0
	take := func(o int64, count int16) {
		n++
		if k := len(out); k > 0 && out[k-1].Last == o-1 && out[k-1].DeliveryCount == count {
			out[k-1].Last = o
			return
		}
		out = append(out, Range{First: o, Last: o, DeliveryCount: count})
	}
	for o := from; o < to && (max <= 0 || n < max); o++ {
		i := o - p.start
		if i < int64(len(p.recs)) {
			r := &p.recs[i]
			if r.state != Available {
				continue
			}
			r.state, r.member, r.deadline = Acquired, member, deadline
			r.count++
			take(o, r.count)
			continue
		}
		if len(p.recs) >= p.cfg.MaxInFlight {
			break
		}
		for int64(len(p.recs)) < i { // from was past the end: the skipped offsets stay available
			p.recs = append(p.recs, inflight{})
		}
		p.recs = append(p.recs, inflight{state: Acquired, count: 1, member: member, deadline: deadline})
		take(o, 1)
	}
	return out
}

// Acknowledge applies one acknowledgement batch of member: offsets first..last with
// types (one type for the whole batch, or one per offset). Every offset must be
// Acquired by member, else nothing is applied (ErrInvalidRecordState); renew is
// accepted only when allowRenew (ErrInvalidRequest otherwise: the request did not say
// IsRenewAck) and the group allows it (ErrInvalidRecordState when RenewDisabled).
// changed reports a change to persist (renew changes nothing durable).
func (p *Partition) Acknowledge(member string, first, last int64, types []AckType, allowRenew bool, now time.Time) (changed bool, err error) {
	if last < first || len(types) == 0 || (len(types) != 1 && int64(len(types)) != last-first+1) {
		return false, ErrInvalidRequest
	}
	for _, t := range types {
		if t < AckGap || t > AckRenew || (t == AckRenew && !allowRenew) {
			return false, ErrInvalidRequest
		}
	}
	if p.cfg.RenewDisabled && slices.Contains(types, AckRenew) {
		return false, ErrInvalidRecordState
	}
	if first < p.start || last >= p.End() {
		return false, ErrInvalidRecordState
	}
	for o := first; o <= last; o++ {
		r := &p.recs[o-p.start]
		if r.state != Acquired || r.member != member {
			return false, ErrInvalidRecordState
		}
	}
	for o := first; o <= last; o++ {
		t := types[0]
		if len(types) > 1 {
			t = types[o-first]
		}
		r := &p.recs[o-p.start]
		switch t {
		case AckGap, AckReject:
			p.finish(r, Archived)
		case AckAccept:
			p.finish(r, Acknowledged)
		case AckRelease:
			p.release(r)
		case AckRenew:
			r.deadline = now.Add(p.cfg.LockDuration)
			continue
		}
		changed = true
	}
	p.advance()
	return changed, nil
}

func (p *Partition) finish(r *inflight, s State) {
	r.state, r.member, r.deadline = s, "", time.Time{}
}

// release makes r available again, or archives it once its deliveries reached the
// limit.
func (p *Partition) release(r *inflight) {
	if int(r.count) >= p.cfg.DeliveryLimit {
		p.finish(r, Archived)
		return
	}
	p.finish(r, Available)
}

// advance moves the start past the done records at the head (invariant 3).
func (p *Partition) advance() {
	i := 0
	for i < len(p.recs) && p.recs[i].state.done() {
		i++
	}
	if i == 0 {
		return
	}
	p.start += int64(i)
	p.recs = append(p.recs[:0], p.recs[i:]...)
}

// Expire releases every record whose lock's deadline is not after now (archiving
// those at the delivery limit). archived reports a record archived (a change to
// persist); released, a record made available (a fetch may now acquire it).
func (p *Partition) Expire(now time.Time) (released, archived bool) {
	for i := range p.recs {
		r := &p.recs[i]
		if r.state != Acquired || r.deadline.After(now) {
			continue
		}
		p.release(r)
		if r.state == Archived {
			archived = true
		} else {
			released = true
		}
	}
	if archived {
		p.advance()
	}
	return released, archived
}

// NextDeadline is the earliest lock deadline, or the zero time when nothing is
// acquired.
func (p *Partition) NextDeadline() time.Time {
	var d time.Time
	for i := range p.recs {
		r := &p.recs[i]
		if r.state == Acquired && (d.IsZero() || r.deadline.Before(d)) {
			d = r.deadline
		}
	}
	return d
}

// ReleaseMember releases every record member holds (its share session closed or the
// partition left its session). archived reports a change to persist.
func (p *Partition) ReleaseMember(member string) (released, archived bool) {
	for i := range p.recs {
		r := &p.recs[i]
		if r.state != Acquired || r.member != member {
			continue
		}
		p.release(r)
		if r.state == Archived {
			archived = true
		} else {
			released = true
		}
	}
	if archived {
		p.advance()
	}
	return released, archived
}

// Acquired counts the records member holds ("" counts every member's).
func (p *Partition) Acquired(member string) int {
	n := 0
	for i := range p.recs {
		if p.recs[i].state == Acquired && (member == "" || p.recs[i].member == member) {
			n++
		}
	}
	return n
}

// MoveStart moves the start up to off (the log start passed it: retention,
// DeleteRecords; or an administrator's AlterShareGroupOffsets), archiving what lies
// below. changed reports a move.
func (p *Partition) MoveStart(off int64) bool {
	if off <= p.start {
		return false
	}
	if n := off - p.start; n >= int64(len(p.recs)) {
		p.recs = p.recs[:0]
	} else {
		p.recs = append(p.recs[:0], p.recs[n:]...)
	}
	p.start = off
	p.advance()
	return true
}

// Batch is a run of offsets with one state and delivery count, as persisted.
type Batch struct {
	First, Last int64
	State       State
	Count       int16
}

// Snapshot returns the durable part of the state: the start and the in-flight records
// as batches, an Acquired record persisted as Available with its count (a lock does
// not survive the partition's leader: after a restart or failover the record can be
// acquired again, as in Kafka). Records never delivered at the tail are left out.
func (p *Partition) Snapshot() (start int64, batches []Batch) {
	n := len(p.recs)
	for n > 0 && p.recs[n-1].state == Available && p.recs[n-1].count == 0 {
		n--
	}
	for i := 0; i < n; i++ {
		r := p.recs[i]
		s := r.state
		if s == Acquired {
			s = Available
		}
		o := p.start + int64(i)
		if k := len(batches); k > 0 && batches[k-1].State == s && batches[k-1].Count == r.count && batches[k-1].Last == o-1 {
			batches[k-1].Last = o
			continue
		}
		batches = append(batches, Batch{First: o, Last: o, State: s, Count: r.count})
	}
	return p.start, batches
}

// Restore returns the partition a Snapshot described. Batches below start are
// ignored; offsets between batches are Available, never delivered; an Acquired batch
// is Available; a batch's count is capped at the delivery limit, and one at the limit
// that is Available is archived.
func Restore(cfg Config, start int64, batches []Batch) *Partition {
	p := NewPartition(cfg, start)
	for _, b := range batches {
		if b.Last < b.First || b.Last < p.start {
			continue
		}
		first := max(b.First, p.start)
		// Distances as unsigned: first >= p.start and b.Last >= first, so they are
		// exact even where the signed subtraction of a damaged record's offsets
		// would overflow (a negative start, a huge last offset).
		if lim := uint64(p.cfg.MaxInFlight) * 4; uint64(first)-uint64(p.start) > lim || uint64(b.Last)-uint64(first) > lim {
			break // a window far beyond the limits: not ours to allocate
		}
		for p.End() < first {
			p.recs = append(p.recs, inflight{})
		}
		s := b.State
		if s == Acquired {
			s = Available
		}
		count := min(b.Count, int16(p.cfg.DeliveryLimit))
		if count < 0 {
			count = 0
		}
		if s == Available && int(count) >= p.cfg.DeliveryLimit {
			s = Archived
		}
		if s != Available && !s.done() {
			s = Available
		}
		for o := max(first, p.End()); o <= b.Last; o++ {
			p.recs = append(p.recs, inflight{state: s, count: count})
		}
	}
	p.advance()
	return p
}
