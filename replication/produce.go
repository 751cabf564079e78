package replication

import (
	"sync/atomic"
	"time"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/purgatory"
)

// Produce carries one produce request's appends on this node's leaders from the append
// to the answer:
//
//	Begin ─▶ Append (per partition: leadership, min.insync.replicas for acks=-1,
//	         leader append, Log.OnDurable) ─▶ Seal
//	      ─▶ every partition durable (or failed): each partition's leader durable end
//	         and HW move, then each moved HW is announced (HighWatermarkMoved, delayed
//	         produces), so a fetch waiting on several of the request's partitions is
//	         woken once and finds them all
//	      ─▶ acks 0/1: done. acks=-1: each partition settles when its HW passes the
//	         records (NOT_ENOUGH_REPLICAS_AFTER_APPEND if the maximal ISR is then below
//	         min.insync.replicas, NOT_LEADER_OR_FOLLOWER if leadership moved); if any is
//	         unsettled the Produce waits in the Manager's purgatory, watched under
//	         those partitions, until they settle or its timeout passes (REQUEST_TIMED_OUT)
//	      ─▶ done() runs once, on whichever goroutine completed it (the handler's, the
//	         flusher's, a follower fetch's, the purgatory's reaper); it must not block.
//
// A Produce is meant to be pooled by its caller (Begin resets it): Parts are reused and
// their callbacks bound once, so a request allocates nothing here in steady state. One
// that was parked in the purgatory (Parked after done) may still be listed there and
// must not be reused.
type Produce struct {
	purgatory.Delayed
	m        *Manager
	acks     int16
	timeout  time.Duration
	start    time.Time
	parts    []*ProducePart
	n        int
	pending  atomic.Int32
	parked   bool
	done     func()
	keys     []*Partition
	nwaiting int // parts counted in their partition's waiting
	// hold: the parts' appends and durability waits wake the flusher at Seal, so
	// that one round syncs them all (engine.FlushHold).
	hold engine.FlushHold
}

// ProducePart is one partition of a Produce.
type ProducePart struct {
	// Partition and Result are set by Append.
	Partition *Partition
	Result    engine.AppendResult
	// Err is the partition's outcome, final when done runs: nil, an engine error from
	// the durability wait, ErrNotLeader, ErrNotEnoughReplicasAfterAppend, ErrTimeout.
	Err error

	pr      *Produce
	epoch   int32
	durable bool
	moved   bool
	settled bool
	fn      func(error)
}

func (pp *ProducePart) onDurable(err error) {
	if err != nil {
		pp.Err, pp.settled = err, true
	} else {
		pp.durable = true
	}
	pp.pr.release()
}

// Begin starts a request: acks is the request's (0, 1 or -1), timeout the request's
// TimeoutMillis (for acks=-1), done the callback that runs once every part is settled.
func (pr *Produce) Begin(m *Manager, acks int16, timeout time.Duration, done func()) {
	pr.m, pr.acks, pr.timeout, pr.done = m, acks, timeout, done
	pr.n, pr.parked, pr.nwaiting = 0, false, 0
	pr.keys = pr.keys[:0]
	pr.start = time.Time{}
	if acks == -1 {
		pr.start = m.clock.Now()
	}
	pr.pending.Store(1)
}

// Len is the number of parts appended.
func (pr *Produce) Len() int { return pr.n }

// Part returns the i-th part (in Append order).
func (pr *Produce) Part(i int) *ProducePart { return pr.parts[i] }

// Parked reports whether the Produce waited in the purgatory (and so may not be reused).
func (pr *Produce) Parked() bool { return pr.parked }

// Append appends records to p as its leader and returns the part's index. On error
// nothing was appended and no part was added: ErrNotLeader, ErrNotEnoughReplicas,
// ErrInvalidAcks, or the engine's error.
func (pr *Produce) Append(p *Partition, records []byte) (int, error) {
	if pr.acks != 0 && pr.acks != 1 && pr.acks != -1 {
		return -1, ErrInvalidAcks
	}
	res, epoch, err := p.appendAsLeader(records, pr.acks, &pr.hold)
	if err != nil {
		return -1, err
	}
	for len(pr.parts) <= pr.n {
		pp := &ProducePart{}
		pp.fn = pp.onDurable
		pr.parts = append(pr.parts, pp)
	}
	pp := pr.parts[pr.n]
	pr.n++
	pp.Partition, pp.Result, pp.Err, pp.pr, pp.epoch, pp.durable, pp.settled = p, res, nil, pr, epoch, false, false
	if p.remotesA.Load() > 0 {
		if h := pr.m.cfg.Hooks.LeaderAppended; h != nil {
			h(p)
		}
	}
	pr.pending.Add(1)
	p.log.OnDurableHeld(res.LastOffset, &pr.hold, pp.fn)
	return pr.n - 1, nil
}

// Seal ends the handler's part: no more Append. The Produce proceeds once every part is
// durable.
func (pr *Produce) Seal() {
	pr.hold.Release() // before release: the Produce may be done and reused after it
	pr.release()
}

func (pr *Produce) release() {
	if pr.pending.Add(-1) == 0 {
		pr.proceed()
	}
}

// proceed runs once every part's durability is known: move the HWs, announce them,
// then settle by acks.
func (pr *Produce) proceed() {
	parts := pr.parts[:pr.n]
	for _, pp := range parts {
		pp.moved = pp.durable && pp.Partition.localDurable(pp.Result.LastOffset+1)
	}
	for i, pp := range parts {
		if pp.moved && (i == 0 || parts[i-1].Partition != pp.Partition || !parts[i-1].moved) {
			pr.m.announce(pp.Partition)
		}
	}
	if pr.acks != -1 {
		for _, pp := range parts {
			pp.settled = true
		}
		pr.finish()
		return
	}
	if pr.settle() {
		pr.finish()
		return
	}
	pr.park()
}

// settle checks the unsettled parts; true when all are settled.
func (pr *Produce) settle() bool {
	all := true
	for _, pp := range pr.parts[:pr.n] {
		if pp.settled {
			continue
		}
		done, err := pp.Partition.checkAck(pp.Result.LastOffset+1, pp.epoch)
		if done {
			pp.settled, pp.Err = true, err
		} else {
			all = false
		}
	}
	return all
}

func (pr *Produce) park() {
	remaining := pr.timeout - pr.m.clock.Now().Sub(pr.start)
	if remaining < 0 {
		remaining = 0
	}
	pr.keys = pr.keys[:0]
	for _, pp := range pr.parts[:pr.n] {
		if !pp.settled && (len(pr.keys) == 0 || pr.keys[len(pr.keys)-1] != pp.Partition) {
			pr.keys = append(pr.keys, pp.Partition)
		}
	}
	for _, p := range pr.keys {
		p.waiting.Add(1)
	}
	pr.nwaiting = len(pr.keys)
	pr.parked = true
	pr.Init(pr, remaining)
	pr.m.produceWaits.TryCompleteElseWatch(pr, pr.keys...)
}

// TryComplete implements purgatory.Operation.
func (pr *Produce) TryComplete() bool {
	if pr.settle() {
		return pr.ForceComplete()
	}
	return false
}

// OnExpiration implements purgatory.Operation: the unsettled parts time out.
func (pr *Produce) OnExpiration() {
	for _, pp := range pr.parts[:pr.n] {
		if !pp.settled {
			pp.settled, pp.Err = true, ErrTimeout
		}
	}
}

// OnComplete implements purgatory.Operation.
func (pr *Produce) OnComplete() {
	for _, p := range pr.keys[:pr.nwaiting] {
		p.waiting.Add(-1)
	}
	pr.nwaiting = 0
	pr.finish()
}

func (pr *Produce) finish() {
	done := pr.done
	pr.done = nil
	if done != nil {
		done()
	}
}
