package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrRun is wrapped by errors that stop a run.
var ErrRun = errors.New("bench: run failed")

// RunConfig says what to run against which broker.
type RunConfig struct {
	Workload *Workload
	Brokers  []string
	Target   string // label in reports

	// Progress, if set, receives one line per second.
	Progress io.Writer
	Logger   *slog.Logger
	// DrainTimeout bounds the wait for consumers to catch up after producing stops
	// (default 30s).
	DrainTimeout time.Duration
	// DeliveryTimeout bounds how long a record may wait for its ack (default 2m);
	// JoinTimeout how long consumers may take to get partitions (default 30s).
	DeliveryTimeout time.Duration
	JoinTimeout     time.Duration
	TopicPrefix     string // default "samsa-bench"
	KeepTopics      bool
	// Broker, if set, reports the broker process's CPU and memory.
	Broker UsageSource
	// BrokerRuntime, if set, reports the broker's Go runtime figures (runtime.go).
	BrokerRuntime RuntimeSource
	// OnSteady, if set, runs in its own goroutine when the measured window starts;
	// its context ends with the window.
	OnSteady func(ctx context.Context)
	Seed     int64
	// BrokerInProcess says the broker runs in this process (the kfake target): the
	// loader's own CPU then includes it.
	BrokerInProcess bool
	// ClientOpts are added to every client of the run (producers, consumers, the
	// admin client): TLS and SASL (ClientSecurity).
	ClientOpts []kgo.Opt
	// Interval, if set, also aggregates the measured window of a steady run into
	// intervals of this length (Result.Intervals, soak.go): the publish latency of
	// each from its own histogram, the broker's RSS averaged over its seconds.
	Interval time.Duration
}

// Point is one second of a run.
type Point struct {
	T        float64 `json:"t"` // seconds since start, end of the interval
	Phase    string  `json:"phase"`
	PubRate  float64 `json:"pub_msgs"`
	PubMBps  float64 `json:"pub_mbps"`
	ConsRate float64 `json:"cons_msgs"`
	ConsMBps float64 `json:"cons_mbps"`
	Backlog  int64   `json:"backlog"`
	PubP50   float64 `json:"pub_p50_ms"`
	PubP99   float64 `json:"pub_p99_ms"`
	E2EP50   float64 `json:"e2e_p50_ms"`
	E2EP99   float64 `json:"e2e_p99_ms"`
	Errors   int64   `json:"errors"`
	// BrokerCores is the broker process's CPU use over the interval (cores busy), when
	// it is a local process.
	BrokerCores float64 `json:"broker_cores,omitempty"`
	// BrokerRSS is the broker's resident set at the end of the interval, in bytes
	// (VmRSS, or process_resident_memory_bytes from its /metrics), when measured.
	BrokerRSS int64 `json:"broker_rss_bytes,omitempty"`
}

// Phases of a run.
const (
	PhaseWarmup  = "warmup"
	PhaseMeasure = "measure"
	PhaseFill    = "fill"
	PhaseDrain   = "drain"
)

type run struct {
	cfg       RunConfig
	w         *Workload
	errs      errSamples
	producers []*producer
	consumers []*consumer
	subs      []*subscription
	topics    []string

	pub, pubRaw, e2e       *hdr.Histogram // whole measured window
	iPub, iPubRaw, iE2E    *hdr.Histogram // current second
	series                 []Point
	last                   counts
	lastT                  time.Time
	lastCPU                float64 // broker CPU seconds at lastT, or -1
	cpu0                   cpuSnap // the loader's and the machine's CPU when the window began
	start                  time.Time
	created                time.Time // when the run began, before topics exist
	windowStart            time.Time // when the measured window began
	measuring              bool
	rt                     *runtimeProbe  // the runtime figures' start of the window
	iv                     *intervalMeter // nil without RunConfig.Interval
	progressMu             sync.Mutex
	consumerWG, producerWG sync.WaitGroup
}

type counts struct {
	sent, acked, ackedBytes, consumed, consBytes, errors int64
}

func (r *run) sample() counts {
	var c counts
	for _, p := range r.producers {
		c.sent += p.sent.Load()
		c.acked += p.acked.Load()
		c.ackedBytes += p.ackedBytes.Load()
		c.errors += p.failed.Load()
	}
	for _, k := range r.consumers {
		c.consumed += k.msgs.Load()
		c.consBytes += k.bytes.Load()
		c.errors += k.failed.Load()
	}
	return c
}

// Run runs one workload against one target and returns its result. Topics are created
// with unique names and deleted afterwards (unless KeepTopics).
func Run(ctx context.Context, cfg RunConfig) (*Result, error) {
	w := cfg.Workload
	if w == nil || len(cfg.Brokers) == 0 {
		return nil, fmt.Errorf("%w: need a workload and brokers", ErrRun)
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = 30 * time.Second
	}
	if cfg.DeliveryTimeout == 0 {
		cfg.DeliveryTimeout = 2 * time.Minute
	}
	if cfg.JoinTimeout == 0 {
		cfg.JoinTimeout = 30 * time.Second
	}
	if cfg.TopicPrefix == "" {
		cfg.TopicPrefix = "samsa-bench"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Seed == 0 {
		cfg.Seed = time.Now().UnixNano()
	}
	r := &run{cfg: cfg, w: w, lastCPU: -1, cpu0: cpuSnap{self: -1, machine: -1},
		pub: newHist(), pubRaw: newHist(), e2e: newHist(),
		iPub: newHist(), iPubRaw: newHist(), iE2E: newHist(),
	}
	id := runID()
	r.created = time.Now()

	adm, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.DisableClientMetrics()}, cfg.ClientOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("%w: admin client: %w", ErrRun, err)
	}
	defer adm.Close()
	ka := kadm.NewClient(adm)
	for i := 0; i < w.Topics; i++ {
		r.topics = append(r.topics, fmt.Sprintf("%s-%s-%d", cfg.TopicPrefix, id, i))
	}
	if err := createTopics(ctx, adm, r.topics, w); err != nil {
		return nil, err
	}
	if !cfg.KeepTopics {
		defer func() {
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := ka.DeleteTopics(dctx, r.topics...); err != nil {
				cfg.Logger.Warn("delete topics", "err", err)
			}
		}()
	}

	pl := payloads(w, cfg.Seed)
	keys := keyTable(w)
	rate := 0.0
	if w.ProducerRate > 0 {
		rate = float64(w.ProducerRate) / float64(w.Producers())
	}
	for ti, topic := range r.topics {
		for i := 0; i < w.ProducersPerTopic; i++ {
			p, err := newProducer(w, cfg.Brokers, topic, pl, keys, cfg.Seed+int64(ti*1000+i), rate, cfg.DeliveryTimeout, &r.errs, cfg.ClientOpts...)
			if err != nil {
				r.closeAll()
				return nil, err
			}
			r.producers = append(r.producers, p)
		}
		for s := 0; s < w.SubscriptionsPerTopic; s++ {
			r.subs = append(r.subs, &subscription{name: fmt.Sprintf("%s-%s-t%d-s%d", cfg.TopicPrefix, id, ti, s)})
		}
	}
	defer r.closeAll()

	res := &Result{Target: cfg.Target, Workload: w.Name, Mode: "client", Started: time.Now().UTC(), Config: w}
	if w.BacklogBytes() > 0 {
		err = r.runBacklog(ctx, res)
	} else {
		err = r.runSteady(ctx, res)
	}
	if err != nil {
		return nil, err
	}
	if n := retentionNote(ctx, ka, r.topics, w); n != "" {
		res.Notes = append(res.Notes, n)
	}
	res.ErrorSamples = r.errs.list()
	res.Series = r.series
	res.PublishLatency = summarize(r.pub, true)
	res.PublishLatencyUncorrected = summarize(r.pubRaw, true)
	res.E2ELatency = summarize(r.e2e, true)
	res.Notes = append(res.Notes, saturationNotes(res, runtime.NumCPU(), runtime.GOMAXPROCS(0))...)
	addSpikeNote(res)
	return res, nil
}

// retentionNote says, for a workload that sets retention.bytes, whether the broker
// deleted segments: on how many partitions the log start offset had left 0 at the
// end of the run. "" for other workloads.
func retentionNote(ctx context.Context, ka *kadm.Client, topics []string, w *Workload) string {
	limit, ok := w.TopicConfigs["retention.bytes"]
	if !ok {
		return ""
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	starts, err := ka.ListStartOffsets(lctx, topics...)
	if err != nil {
		return fmt.Sprintf("retention: log start offsets not read: %v", err)
	}
	var moved, all int
	starts.Each(func(o kadm.ListedOffset) {
		all++
		if o.Err == nil && o.Offset > 0 {
			moved++
		}
	})
	if moved == 0 {
		return fmt.Sprintf("retention: the log start offset is 0 on all %d partitions at the end of the run: the broker deleted no segment (retention.bytes %s; its retention check may not have run yet)", all, limit)
	}
	return fmt.Sprintf("retention: segments deleted: the log start offset is above 0 on %d of %d partitions at the end of the run (retention.bytes %s)", moved, all, limit)
}

func runID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func createTopics(ctx context.Context, cl *kgo.Client, topics []string, w *Workload) error {
	ka := kadm.NewClient(cl)
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	configs := map[string]*string{}
	if w.MinInsyncReplicas > 0 && w.MinInsyncReplicas <= w.ReplicationFactor {
		configs["min.insync.replicas"] = kadm.StringPtr(strconv.Itoa(w.MinInsyncReplicas))
	}
	for k, v := range w.TopicConfigs {
		configs[k] = kadm.StringPtr(v)
	}
	resp, err := ka.CreateTopics(cctx, int32(w.PartitionsPerTopic), int16(w.ReplicationFactor), configs, topics...)
	if err != nil {
		return fmt.Errorf("%w: create topics: %w", ErrRun, err)
	}
	for _, t := range resp.Sorted() {
		if t.Err != nil {
			return fmt.Errorf("%w: create topic %s: %w", ErrRun, t.Topic, t.Err)
		}
	}
	// Wait until metadata shows every partition with a leader, and, in a cluster,
	// until every broker does: one that has not applied the new topics yet answers a
	// produce to them with UNKNOWN_TOPIC_OR_PARTITION.
	deadline := time.Now().Add(30 * time.Second)
	for {
		md, err := ka.Metadata(cctx, topics...)
		ready := err == nil && topicsReady(md.Topics, topics, w.PartitionsPerTopic)
		if ready && len(md.Brokers) > 1 {
			for _, b := range md.Brokers {
				if berr := brokerKnows(cctx, b.NodeID, cl.Broker(int(b.NodeID)), topics, w.PartitionsPerTopic); berr != nil {
					ready, err = false, berr
					break
				}
			}
		}
		if ready {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: topics not ready after 30s (metadata err %v)", ErrRun, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// topicsReady: every topic of md has its partitions, each with a leader.
func topicsReady(md kadm.TopicDetails, topics []string, partitions int) bool {
	for _, t := range topics {
		td, ok := md[t]
		if !ok || td.Err != nil || len(td.Partitions) != partitions {
			return false
		}
		for _, p := range td.Partitions {
			if p.Leader < 0 || p.Err != nil {
				return false
			}
		}
	}
	return true
}

// brokerKnows asks one broker (only it) for the topics' metadata: nil once it shows
// each with its partitions, every one with a leader.
func brokerKnows(ctx context.Context, id int32, b *kgo.Broker, topics []string, partitions int) error {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, b)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, t := range resp.Topics {
		if t.Topic == nil || t.ErrorCode != 0 || len(t.Partitions) != partitions {
			continue
		}
		led := true
		for _, p := range t.Partitions {
			led = led && p.ErrorCode == 0 && p.Leader >= 0
		}
		have[*t.Topic] = led
	}
	for _, t := range topics {
		if !have[t] {
			return fmt.Errorf("broker %d does not show topic %s with %d led partitions yet", id, t, partitions)
		}
	}
	return nil
}

// startConsumers creates and starts every consumer, then waits (bounded) until each
// has partitions, so that latency is not measured across a group join.
func (r *run) startConsumers(ctx context.Context) error {
	w := r.w
	for ti, topic := range r.topics {
		for s := 0; s < w.SubscriptionsPerTopic; s++ {
			sub := r.subs[ti*w.SubscriptionsPerTopic+s]
			for i := 0; i < w.ConsumerPerSubscription; i++ {
				c, err := newConsumer(w, r.cfg.Brokers, topic, sub, i, r.created.Add(-time.Minute).UnixNano(), &r.errs, r.cfg.ClientOpts...)
				if err != nil {
					return err
				}
				r.consumers = append(r.consumers, c)
			}
		}
	}
	for _, c := range r.consumers {
		r.consumerWG.Add(1)
		go func() {
			defer r.consumerWG.Done()
			c.loop(ctx)
		}()
	}
	deadline := time.Now().Add(r.cfg.JoinTimeout)
	for {
		all := true
		for _, c := range r.consumers {
			all = all && c.assigned.Load()
		}
		if all {
			return nil
		}
		if time.Now().After(deadline) {
			r.cfg.Logger.Warn("not every consumer has partitions; starting anyway", "after", r.cfg.JoinTimeout)
			r.errs.add("join", fmt.Errorf("not every consumer had partitions after %v", r.cfg.JoinTimeout))
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (r *run) startProducers(start time.Time, stop <-chan struct{}, stopAtBytes int64) {
	for _, p := range r.producers {
		r.producerWG.Add(1)
		go func() {
			defer r.producerWG.Done()
			p.loop(start, stop, stopAtBytes)
		}()
	}
}

// stopProducers waits for the loops, then flushes what is buffered (bounded).
func (r *run) stopProducers(stop chan struct{}) {
	select {
	case <-stop:
	default:
		close(stop)
	}
	r.producerWG.Wait()
	fctx, cancel := context.WithTimeout(context.Background(), r.cfg.DeliveryTimeout+10*time.Second)
	defer cancel()
	for _, p := range r.producers {
		if err := p.cl.Flush(fctx); err != nil {
			r.errs.add("flush", err)
		}
	}
}

func (r *run) closeAll() {
	for _, p := range r.producers {
		p.cl.Close()
	}
	for _, c := range r.consumers {
		c.cl.Close()
	}
}

// caughtUp reports whether every subscription has read everything acknowledged.
func (r *run) caughtUp() bool {
	if len(r.subs) == 0 {
		return true
	}
	perTopic := make([]int64, len(r.topics))
	for i, p := range r.producers {
		perTopic[i/r.w.ProducersPerTopic] += p.acked.Load()
	}
	for i, s := range r.subs {
		if s.consumed.Load() < perTopic[i/r.w.SubscriptionsPerTopic] {
			return false
		}
	}
	return true
}

// backlog is what the subscriptions have still to read: per subscription, what was
// acknowledged on its topic less what it consumed, never below zero. (A consumer can
// read a record before its producer sees the acknowledgement, and a retried send
// can be read twice, so consumed may run ahead of acked.)
func (r *run) backlog() int64 {
	if len(r.subs) == 0 {
		return 0
	}
	perTopic := make([]int64, len(r.topics))
	for i, p := range r.producers {
		perTopic[i/r.w.ProducersPerTopic] += p.acked.Load()
	}
	var n int64
	for i, s := range r.subs {
		n += max(0, perTopic[i/r.w.SubscriptionsPerTopic]-s.consumed.Load())
	}
	return n
}

// tick closes one interval: drains every recorder, appends a Point, prints progress.
func (r *run) tick(now time.Time, phase string) Point {
	for _, p := range r.producers {
		p.pub.drainInto(r.iPub)
		p.pubRaw.drainInto(r.iPubRaw)
	}
	for _, c := range r.consumers {
		c.e2e.drainInto(r.iE2E)
	}
	c := r.sample()
	dt := now.Sub(r.lastT).Seconds()
	if dt <= 0 {
		dt = 1e-9
	}
	pt := Point{
		T:        now.Sub(r.start).Seconds(),
		Phase:    phase,
		PubRate:  float64(c.acked-r.last.acked) / dt,
		PubMBps:  float64(c.ackedBytes-r.last.ackedBytes) / dt / 1e6,
		ConsRate: float64(c.consumed-r.last.consumed) / dt,
		ConsMBps: float64(c.consBytes-r.last.consBytes) / dt / 1e6,
		Backlog:  r.backlog(),
		PubP50:   usToMs(r.iPub.ValueAtQuantile(50)),
		PubP99:   usToMs(r.iPub.ValueAtQuantile(99)),
		E2EP50:   usToMs(r.iE2E.ValueAtQuantile(50)),
		E2EP99:   usToMs(r.iE2E.ValueAtQuantile(99)),
		Errors:   c.errors - r.last.errors,
	}
	if r.measuring {
		r.pub.Merge(r.iPub)
		r.pubRaw.Merge(r.iPubRaw)
		r.e2e.Merge(r.iE2E)
	}
	if r.iv != nil && phase == PhaseMeasure {
		r.iv.pub.Merge(r.iPub)
	}
	r.iPub.Reset()
	r.iPubRaw.Reset()
	r.iE2E.Reset()
	cores := ""
	if u, err := r.usage(); err == nil {
		if r.lastCPU >= 0 {
			pt.BrokerCores = (u.CPUSeconds - r.lastCPU) / dt
			cores = fmt.Sprintf(" | broker %.2f cores", pt.BrokerCores)
		}
		r.lastCPU = u.CPUSeconds
		pt.BrokerRSS = u.RSS
	}
	if r.iv != nil && phase == PhaseMeasure {
		r.iv.add(now, pt, c.acked-r.last.acked)
	}
	r.last, r.lastT = c, now
	r.series = append(r.series, pt)
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, "[%s %s] %4.0fs %-7s pub %9s msg/s %7.1f MB/s | cons %9s msg/s | backlog %8s | pub p50 %7.2f p99 %7.2f ms | e2e p50 %7.2f p99 %7.2f ms | err %d%s\n",
			r.cfg.Target, r.w.Name, pt.T, phase, siCount(pt.PubRate), pt.PubMBps, siCount(pt.ConsRate), siCount(float64(pt.Backlog)),
			pt.PubP50, pt.PubP99, pt.E2EP50, pt.E2EP99, pt.Errors, cores)
	}
	return pt
}

func siCount(v float64) string {
	switch {
	case v >= 1e6 || v <= -1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4 || v <= -1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// runSteady: consumers up, producers for warmup+duration, then drain.
func (r *run) runSteady(ctx context.Context, res *Result) error {
	w := r.w
	cctx, cancelConsumers := context.WithCancel(ctx)
	defer func() { cancelConsumers(); r.consumerWG.Wait() }()
	if err := r.startConsumers(cctx); err != nil {
		return err
	}
	stop := make(chan struct{})
	r.start = time.Now()
	r.lastT = r.start
	if u, err := r.usage(); err == nil {
		r.lastCPU = u.CPUSeconds
	}
	r.startProducers(r.start, stop, 0)
	defer r.stopProducers(stop)

	warmTicks := int((w.Warmup.D() + time.Second - 1) / time.Second)
	durTicks := max(1, int((w.Duration.D()+time.Second-1)/time.Second))
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	var winStart counts
	var use0 Usage
	steadyCtx, endSteady := context.WithCancel(ctx)
	defer endSteady()
	if warmTicks == 0 {
		r.beginWindow(steadyCtx, &winStart, &use0)
	}
	for k := 1; k <= warmTicks+durTicks; k++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-ticker.C:
			phase := PhaseMeasure
			if k <= warmTicks {
				phase = PhaseWarmup
			}
			r.tick(now, phase)
			if k == warmTicks {
				r.beginWindow(steadyCtx, &winStart, &use0)
			}
		}
	}
	winEnd := r.sample()
	winDur := time.Since(r.windowStart).Seconds()
	if r.iv != nil {
		r.iv.finish(res)
	}
	r.stopProducers(stop)
	endSteady()
	use1, useErr := r.usage()
	r.loaderCost(res, winEnd.acked-winStart.acked, winDur, "produced")
	r.fillRates(res, winStart, winEnd, winDur)
	if useErr == nil && r.cfg.Broker != nil {
		res.Broker = brokerCost(r.cfg.Broker, use0, use1, winEnd.acked-winStart.acked, winEnd.ackedBytes-winStart.ackedBytes)
		res.Broker.CPUCores = res.Broker.CPUSeconds / winDur
	}
	// Drain: consumers catch up with everything acknowledged.
	deadline := time.Now().Add(r.cfg.DrainTimeout)
	for !r.caughtUp() && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-ticker.C:
			r.tick(now, PhaseDrain)
		case <-time.After(20 * time.Millisecond):
		}
	}
	r.tick(time.Now(), PhaseDrain)
	r.totals(res)
	return nil
}

func (r *run) beginWindow(ctx context.Context, c *counts, u *Usage) {
	r.measuring = true
	r.windowStart = time.Now()
	if r.cfg.Interval > 0 {
		r.iv = newIntervalMeter(r.windowStart, r.cfg.Interval, r.cfg.Progress, r.cfg.Target+" "+r.w.Name)
	}
	*c = r.sample()
	*u, _ = r.usage()
	r.cpu0 = takeCPUSnap()
	r.rt = startRuntimeProbe(r.cfg.BrokerRuntime)
	if r.cfg.OnSteady != nil {
		go r.cfg.OnSteady(ctx)
	}
}

// loaderCost sets res.Loader from the loader's CPU now against the window's start.
func (r *run) loaderCost(res *Result, msgs int64, secs float64, per string) {
	res.Loader = loaderCost(r.cpu0, takeCPUSnap(), msgs, secs, per, r.cfg.BrokerInProcess)
	r.rt.finish(res, r.cfg.BrokerInProcess)
}

func (r *run) usage() (Usage, error) {
	if r.cfg.Broker == nil {
		return Usage{}, errors.New("no broker process")
	}
	return r.cfg.Broker.Usage()
}

// runBacklog: producers fill the backlog with no consumer, stop; consumers drain it
// from the start. The measured window is the drain.
func (r *run) runBacklog(ctx context.Context, res *Result) error {
	w := r.w
	stop := make(chan struct{})
	r.start = time.Now()
	r.lastT = r.start
	if u, err := r.usage(); err == nil {
		r.lastCPU = u.CPUSeconds
	}
	perProducer := w.BacklogBytes() / int64(len(r.producers))
	r.startProducers(r.start, stop, perProducer)
	done := make(chan struct{})
	go func() { r.producerWG.Wait(); close(done) }()
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	fillEnd := time.Now().Add(w.Duration.D())
fill:
	for {
		select {
		case <-ctx.Done():
			r.stopProducers(stop)
			return ctx.Err()
		case <-done:
			break fill
		case now := <-ticker.C:
			r.tick(now, PhaseFill)
			if now.After(fillEnd) {
				break fill
			}
		}
	}
	r.stopProducers(stop)
	res.Notes = append(res.Notes, fmt.Sprintf("backlog filled: %d messages, %.2f GiB", r.sample().acked, float64(r.sample().ackedBytes)/(1<<30)))

	cctx, cancelConsumers := context.WithCancel(ctx)
	defer func() { cancelConsumers(); r.consumerWG.Wait() }()
	var winStart counts
	var use0 Usage
	steadyCtx, endSteady := context.WithCancel(ctx)
	defer endSteady()
	r.beginWindow(steadyCtx, &winStart, &use0)
	t0 := time.Now()
	if err := r.startConsumers(cctx); err != nil {
		return err
	}
	deadline := t0.Add(w.Duration.D())
	for !r.caughtUp() && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-ticker.C:
			r.tick(now, PhaseDrain)
		case <-time.After(20 * time.Millisecond):
		}
	}
	winEnd := r.sample()
	dur := time.Since(t0).Seconds()
	endSteady()
	use1, useErr := r.usage()
	r.loaderCost(res, winEnd.consumed-winStart.consumed, dur, "consumed")
	r.tick(time.Now(), PhaseDrain)
	r.fillRates(res, winStart, winEnd, dur)
	res.PubRate, res.PubMBps = 0, 0 // nothing is produced while draining
	if useErr == nil && r.cfg.Broker != nil {
		res.Broker = brokerCost(r.cfg.Broker, use0, use1, winEnd.consumed-winStart.consumed, winEnd.consBytes-winStart.consBytes)
		res.Broker.PerWhat = "consumed"
		res.Broker.CPUCores = res.Broker.CPUSeconds / dur
	}
	r.totals(res)
	return nil
}

func (r *run) fillRates(res *Result, a, b counts, secs float64) {
	if secs <= 0 {
		secs = 1e-9
	}
	res.DurationSec = secs
	res.PubRate = float64(b.acked-a.acked) / secs
	res.PubMBps = float64(b.ackedBytes-a.ackedBytes) / secs / 1e6
	res.ConsRate = float64(b.consumed-a.consumed) / secs
	res.ConsMBps = float64(b.consBytes-a.consBytes) / secs / 1e6
}

func (r *run) totals(res *Result) {
	c := r.sample()
	res.Sent, res.Acked, res.Consumed, res.Errors = c.sent, c.acked, c.consumed, c.errors
	res.Subscriptions = len(r.subs)
	for _, s := range r.subs {
		res.ConsumedPerSubscription = append(res.ConsumedPerSubscription, s.consumed.Load())
	}
	res.CaughtUp = r.caughtUp()
	var foreign int64
	for _, k := range r.consumers {
		foreign += k.foreign.Load()
	}
	if foreign > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d consumed records carried no send time of this run (not in e2e latency)", foreign))
	}
	res.Backlog = r.backlog()
}
