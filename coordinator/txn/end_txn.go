package txn

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EndTxn serves EndTxn (key 26): PrepareCommit or PrepareAbort is logged,
// the client answered, and the markers written to every partition of the
// transaction (MarkerChannel), then CompleteCommit or CompleteAbort
// logged. Kafka's handleEndTransaction, with KIP-890 part 2 for clients
// that send v5+ when the transaction.version is 2 (Config.TransactionVersion,
// SetTransactionVersion): the epoch is bumped
// at every EndTxn (the answer carries the producer id and epoch of the
// next transaction, a new producer id once the epoch is exhausted), the
// markers carry the bumped epoch, a retry with the epoch before the bump
// is recognised, and an abort with no transaction (Empty) succeeds and
// bumps the epoch.
//
// Errors: INVALID_REQUEST, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// COORDINATOR_NOT_AVAILABLE, INVALID_PRODUCER_ID_MAPPING (unknown id or
// another producer id), PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2),
// CONCURRENT_TRANSACTIONS (a transition or the markers of the last end in
// flight), INVALID_TXN_STATE (commit after abort, end with no
// transaction). A retry of a completed end answers NONE.
//
// While the end of the producer's previous transaction is in flight (its
// markers being written, its completion logged), the request waits for it,
// up to addWaitMax, as AddPartitionsToTxn does, and is then served as if it
// had just arrived (CONCURRENT_TRANSACTIONS if the end is still not done).
// Under version 2 this comes before the epoch check (Kafka's KAFKA-18464): an
// abort at the bumped epoch, sent right after a commit was answered (a
// client that produced nothing in its next transaction, or is revoked in a
// rebalance), is the next transaction's end, not a fenced producer.
func (c *Coordinator) EndTxn(req *kmsg.EndTxnRequest, done func(*kmsg.EndTxnResponse)) {
	c.endTxn(req, c.nowMs()+addWaitMax.Milliseconds(), done)
}

// endTxn serves an EndTxn that may wait (waitTurnLocked) until deadline
// (Unix ms).
func (c *Coordinator) endTxn(req *kmsg.EndTxnRequest, deadline int64, done func(*kmsg.EndTxnResponse)) {
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	reply := func(code int16, pid int64, epoch int16) {
		if code == kerr.ProducerFenced.Code && req.Version < 2 {
			code = kerr.InvalidProducerEpoch.Code
		}
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, pid, epoch
		done(resp)
	}
	if req.TransactionalID == "" {
		reply(kerr.InvalidRequest.Code, -1, -1)
		return
	}
	tv := int16(0)
	if c.TransactionVersion() >= 2 && req.Version >= 5 {
		tv = 2
	}
	fresh := int64(-1)
	for attempt := 0; attempt < 3; attempt++ {
		var needPid bool
		c.withLock(func(fx *effects) {
			part, m, code := c.lookupLocked(req.TransactionalID)
			switch {
			case code != 0:
				fx.add(func() { reply(code, -1, -1) })
			case m == nil:
				fx.add(func() { reply(kerr.InvalidProducerIDMapping.Code, -1, -1) })
			default:
				wait := func() bool { return c.waitTurnLocked(m, deadline, func() { c.endTxn(req, deadline, done) }) }
				needPid = c.endTxnLocked(fx, part, m, req.ProducerID, req.ProducerEpoch, req.Commit, true, tv, &fresh, wait, reply)
			}
		})
		if !needPid {
			return
		}
		pid, err := c.pids.NextProducerID()
		if err != nil {
			c.logger.Warn("no producer id for an exhausted epoch", "transactional_id", req.TransactionalID, "err", err)
			reply(kerr.CoordinatorNotAvailable.Code, -1, -1)
			return
		}
		fresh = pid
	}
	reply(kerr.ConcurrentTransactions.Code, -1, -1)
}

// endTxnLocked ends m's transaction (Kafka's endTransaction): from a
// client's EndTxn, or, not from a client, a fence's abort (m pending
// PrepareEpochFence, epoch the fenced one). Under transaction version 2
// (tv, the request's) it follows Kafka's rules for it: an EndTxn bumps
// the epoch, a retry carries the epoch before the bump, and an abort with
// no transaction (Empty, or after a completed one) is an empty abort that
// bumps the epoch. cb gets the answer (with the producer id and epoch for
// the next transaction) outside the lock. While a transition of m or its
// previous end is in flight, wait (nil: none) is called to run the request
// again once that is over; when it does (true), cb gets nothing now, else
// the answer is CONCURRENT_TRANSACTIONS. It reports needPid when it needs a
// fresh producer id it was not given.
func (c *Coordinator) endTxnLocked(fx *effects, part *partition, m *txnMeta, pid int64, epoch int16, commit, fromClient bool,
	tv int16, fresh *int64, wait func() bool, cb func(code int16, pid int64, epoch int16)) (needPid bool) {
	answer := func(code int16, pid int64, epoch int16) { fx.add(func() { cb(code, pid, epoch) }) }
	r := newEndRequest(m, pid, epoch, commit, fromClient, tv)
	act, code := r.checkProducer(m)
	if act == endLog {
		act, code = r.checkState(m)
	}
	switch act {
	case endReply:
		if code == 0 {
			answer(0, m.producerID, m.epoch) // a retry of an end that completed
		} else {
			answer(code, -1, -1)
		}
		return false
	case endWait:
		if wait == nil || !wait() {
			answer(kerr.ConcurrentTransactions.Code, -1, -1)
		}
		return false
	case endInvalid:
		c.logger.Debug("EndTxn in a state that does not take it", "transactional_id", m.id, "state", m.state, "commit", commit)
		answer(kerr.InvalidTxnState.Code, -1, -1)
		return false
	case endBroken:
		c.logger.Error("transactional id in a state it is never left in", "transactional_id", m.id, "state", m.state)
		answer(kerr.UnknownServerError.Code, -1, -1)
		return false
	}
	return c.logEndLocked(fx, part, m, r, tv, fresh, cb)
}

// endRequest is an EndTxn, or a fence's abort, as endTxnLocked judges it
// against the transactional id's metadata m.
type endRequest struct {
	pid        int64
	epoch      int16
	commit     bool
	fromClient bool
	fencing    bool // a fence's abort: m pending PrepareEpochFence
	v2         bool // transaction version 2
	// A retry of an end whose epoch bump overflowed to a new producer id.
	retryOnOverflow bool
	// A retry of an end that bumped the epoch (the client has the old one).
	retryOnBump bool
}

func newEndRequest(m *txnMeta, pid int64, epoch int16, commit, fromClient bool, tv int16) endRequest {
	r := endRequest{pid: pid, epoch: epoch, commit: commit, fromClient: fromClient,
		fencing: m.pending == PrepareEpochFence, v2: tv >= 2}
	r.retryOnOverflow = r.v2 && !r.fencing && m.prevProducerID == pid && epoch == math.MaxInt16-1 && m.epoch == 0
	r.retryOnBump = r.v2 && !r.fencing && m.epoch == epoch+1
	return r
}

func (r endRequest) isRetry() bool { return r.retryOnBump || r.retryOnOverflow }

// endAction is what endTxnLocked does with a request.
type endAction uint8

const (
	endLog     endAction = iota // log the end
	endReply                    // answer the code now (NONE: with m's producer id and epoch)
	endWait                     // a transition is in flight: wait for it, else CONCURRENT_TRANSACTIONS
	endInvalid                  // INVALID_TXN_STATE
	endBroken                   // m is in a state it is never left in: UNKNOWN_SERVER_ERROR
)

// checkProducer checks the request's producer id and epoch against m, and
// whether a transition of m is in flight.
func (r endRequest) checkProducer(m *txnMeta) (endAction, int16) {
	var validEpoch bool
	switch {
	case !r.v2 || r.fencing:
		validEpoch = (!r.fromClient || r.epoch == m.epoch) && r.epoch >= m.epoch
	case m.state == PrepareCommit, m.state == PrepareAbort:
		validEpoch = r.retryOnBump
	case m.state == CompleteCommit, m.state == CompleteAbort:
		validEpoch = r.isRetry() || r.epoch == m.epoch
	default:
		validEpoch = r.epoch == m.epoch
	}
	// While a completion that moves to a new producer id is logged, the
	// client may already use that id: it waits.
	movingTo := m.markers != nil && m.markers.complete.producerID == r.pid && r.pid != m.producerID
	ending := m.pending != noState && !r.fencing
	switch {
	case ending && movingTo:
		return endWait, 0
	case m.producerID != r.pid && !r.retryOnOverflow:
		return endReply, kerr.InvalidProducerIDMapping.Code
	case ending && r.v2:
		// Before the epoch check under version 2: the client's next end
		// carries the bumped epoch while the last end is in flight.
		return endWait, 0
	case !validEpoch:
		return endReply, kerr.ProducerFenced.Code
	case ending:
		return endWait, 0
	}
	return endLog, 0
}

// checkState checks that m's state takes the request: a commit or an abort of
// an ongoing transaction, a retry of a completed end (answered NONE), or under
// version 2 an abort with no transaction (an empty abort, which bumps the epoch).
func (r endRequest) checkState(m *txnMeta) (endAction, int16) {
	commit, isRetry, v2 := r.commit, r.isRetry(), r.v2
	switch m.state {
	case Ongoing:
	case Empty:
		// Transaction version 2: an abort with nothing to abort bumps the
		// epoch all the same (the client aborts when it cannot tell).
		if commit || !v2 || r.fencing {
			return endInvalid, 0
		}
	case CompleteCommit:
		switch {
		case commit && (isRetry || !v2):
			return endReply, 0
		case commit, isRetry || !v2:
			return endInvalid, 0
		}
		// Version 2: an empty abort.
	case CompleteAbort:
		switch {
		case commit:
			return endInvalid, 0
		case isRetry || !v2:
			return endReply, 0
		}
		// Version 2: an empty abort.
	case PrepareCommit:
		if commit {
			return endReply, kerr.ConcurrentTransactions.Code
		}
		return endInvalid, 0
	case PrepareAbort:
		if !commit {
			return endReply, kerr.ConcurrentTransactions.Code
		}
		return endInvalid, 0
	default:
		return endBroken, 0
	}
	return endLog, 0
}

// logEndLocked logs PrepareCommit or PrepareAbort for m (with a fresh producer
// id under version 2 once the epoch is exhausted: needPid when it has none),
// answers once it is written and starts the markers.
func (c *Coordinator) logEndLocked(fx *effects, part *partition, m *txnMeta, r endRequest, tv int16, fresh *int64,
	cb func(code int16, pid int64, epoch int16)) (needPid bool) {
	state := PrepareAbort
	if r.commit {
		state = PrepareCommit
	}
	nextPid := int64(noProducer)
	if r.v2 && !r.fencing && epochExhausted(m.epoch) {
		if *fresh < 0 {
			return true
		}
		nextPid, *fresh = *fresh, -1
	}
	epochFence := false
	if state == PrepareAbort && r.fencing {
		// The fence's bump becomes the epoch the abort is logged with.
		epochFence = true
		m.pending = noState
		m.epoch, m.lastEpoch = r.epoch, noProducer
	}
	t, err := m.prepareEnd(state, tv, nextPid, c.nowMs())
	if err != nil {
		c.logger.Error("EndTxn transition", "transactional_id", m.id, "err", err)
		fx.add(func() { cb(kerr.UnknownServerError.Code, -1, -1) })
		return false
	}
	c.appendLocked(fx, part, m, t, nil, func(fx *effects, code int16) {
		if code != 0 {
			if epochFence {
				if _, cur := c.currentLocked(part.id, part.epoch, m); cur {
					// The bumped epoch may or may not be in the log: the next
					// fence does not bump again.
					m.failedFence = true
				}
			}
			fx.add(func() { cb(code, -1, -1) })
			return
		}
		ct, err := m.prepareComplete(c.nowMs())
		if err != nil {
			c.logger.Error("EndTxn completion", "transactional_id", m.id, "err", err)
			fx.add(func() { cb(kerr.UnknownServerError.Code, -1, -1) })
			return
		}
		fx.add(func() { cb(0, ct.producerID, ct.epoch) })
		c.startMarkersLocked(fx, part, m, r.commit, ct)
	})
	return false
}
