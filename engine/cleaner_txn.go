package engine

import "sort"

// Transactions in the cleaner, Kafka's rules (LogCleaner's doc, points 2-4,
// and CleanedTransactionMetadata):
//
//   - nothing at or after the last stable offset is cleaned (the cleanable
//     range ends there);
//   - the data of an aborted transaction is removed at once, whatever its
//     keys, and never enters the offset map;
//   - a marker (control batch) stays until no batch of its transaction is
//     left and its delete horizon (set then, as for a tombstone) has
//     passed; a commit marker whose data is all superseded goes the same
//     way. An abort marker kept because data of its transaction was met
//     in the pass keeps its entry in the cleaned segment's .txnindex; one
//     whose data is gone loses it (consumers have nothing to drop).
//
// The aborted transactions come from the transaction indexes of every
// segment of the log (Kafka's collectAbortedTransactions over the range).

// abortedOf returns the aborted transactions of the pinned segments, by
// first offset.
func abortedOf(segs []*segment) []AbortedTxn {
	var out []AbortedTxn
	for _, s := range segs {
		out = append(out, s.tix.all()...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FirstOffset < out[j].FirstOffset })
	return out
}

// txnMeta follows the transactions through one walk of the log in offset
// order (Kafka's CleanedTransactionMetadata).
type txnMeta struct {
	aborted          []AbortedTxn
	next             int
	ongoingAborted   map[int64]*abortedState
	ongoingCommitted map[int64]bool
}

type abortedState struct {
	txn      AbortedTxn
	observed bool // a batch of the transaction was met in this walk
}

// consumeUpTo starts the aborted transactions that begin at or before off.
func (m *txnMeta) consumeUpTo(off int64) {
	for m.next < len(m.aborted) && m.aborted[m.next].FirstOffset <= off {
		a := m.aborted[m.next]
		if m.ongoingAborted == nil {
			m.ongoingAborted = map[int64]*abortedState{}
		}
		m.ongoingAborted[a.ProducerID] = &abortedState{txn: a}
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
// delete horizon has passed): its transaction has no batch left. kept is
// the index entry of an abort marker that must stay for the data of its
// transaction met in this walk.
func (m *txnMeta) onControl(h *BatchHeader, ct int) (canDiscard bool, kept *AbortedTxn) {
	m.consumeUpTo(h.LastOffset())
	switch ct {
	case -1:
		return true, nil
	case controlAbort:
		a := m.ongoingAborted[h.ProducerID]
		delete(m.ongoingAborted, h.ProducerID)
		if a != nil && a.observed {
			return false, &a.txn
		}
		return true, nil
	case controlCommit:
		had := m.ongoingCommitted[h.ProducerID]
		delete(m.ongoingCommitted, h.ProducerID)
		return !had, nil
	}
	return false, nil
}
