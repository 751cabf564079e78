package audit

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// txnTimeout is the transactional producer's transaction.timeout.ms: a transaction
// left open by an audit that was killed is aborted by its coordinator after it, so
// read_committed readers of the canary topic are held up no longer.
const txnTimeout = 10 * time.Second

// opTimeout bounds one transaction's produce and EndTxn.
const opTimeout = 30 * time.Second

// abortEvery: the transactional producer aborts one transaction in abortEvery.
const abortEvery = 5

// readers are the two consumers; each closes its client when its context ends.
type readers struct {
	wg sync.WaitGroup
	// assigned is closed when the group member has been assigned partitions: the
	// producers start then, so the group's join is not measured as latency.
	assigned chan struct{}
}

func (rs *readers) wait() { rs.wg.Wait() }

func (a *auditor) startReaders(ctx context.Context, s setupResult) (*readers, error) {
	topic := a.cfg.Topic
	reset := kgo.NewOffset().AtStart()
	if !s.committed {
		reset = kgo.NewOffset().AfterMilli(s.at.UnixMilli())
	}
	rs := &readers{assigned: make(chan struct{})}
	var once sync.Once
	group, err := kgo.NewClient(append(clientOpts(a.cfg.Client, "group"),
		kgo.ConsumerGroup(a.group), kgo.ConsumeTopics(topic),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			if len(m[topic]) > 0 {
				once.Do(func() { close(rs.assigned) })
			}
		}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.ConsumeResetOffset(reset))...)
	if err != nil {
		return nil, err
	}
	offs := map[int32]kgo.Offset{}
	for p, e := range s.ends {
		offs[p] = kgo.NewOffset().At(e)
	}
	committed, err := kgo.NewClient(append(clientOpts(a.cfg.Client, "read-committed"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	if err != nil {
		group.Close()
		return nil, err
	}
	rs.wg.Add(2)
	go func() { defer rs.wg.Done(); a.read(ctx, GroupReader, group) }()
	go func() { defer rs.wg.Done(); a.read(ctx, CommittedReader, committed) }()
	return rs, nil
}

// read polls until ctx ends and gives the checker every canary record of the run.
func (a *auditor) read(ctx context.Context, r Reader, cl *kgo.Client) {
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.Canceled) {
				a.clientError(r.String(), err)
			}
		})
		a.mu.Lock()
		now := a.now()
		fs.EachRecord(func(rec *kgo.Record) {
			v, err := DecodeValue(rec.Value)
			if err != nil || v.Run != a.run {
				a.mu.foreign++
				return
			}
			lat, first := a.mu.c.Read(r, ID{Producer: v.Producer, P: rec.Partition, Seq: v.Seq}, rec.Offset, now)
			if first && a.m != nil {
				a.m.e2e[r].Observe(lat.Seconds())
			}
		})
		a.mu.Unlock()
	}
}

func (a *auditor) clientError(client string, err error) {
	if a.m != nil {
		a.m.errors.WithLabelValues(client).Inc()
	}
	a.warn.warn(client, err)
}

// producers are the two canary producers. Their loops end when the context given to
// startProducers does, after the record or transaction at hand; what they sent stays
// theirs to deliver until stop.
type producers struct {
	wg   sync.WaitGroup
	idem *kgo.Client
	// cancelSends fails what is still unsent: stop calls it when its time is up.
	cancelSends context.CancelFunc
}

func (a *auditor) startProducers(ctx context.Context) (*producers, error) {
	idem, err := kgo.NewClient(append(clientOpts(a.cfg.Client, "idempotent"),
		kgo.DefaultProduceTopic(a.cfg.Topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))...)
	if err != nil {
		return nil, err
	}
	sendCtx, cancel := context.WithCancel(context.Background())
	ps := &producers{idem: idem, cancelSends: cancel}
	every := time.Duration(float64(time.Second) / a.cfg.Rate)
	ps.wg.Add(2)
	go func() { defer ps.wg.Done(); a.produceIdempotent(ctx, sendCtx, idem, every) }()
	go func() { defer ps.wg.Done(); a.produceTransactions(ctx, sendCtx, every) }()
	return ps, nil
}

// stop waits for the loops and for the idempotent producer's buffered records, d at
// most (or until abort), then fails what is left and closes the client.
func (ps *producers) stop(d time.Duration, abort <-chan struct{}) {
	deadline := time.Now().Add(d)
	done := make(chan struct{})
	go func() { ps.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		ps.cancelSends()
		<-done
	case <-abort:
		ps.cancelSends()
		<-done
	}
	fctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	go func() {
		select {
		case <-abort:
			cancel()
		case <-fctx.Done():
		}
	}()
	if err := ps.idem.Flush(fctx); err != nil {
		ps.cancelSends()
	}
	ps.idem.Close()
	ps.cancelSends()
}

// produceIdempotent sends one record to every partition each tick.
func (a *auditor) produceIdempotent(ctx, sendCtx context.Context, cl *kgo.Client, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, p := range a.parts {
			id := a.send(Idempotent, p)
			rec := &kgo.Record{Partition: p, Value: AppendValue(nil, Value{Run: a.run, Producer: Idempotent, Seq: id.Seq, Sent: time.Now().UnixNano()})}
			cl.Produce(sendCtx, rec, func(r *kgo.Record, err error) { a.answered(id, r, err) })
		}
	}
}

func (a *auditor) send(p Producer, part int32) ID {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mu.c.Send(p, part, a.now())
}

// answered records a produce's answer (a promise: it must not block on the client).
func (a *auditor) answered(id ID, r *kgo.Record, err error) {
	a.mu.Lock()
	now := a.now()
	if err != nil {
		a.mu.c.Failed(id, now)
	} else if lat := a.mu.c.Acked(id, r.Offset, now); a.m != nil {
		a.m.produce[id.Producer].Observe(lat.Seconds())
	}
	a.mu.Unlock()
	if err != nil && !errors.Is(err, context.Canceled) {
		a.clientError(id.Producer.String(), err)
	}
}

// produceTransactions runs one transaction each tick: a record to every partition,
// then a commit, or an abort for one transaction in abortEvery (and for any whose
// produce failed). An EndTxn without an answer leaves the outcome unknown; the client
// is then replaced (the next one's InitProducerID fences it and settles the
// transaction).
func (a *auditor) produceTransactions(ctx, sendCtx context.Context, every time.Duration) {
	var cl *kgo.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	t := time.NewTicker(every)
	defer t.Stop()
	var n int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if cl == nil {
			var err error
			cl, err = kgo.NewClient(append(clientOpts(a.cfg.Client, "transactional"),
				kgo.DefaultProduceTopic(a.cfg.Topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.TransactionalID("samsa-audit-"+a.run), kgo.TransactionTimeout(txnTimeout),
				kgo.ProducerLinger(0))...)
			if err != nil {
				a.clientError("transactional", err)
				continue
			}
		}
		n++
		if ok := a.transaction(sendCtx, cl, n%abortEvery != 0); !ok {
			cl.Close()
			cl = nil
		}
	}
}

// transaction runs one transaction; it returns false when the client must be
// replaced.
func (a *auditor) transaction(sendCtx context.Context, cl *kgo.Client, commit bool) bool {
	if err := cl.BeginTransaction(); err != nil {
		a.clientError("transactional", err)
		return false
	}
	ids := make([]ID, len(a.parts))
	recs := make([]*kgo.Record, len(a.parts))
	index := make(map[*kgo.Record]int, len(recs))
	for i, p := range a.parts {
		ids[i] = a.send(Transactional, p)
		recs[i] = &kgo.Record{Partition: p, Value: AppendValue(nil, Value{Run: a.run, Producer: Transactional, Seq: ids[i].Seq, Sent: time.Now().UnixNano()})}
		index[recs[i]] = i
	}
	ctx, cancel := context.WithTimeout(sendCtx, opTimeout)
	defer cancel()
	for _, r := range cl.ProduceSync(ctx, recs...) {
		a.answered(ids[index[r.Record]], r.Record, r.Err)
		if r.Err != nil {
			commit = false
		}
	}
	end := kgo.TryAbort
	if commit {
		end = kgo.TryCommit
	}
	err := cl.EndTransaction(ctx, end)
	outcome := Aborted
	switch {
	case err != nil:
		outcome = Unknown
		a.clientError("transactional", err)
	case commit:
		outcome = Committed
	}
	a.mu.Lock()
	a.mu.c.TxnEnded(ids, outcome, a.now())
	a.mu.Unlock()
	return err == nil
}
