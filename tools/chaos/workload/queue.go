// Package workload is the fault harness's queue workload: franz-go producers with
// acks=all and idempotence sending unique values ("<proc>-<n>") to several partitions
// of one topic, consumers in a group committing what they read, and assigned
// consumers reading every partition from the start. Every send, acknowledgement
// (with its offset), poll (with offsets), commit and assignment change is appended to
// a chaos.Writer with monotonic and wall-clock times.
//
// Processes: producers p0..pN, group members g0..gN (group Config.Group), assigned
// consumers a0..aN, and the final drain (chaos.ProcFinal), a fresh reader of every
// partition from its start to its end offset after the run.
package workload

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/samsa-broker/samsa/tools/chaos"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config describes the workload.
type Config struct {
	Brokers    []string
	Topic      string
	Partitions int32
	Producers  int
	// Rate is the sends per second of all producers together; InFlight bounds each
	// producer's unanswered sends (the loop waits when it is reached).
	Rate     float64
	InFlight int
	// ProduceTimeout is the produce requests' timeout: how long a broker may hold an
	// acks=all produce waiting for its ISR before answering REQUEST_TIMED_OUT (the
	// client then retries); 0 means 10 s.
	ProduceTimeout time.Duration
	// MetadataMaxAge is how often every client refreshes its metadata when nothing
	// tells it to sooner (an error such as NOT_LEADER_OR_FOLLOWER does); 0 means 5 s.
	MetadataMaxAge time.Duration
	// GroupConsumers join Group; AssignedConsumers read every partition.
	GroupConsumers    int
	Group             string
	AssignedConsumers int
	Seed              int64
	// The transactional workload (txn.go), on a topic of its own; off when
	// TxnTopic is empty. TxnRate is transactions per second of all its producers
	// together (0: 20).
	TxnTopic      string
	TxnPartitions int32
	TxnProducers  int
	TxnConsumers  int
	TxnRate       float64
	// TxnCopiers consume-transform-produce transactions on the same topic, each
	// reading it read_committed and writing what it read about back, at
	// TxnCopyRate transactions per second each (0: 4).
	TxnCopiers  int
	TxnCopyRate float64
	History     *chaos.Writer
	// ClientLog receives the clients' warnings (nil: none). A warning that says an
	// authentication, TLS handshake or authorization failed (chaos.IsAuthError) is
	// also recorded as a chaos.EventAuthFailed event of the client's process.
	ClientLog io.Writer
	// ClientOpts are added to every client's options (TLS and SASL on a secured
	// cluster).
	ClientOpts []kgo.Opt
}

// Workload is a running workload.
type Workload struct {
	cfg      Config
	prodStop context.CancelFunc
	consStop context.CancelFunc
	prodWG   sync.WaitGroup
	consWG   sync.WaitGroup
	producer []*producer
	logMu    sync.Mutex

	mu struct {
		sync.Mutex
		maxAcked map[int32]int64
		maxRead  map[string]map[int32]int64 // reader -> partition -> highest offset read
		acked    int64
		sent     int64
		read     int64
		txns     map[chaos.Status]int64 // transactions by outcome
		copied   int64                  // copiers' transactions committed
		txnRead  int64                  // records read by read_committed consumers
	}
}

// Start starts every client. The topic must exist.
func Start(ctx context.Context, cfg Config) (*Workload, error) {
	if cfg.InFlight <= 0 {
		cfg.InFlight = 32
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 200
	}
	if cfg.Partitions <= 0 {
		return nil, fmt.Errorf("workload: %d partitions", cfg.Partitions)
	}
	if cfg.Group == "" {
		cfg.Group = "chaos-g"
	}
	w := &Workload{cfg: cfg}
	w.mu.maxAcked = map[int32]int64{}
	w.mu.maxRead = map[string]map[int32]int64{}
	w.mu.txns = map[chaos.Status]int64{}
	pctx, pstop := context.WithCancel(context.WithoutCancel(ctx))
	cctx, cstop := context.WithCancel(context.WithoutCancel(ctx))
	w.prodStop, w.consStop = pstop, cstop
	for i := 0; i < cfg.Producers; i++ {
		p, err := w.newProducer(i)
		if err != nil {
			w.abort()
			return nil, err
		}
		w.producer = append(w.producer, p)
		w.prodWG.Add(1)
		go func() { defer w.prodWG.Done(); p.run(pctx) }()
	}
	for i := 0; i < cfg.GroupConsumers; i++ {
		c, err := w.newConsumer(fmt.Sprintf("g%d", i), true)
		if err != nil {
			w.abort()
			return nil, err
		}
		w.consWG.Add(1)
		go func() { defer w.consWG.Done(); c.run(cctx) }()
	}
	for i := 0; i < cfg.AssignedConsumers; i++ {
		c, err := w.newConsumer(fmt.Sprintf("a%d", i), false)
		if err != nil {
			w.abort()
			return nil, err
		}
		w.consWG.Add(1)
		go func() { defer w.consWG.Done(); c.run(cctx) }()
	}
	if cfg.TxnTopic != "" {
		if cfg.TxnPartitions <= 0 {
			w.abort()
			return nil, fmt.Errorf("workload: %d transactional partitions", cfg.TxnPartitions)
		}
		if err := w.startTxn(pctx, cctx); err != nil {
			w.abort()
			return nil, err
		}
	}
	return w, nil
}

func (w *Workload) abort() {
	w.prodStop()
	w.consStop()
	w.prodWG.Wait()
	w.consWG.Wait()
}

func (w *Workload) logger(proc string) kgo.Opt {
	if w.cfg.ClientLog == nil {
		return kgo.WithLogger(nil)
	}
	return kgo.WithLogger(kgo.BasicLogger(lockedWriter{&w.logMu, w.cfg.ClientLog, w, proc}, kgo.LogLevelWarn, func() string {
		return time.Now().Format("15:04:05.000 ") + proc + " "
	}))
}

// lockedWriter writes one client's log lines to the shared log, and records those
// about a failed authentication in the history.
type lockedWriter struct {
	mu   *sync.Mutex
	w    io.Writer
	wl   *Workload
	proc string
}

func (l lockedWriter) Write(b []byte) (int, error) {
	if line := strings.TrimSpace(string(b)); chaos.IsAuthError(line) {
		now, wall := l.wl.cfg.History.Now()
		l.wl.append(chaos.Op{Proc: l.proc, F: chaos.FEvent, Status: chaos.Info, Start: now, End: now, Wall: wall, V: chaos.EventAuthFailed, Err: line})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (w *Workload) common(proc string) []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(w.cfg.Brokers...),
		kgo.MetadataMaxAge(cmp.Or(w.cfg.MetadataMaxAge, 5*time.Second)),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.DialTimeout(3 * time.Second),
		kgo.RequestTimeoutOverhead(5 * time.Second),
		w.logger(proc),
	}, w.cfg.ClientOpts...)
}

func (w *Workload) append(op chaos.Op) { w.cfg.History.Append(op) }

func (w *Workload) lifeOp(proc, group string, f chaos.Func, err error) {
	now, wall := w.cfg.History.Now()
	op := chaos.Op{Proc: proc, F: f, Status: chaos.OK, Group: group, Start: now, End: now, Wall: wall}
	if err != nil {
		op.Err = err.Error()
	}
	w.append(op)
}

// producer sends unique values at its share of the rate.
type producer struct {
	w    *Workload
	proc string
	cl   *kgo.Client
	rng  *rand.Rand
	sem  chan struct{}
	seq  int64
}

func (w *Workload) newProducer(i int) (*producer, error) {
	proc := fmt.Sprintf("p%d", i)
	opts := append(w.common(proc),
		kgo.DefaultProduceTopic(w.cfg.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.MaxBufferedRecords(2*w.cfg.InFlight),
		kgo.UnknownTopicRetries(-1),
		kgo.ProduceRequestTimeout(cmp.Or(w.cfg.ProduceTimeout, 10*time.Second)),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("workload: producer: %w", err)
	}
	return &producer{w: w, proc: proc, cl: cl, rng: rand.New(rand.NewPCG(uint64(w.cfg.Seed), uint64(i)+1)), sem: make(chan struct{}, w.cfg.InFlight)}, nil
}

func (p *producer) run(ctx context.Context) {
	w := p.w
	w.lifeOp(p.proc, "", chaos.FOpen, nil)
	every := max(time.Microsecond, time.Duration(float64(time.Second)*float64(w.cfg.Producers)/w.cfg.Rate))
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		select {
		case <-ctx.Done():
			return
		case p.sem <- struct{}{}:
		}
		p.seq++
		part := int32(p.rng.IntN(int(w.cfg.Partitions)))
		op := chaos.Op{Proc: p.proc, F: chaos.FSend, Seq: p.seq, P: part, V: fmt.Sprintf("%s-%d", p.proc, p.seq)}
		op.Start, op.Wall = w.cfg.History.Now()
		w.mu.Lock()
		w.mu.sent++
		w.mu.Unlock()
		// The record's context is not the loop's: stopping the loop must not fail
		// records already handed over; Stop decides their fate.
		p.cl.Produce(context.Background(), &kgo.Record{Partition: part, Value: []byte(op.V)}, func(r *kgo.Record, err error) {
			op.End, _ = w.cfg.History.Now()
			if err == nil {
				op.Status, op.O = chaos.OK, r.Offset
				w.mu.Lock()
				w.mu.acked++
				if cur, ok := w.mu.maxAcked[part]; !ok || r.Offset > cur {
					w.mu.maxAcked[part] = r.Offset
				}
				w.mu.Unlock()
			} else {
				// Every error leaves the outcome unknown: a timed-out or retried batch
				// may be in the log.
				op.Status, op.Err = chaos.Info, err.Error()
			}
			w.append(op)
			<-p.sem
		})
	}
}

// StopProducers stops sending, waits up to wait for the answers of what was sent,
// then closes the producers (what is still unanswered is recorded as unknown).
func (w *Workload) StopProducers(wait time.Duration) {
	w.prodStop()
	w.prodWG.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range w.producer {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.cl.Flush(ctx)
			p.cl.Close()
			w.lifeOp(p.proc, "", chaos.FClose, nil)
		}()
	}
	wg.Wait()
}

// consumer polls; group members commit after each poll.
type consumer struct {
	w     *Workload
	proc  string
	group string
	cl    *kgo.Client
}

func (w *Workload) newConsumer(proc string, group bool) (*consumer, error) {
	c := &consumer{w: w, proc: proc}
	opts := append(w.common(proc), kgo.FetchMaxWait(500*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if group {
		c.group = w.cfg.Group
		opts = append(opts,
			kgo.ConsumerGroup(w.cfg.Group),
			kgo.ConsumeTopics(w.cfg.Topic),
			kgo.DisableAutoCommit(),
			kgo.BlockRebalanceOnPoll(),
			kgo.SessionTimeout(15*time.Second),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				c.assignment(chaos.FAssign, m[w.cfg.Topic], "")
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				c.assignment(chaos.FRevoke, m[w.cfg.Topic], "revoked")
			}),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				c.assignment(chaos.FRevoke, m[w.cfg.Topic], "lost")
			}),
		)
	} else {
		parts := map[int32]kgo.Offset{}
		for p := int32(0); p < w.cfg.Partitions; p++ {
			parts[p] = kgo.NewOffset().AtStart()
		}
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.cfg.Topic: parts}))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("workload: consumer: %w", err)
	}
	c.cl = cl
	return c, nil
}

func (c *consumer) assignment(f chaos.Func, parts []int32, why string) {
	if f == chaos.FAssign && len(parts) == 0 {
		return
	}
	now, wall := c.w.cfg.History.Now()
	c.w.append(chaos.Op{Proc: c.proc, F: f, Status: chaos.OK, Group: c.group, Start: now, End: now, Wall: wall, Parts: append([]int32(nil), parts...), Err: why})
}

func (c *consumer) run(ctx context.Context) {
	w := c.w
	w.lifeOp(c.proc, c.group, chaos.FOpen, nil)
	if c.group == "" {
		var all []int32
		for p := int32(0); p < w.cfg.Partitions; p++ {
			all = append(all, p)
		}
		c.assignment(chaos.FAssign, all, "")
	}
	defer func() {
		c.cl.Close() // a group member leaves the group
		w.lifeOp(c.proc, c.group, chaos.FClose, nil)
	}()
	for ctx.Err() == nil {
		c.pollOnce(ctx, c.proc, c.group)
		if c.group != "" {
			c.commit(ctx)
			c.cl.AllowRebalance()
		}
	}
}

// pollOnce polls for up to a second and records what came back.
func (c *consumer) pollOnce(ctx context.Context, proc, group string) int {
	w := c.w
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	op := chaos.Op{Proc: proc, F: chaos.FPoll, Status: chaos.OK, Group: group}
	op.Start, op.Wall = w.cfg.History.Now()
	fs := c.cl.PollRecords(pctx, 2000)
	op.End, _ = w.cfg.History.Now()
	var errs []string
	for _, e := range fs.Errors() {
		if errors.Is(e.Err, context.DeadlineExceeded) || errors.Is(e.Err, context.Canceled) || errors.Is(e.Err, kgo.ErrClientClosed) {
			continue
		}
		errs = append(errs, fmt.Sprintf("p%d: %v", e.Partition, e.Err))
	}
	fs.EachRecord(func(r *kgo.Record) {
		if r.Topic == w.cfg.Topic {
			op.Recs = append(op.Recs, chaos.Rec{P: r.Partition, O: r.Offset, V: string(r.Value)})
			prod := ""
			if r.ProducerID >= 0 {
				prod = fmt.Sprintf("%d/%d", r.ProducerID, r.ProducerEpoch)
			}
			op.Prods = append(op.Prods, prod)
		}
	})
	if len(errs) > 0 {
		op.Err = strings.Join(errs, "; ")
	}
	if len(op.Recs) == 0 && op.Err == "" {
		return 0
	}
	w.append(op)
	reader := proc
	if group != "" {
		reader = "group:" + group
	}
	w.mu.Lock()
	w.mu.read += int64(len(op.Recs))
	m := w.mu.maxRead[reader]
	if m == nil {
		m = map[int32]int64{}
		w.mu.maxRead[reader] = m
	}
	for _, r := range op.Recs {
		if cur, ok := m[r.P]; !ok || r.O > cur {
			m[r.P] = r.O
		}
	}
	w.mu.Unlock()
	return len(op.Recs)
}

// commit commits what the member consumed and records the request and its answer.
func (c *consumer) commit(ctx context.Context) {
	w := c.w
	offs := c.cl.UncommittedOffsets()
	if len(offs) == 0 {
		return
	}
	op := chaos.Op{Proc: c.proc, F: chaos.FCommit, Group: c.group, Offs: map[int32]int64{}}
	op.Start, op.Wall = w.cfg.History.Now()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c.cl.CommitOffsetsSync(cctx, offs, func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		op.End, _ = w.cfg.History.Now()
		for _, t := range req.Topics {
			if t.Topic != w.cfg.Topic {
				continue
			}
			for _, p := range t.Partitions {
				op.Offs[p.Partition] = p.Offset
			}
		}
		if err != nil {
			op.Status, op.Err = chaos.Info, err.Error()
			return
		}
		op.Status = chaos.OK
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					if op.PartErr == nil {
						op.PartErr = map[int32]string{}
					}
					op.PartErr[p.Partition] = kerr.ErrorForCode(p.ErrorCode).Error()
				}
			}
		}
	})
	if op.End == 0 {
		op.End, _ = w.cfg.History.Now()
		op.Status = chaos.Info
	}
	if len(op.Offs) > 0 {
		w.append(op)
	}
}

// StopConsumers stops every consumer (group members leave the group).
func (w *Workload) StopConsumers() {
	w.consStop()
	w.consWG.Wait()
}

// Progress is a snapshot of the counts.
type Progress struct {
	Sent, Acked, Read int64
	// Transactions committed, aborted and unknown; records read by read_committed
	// consumers.
	Committed, Aborted, TxnUnknown, TxnRead int64
	// Copied: consume-transform-produce transactions committed (among Committed).
	Copied int64
	// Behind is, per reader, how many partitions it has not read up to the highest
	// acknowledged offset.
	Behind map[string]int
}

// Progress reports the counts and how far each reader is behind.
func (w *Workload) Progress() Progress {
	w.mu.Lock()
	defer w.mu.Unlock()
	pr := Progress{Sent: w.mu.sent, Acked: w.mu.acked, Read: w.mu.read, Behind: map[string]int{},
		Committed: w.mu.txns[chaos.OK], Aborted: w.mu.txns[chaos.Fail], TxnUnknown: w.mu.txns[chaos.Info], TxnRead: w.mu.txnRead,
		Copied: w.mu.copied}
	var readers []string
	if w.cfg.GroupConsumers > 0 {
		readers = append(readers, "group:"+w.cfg.Group)
	}
	for i := 0; i < w.cfg.AssignedConsumers; i++ {
		readers = append(readers, fmt.Sprintf("a%d", i))
	}
	for _, r := range readers {
		n := 0
		for p, hi := range w.mu.maxAcked {
			if got, ok := w.mu.maxRead[r][p]; !ok || got < hi {
				n++
			}
		}
		pr.Behind[r] = n
	}
	return pr
}

// CaughtUp reports whether every reader has read up to every partition's highest
// acknowledged offset.
func (w *Workload) CaughtUp() bool {
	for _, n := range w.Progress().Behind {
		if n > 0 {
			return false
		}
	}
	return true
}
