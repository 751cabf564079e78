package txn

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
)

// abortTick aborts the transactions past their transaction.timeout.ms
// (Kafka's abortTimedOutTransactions): each is fenced (its epoch bumped,
// so that the producer's late writes are refused) and aborted, as a
// timeout of its own would. It runs every Config.AbortInterval.
func (c *Coordinator) abortTick() {
	c.withLock(func(fx *effects) {
		if c.mu.closed {
			return
		}
		c.abortTimedOutLocked(fx)
		c.mu.abortTimer = c.clock.AfterFunc(c.cfg.AbortInterval, c.abortTick)
	})
}

func (c *Coordinator) abortTimedOutLocked(fx *effects) {
	now := c.nowMs()
	for _, part := range c.sortedPartsLocked() {
		for _, m := range sortedTxns(part) {
			if m.state != Ongoing || m.pending != noState || m.startMs+int64(m.timeoutMs) >= now {
				continue
			}
			t, err := m.prepareFence()
			if err != nil {
				c.logger.Error("fencing a timed-out transaction", "transactional_id", m.id, "err", err)
				continue
			}
			id := m.id
			c.logger.Info("aborting a timed-out transaction", "transactional_id", id, "producer_id", m.producerID,
				"timeout_ms", m.timeoutMs)
			fresh := int64(-1)
			c.endTxnLocked(fx, part, m, t.producerID, t.epoch, false, false, c.TransactionVersion(), &fresh, nil,
				func(code int16, _ int64, _ int16) {
					if code != 0 {
						c.logger.Info("abort of a timed-out transaction not done", "transactional_id", id, "error", kerr.ErrorForCode(code))
					}
				})
		}
	}
}

// expireTick expires the transactional ids idle past
// transactional.id.expiration.ms (Kafka's removeExpiredTransactionalIds):
// a tombstone per id, an append per partition (at most
// Config.MaxTombstonesPerAppend each), the ids dropped once it is logged.
// It runs every Config.ExpirationInterval.
func (c *Coordinator) expireTick() {
	c.withLock(func(fx *effects) {
		if c.mu.closed {
			return
		}
		c.expireLocked(fx)
		c.mu.expireTimer = c.clock.AfterFunc(c.cfg.ExpirationInterval, c.expireTick)
	})
}

func (c *Coordinator) expireLocked(fx *effects) {
	cutoff := c.nowMs() - c.cfg.IDExpiration.Milliseconds()
	for _, part := range c.sortedPartsLocked() {
		var batch []*txnMeta
		flush := func() {
			if len(batch) > 0 {
				c.appendTombstonesLocked(fx, part, batch)
				batch = nil
			}
		}
		for _, m := range sortedTxns(part) {
			if !m.state.expirable() || m.pending != noState || m.updateMs > cutoff {
				continue
			}
			if _, err := m.prepareDead(); err != nil {
				continue
			}
			batch = append(batch, m)
			if len(batch) >= c.cfg.MaxTombstonesPerAppend {
				flush()
			}
		}
		flush()
	}
}

// appendTombstonesLocked logs the tombstones of ms (each pending Dead) and
// drops them once logged; a failure resets their pending state.
func (c *Coordinator) appendTombstonesLocked(fx *effects, part *partition, ms []*txnMeta) {
	now := c.nowMs()
	recs := make([]Record, len(ms))
	for i, m := range ms {
		recs[i] = Record{Key: AppendKey(nil, m.id), Timestamp: now}
	}
	p, epoch := part.id, part.epoch
	c.logAppend(fx, p, recs, func(err error) {
		c.withLock(func(fx *effects) {
			for _, m := range ms {
				part, cur := c.currentLocked(p, epoch, m)
				if !cur || m.pending != Dead {
					continue
				}
				if err != nil {
					m.pending = noState
					continue
				}
				delete(part.txns, m.id)
			}
			if err != nil {
				c.logger.Info("expired transactional ids not removed", "partition", p, "count", len(ms), "err", err)
			} else {
				c.logger.Info("expired transactional ids removed", "partition", p, "count", len(ms))
			}
		})
	})
}

// sortedPartsLocked returns the loaded partitions by id (a deterministic
// order for the scans).
func (c *Coordinator) sortedPartsLocked() []*partition {
	out := make([]*partition, 0, len(c.mu.parts))
	for _, part := range c.mu.parts {
		if !part.loading {
			out = append(out, part)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func sortedTxns(part *partition) []*txnMeta {
	out := make([]*txnMeta, 0, len(part.txns))
	for _, m := range part.txns {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}
