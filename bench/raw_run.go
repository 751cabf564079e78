package bench

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// RunRaw measures broker capacity with pre-encoded Produce requests, pipelined, and
// Fetch requests whose records are never decoded. One topic of the workload's
// partitions is used; every request carries one batch per partition.
//
// Its phases: the configuration's defaults (withDefaults); the topic, and its
// partitions by leader (openRawTopic); every leader's producers and fetcher
// (startClients); the run's clock, a Point a second, through the warmup and the
// measured window, or a backlog's fill and drain (newMeter, run); the end of the
// window and of the clients (closeWindow); the figures (result).
func RunRaw(ctx context.Context, cfg RawConfig) (*Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.Workload.TieredCatchup() {
		return runTieredCatchup(ctx, cfg)
	}
	t, err := openRawTopic(ctx, cfg.Brokers, cfg.Workload)
	if err != nil {
		return nil, err
	}
	defer t.close()
	r := newRawRun(ctx, cfg, t)
	defer r.stop()
	if err := r.startClients(ctx); err != nil {
		return nil, err
	}
	m := r.newMeter(ctx)
	defer m.endSteady()
	runErr := m.run(ctx)
	end := m.closeWindow()
	if runErr != nil {
		return nil, fmt.Errorf("%w: raw: %w", ErrRun, runErr)
	}
	res := m.result(end)
	if n := retentionNote(ctx, t.ka, []string{t.name}, cfg.Workload); n != "" {
		res.Notes = append(res.Notes, n)
	}
	return res, nil
}

// withDefaults checks cfg (a workload and brokers; the paced mode needs a fixed
// rate, and drains no backlog) and fills in its zero values: the connections, the
// requests in flight, the records per batch, the duration and the warmup.
func (cfg RawConfig) withDefaults() (RawConfig, error) {
	w := cfg.Workload
	if w == nil || len(cfg.Brokers) == 0 {
		return cfg, fmt.Errorf("%w: raw: need a workload and brokers", ErrRun)
	}
	switch {
	case cfg.Connections > 0:
	case cfg.Paced:
		cfg.Connections = max(1, w.Producers())
	default:
		cfg.Connections = 2
	}
	switch {
	case cfg.InFlight > 0:
	case cfg.Paced && w.Producer.MaxInFlight > 0:
		cfg.InFlight = w.Producer.MaxInFlight
	default:
		cfg.InFlight = 8
	}
	if cfg.RecordsPerBatch <= 0 {
		cfg.RecordsPerBatch = defaultRawRecordsPerBatch(w)
	}
	if cfg.Duration <= 0 {
		cfg.Duration = w.Duration.D()
	}
	if cfg.Warmup <= 0 {
		cfg.Warmup = w.Warmup.D()
	}
	if cfg.Paced && w.ProducerRate <= 0 {
		return cfg, fmt.Errorf("%w: raw: the paced mode needs a fixed rate (the workload's producerRate or --rate)", ErrRun)
	}
	if cfg.Paced && w.ConsumerBacklogSizeGB > 0 {
		return cfg, fmt.Errorf("%w: raw: the paced mode does not fill a backlog (%s drains one)", ErrRun, w.Name)
	}
	return cfg, nil
}

// rawTopic is the topic of a raw run, created for it and deleted after it by its
// admin client.
type rawTopic struct {
	adm      *kgo.Client
	ka       *kadm.Client
	name     string
	byLeader map[string][]int32 // its partitions by leader address
}

// openRawTopic creates the run's topic (the workload's partitions and replication
// factor) and finds every partition's leader in the metadata. The caller closes it.
func openRawTopic(ctx context.Context, brokers []string, w *Workload) (*rawTopic, error) {
	adm, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DisableClientMetrics())
	if err != nil {
		return nil, fmt.Errorf("%w: raw admin client: %w", ErrRun, err)
	}
	t := &rawTopic{adm: adm, ka: kadm.NewClient(adm), name: "samsa-bench-raw-" + runID()}
	if err := createTopics(ctx, adm, []string{t.name}, w); err != nil {
		adm.Close()
		return nil, err
	}
	if t.byLeader, err = t.partitionsByLeader(ctx); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

// partitionsByLeader maps each leader's address to the partitions of the topic it
// leads, in order.
func (t *rawTopic) partitionsByLeader(ctx context.Context) (map[string][]int32, error) {
	md, err := t.ka.Metadata(ctx, t.name)
	if err != nil {
		return nil, fmt.Errorf("%w: raw metadata: %w", ErrRun, err)
	}
	byLeader := map[string][]int32{}
	for _, p := range md.Topics[t.name].Partitions.Sorted() {
		addr := ""
		for _, b := range md.Brokers {
			if b.NodeID == p.Leader {
				addr = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
			}
		}
		if addr == "" {
			return nil, fmt.Errorf("%w: raw: no broker %d in metadata", ErrRun, p.Leader)
		}
		byLeader[addr] = append(byLeader[addr], p.Partition)
	}
	return byLeader, nil
}

// close deletes the topic (within 30 s, whatever the run's context) and closes the
// admin client.
func (t *rawTopic) close() {
	dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = t.ka.DeleteTopics(dctx, t.name)
	t.adm.Close()
}

// rawRun is what the phases of a RunRaw share once its topic exists: the clients'
// counters, and what starts, stops and waits for them.
type rawRun struct {
	cfg   RawConfig
	w     *Workload
	topic *rawTopic

	prod, cons *rawStats
	uncorr     *recorder     // paced: latency from the request's write
	tick       time.Duration // paced: the interval of a connection's requests
	schedStart time.Time     // paced: the origin of the schedule
	stopCtx    context.Context
	stop       context.CancelFunc // ends every client at once
	wg, prodWG sync.WaitGroup     // fetchers, producers
	stopProd   chan struct{}      // producers finish what is in flight and return
	// startFetch starts each leader's fetcher, until the end offsets given (nil: for
	// as long as the run lasts).
	startFetch []func(until map[int32]int64)
	errc       chan error // the clients' errors: the first ends the run
	notes      []string   // one per leader: how it is loaded
	// ledger, for a read-back's fill (readback.go), numbers the records and keeps
	// what was acknowledged; nil otherwise.
	ledger *ackLedger
	keys   []int  // with ledger: each record's key in a batch
	value  []byte // every record's value
}

// newRawRun readies a run of cfg over the topic t; its clients end with ctx, or
// with stop.
func newRawRun(ctx context.Context, cfg RawConfig, t *rawTopic) *rawRun {
	w := cfg.Workload
	r := &rawRun{cfg: cfg, w: w, topic: t, prod: &rawStats{lat: newRecorder()}, cons: &rawStats{lat: newRecorder()},
		uncorr: newRecorder(), tick: max(rawMinTick, w.Producer.Linger.D()), schedStart: time.Now(),
		stopProd: make(chan struct{}), errc: make(chan error, 64)}
	r.stopCtx, r.stop = context.WithCancel(ctx)
	// A backlog workload bounds the volume too: raw mode produces at the broker's full
	// speed, and a 10-minute run at disk speed would fill the disk, not a backlog.
	if w.ConsumerBacklogSizeGB > 0 {
		r.prod.limit = int64(w.ConsumerBacklogSizeGB * (1 << 30))
	}
	return r
}

// counts is the records and bytes produced, then fetched, so far.
func (r *rawRun) counts() [4]int64 {
	return [4]int64{r.prod.records.Load(), r.prod.bytes.Load(), r.cons.records.Load(), r.cons.bytes.Load()}
}

// startClients starts every leader's producers and readies its fetcher (which the
// meter starts: at once, or after a backlog's fill). The records carry the
// workload's first payload.
func (r *rawRun) startClients(ctx context.Context) error {
	totalParts := 0
	for _, parts := range r.topic.byLeader {
		totalParts += len(parts)
	}
	value := make([]byte, r.w.MessageSize)
	copy(value, payloads(r.w, 1)[0])
	r.value = value
	for addr, parts := range r.topic.byLeader {
		if err := r.startLeader(ctx, addr, parts, totalParts, value); err != nil {
			return err
		}
	}
	return nil
}

// startLeader starts the clients of the leader at addr, which leads parts of the
// topic's totalParts: it takes the versions addr serves, builds the Produce request
// of one batch of value per partition, notes how the leader is loaded, starts the
// producer connections and readies the fetcher.
func (r *rawRun) startLeader(ctx context.Context, addr string, parts []int32, totalParts int, value []byte) error {
	pver, fver, err := rawVersions(ctx, addr)
	if err != nil {
		return err
	}
	req, batch := rawProduceRequest(r.topic.name, parts, pver, r.w.Producer.Acks, r.cfg.RecordsPerBatch, value)
	if r.ledger != nil { // one batch per partition: each names its partition in its keys
		ts := time.Now().UnixMilli()
		for i := range req.Topics[0].Partitions {
			rp := &req.Topics[0].Partitions[i]
			rp.Records, r.keys = appendReadBackBatch(nil, rp.Partition, r.cfg.RecordsPerBatch, value, ts)
		}
		batch = req.Topics[0].Partitions[0].Records
	}
	conns := r.cfg.Connections
	if r.cfg.Paced {
		conns = min(conns, len(parts))
	}
	r.notes = append(r.notes, r.leaderNote(addr, parts, totalParts, conns, len(batch), pver, fver))
	for i := 0; i < conns; i++ {
		if err := r.startProducer(ctx, addr, req, parts, i, conns, totalParts, value); err != nil {
			return err
		}
	}
	if r.cfg.NoConsume {
		return nil
	}
	return r.readyFetcher(ctx, addr, parts, fver)
}

// rawVersions asks addr the versions of Produce and Fetch it serves, and returns
// those the raw client speaks: the highest both know, at least produce v3 and
// fetch v4.
func rawVersions(ctx context.Context, addr string) (pver, fver int16, err error) {
	vers, err := apiVersions(ctx, addr, 5*time.Second)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: raw ApiVersions %s: %w", ErrRun, addr, err)
	}
	pv, okP := vers[0]
	fv, okF := vers[1]
	if !okP || !okF {
		return 0, 0, fmt.Errorf("%w: raw: %s does not list Produce and Fetch in ApiVersions", ErrRun, addr)
	}
	if pv[1] < 3 || fv[1] < 4 {
		return 0, 0, fmt.Errorf("%w: raw: %s serves produce ≤v%d, fetch ≤v%d; need v3/v4", ErrRun, addr, pv[1], fv[1])
	}
	return min(pv[1], rawMaxProduceVersion), min(fv[1], rawMaxFetchVersion), nil
}

// rawProduceRequest is the Produce request (version pver, acks) that the raw
// producers send to the leader of parts: one batch of n records of value for each
// partition, the same bytes each time. It returns the batch too.
func rawProduceRequest(topic string, parts []int32, pver int16, acks Acks, n int, value []byte) (*kmsg.ProduceRequest, []byte) {
	req := kmsg.NewPtrProduceRequest()
	req.Version = pver
	req.Acks = int16(acks)
	req.TimeoutMillis = 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	batch := AppendRecordBatch(nil, n, value, time.Now().UnixMilli())
	for _, p := range parts {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = p
		rp.Records = batch
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req, batch
}

// leaderNote says how the leader at addr is loaded: its connections, requests in
// flight and batches (paced: its share of the rate, and how records spread over the
// partitions), and the versions spoken.
func (r *rawRun) leaderNote(addr string, parts []int32, totalParts, conns, batchLen int, pver, fver int16) string {
	cfg, w := r.cfg, r.w
	if !cfg.Paced {
		return fmt.Sprintf("raw %s: %d connections × %d in flight, %d records/batch, %d partitions/request (%d KiB), produce v%d, fetch v%d",
			addr, cfg.Connections, cfg.InFlight, cfg.RecordsPerBatch, len(parts), batchLen*len(parts)>>10, pver, fver)
	}
	spread := "keyed: records spread one at a time over the partitions"
	if w.KeyDistributor == KeyNone {
		spread = fmt.Sprintf("keyless: a batch (at most %d records) to one partition, the next to the next", cfg.RecordsPerBatch)
	}
	return fmt.Sprintf("raw %s paced: %d msg/s over %d partitions, %d connections × at most %d in flight, one request per connection every %v with the records due, %s; produce v%d, fetch v%d",
		addr, int64(float64(w.ProducerRate)*float64(len(parts))/float64(totalParts)), len(parts), conns, cfg.InFlight, r.tick, spread, pver, fver)
}

// startProducer dials addr and starts its producer connection i of conns: paced
// (rawPaced: its share of the rate, over parts of totalParts), or pipelining req
// (rawProduce). Its error, unless the run is stopping, goes to errc.
func (r *rawRun) startProducer(ctx context.Context, addr string, req *kmsg.ProduceRequest, parts []int32, i, conns, totalParts int, value []byte) error {
	cfg, w := r.cfg, r.w
	rc, err := dialRaw(ctx, addr)
	if err != nil {
		return fmt.Errorf("%w: raw dial %s: %w", ErrRun, addr, err)
	}
	if cfg.Paced {
		pc := newPacedConn(rc, req, parts, i, conns, totalParts, w, value, cfg.RecordsPerBatch)
		r.prodWG.Add(1)
		go func() {
			defer r.prodWG.Done()
			defer rc.Close()
			if err := rawPaced(r.stopCtx, r.stopProd, pc, r.schedStart, r.tick, cfg.InFlight, int64(w.MessageSize), r.prod, r.uncorr); err != nil && r.stopCtx.Err() == nil {
				r.errc <- err
			}
		}()
		return nil
	}
	frame := rc.appendRequest(nil, req, 0)
	perReq := int64(cfg.RecordsPerBatch * len(parts))
	var stamp *readBackStamp
	if r.ledger != nil {
		if stamp, err = newReadBackStamp(r.ledger, frame, req, r.keys); err != nil {
			rc.Close()
			return fmt.Errorf("%w: %w", ErrRun, err)
		}
	}
	r.prodWG.Add(1)
	go func() {
		defer r.prodWG.Done()
		defer rc.Close()
		if err := rawProduce(r.stopCtx, r.stopProd, rc, frame, req, cfg.InFlight, perReq, int64(w.MessageSize), r.prod, stamp); err != nil && r.stopCtx.Err() == nil {
			r.errc <- err
		}
	}()
	return nil
}

// readyFetcher dials addr for the fetcher of parts (fetch version fver) and adds
// its start to startFetch.
func (r *rawRun) readyFetcher(ctx context.Context, addr string, parts []int32, fver int16) error {
	rc, err := dialRaw(ctx, addr)
	if err != nil {
		return fmt.Errorf("%w: raw dial %s: %w", ErrRun, addr, err)
	}
	r.startFetch = append(r.startFetch, func(until map[int32]int64) {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer rc.Close()
			if err := rawFetch(r.stopCtx, rc, r.topic.name, parts, nil, until, fver, int64(r.w.MessageSize), r.cons); err != nil && r.stopCtx.Err() == nil {
				r.errc <- err
			}
		}()
	})
	return nil
}

// rawMeter is a raw run's clock: a Point a second, the measured window, the end.
// A backlog workload fills first with no fetcher, then drains from the start with
// no producer: the measured window is the drain. Other workloads produce and fetch
// at once, and measure after the warmup.
type rawMeter struct {
	r       *rawRun
	res     *Result
	backlog bool
	start   time.Time
	end     time.Time // of the run, or of a backlog's drain once it started

	last                 [4]int64 // counts at the last point
	lastT                time.Time
	pubTotal, iPub       *hdr.Histogram // request latency: of the window, of this second
	uncorrTotal, iUncorr *hdr.Histogram // paced: from the request's write

	// The measured window, from beginWindow on.
	measuring bool
	winStart  time.Time
	win0      [4]int64
	use0      Usage
	snap0     cpuSnap
	rt        *runtimeProbe   // the runtime figures' start of the window
	steadyCtx context.Context // OnSteady's: ends with the window
	endSteady context.CancelFunc

	// filled is closed when a backlog's producers have all returned (nil once
	// received), drained when its fetchers have read every partition to the end
	// offsets taken after the fill (nil until the drain starts).
	filled, drained chan struct{}
	fillStopped     bool // stopProd is closed: the fill ran out of time, or the run ended
}

// newMeter starts the run's clock, and the fetchers unless a backlog is to be
// filled first; without a warmup (and a backlog) the window begins at once.
func (r *rawRun) newMeter(ctx context.Context) *rawMeter {
	backlog := r.w.ConsumerBacklogSizeGB > 0 && !r.cfg.NoConsume
	if !backlog {
		for _, f := range r.startFetch {
			f(nil)
		}
	}
	m := &rawMeter{r: r, backlog: backlog,
		res:      &Result{Target: r.cfg.Target, Workload: r.w.Name, Mode: "raw", Started: time.Now().UTC(), Notes: r.notes},
		pubTotal: newHist(), iPub: newHist(), uncorrTotal: newHist(), iUncorr: newHist()}
	m.start = time.Now()
	m.lastT, m.winStart = m.start, m.start
	m.steadyCtx, m.endSteady = context.WithCancel(ctx)
	if r.cfg.Warmup <= 0 && !backlog {
		m.beginWindow(m.last)
	}
	if r.prod.limit > 0 {
		filled := make(chan struct{})
		m.filled = filled
		go func() { r.prodWG.Wait(); close(filled) }()
	}
	m.end = m.start.Add(r.cfg.Warmup + r.cfg.Duration)
	return m
}

// beginWindow begins the measured window at the counts cur: it samples the
// broker's and the loader's CPU, and starts cfg.OnSteady.
func (m *rawMeter) beginWindow(cur [4]int64) {
	cfg := m.r.cfg
	m.measuring, m.win0, m.winStart = true, cur, time.Now()
	if cfg.Broker != nil {
		m.use0, _ = cfg.Broker.Usage()
	}
	m.snap0 = takeCPUSnap()
	m.rt = startRuntimeProbe(cfg.BrokerRuntime)
	if cfg.OnSteady != nil {
		go cfg.OnSteady(m.steadyCtx)
	}
}

// run ticks every second until the run's end, a backlog drained, a backlog filled
// with no fetcher to drain it, or an error (a client's, or ctx's), which it returns.
func (m *rawMeter) run(ctx context.Context) error {
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-m.r.errc:
			return err
		case <-m.filled:
			m.filled = nil
			if !m.backlog {
				return nil // produce only: the volume is reached
			}
			if err := m.startDrain(ctx); err != nil {
				return err
			}
		case <-m.drained:
			return nil
		case now := <-ticker.C:
			if m.second(now) {
				return nil
			}
		}
	}
}

// startDrain starts a backlog's drain once its fill is over: it takes the end
// offsets the fetchers read to, notes the fill, begins the window (the drain's
// Duration) and starts the fetchers.
func (m *rawMeter) startDrain(ctx context.Context) error {
	r := m.r
	until, n, err := rawEndOffsets(ctx, r.topic.ka, r.topic.name, r.prod.records.Load())
	if err != nil {
		return err
	}
	m.res.Notes = append(m.res.Notes, fmt.Sprintf("backlog filled: %d records, %.2f GiB of values in %.1fs (%.0f MB/s); drained from offset 0 with no producer",
		n, float64(r.prod.bytes.Load())/(1<<30), time.Since(m.start).Seconds(), float64(r.prod.bytes.Load())/time.Since(m.start).Seconds()/1e6))
	m.beginWindow(r.counts())
	m.end = m.winStart.Add(r.cfg.Duration)
	for _, f := range r.startFetch {
		f(until)
	}
	drained := make(chan struct{})
	m.drained = drained
	go func() { r.wg.Wait(); close(drained) }()
	return nil
}

// second takes the point of the second ending at now, begins the window once the
// warmup is over, and reports whether the run is over: at its end, unless a backlog
// is still filling (its producers are then stopped, and the drain starts once they
// have returned).
func (m *rawMeter) second(now time.Time) (done bool) {
	cur := m.point(now)
	if !m.backlog && !m.measuring && now.Sub(m.start) >= m.r.cfg.Warmup {
		m.beginWindow(cur)
	}
	if now.Before(m.end) {
		return false
	}
	if m.backlog && !m.measuring {
		if m.filled != nil && !m.fillStopped {
			m.fillStopped = true
			close(m.r.stopProd) // the fill ran out of time: drain what is there
		}
		return false
	}
	return true
}

// point appends the Point of the second ending at now to the result, adds its
// latencies to the window's (a backlog's request latency is the fill's) and
// prints it to cfg.Progress. It returns the counts at now.
func (m *rawMeter) point(now time.Time) [4]int64 {
	r, cfg := m.r, m.r.cfg
	r.prod.lat.drainInto(m.iPub)
	r.uncorr.drainInto(m.iUncorr)
	cur := r.counts()
	dt := now.Sub(m.lastT).Seconds()
	phase := PhaseMeasure
	switch {
	case m.backlog && !m.measuring:
		phase = PhaseFill
	case m.backlog:
		phase = PhaseDrain
	case !m.measuring:
		phase = PhaseWarmup
	}
	last := m.last
	pt := Point{T: now.Sub(m.start).Seconds(), Phase: phase,
		PubRate: float64(cur[0]-last[0]) / dt, PubMBps: float64(cur[1]-last[1]) / dt / 1e6,
		ConsRate: float64(cur[2]-last[2]) / dt, ConsMBps: float64(cur[3]-last[3]) / dt / 1e6,
		Backlog: max(0, cur[0]-cur[2]), PubP50: usToMs(m.iPub.ValueAtQuantile(50)), PubP99: usToMs(m.iPub.ValueAtQuantile(99)),
		Errors: r.prod.errs.Load() + r.cons.errs.Load()}
	m.res.Series = append(m.res.Series, pt)
	if m.measuring || m.backlog {
		m.pubTotal.Merge(m.iPub) // a backlog's request latency is the fill's
		m.uncorrTotal.Merge(m.iUncorr)
	}
	m.iPub.Reset()
	m.iUncorr.Reset()
	m.last, m.lastT = cur, now
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "[%s %s RAW] %4.0fs %-7s produce %9s rec/s %7.1f MB/s | fetch %9s rec/s %7.1f MB/s | request p50 %6.2f p99 %6.2f ms | err %d\n",
			cfg.Target, r.w.Name, pt.T, phase, siCount(pt.PubRate), pt.PubMBps, siCount(pt.ConsRate), pt.ConsMBps, pt.PubP50, pt.PubP99, pt.Errors)
	}
	return cur
}

// rawWindowEnd is what closeWindow measured at the end of the window.
type rawWindowEnd struct {
	counts [4]int64
	secs   float64 // the window's length
	use    Usage   // the broker's (with cfg.Broker)
	snap   cpuSnap // the loader's
}

// closeWindow ends the window (its counts, length and CPU use), then the run:
// OnSteady's context, then every client, and waits for the clients to return.
func (m *rawMeter) closeWindow() rawWindowEnd {
	r := m.r
	e := rawWindowEnd{counts: r.counts(), secs: time.Since(m.winStart).Seconds()}
	if r.cfg.Broker != nil {
		e.use, _ = r.cfg.Broker.Usage()
	}
	e.snap = takeCPUSnap()
	m.rt.finish(m.res, r.cfg.BrokerInProcess)
	m.endSteady()
	// The producers finish the requests in flight (for at most rawDrainWait) before
	// the run ends: a record the broker took in and a consumer read is then counted
	// as acknowledged too, so that consumed never exceeds acknowledged.
	if !m.fillStopped {
		m.fillStopped = true
		close(r.stopProd)
	}
	drained := make(chan struct{})
	go func() { r.prodWG.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(rawDrainWait):
	}
	r.stop()
	r.wg.Wait()
	r.prodWG.Wait()
	return e
}

// rawDrainWait bounds how long the end of a run waits for the answers in flight.
const rawDrainWait = 5 * time.Second

// result fills in the run's result from the window that ended with e: rates over
// the window, totals, request latency, a backlog's catch-up, and the CPU cost of the
// broker and of the loader per message (produced, or for a backlog consumed).
func (m *rawMeter) result(e rawWindowEnd) *Result {
	res, r, cfg := m.res, m.r, m.r.cfg
	secs, win0, winEnd := e.secs, m.win0, e.counts
	res.DurationSec = secs
	res.PubRate = float64(winEnd[0]-win0[0]) / secs
	res.PubMBps = float64(winEnd[1]-win0[1]) / secs / 1e6
	res.ConsRate = float64(winEnd[2]-win0[2]) / secs
	res.ConsMBps = float64(winEnd[3]-win0[3]) / secs / 1e6
	res.Acked, res.Consumed, res.Errors = r.prod.records.Load(), r.cons.records.Load(), r.prod.errs.Load()+r.cons.errs.Load()
	res.PublishLatency = summarize(m.pubTotal, true)
	if cfg.Paced {
		res.RawRate = r.w.ProducerRate
		res.PublishLatencyUncorrected = summarize(m.uncorrTotal, true)
	}
	msgs, per := winEnd[0]-win0[0], "produced"
	if m.backlog {
		msgs, per = winEnd[2]-win0[2], "consumed"
		res.CaughtUp = m.drained != nil && res.Consumed == res.Acked
	}
	if cfg.Broker != nil && e.use.CPUSeconds > 0 {
		bytes := winEnd[1] - win0[1]
		if m.backlog {
			bytes = winEnd[3] - win0[3]
		}
		res.Broker = brokerCost(cfg.Broker, m.use0, e.use, msgs, bytes)
		res.Broker.PerWhat = per
		res.Broker.CPUCores = res.Broker.CPUSeconds / secs
	}
	if res.Loader = loaderCost(m.snap0, e.snap, msgs, secs, per, cfg.BrokerInProcess); res.Loader != nil {
		res.Notes = append(res.Notes, saturationNotes(res, runtime.NumCPU(), runtime.GOMAXPROCS(0))...)
	}
	addSpikeNote(res)
	return res
}
