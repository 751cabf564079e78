package engine

import (
	"fmt"
	"math"
	"sort"
)

// Transactions in the cleaner, Kafka's rules (LogCleaner's doc, points 2-4,
// and CleanedTransactionMetadata):
//
//   - nothing at or after the first offset of a transaction still open is
//     cleaned (Kafka: nothing past the last stable offset);
//   - the data of an aborted transaction is removed at once, whatever its
//     keys, and never enters the offset map;
//   - a marker (control batch) stays until no batch of its transaction is
//     left and its delete horizon (set then, as for a tombstone) has
//     passed; a commit marker whose data is all superseded goes the same
//     way.
//
// Kafka learns the aborted transactions from the transaction index
// (.txnindex); the engine has none yet (transactions are not served), so a
// pass that meets transactional batches derives them by reading the batch
// headers, and each marker, from the log start to the high watermark. A
// pass over a log without transactional batches reads nothing more
// (segment.txn caches what a segment holds).

// Values of segment.txn.
const (
	txnUnknown int32 = iota // not looked at (a segment opened after a clean shutdown)
	txnNone                 // no transactional data and no marker
	txnHas                  // some
)

// abortedTxn is an aborted transaction: its producer, its first offset
// and the offset of its abort marker.
type abortedTxn struct {
	pid, first, last int64
}

// txnScan is what scanTransactions found.
type txnScan struct {
	aborted      []abortedTxn // sorted by first offset
	ongoingFirst int64        // first offset of the earliest transaction without a marker below the high watermark; MaxInt64 if none
}

// meta returns a fresh walk over the aborted transactions.
func (s *txnScan) meta() *txnMeta { return &txnMeta{aborted: s.aborted} }

// scanTransactions derives the transactions of the log below hw, if the
// cleanable segments hold any transactional batch.
func (p *pass) scanTransactions(segs []*segment, hw int64) (txnScan, error) {
	res := txnScan{ongoingFirst: math.MaxInt64}
	need := false
	for _, s := range segs[:len(segs)-1] {
		st := s.txn.Load()
		if st == txnUnknown {
			var err error
			if st, err = p.txnStateOf(s); err != nil {
				return res, err
			}
		}
		if st == txnHas {
			need = true
			break
		}
	}
	if !need {
		return res, nil
	}
	open := map[int64]int64{} // producer → first offset of its open transaction
	for _, s := range segs {
		if s.base >= hw {
			break
		}
		size := s.size.Load()
		sc := getScanner(s.log, size)
		p.t.rd.reset(s.log, size, p)
		for pos := int64(0); pos < size; {
			h, err := sc.header(pos)
			if err != nil {
				putScanner(sc)
				return res, fmt.Errorf("segment %d at %d: %w", s.base, pos, err)
			}
			if h.LastOffset() >= hw {
				break
			}
			switch {
			case h.Control():
				_, b, err := p.t.rd.batch(pos)
				if err != nil {
					putScanner(sc)
					return res, err
				}
				ct, err := p.controlType(&h, b)
				if err != nil {
					putScanner(sc)
					return res, err
				}
				if first, ok := open[h.ProducerID]; ok {
					if ct == controlAbort {
						res.aborted = append(res.aborted, abortedTxn{h.ProducerID, first, h.LastOffset()})
					}
					delete(open, h.ProducerID)
				}
			case h.Transactional():
				if _, ok := open[h.ProducerID]; !ok {
					open[h.ProducerID] = h.BaseOffset
				}
			}
			pos += h.Size()
		}
		putScanner(sc)
	}
	for _, first := range open {
		res.ongoingFirst = min(res.ongoingFirst, first)
	}
	sort.Slice(res.aborted, func(i, j int) bool { return res.aborted[i].first < res.aborted[j].first })
	return res, nil
}

// txnStateOf reads the headers of an inactive segment to learn whether it
// holds transactional batches, and caches the answer.
func (p *pass) txnStateOf(s *segment) (int32, error) {
	size := s.size.Load()
	sc := getScanner(s.log, size)
	defer putScanner(sc)
	st := txnNone
	for pos := int64(0); pos < size; {
		h, err := sc.header(pos)
		if err != nil {
			return txnUnknown, fmt.Errorf("segment %d at %d: %w", s.base, pos, err)
		}
		if h.Transactional() || h.Control() {
			st = txnHas
			break
		}
		pos += h.Size()
	}
	s.txn.Store(st)
	return st, nil
}

// txnMeta follows the transactions through one walk of the log in offset
// order (Kafka's CleanedTransactionMetadata).
type txnMeta struct {
	aborted          []abortedTxn
	next             int
	ongoingAborted   map[int64]*abortedState
	ongoingCommitted map[int64]bool
}

type abortedState struct {
	txn      abortedTxn
	observed bool // a batch of the transaction was met in this walk
}

// consumeUpTo starts the aborted transactions that begin at or before off.
func (m *txnMeta) consumeUpTo(off int64) {
	for m.next < len(m.aborted) && m.aborted[m.next].first <= off {
		a := m.aborted[m.next]
		if m.ongoingAborted == nil {
			m.ongoingAborted = map[int64]*abortedState{}
		}
		m.ongoingAborted[a.pid] = &abortedState{txn: a}
		m.next++
	}
}

// onBatch is called for each data batch; it reports whether the batch
// belongs to an aborted transaction (and goes).
func (m *txnMeta) onBatch(h *BatchHeader) bool {
	m.consumeUpTo(h.LastOffset())
	if !h.Transactional() {
		return false
	}
	if a := m.ongoingAborted[h.ProducerID]; a != nil {
		a.observed = true
		return true
	}
	if m.ongoingCommitted == nil {
		m.ongoingCommitted = map[int64]bool{}
	}
	m.ongoingCommitted[h.ProducerID] = true
	return false
}

// onControl is called for each control batch with its marker type (-1
// for an emptied one); it reports whether the marker may go (once its
// delete horizon has passed): its transaction has no batch left.
func (m *txnMeta) onControl(h *BatchHeader, ct int) bool {
	m.consumeUpTo(h.LastOffset())
	switch ct {
	case -1:
		return true
	case controlAbort:
		a := m.ongoingAborted[h.ProducerID]
		delete(m.ongoingAborted, h.ProducerID)
		return a == nil || !a.observed
	case controlCommit:
		had := m.ongoingCommitted[h.ProducerID]
		delete(m.ongoingCommitted, h.ProducerID)
		return !had
	}
	return false
}
