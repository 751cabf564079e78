package txn

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerID serves InitProducerId (key 22) for a transactional id
// (req.TransactionalID non-nil; the handler answers idempotent producers
// itself). Kafka's handleInitProducerId:
//
//   - a new id gets a producer id from ProducerIDs and epoch 0;
//   - an id in Empty, CompleteCommit or CompleteAbort gets its epoch bumped
//     (fencing the previous producer), or a new producer id once the epoch
//     is exhausted; v3+ (KIP-360) names the producer id and epoch it had:
//     the current epoch bumps, the last epoch (a retry) answers the
//     current one, any other epoch or producer id is PRODUCER_FENCED;
//   - an id with a transaction Ongoing is fenced: its epoch bumped and its
//     transaction aborted (PrepareEpochFence, then the abort), and the
//     request answered CONCURRENT_TRANSACTIONS, so that the client retries
//     and gets the epoch after the abort;
//   - PrepareCommit/PrepareAbort, or any transition in flight:
//     CONCURRENT_TRANSACTIONS.
//
// Errors: INVALID_REQUEST (an empty id, a producer id without an epoch),
// INVALID_TRANSACTION_TIMEOUT (not in (0, transaction.max.timeout.ms]),
// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE
// (no producer id, the log unavailable), PRODUCER_FENCED (INVALID_PRODUCER_EPOCH
// before v4, as Kafka).
func (c *Coordinator) InitProducerID(req *kmsg.InitProducerIDRequest, done func(*kmsg.InitProducerIDResponse)) {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	reply := func(code int16, pid int64, epoch int16) {
		if code == kerr.ProducerFenced.Code && req.Version < 4 {
			code = kerr.InvalidProducerEpoch.Code
		}
		if code != 0 {
			pid, epoch = -1, -1
		}
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, pid, epoch
		done(resp)
	}
	if req.TransactionalID == nil || *req.TransactionalID == "" {
		reply(kerr.InvalidRequest.Code, -1, -1)
		return
	}
	id := *req.TransactionalID
	timeout := req.TransactionTimeoutMillis
	if timeout <= 0 || time.Duration(timeout)*time.Millisecond > c.cfg.MaxTimeout {
		reply(kerr.InvalidTransactionTimeout.Code, -1, -1)
		return
	}
	var expected *producerEpoch
	if req.Version >= 3 && (req.ProducerID >= 0 || req.ProducerEpoch >= 0) {
		if req.ProducerID < 0 || req.ProducerEpoch < 0 {
			reply(kerr.InvalidRequest.Code, -1, -1)
			return
		}
		expected = &producerEpoch{req.ProducerID, req.ProducerEpoch}
	}
	fresh := int64(-1)
	for attempt := 0; attempt < 3; attempt++ {
		var needPid bool
		c.withLock(func(fx *effects) { needPid = c.initLocked(fx, id, timeout, expected, &fresh, reply) })
		if !needPid {
			return
		}
		pid, err := c.pids.NextProducerID()
		if err != nil {
			c.logger.Warn("no producer id for a transactional id", "transactional_id", id, "err", err)
			reply(kerr.CoordinatorNotAvailable.Code, -1, -1)
			return
		}
		fresh = pid
	}
	reply(kerr.ConcurrentTransactions.Code, -1, -1)
}

type producerEpoch struct {
	pid   int64
	epoch int16
}

// initLocked is InitProducerId under the lock. It reports needPid when it
// needs a fresh producer id it was not given (*fresh < 0); it consumes
// *fresh when it uses it.
func (c *Coordinator) initLocked(fx *effects, id string, timeout int32, expected *producerEpoch, fresh *int64,
	reply func(int16, int64, int16)) (needPid bool) {
	answer := func(code int16, pid int64, epoch int16) { fx.add(func() { reply(code, pid, epoch) }) }
	part, m, code := c.lookupLocked(id)
	if code != 0 {
		answer(code, -1, -1)
		return false
	}
	now := c.nowMs()
	if m == nil {
		if *fresh < 0 {
			return true
		}
		m = newMeta(id, *fresh, timeout, now)
		*fresh = -1
		part.txns[id] = m
	}
	if m.pending != noState {
		answer(kerr.ConcurrentTransactions.Code, -1, -1)
		return false
	}
	if expected != nil && !(m.epoch == noProducer || expected.pid == m.producerID ||
		expected.pid == m.prevProducerID && epochExhausted(expected.epoch)) {
		answer(kerr.ProducerFenced.Code, -1, -1)
		return false
	}
	switch m.state {
	case PrepareAbort, PrepareCommit:
		answer(kerr.ConcurrentTransactions.Code, -1, -1)
	case CompleteAbort, CompleteCommit, Empty:
		var t transit
		var err error
		if epochExhausted(m.epoch) && (expected == nil || expected.epoch == m.epoch) {
			if *fresh < 0 {
				return true
			}
			t, err = m.prepareRotation(*fresh, timeout, now, expected != nil)
			*fresh = -1
		} else {
			var exp *int16
			if expected != nil {
				exp = &expected.epoch
			}
			var fenced bool
			if t, fenced, err = m.prepareBump(timeout, exp, now); fenced {
				answer(kerr.ProducerFenced.Code, -1, -1)
				return false
			}
		}
		if err != nil {
			c.logger.Error("InitProducerId transition", "transactional_id", id, "err", err)
			answer(kerr.UnknownServerError.Code, -1, -1)
			return false
		}
		c.appendLocked(fx, part, m, t, nil, func(fx *effects, code int16) {
			if code == 0 {
				c.logger.Info("initialized transactional id", "transactional_id", id, "producer_id", t.producerID, "epoch", t.epoch,
					"partition", part.id)
			}
			fx.add(func() { reply(code, t.producerID, t.epoch) })
		})
	case Ongoing:
		// Fence the producer and abort its transaction; the client retries
		// once the abort is done and gets the epoch after it.
		t, err := m.prepareFence()
		if err != nil {
			c.logger.Error("InitProducerId fence", "transactional_id", id, "err", err)
			answer(kerr.UnknownServerError.Code, -1, -1)
			return false
		}
		c.endTxnLocked(fx, part, m, t.producerID, t.epoch, false, false, c.TransactionVersion(), fresh, nil, func(code int16, _ int64, _ int16) {
			if code == 0 {
				code = kerr.ConcurrentTransactions.Code
			}
			reply(code, -1, -1)
		})
	default:
		c.logger.Error("transactional id in a state it is never left in", "transactional_id", id, "state", m.state)
		answer(kerr.UnknownServerError.Code, -1, -1)
	}
	return false
}
