package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/samsa-broker/samsa/tools/chaos"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The transactional workload, on a topic of its own (Config.TxnTopic): producers
// t0..tN, each with its own transactional id, run one transaction after another,
// each of one to four records ("<proc>-<txn>-<i>") spread over the partitions, and
// commit three in four, abort the rest; read_committed consumers r0..rN read every
// partition from its start. Every transaction is one chaos.FTxn op with its records
// and outcome; every read_committed poll one chaos.FTxnPoll; the final drain of the
// topic is chaos.ProcFinalTxn. The checker (chaos.checkTxn) asks: nothing of an
// aborted transaction read, everything of a committed one read by the final drain,
// every transaction read all or nothing.
//
// Copiers x0..xN (Config.TxnCopiers) run consume-transform-produce transactions on the
// same topic: each polls it with a read_committed consumer of its own (every
// partition from the start, never rewound), then in one transaction writes one or
// two records ("<proc>-<txn>-<i>") and commits. The FTxn op holds what the poll
// returned (Reads) beside what it wrote: the wr edges of the checker's dependency
// graph (chaos.txnGraph, G0 and G1c). A poll that returns nothing makes no
// transaction.
//
// A producer whose transaction ends in an error it cannot classify (the outcome is
// unknown) closes its client and starts a new one with the same transactional id:
// the new producer's InitProducerId fences the old epoch and settles the open
// transaction, as Kafka's clients are told to do.

// txnTimeout is the producers' transaction.timeout.ms: a transaction left open by a
// fault is aborted by its coordinator after it, well within the quiet period.
const txnTimeout = 10 * time.Second

type txnProducer struct {
	w    *Workload
	proc string
	id   string
	cl   *kgo.Client
	rng  *rand.Rand
	seq  int64
	// A copier's read_committed consumer (nil for a producer) and its rate.
	reader *kgo.Client
	rate   float64
}

func (w *Workload) startTxn(pctx, cctx context.Context) error {
	for i := range w.cfg.TxnProducers {
		p := &txnProducer{w: w, proc: fmt.Sprintf("t%d", i), id: fmt.Sprintf("chaos-txn-%d", i),
			rng: rand.New(rand.NewPCG(uint64(w.cfg.Seed), uint64(1000+i)))}
		w.prodWG.Add(1)
		go func() { defer w.prodWG.Done(); p.run(pctx) }()
	}
	for i := range w.cfg.TxnCopiers {
		proc := fmt.Sprintf("x%d", i)
		reader, err := w.txnReader(proc)
		if err != nil {
			return err
		}
		rate := w.cfg.TxnCopyRate
		if rate <= 0 {
			rate = 4
		}
		p := &txnProducer{w: w, proc: proc, id: fmt.Sprintf("chaos-txn-copier-%d", i), reader: reader, rate: rate,
			rng: rand.New(rand.NewPCG(uint64(w.cfg.Seed), uint64(2000+i)))}
		w.prodWG.Add(1)
		go func() { defer w.prodWG.Done(); defer reader.Close(); p.run(pctx) }()
	}
	for i := range w.cfg.TxnConsumers {
		proc := fmt.Sprintf("r%d", i)
		cl, err := w.txnReader(proc)
		if err != nil {
			return err
		}
		w.consWG.Add(1)
		go func() {
			defer w.consWG.Done()
			w.lifeOp(proc, "", chaos.FOpen, nil)
			defer func() { cl.Close(); w.lifeOp(proc, "", chaos.FClose, nil) }()
			for cctx.Err() == nil {
				w.txnPoll(cctx, cl, proc)
			}
		}()
	}
	return nil
}

func (p *txnProducer) client() (*kgo.Client, error) {
	if p.cl != nil {
		return p.cl, nil
	}
	w := p.w
	cl, err := kgo.NewClient(append(w.common(p.proc),
		kgo.DefaultProduceTopic(w.cfg.TxnTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID(p.id),
		kgo.TransactionTimeout(txnTimeout),
		kgo.ProducerLinger(time.Millisecond),
		kgo.UnknownTopicRetries(-1),
		kgo.ProduceRequestTimeout(10*time.Second),
	)...)
	if err != nil {
		return nil, fmt.Errorf("workload: transactional producer: %w", err)
	}
	p.cl = cl
	return cl, nil
}

// reset drops the client after an outcome it cannot settle; the next one fences it.
func (p *txnProducer) reset() {
	if p.cl != nil {
		p.cl.Close()
		p.cl = nil
	}
}

func (p *txnProducer) run(ctx context.Context) {
	w := p.w
	w.lifeOp(p.proc, "", chaos.FOpen, nil)
	defer func() {
		p.reset()
		w.lifeOp(p.proc, "", chaos.FClose, nil)
	}()
	every := time.Duration(float64(time.Second) / p.rate)
	if p.reader == nil {
		rate := w.cfg.TxnRate
		if rate <= 0 {
			rate = 20
		}
		every = time.Duration(float64(time.Second) * float64(w.cfg.TxnProducers) / rate)
	}
	tick := time.NewTicker(max(time.Millisecond, every))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		p.once()
	}
}

// once runs one transaction and records it. Stopping the loop does not cut a
// transaction short: it runs to its end under its own deadline.
func (p *txnProducer) once() {
	w := p.w
	n := 1 + p.rng.IntN(4)
	commit := p.rng.IntN(4) != 0
	op := chaos.Op{Proc: p.proc, F: chaos.FTxn}
	op.Start, op.Wall = w.cfg.History.Now()
	if p.reader != nil {
		// Consume, then transform and produce: the records written come after the
		// poll, and the transaction commits unless a produce fails.
		op.Reads = p.poll()
		if len(op.Reads) == 0 {
			return
		}
		n, commit = 1+p.rng.IntN(2), true
	}
	p.seq++
	op.Seq = p.seq
	recs := make([]*kgo.Record, n)
	for i := range recs {
		part := int32(p.rng.IntN(int(w.cfg.TxnPartitions)))
		recs[i] = &kgo.Record{Partition: part, Value: fmt.Appendf(nil, "%s-%d-%d", p.proc, p.seq, i)}
		op.Recs = append(op.Recs, chaos.Rec{P: part, O: -1, V: string(recs[i].Value)})
	}
	defer func() {
		op.End, _ = w.cfg.History.Now()
		w.append(op)
		w.mu.Lock()
		w.mu.txns[op.Status]++
		if p.reader != nil && op.Status == chaos.OK {
			w.mu.copied++
		}
		w.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*txnTimeout)
	defer cancel()
	cl, err := p.client()
	if err != nil {
		op.Status, op.Err = chaos.Fail, err.Error()
		return
	}
	if err := cl.BeginTransaction(); err != nil {
		// Nothing was sent in this transaction.
		op.Status, op.Err = chaos.Fail, "begin: "+err.Error()
		p.reset()
		return
	}
	var errs []string
	// ProduceSync's results come in the order the records completed, not sent.
	index := make(map[*kgo.Record]int, len(recs))
	for i, r := range recs {
		index[r] = i
	}
	for _, r := range cl.ProduceSync(ctx, recs...) {
		if r.Err != nil {
			errs = append(errs, r.Err.Error())
			continue
		}
		op.Recs[index[r.Record]].O = r.Record.Offset
	}
	if len(errs) > 0 {
		commit = false
		op.Err = "produce: " + strings.Join(errs, "; ")
	}
	end := kgo.TryAbort
	if commit {
		end = kgo.TryCommit
	}
	err = cl.EndTransaction(ctx, end)
	switch {
	case err == nil && commit:
		op.Status = chaos.OK
	case err == nil:
		op.Status = chaos.Fail
	default:
		// The EndTxn may or may not have reached the coordinator (a commit may be
		// prepared): unknown. A fresh producer settles it.
		op.Status = chaos.Info
		op.Err = strings.TrimPrefix(op.Err+"; end: "+err.Error(), "; ")
		p.reset()
	}
}

// poll is a copier's read: what its read_committed consumer returns within half a
// second (at most 200 records; the rest stay buffered for the next transaction).
// Errors are the client's to retry: a poll that returns none is no transaction.
func (p *txnProducer) poll() []chaos.Rec {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var out []chaos.Rec
	p.reader.PollRecords(ctx, 200).EachRecord(func(r *kgo.Record) {
		if r.Topic == p.w.cfg.TxnTopic {
			out = append(out, chaos.Rec{P: r.Partition, O: r.Offset, V: string(r.Value)})
		}
	})
	return out
}

// txnReader is a read_committed consumer of every partition of the topic, from the
// start.
func (w *Workload) txnReader(proc string) (*kgo.Client, error) {
	parts := map[int32]kgo.Offset{}
	for p := range w.cfg.TxnPartitions {
		parts[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(append(w.common(proc),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.cfg.TxnTopic: parts}))...)
	if err != nil {
		return nil, fmt.Errorf("workload: read_committed consumer: %w", err)
	}
	return cl, nil
}

// txnPoll polls for up to a second, records what came back and says how many
// records it was.
func (w *Workload) txnPoll(ctx context.Context, cl *kgo.Client, proc string) int {
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	op := chaos.Op{Proc: proc, F: chaos.FTxnPoll, Status: chaos.OK}
	op.Start, op.Wall = w.cfg.History.Now()
	fs := cl.PollRecords(pctx, 2000)
	op.End, _ = w.cfg.History.Now()
	var errs []string
	for _, e := range fs.Errors() {
		if errors.Is(e.Err, context.DeadlineExceeded) || errors.Is(e.Err, context.Canceled) || errors.Is(e.Err, kgo.ErrClientClosed) {
			continue
		}
		errs = append(errs, fmt.Sprintf("p%d: %v", e.Partition, e.Err))
	}
	fs.EachRecord(func(r *kgo.Record) {
		if r.Topic == w.cfg.TxnTopic {
			op.Recs = append(op.Recs, chaos.Rec{P: r.Partition, O: r.Offset, V: string(r.Value)})
		}
	})
	if len(errs) > 0 {
		op.Err = strings.Join(errs, "; ")
	}
	if len(op.Recs) > 0 || op.Err != "" {
		w.append(op)
		w.mu.Lock()
		w.mu.txnRead += int64(len(op.Recs))
		w.mu.Unlock()
	}
	return len(op.Recs)
}

// FinalTxnDrain reads the transactional topic with read_committed from its start,
// as chaos.ProcFinalTxn, after the quiet period (stable is every partition's last
// stable offset then, recorded for the report). A read_committed reader skips
// aborted records and markers without returning them, so it cannot tell "read to
// the end" from the offsets it sees; it stops after three polls in a row (three
// fetch waits) bring nothing, or when ctx ends.
func (w *Workload) FinalTxnDrain(ctx context.Context, stable map[int32]int64) error {
	if w.cfg.TxnTopic == "" {
		return nil
	}
	now, wall := w.cfg.History.Now()
	w.append(chaos.Op{Proc: chaos.ProcFinalTxn, F: chaos.FEvent, Status: chaos.OK, Start: now, End: now, Wall: wall, V: "end-offsets", Offs: stable})
	cl, err := w.txnReader(chaos.ProcFinalTxn)
	if err != nil {
		return err
	}
	defer cl.Close()
	w.lifeOp(chaos.ProcFinalTxn, "", chaos.FOpen, nil)
	defer w.lifeOp(chaos.ProcFinalTxn, "", chaos.FClose, nil)
	for empty := 0; empty < 3; {
		if ctx.Err() != nil {
			return fmt.Errorf("workload: final read_committed read cut short: %w", ctx.Err())
		}
		if w.txnPoll(ctx, cl, chaos.ProcFinalTxn) == 0 {
			empty++
		} else {
			empty = 0
		}
	}
	now, wall = w.cfg.History.Now()
	w.append(chaos.Op{Proc: chaos.ProcFinalTxn, F: chaos.FEvent, Status: chaos.OK, Start: now, End: now, Wall: wall, V: "drained"})
	return nil
}
