package audit

import (
	"fmt"
	"sort"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/samsa-broker/samsa/tools/chaos"
)

// Reader names one of the audit's consumers.
type Reader uint8

// The readers.
const (
	GroupReader     Reader = iota // the consumer group, read_uncommitted
	CommittedReader               // the read_committed consumer of every partition
	numReaders
)

func (r Reader) String() string {
	if r == GroupReader {
		return "group"
	}
	return "read_committed"
}

// Producer names one of the canary producers.
type Producer uint8

// The producers.
const (
	Idempotent    Producer = iota // acks=all, idempotent; no transactions
	Transactional                 // one record per partition per transaction; commits most
	numProducers
)

func (p Producer) String() string {
	if p == Idempotent {
		return "idempotent"
	}
	return "transactional"
}

func (p Producer) code() byte {
	if p == Idempotent {
		return 'i'
	}
	return 't'
}

// Outcome is how a transaction ended, as its producer was told.
type Outcome uint8

// Outcomes of EndTxn.
const (
	txnOpen   Outcome = iota
	Committed         // the commit was answered
	Aborted           // the abort was answered
	Unknown           // EndTxn failed: either may have happened
	numOutcomes
)

func (o Outcome) String() string {
	switch o {
	case Committed:
		return "committed"
	case Aborted:
		return "aborted"
	case Unknown:
		return "unknown"
	}
	return "open"
}

// Anomaly kinds. lost, unseen, aborted-read and phantom are tools/chaos's kinds, judged
// here incrementally; duplicated is chaos's duplicate and reordered its
// nonmonotonic-send, both judged per producer stream from what the readers return.
const (
	KLost        = chaos.KLost
	KDuplicated  = "duplicated"
	KReordered   = "reordered"
	KAbortedRead = chaos.KAbortedRead
	KPhantom     = chaos.KPhantom
	KUnseen      = chaos.KUnseen
)

// Kinds lists the counted anomaly kinds in the order verdicts show them (unseen, a
// gauge, comes after them).
var Kinds = []string{KLost, KDuplicated, KReordered, KAbortedRead, KPhantom}

// ID names one canary record: its producer, the partition it was sent to, and its
// number in that producer's stream to that partition (1, 2, 3, ...).
type ID struct {
	Producer Producer
	P        int32
	Seq      int64
}

func (id ID) String() string { return fmt.Sprintf("%c/%d", id.Producer.code(), id.Seq) }

// Options tune a Checker.
type Options struct {
	// Horizon is how long a reader has to return an acknowledged record (from its
	// acknowledgement, or for read_committed from its transaction's commit) before it
	// is judged: lost if the reader returned a later offset of the partition, else
	// unseen. It is also how long a resolved record stays in the window to tell a
	// duplicate from a re-read. 0: one minute.
	Horizon time.Duration
	// MaxWindow bounds the records kept per producer stream (partition × producer). A
	// record pushed out unresolved stays counted as unseen. 0: 100,000.
	MaxWindow int
	// MaxListed bounds the anomalies listed per kind (all are counted). 0: 20.
	MaxListed int
}

// DefaultHorizon is the horizon when Options.Horizon is 0.
const DefaultHorizon = time.Minute

// notOwed marks a reader that is not (yet) owed a record.
const notOwed = time.Duration(-1)

// Record states on the producer's side.
const (
	stInFlight uint8 = iota // handed to the client, not answered
	stAcked                 // acknowledged at off
	stFailed                // the client gave up: it may or may not be in the log
)

// entry is what the window knows of one record.
type entry struct {
	off  int64 // acknowledged offset; -1 until acknowledged
	pos  int64 // the first position known, from the ack or a read; -1 none
	dup  int64 // the last other position reported as a duplicate; -1 none
	sent time.Duration
	// owed[r]: since when reader r must return the record (its ack, or for
	// read_committed its transaction's commit); notOwed when it must not or need not.
	owed  [numReaders]time.Duration
	read  [numReaders]bool
	state uint8
	txn   Outcome // transactional records: their transaction's outcome
	lost  bool
}

// stream is one producer's records to one partition, the unresolved ones and those
// resolved within the horizon, in sequence order.
//
// Invariants: entries[i] has sequence base+i; every sequence below base was resolved
// for every reader and is older than the horizon (or was pushed out by MaxWindow);
// next-1 is the last sequence sent.
type stream struct {
	base    int64
	entries []entry
	next    int64
}

// cursor is one reader's progress in one partition.
type cursor struct {
	max  int64               // the highest offset returned, -1 none
	last [numProducers]int64 // per producer, the highest sequence returned in a forward read
}

type partState struct {
	streams [numProducers]stream
	reads   [numReaders]cursor
	lastAck time.Duration // the last acknowledgement (the start before the first)
	longest time.Duration // the longest time between acknowledgements
}

// reportKey dedupes an anomaly found by both readers (or twice by one).
type reportKey struct {
	id   ID
	off  int64
	kind string
}

// Checker judges a canary stream incrementally: the producers' sends, acknowledgements
// and transaction outcomes, and the readers' records, as they happen. Memory is the
// window of records not yet resolved (plus those resolved within the horizon), not
// the history: a run of days keeps what its last horizon holds.
//
// It does no I/O and keeps no clock: every call takes now, the time since the audit
// began (monotonic), and calls must come with non-decreasing now. It is not safe for
// concurrent use: the driver (Run) serializes calls under one mutex.
//
// What it reports, for each record of the run (an "acknowledged" record: its produce
// was answered with an offset):
//
//	lost          owed to a reader (acknowledged; for read_committed, of the idempotent
//	              producer or of a committed transaction), not returned by it within the
//	              horizon, though it returned a later offset of the partition (at the end
//	              of the run: not returned after the drain, though passed)
//	unseen        owed, not returned within the horizon, and the reader has not yet
//	              returned anything past it (at the end: owed, not returned, not passed);
//	              a gauge during the run, an anomaly in the verdict
//	duplicated    the record at two offsets (its acknowledgement's and a read's, or two
//	              reads'), or read in a forward read after its stream moved on by more
//	              than the horizon; each (record, offset) counted once
//	reordered     a reader, reading forward (to offsets above any it returned in the
//	              partition), returns a record of a producer whose later record it
//	              already returned: the sequence went backwards in the log
//	aborted-read  the read_committed reader returned a record of a transaction whose
//	              abort was answered
//	phantom       a record of the run that its producer never sent (a sequence not
//	              given yet, or a partition the run does not write to)
type Checker struct {
	opt      Options
	parts    map[int32]*partState
	order    []int32 // partitions, sorted
	reported map[reportKey]time.Duration

	producing bool
	finished  bool
	began     time.Duration // production's start (StartProducing): reports count from it

	produced, acked, failed [numProducers]int64
	reads                   [numReaders]int64
	txns                    [numOutcomes]int64
	counts                  map[string]int64
	unseen                  int64 // overdue and not passed, at the last Tick or Finish
	dropped                 int64 // pushed out of the window unresolved: unseen for good
	listed                  map[string]int
	fresh                   []chaos.Anomaly
	all                     []chaos.Anomaly
	lat                     [numReaders]*hdrhistogram.Histogram // µs
}

// NewChecker returns a checker of a run that writes to partitions, starting at time 0.
func NewChecker(partitions []int32, opt Options) *Checker {
	if opt.Horizon <= 0 {
		opt.Horizon = DefaultHorizon
	}
	if opt.MaxWindow <= 0 {
		opt.MaxWindow = 100_000
	}
	if opt.MaxListed <= 0 {
		opt.MaxListed = 20
	}
	c := &Checker{
		opt:       opt,
		parts:     map[int32]*partState{},
		reported:  map[reportKey]time.Duration{},
		counts:    map[string]int64{},
		listed:    map[string]int{},
		producing: true,
	}
	for _, p := range partitions {
		if _, dup := c.parts[p]; dup {
			continue
		}
		ps := &partState{}
		for i := range ps.streams {
			ps.streams[i] = stream{base: 1, next: 1}
		}
		for i := range ps.reads {
			ps.reads[i].max = -1
		}
		c.parts[p] = ps
		c.order = append(c.order, p)
	}
	sort.Slice(c.order, func(i, j int) bool { return c.order[i] < c.order[j] })
	for i := range c.lat {
		c.lat[i] = hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 2)
	}
	return c
}

// Horizon is the horizon in use.
func (c *Checker) Horizon() time.Duration { return c.opt.Horizon }

func (c *Checker) entry(id ID) *entry {
	ps := c.parts[id.P]
	if ps == nil {
		return nil
	}
	st := &ps.streams[id.Producer]
	i := id.Seq - st.base
	if i < 0 || i >= int64(len(st.entries)) {
		return nil
	}
	return &st.entries[i]
}

// Send gives the next record of producer p to partition part its identity and puts
// it in the window as in flight. part must be one of the checker's partitions.
func (c *Checker) Send(p Producer, part int32, now time.Duration) ID {
	ps := c.parts[part]
	if ps == nil {
		panic(fmt.Sprintf("audit: Send to partition %d, not one of the run's", part))
	}
	st := &ps.streams[p]
	id := ID{Producer: p, P: part, Seq: st.next}
	st.next++
	st.entries = append(st.entries, entry{off: -1, pos: -1, dup: -1, sent: now, owed: [numReaders]time.Duration{notOwed, notOwed}})
	c.produced[p]++
	for len(st.entries) > c.opt.MaxWindow {
		e := &st.entries[0]
		if c.owedUnread(e) {
			c.dropped++
		}
		st.entries = st.entries[1:]
		st.base++
	}
	return id
}

// Acked records the acknowledgement of id at offset off; it returns the produce
// latency (0 when id is not in the window).
func (c *Checker) Acked(id ID, off int64, now time.Duration) time.Duration {
	e := c.entry(id)
	if e == nil || e.state != stInFlight {
		return 0
	}
	e.state, e.off = stAcked, off
	c.acked[id.Producer]++
	if e.pos >= 0 && e.pos != off {
		e.dup = off
		c.duplicated(id, off, now, fmt.Sprintf("acknowledged at offset %d, read before at offset %d", off, e.pos))
	} else {
		e.pos = off
	}
	e.owed[GroupReader] = now
	if id.Producer == Idempotent {
		e.owed[CommittedReader] = now
	}
	ps := c.parts[id.P]
	if g := now - ps.lastAck; g > ps.longest {
		ps.longest = g
	}
	ps.lastAck = now
	return now - e.sent
}

// Failed records that the client gave up on id: it is owed to no reader, and a read
// of it is no anomaly.
func (c *Checker) Failed(id ID, now time.Duration) {
	e := c.entry(id)
	if e == nil || e.state != stInFlight {
		return
	}
	e.state = stFailed
	c.failed[id.Producer]++
}

// TxnEnded records the outcome of the transaction that produced ids.
func (c *Checker) TxnEnded(ids []ID, o Outcome, now time.Duration) {
	c.txns[o]++
	for _, id := range ids {
		e := c.entry(id)
		if e == nil {
			continue
		}
		e.txn = o
		switch o {
		case Committed:
			if e.state == stAcked {
				e.owed[CommittedReader] = now
			}
		case Aborted:
			if e.read[CommittedReader] {
				c.abortedRead(id, e.pos, now, "returned before its transaction's abort was answered")
			}
		}
	}
}

// Read records that reader r returned id at offset off. It returns the end-to-end
// latency and true at r's first read of id.
func (c *Checker) Read(r Reader, id ID, off int64, now time.Duration) (time.Duration, bool) {
	c.reads[r]++
	ps := c.parts[id.P]
	if ps == nil || id.Seq < 1 || id.Seq >= ps.streams[id.Producer].next {
		c.phantom(id, off, now, r)
		return 0, false
	}
	cur := &ps.reads[r]
	forward := off > cur.max
	if forward {
		cur.max = off
	}
	e := c.entry(id)
	if e == nil {
		if forward {
			c.duplicated(id, off, now, fmt.Sprintf("read by the %s reader at offset %d, more than the horizon after every reader had resolved it", r, off))
		}
		return 0, false
	}
	dup := false
	switch {
	case e.pos < 0:
		e.pos = off
	case e.pos != off:
		dup = true
		if e.dup != off { // else reported already (a re-read of the copy)
			e.dup = off
			c.duplicated(id, off, now, fmt.Sprintf("read by the %s reader at offset %d, known at offset %d", r, off, e.pos))
		}
	}
	if forward && !dup {
		if last := cur.last[id.Producer]; id.Seq < last {
			c.reordered(id, off, now, fmt.Sprintf("the %s reader returned it at offset %d after %c/%d of the same producer at a lower offset", r, off, id.Producer.code(), last))
		} else {
			cur.last[id.Producer] = id.Seq
		}
	}
	if r == CommittedReader && e.txn == Aborted {
		c.abortedRead(id, off, now, "its transaction's abort had been answered")
	}
	if e.read[r] {
		return 0, false
	}
	e.read[r] = true
	lat := now - e.sent
	us := int64(lat / time.Microsecond)
	if us > c.lat[r].HighestTrackableValue() {
		us = c.lat[r].HighestTrackableValue()
	}
	_ = c.lat[r].RecordValue(max(us, 1))
	return lat, true
}

func (c *Checker) add(kind string, id ID, off int64, now time.Duration, detail string) {
	k := reportKey{id: id, off: off, kind: kind}
	if _, seen := c.reported[k]; seen {
		return
	}
	c.reported[k] = now
	c.counts[kind]++
	if c.listed[kind] >= c.opt.MaxListed {
		return
	}
	c.listed[kind]++
	a := chaos.Anomaly{Kind: kind, P: id.P, O: off, Value: id.String(), Proc: id.Producer.String(), Time: int64(now - c.began), Detail: detail}
	c.fresh = append(c.fresh, a)
	c.all = append(c.all, a)
}

func (c *Checker) duplicated(id ID, off int64, now time.Duration, detail string) {
	c.add(KDuplicated, id, off, now, detail)
}

func (c *Checker) reordered(id ID, off int64, now time.Duration, detail string) {
	c.add(KReordered, id, -1, now, detail)
}

func (c *Checker) abortedRead(id ID, off int64, now time.Duration, detail string) {
	c.add(KAbortedRead, id, -1, now, "read_committed returned a record of an aborted transaction: "+detail)
}

func (c *Checker) phantom(id ID, off int64, now time.Duration, r Reader) {
	c.add(KPhantom, id, off, now, fmt.Sprintf("the %s reader returned a record of this run that its producer never sent", r))
}

// TakeNew returns the anomalies listed since the last call (at most MaxListed of each
// kind over the run; the counts hold them all).
func (c *Checker) TakeNew() []chaos.Anomaly {
	out := c.fresh
	c.fresh = nil
	return out
}

// Anomalies returns every listed anomaly of the run, in the order found.
func (c *Checker) Anomalies() []chaos.Anomaly { return append([]chaos.Anomaly(nil), c.all...) }
