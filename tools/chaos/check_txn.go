package chaos

import (
	"fmt"
	"sort"
)

// The transactional checks, over the FTxn and FTxnPoll ops of the transactional
// workload's topic (the queue checks do not see them). Every poll of that topic is
// a read_committed consumer's, the final drain's (ProcFinalTxn) included.
//
//	aborted-read   a read_committed poll returned a record of an aborted transaction
//	               (its abort was answered): Jepsen's G1a, the read of an aborted write
//	txn-lost       a record of a committed transaction (its commit was answered) that
//	               the final drain did not return, though it read the topic to its end
//	txn-partial    the final drain returned some but not all records of one
//	               transaction, whatever its outcome: a transaction is all or nothing
//
// and on the same topic, as the queue checks do: duplicate (one value at two
// offsets), inconsistent-offsets (two values at one offset, or a committed record read
// at another offset than its produce was acknowledged at) and phantom (a record read
// that no transaction produced).

// Transactional anomaly kinds.
const (
	KAbortedRead = "aborted-read"
	KTxnLost     = "txn-lost"
	KTxnPartial  = "txn-partial"
)

// ProcFinalTxn is the final drain of the transactional topic (read_committed).
const ProcFinalTxn = "final-txn"

// TxnStats counts the transactional workload's operations.
type TxnStats struct {
	Txns      int `json:"txns"`
	Committed int `json:"committed"`
	Aborted   int `json:"aborted"`
	Unknown   int `json:"unknown"`
	Records   int `json:"records"` // records produced in transactions
	Reads     int `json:"reads"`   // records returned by read_committed polls, the final drain's included
	// Drained: the final drain read the topic to its end (else txn-lost is not judged).
	Drained bool `json:"drained"`
	// Graph: the dependency graph of the committed transactions (G0, G1c).
	Graph TxnGraphStats `json:"graph"`
}

type txnVal struct {
	op   *Op   // the FTxn that produced it
	ack  int64 // offset acknowledged, -1 when not
	pos  map[pos]*Op
	seen bool // by the final drain
}

func (c *checker) checkTxn() {
	txns, vals := c.txnProduced()
	c.txnReads(vals)
	c.txnGraph(txns, vals)
	if !c.res.Txn.Drained {
		return
	}
	c.txnDrained(txns, vals)
}

// txnProduced counts the transactions and the records they produced, and returns
// the transactions and each value's producer.
func (c *checker) txnProduced() ([]*Op, map[string]*txnVal) {
	st := &c.res.Txn
	vals := map[string]*txnVal{}
	var txns []*Op
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		switch {
		case op.F == FTxn:
			txns = append(txns, op)
			st.Txns++
			switch op.Status {
			case OK:
				st.Committed++
			case Fail:
				st.Aborted++
			default:
				st.Unknown++
			}
			for _, r := range op.Recs {
				st.Records++
				if prev, dup := vals[r.V]; dup {
					c.add(Anomaly{Kind: KDuplicate, P: -1, O: -1, Value: r.V, Proc: op.Proc, Time: op.Start,
						Detail: fmt.Sprintf("transactional value produced twice (ops %d and %d): the workload's values are not unique", prev.op.ID, op.ID), Ops: []int64{prev.op.ID, op.ID}})
					continue
				}
				vals[r.V] = &txnVal{op: op, ack: r.O, pos: map[pos]*Op{}}
			}
		case op.F == FEvent && op.Proc == ProcFinalTxn && op.V == "drained":
			st.Drained = true
		}
	}
	return txns, vals
}

// txnReads checks each record read_committed returned (by polls, the final drain
// and consume-transform-produce transactions): one value per offset, one offset per
// value, a producer for it, its acknowledged offset, no aborted transaction's.
func (c *checker) txnReads(vals map[string]*txnVal) {
	st := &c.res.Txn
	atOffset := map[pos]string{} // the value first read at each position
	atOp := map[pos]*Op{}
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		var reads []Rec
		switch op.F {
		case FTxnPoll:
			reads = op.Recs
		case FTxn:
			reads = op.Reads // a consume-transform-produce transaction's
		}
		for _, r := range reads {
			st.Reads++
			at := pos{p: r.P, o: r.O}
			if v, ok := atOffset[at]; !ok {
				atOffset[at], atOp[at] = r.V, op
			} else if v != r.V {
				c.add(Anomaly{Kind: KInconsistent, P: r.P, O: r.O, Value: r.V, Proc: op.Proc, Time: op.End,
					Detail: fmt.Sprintf("transactional topic: %q and %q read at one offset (ops %d and %d)", v, r.V, atOp[at].ID, op.ID), Ops: []int64{atOp[at].ID, op.ID}})
			}
			tv := vals[r.V]
			if tv == nil {
				c.add(Anomaly{Kind: KPhantom, P: r.P, O: r.O, Value: r.V, Proc: op.Proc, Time: op.End,
					Detail: "transactional topic: read a record no transaction produced", Ops: []int64{op.ID}})
				continue
			}
			c.txnRead(op, r, at, tv)
		}
	}
}

// txnRead checks one record read of a known producer: read at one offset only, the
// one acknowledged, and not of an aborted transaction.
func (c *checker) txnRead(op *Op, r Rec, at pos, tv *txnVal) {
	if op.Proc == ProcFinalTxn {
		tv.seen = true
	}
	if _, ok := tv.pos[at]; !ok {
		tv.pos[at] = op
		if len(tv.pos) == 2 {
			var ops []int64
			for _, o := range tv.pos {
				ops = append(ops, o.ID)
			}
			sort.Slice(ops, func(i, j int) bool { return ops[i] < ops[j] })
			c.add(Anomaly{Kind: KDuplicate, P: r.P, O: r.O, Value: r.V, Proc: op.Proc, Time: op.End,
				Detail: "transactional topic: one value read at two offsets", Ops: ops})
		}
	}
	if tv.op.Status == OK && tv.ack >= 0 && tv.ack != r.O {
		c.add(Anomaly{Kind: KInconsistent, P: r.P, O: r.O, Value: r.V, Proc: op.Proc, Time: op.End,
			Detail: fmt.Sprintf("committed record acknowledged at offset %d, read at %d", tv.ack, r.O), Ops: []int64{tv.op.ID, op.ID}})
	}
	if tv.op.Status == Fail {
		c.add(Anomaly{Kind: KAbortedRead, P: r.P, O: r.O, Value: r.V, Proc: op.Proc, Time: op.End,
			Detail: fmt.Sprintf("read_committed read a record of transaction %s/%d, whose abort was answered at %s", tv.op.Proc, tv.op.Seq, fmtT(tv.op.End)),
			Ops:    []int64{tv.op.ID, op.ID}})
	}
}

// txnDrained checks the final read_committed drain, which read the topic to its
// end: every record of a committed transaction is in it (txn-lost), and of each
// transaction all records or none (txn-partial).
func (c *checker) txnDrained(txns []*Op, vals map[string]*txnVal) {
	for _, t := range txns {
		var seen, missing []string
		for _, r := range t.Recs {
			if tv := vals[r.V]; tv != nil && tv.op == t {
				if tv.seen {
					seen = append(seen, r.V)
				} else {
					missing = append(missing, r.V)
				}
			}
		}
		if t.Status == OK {
			for _, r := range t.Recs {
				if tv := vals[r.V]; tv != nil && tv.op == t && !tv.seen {
					c.add(Anomaly{Kind: KTxnLost, P: r.P, O: r.O, Value: r.V, Proc: t.Proc, Time: t.End,
						Detail: fmt.Sprintf("transaction %s/%d committed at %s; the final read_committed drain did not return this record", t.Proc, t.Seq, fmtT(t.End)),
						Ops:    []int64{t.ID}})
				}
			}
		}
		if len(seen) > 0 && len(missing) > 0 {
			c.add(Anomaly{Kind: KTxnPartial, P: -1, O: -1, Value: missing[0], Proc: t.Proc, Time: t.End,
				Detail: fmt.Sprintf("transaction %s/%d (%s): the final drain returned %v but not %v", t.Proc, t.Seq, t.Status, seen, missing),
				Ops:    []int64{t.ID}})
		}
	}
}
