package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawMaxBatchBytes bounds a raw batch below Kafka's default max.message.bytes
// (1,048,588); rawRecordOverhead is a generous bound on a record's framing (length,
// attributes, deltas, key and header counts) beside its value.
const (
	rawMaxBatchBytes  = 1_000_000
	rawRecordOverhead = 24
)

// defaultRawRecordsPerBatch is the workload's batch size in records, at most 4096, and
// under Kafka's default max.message.bytes so that a broker with default limits accepts
// every batch.
func defaultRawRecordsPerBatch(w *Workload) int {
	return min(4096, max(1, w.Producer.BatchSize/w.MessageSize),
		max(1, rawMaxBatchBytes/(w.MessageSize+rawRecordOverhead)))
}

// RawConfig configures the raw (broker capacity) mode. Zero values take defaults.
type RawConfig struct {
	Workload *Workload
	Brokers  []string
	Target   string
	Progress io.Writer
	Broker   UsageSource
	// BrokerInProcess: the broker runs in this process, so the loader's CPU includes it.
	BrokerInProcess bool

	Connections     int // produce connections (default 2; paced: the workload's producers)
	InFlight        int // pipelined Produce requests per connection (default 8; paced: the workload's maxInFlight)
	RecordsPerBatch int // default batchSize/messageSize, at most 4096 and within rawMaxBatchBytes
	Duration        time.Duration
	Warmup          time.Duration
	NoConsume       bool // skip the raw fetchers
	// Paced: produce at the workload's producerRate (raw_paced.go) instead of the
	// broker's capacity; InFlight bounds each connection's unanswered requests.
	Paced bool
	// OnSteady, if set, runs in its own goroutine when the measured window starts (on
	// a backlog workload: when the drain starts); its context ends with the window.
	OnSteady func(ctx context.Context)
}

// Highest versions the raw client speaks: both still name topics (newer ones use
// topic IDs).
const (
	rawMaxProduceVersion = 9
	rawMaxFetchVersion   = 12
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// AppendRecordBatch appends a v2 record batch (magic 2, no compression, no producer
// id) of n records with the given value and no key. Offsets are relative (base 0);
// the broker assigns real ones.
//
//	baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 |
//	crc uint32 (CRC-32C of attributes..end) | attributes int16 | lastOffsetDelta int32 |
//	firstTimestamp int64 | maxTimestamp int64 | producerId int64 | producerEpoch int16 |
//	baseSequence int32 | records count int32 | records...
//	record: length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
//	        keyLength varint (-1) | valueLength varint | value | headers count varint (0)
func AppendRecordBatch(dst []byte, n int, value []byte, tsMillis int64) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, 0) // length, patched
	dst = binary.BigEndian.AppendUint32(dst, 0xFFFFFFFF)
	dst = append(dst, 2)
	dst = binary.BigEndian.AppendUint32(dst, 0) // crc, patched
	crcStart := len(dst)
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(n-1))
	dst = binary.BigEndian.AppendUint64(dst, uint64(tsMillis))
	dst = binary.BigEndian.AppendUint64(dst, uint64(tsMillis))
	dst = binary.BigEndian.AppendUint64(dst, 0xFFFFFFFFFFFFFFFF)
	dst = binary.BigEndian.AppendUint16(dst, 0xFFFF)
	dst = binary.BigEndian.AppendUint32(dst, 0xFFFFFFFF)
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	for i := 0; i < n; i++ {
		// attributes, timestamp delta 0, offset delta, key -1, value length, value, 0 headers
		bodyLen := 1 + 1 + varintLen(int64(i)) + 1 + varintLen(int64(len(value))) + len(value) + 1
		dst = binary.AppendVarint(dst, int64(bodyLen))
		dst = append(dst, 0)
		dst = binary.AppendVarint(dst, 0)
		dst = binary.AppendVarint(dst, int64(i))
		dst = binary.AppendVarint(dst, -1)
		dst = binary.AppendVarint(dst, int64(len(value)))
		dst = append(dst, value...)
		dst = binary.AppendVarint(dst, 0)
	}
	binary.BigEndian.PutUint32(dst[start+8:], uint32(len(dst)-start-12))
	binary.BigEndian.PutUint32(dst[start+17:], crc32.Checksum(dst[crcStart:], crc32c))
	return dst
}

// varintLen is the size of v as a zig-zag varint.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// scanBatches walks the record batches in b without decoding records: it returns the
// records and bytes of every whole batch, and the offset after the last one (or -1).
func scanBatches(b []byte) (records, bytes int64, next int64) {
	next = -1
	for len(b) >= 61 {
		base := int64(binary.BigEndian.Uint64(b))
		l := int64(int32(binary.BigEndian.Uint32(b[8:])))
		if l < 49 || 12+l > int64(len(b)) {
			break // a partial batch at the end of a fetch
		}
		if b[16] == 2 {
			lastDelta := int64(int32(binary.BigEndian.Uint32(b[23:])))
			records += max(0, int64(int32(binary.BigEndian.Uint32(b[57:]))))
			next = base + lastDelta + 1
		} else {
			next = base + 1 // old formats: one message at least; good enough to advance
			records++
		}
		bytes += 12 + l
		b = b[12+l:]
	}
	return records, bytes, next
}

type rawStats struct {
	records, bytes, errs atomic.Int64
	lat                  *recorder
	// limit, when positive, bounds the bytes of values the producers sharing these
	// stats send (a backlog's fill); claimed is what they have sent so far.
	limit   int64
	claimed atomic.Int64
}

// RunRaw measures broker capacity with pre-encoded Produce requests, pipelined, and
// Fetch requests whose records are never decoded. One topic of the workload's
// partitions is used; every request carries one batch per partition.
func RunRaw(ctx context.Context, cfg RawConfig) (*Result, error) {
	w := cfg.Workload
	if w == nil || len(cfg.Brokers) == 0 {
		return nil, fmt.Errorf("%w: raw: need a workload and brokers", ErrRun)
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
		return nil, fmt.Errorf("%w: raw: the paced mode needs a fixed rate (the workload's producerRate or --rate)", ErrRun)
	}
	if cfg.Paced && w.ConsumerBacklogSizeGB > 0 {
		return nil, fmt.Errorf("%w: raw: the paced mode does not fill a backlog (%s drains one)", ErrRun, w.Name)
	}
	adm, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.DisableClientMetrics())
	if err != nil {
		return nil, fmt.Errorf("%w: raw admin client: %w", ErrRun, err)
	}
	defer adm.Close()
	ka := kadm.NewClient(adm)
	topic := "samsa-bench-raw-" + runID()
	if err := createTopics(ctx, adm, []string{topic}, w); err != nil {
		return nil, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = ka.DeleteTopics(dctx, topic)
	}()
	md, err := ka.Metadata(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("%w: raw metadata: %w", ErrRun, err)
	}
	// Partitions by leader address.
	byLeader := map[string][]int32{}
	for _, p := range md.Topics[topic].Partitions.Sorted() {
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

	prod, cons := &rawStats{lat: newRecorder()}, &rawStats{lat: newRecorder()}
	uncorr := newRecorder() // paced: latency from the request's write
	totalParts := 0
	for _, parts := range byLeader {
		totalParts += len(parts)
	}
	tick := max(rawMinTick, w.Producer.Linger.D())
	schedStart := time.Now()
	stopCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg, prodWG sync.WaitGroup   // fetchers, producers
	stopProd := make(chan struct{}) // producers finish what is in flight and return
	var startFetch []func(map[int32]int64)
	// A backlog workload bounds the volume too: raw mode produces at the broker's full
	// speed, and a 10-minute run at disk speed would fill the disk, not a backlog.
	if w.ConsumerBacklogSizeGB > 0 {
		prod.limit = int64(w.ConsumerBacklogSizeGB * (1 << 30))
	}
	errc := make(chan error, 64)
	var notes []string
	value := make([]byte, w.MessageSize)
	copy(value, payloads(w, 1)[0])
	for addr, parts := range byLeader {
		vers, err := apiVersions(ctx, addr, 5*time.Second)
		if err != nil {
			return nil, fmt.Errorf("%w: raw ApiVersions %s: %w", ErrRun, addr, err)
		}
		pv, okP := vers[0]
		fv, okF := vers[1]
		if !okP || !okF {
			return nil, fmt.Errorf("%w: raw: %s does not list Produce and Fetch in ApiVersions", ErrRun, addr)
		}
		if pv[1] < 3 || fv[1] < 4 {
			return nil, fmt.Errorf("%w: raw: %s serves produce ≤v%d, fetch ≤v%d; need v3/v4", ErrRun, addr, pv[1], fv[1])
		}
		pver, fver := min(pv[1], rawMaxProduceVersion), min(fv[1], rawMaxFetchVersion)
		req := kmsg.NewPtrProduceRequest()
		req.Version = pver
		req.Acks = int16(w.Producer.Acks)
		req.TimeoutMillis = 30000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		batch := AppendRecordBatch(nil, cfg.RecordsPerBatch, value, time.Now().UnixMilli())
		for _, p := range parts {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = p
			rp.Records = batch
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		perReq := int64(cfg.RecordsPerBatch * len(parts))
		conns := cfg.Connections
		if cfg.Paced {
			conns = min(conns, len(parts))
			spread := "keyed: records spread one at a time over the partitions"
			if w.KeyDistributor == KeyNone {
				spread = fmt.Sprintf("keyless: a batch (at most %d records) to one partition, the next to the next", cfg.RecordsPerBatch)
			}
			notes = append(notes, fmt.Sprintf("raw %s paced: %d msg/s over %d partitions, %d connections × at most %d in flight, one request per connection every %v with the records due, %s; produce v%d, fetch v%d",
				addr, int64(float64(w.ProducerRate)*float64(len(parts))/float64(totalParts)), len(parts), conns, cfg.InFlight, tick, spread, pver, fver))
		} else {
			notes = append(notes, fmt.Sprintf("raw %s: %d connections × %d in flight, %d records/batch, %d partitions/request (%d KiB), produce v%d, fetch v%d",
				addr, cfg.Connections, cfg.InFlight, cfg.RecordsPerBatch, len(parts), len(batch)*len(parts)>>10, pver, fver))
		}
		for i := 0; i < conns; i++ {
			rc, err := dialRaw(ctx, addr)
			if err != nil {
				return nil, fmt.Errorf("%w: raw dial %s: %w", ErrRun, addr, err)
			}
			if cfg.Paced {
				pc := newPacedConn(rc, req, parts, i, conns, totalParts, w, value, cfg.RecordsPerBatch)
				prodWG.Add(1)
				go func() {
					defer prodWG.Done()
					defer rc.Close()
					if err := rawPaced(stopCtx, stopProd, pc, schedStart, tick, cfg.InFlight, int64(w.MessageSize), prod, uncorr); err != nil && stopCtx.Err() == nil {
						errc <- err
					}
				}()
				continue
			}
			frame := rc.appendRequest(nil, req, 0)
			prodWG.Add(1)
			go func() {
				defer prodWG.Done()
				defer rc.Close()
				if err := rawProduce(stopCtx, stopProd, rc, frame, req, cfg.InFlight, perReq, int64(w.MessageSize), prod); err != nil && stopCtx.Err() == nil {
					errc <- err
				}
			}()
		}
		if !cfg.NoConsume {
			rc, err := dialRaw(ctx, addr)
			if err != nil {
				return nil, fmt.Errorf("%w: raw dial %s: %w", ErrRun, addr, err)
			}
			startFetch = append(startFetch, func(until map[int32]int64) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer rc.Close()
					if err := rawFetch(stopCtx, rc, topic, parts, until, fver, int64(w.MessageSize), cons); err != nil && stopCtx.Err() == nil {
						errc <- err
					}
				}()
			})
		}
	}
	// A backlog workload fills first with no fetcher, then drains from the start with
	// no producer: the measured window is the drain. Other workloads produce and fetch
	// at once.
	backlog := w.ConsumerBacklogSizeGB > 0 && !cfg.NoConsume
	if !backlog {
		for _, f := range startFetch {
			f(nil)
		}
	}

	res := &Result{Target: cfg.Target, Workload: w.Name, Mode: "raw", Started: time.Now().UTC(), Notes: notes}
	start := time.Now()
	last, lastT := [4]int64{}, start
	pubTotal, iPub := newHist(), newHist()
	uncorrTotal, iUncorr := newHist(), newHist()
	var win0 [4]int64
	var use0 Usage
	var snap0 cpuSnap
	steadyCtx, endSteady := context.WithCancel(ctx)
	defer endSteady()
	winStart := start
	measuring := false
	beginWindow := func(cur [4]int64) {
		measuring, win0, winStart = true, cur, time.Now()
		if cfg.Broker != nil {
			use0, _ = cfg.Broker.Usage()
		}
		snap0 = takeCPUSnap()
		if cfg.OnSteady != nil {
			go cfg.OnSteady(steadyCtx)
		}
	}
	counts := func() [4]int64 {
		return [4]int64{prod.records.Load(), prod.bytes.Load(), cons.records.Load(), cons.bytes.Load()}
	}
	if cfg.Warmup <= 0 && !backlog {
		beginWindow(last)
	}
	// filled is closed when a backlog's producers have all returned, drained when its
	// fetchers have read every partition to the end offsets taken after the fill.
	var filled, drained chan struct{}
	fillStopped := false
	if prod.limit > 0 {
		filled = make(chan struct{})
		go func() { prodWG.Wait(); close(filled) }()
	}
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	end := start.Add(cfg.Warmup + cfg.Duration)
	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			runErr = ctx.Err()
			break loop
		case err := <-errc:
			runErr = err
			break loop
		case <-filled:
			filled = nil
			if !backlog {
				break loop // produce only: the volume is reached
			}
			until, n, err := rawEndOffsets(ctx, ka, topic, prod.records.Load())
			if err != nil {
				runErr = err
				break loop
			}
			res.Notes = append(res.Notes, fmt.Sprintf("backlog filled: %d records, %.2f GiB of values in %.1fs (%.0f MB/s); drained from offset 0 with no producer",
				n, float64(prod.bytes.Load())/(1<<30), time.Since(start).Seconds(), float64(prod.bytes.Load())/time.Since(start).Seconds()/1e6))
			beginWindow(counts())
			end = winStart.Add(cfg.Duration)
			for _, f := range startFetch {
				f(until)
			}
			drained = make(chan struct{})
			go func() { wg.Wait(); close(drained) }()
		case <-drained:
			break loop
		case now := <-ticker.C:
			prod.lat.drainInto(iPub)
			uncorr.drainInto(iUncorr)
			cur := counts()
			dt := now.Sub(lastT).Seconds()
			phase := PhaseMeasure
			switch {
			case backlog && !measuring:
				phase = PhaseFill
			case backlog:
				phase = PhaseDrain
			case !measuring:
				phase = PhaseWarmup
			}
			pt := Point{T: now.Sub(start).Seconds(), Phase: phase,
				PubRate: float64(cur[0]-last[0]) / dt, PubMBps: float64(cur[1]-last[1]) / dt / 1e6,
				ConsRate: float64(cur[2]-last[2]) / dt, ConsMBps: float64(cur[3]-last[3]) / dt / 1e6,
				Backlog: max(0, cur[0]-cur[2]), PubP50: usToMs(iPub.ValueAtQuantile(50)), PubP99: usToMs(iPub.ValueAtQuantile(99)),
				Errors: prod.errs.Load() + cons.errs.Load()}
			res.Series = append(res.Series, pt)
			if measuring || backlog {
				pubTotal.Merge(iPub) // a backlog's request latency is the fill's
				uncorrTotal.Merge(iUncorr)
			}
			iPub.Reset()
			iUncorr.Reset()
			last, lastT = cur, now
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "[%s %s RAW] %4.0fs %-7s produce %9s rec/s %7.1f MB/s | fetch %9s rec/s %7.1f MB/s | request p50 %6.2f p99 %6.2f ms | err %d\n",
					cfg.Target, w.Name, pt.T, phase, siCount(pt.PubRate), pt.PubMBps, siCount(pt.ConsRate), pt.ConsMBps, pt.PubP50, pt.PubP99, pt.Errors)
			}
			if !backlog && !measuring && now.Sub(start) >= cfg.Warmup {
				beginWindow(cur)
			}
			if !now.Before(end) {
				if backlog && !measuring {
					if filled != nil && !fillStopped {
						fillStopped = true
						close(stopProd) // the fill ran out of time: drain what is there
					}
					continue
				}
				break loop
			}
		}
	}
	winEnd := counts()
	secs := time.Since(winStart).Seconds()
	var use1 Usage
	if cfg.Broker != nil {
		use1, _ = cfg.Broker.Usage()
	}
	snap1 := takeCPUSnap()
	endSteady()
	stop()
	wg.Wait()
	prodWG.Wait()
	if runErr != nil {
		return nil, fmt.Errorf("%w: raw: %w", ErrRun, runErr)
	}
	res.DurationSec = secs
	res.PubRate = float64(winEnd[0]-win0[0]) / secs
	res.PubMBps = float64(winEnd[1]-win0[1]) / secs / 1e6
	res.ConsRate = float64(winEnd[2]-win0[2]) / secs
	res.ConsMBps = float64(winEnd[3]-win0[3]) / secs / 1e6
	res.Acked, res.Consumed, res.Errors = prod.records.Load(), cons.records.Load(), prod.errs.Load()+cons.errs.Load()
	res.PublishLatency = summarize(pubTotal, true)
	if cfg.Paced {
		res.RawRate = w.ProducerRate
		res.PublishLatencyUncorrected = summarize(uncorrTotal, true)
	}
	msgs, per := winEnd[0]-win0[0], "produced"
	if backlog {
		msgs, per = winEnd[2]-win0[2], "consumed"
		res.CaughtUp = drained != nil && res.Consumed == res.Acked
	}
	if cfg.Broker != nil && use1.CPUSeconds > 0 {
		bytes := winEnd[1] - win0[1]
		if backlog {
			bytes = winEnd[3] - win0[3]
		}
		res.Broker = brokerCost(cfg.Broker, use0, use1, msgs, bytes)
		res.Broker.PerWhat = per
		res.Broker.CPUCores = res.Broker.CPUSeconds / secs
	}
	if res.Loader = loaderCost(snap0, snap1, msgs, secs, per, cfg.BrokerInProcess); res.Loader != nil {
		res.Notes = append(res.Notes, saturationNotes(res, runtime.NumCPU(), runtime.GOMAXPROCS(0))...)
	}
	return res, nil
}

// rawEndOffsets is every partition's end offset once their sum is the acked records
// (the topic is new: its logs start at 0). A replicated topic's high watermark may
// trail the last acknowledgement for a moment (acks=1), so it asks again for up to
// 10 s; a sum above acked, or still below it then, is an error.
func rawEndOffsets(ctx context.Context, ka *kadm.Client, topic string, acked int64) (map[int32]int64, int64, error) {
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		lo, err := ka.ListEndOffsets(ctx, topic)
		if err == nil {
			err = lo.Error()
		}
		if err != nil {
			return nil, 0, fmt.Errorf("raw end offsets: %w", err)
		}
		until, sum := map[int32]int64{}, int64(0)
		lo.Each(func(o kadm.ListedOffset) {
			until[o.Partition] = o.Offset
			sum += o.Offset
		})
		if sum == acked {
			return until, sum, nil
		}
		if sum > acked || time.Now().After(deadline) {
			return nil, 0, fmt.Errorf("raw: the backlog holds %d records, %d were acknowledged", sum, acked)
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-tick.C:
		}
	}
}

// rawProduce writes frame over and over (patching the correlation id) with up to
// inflight requests outstanding, reading responses on a second goroutine. When stop
// is closed, or st.limit bytes of values have been claimed by the run's producers, it
// sends no more and returns once every request in flight is answered; ctx ends it at
// once.
func rawProduce(ctx context.Context, stop <-chan struct{}, rc *rawConn, frame []byte, req *kmsg.ProduceRequest, inflight int, perReq, msgSize int64, st *rawStats) error {
	noAcks := req.Acks == 0
	sent := make(chan int64, inflight)
	readErr := make(chan error, 1)
	go func() {
		defer close(readErr)
		if noAcks {
			return
		}
		resp := kmsg.NewPtrProduceResponse()
		for corr := int32(1); ; corr++ {
			t0, ok := <-sent
			if !ok {
				return
			}
			body, err := rc.readResponse(req.Key(), req.IsFlexible(), corr)
			if err != nil {
				readErr <- err
				return
			}
			ok2, err := readProduce(resp, req.Version, body, st)
			if err != nil {
				readErr <- err
				return
			}
			st.lat.record(time.Now().UnixNano() - t0)
			perPart := perReq / int64(len(req.Topics[0].Partitions))
			st.records.Add(ok2 * perPart)
			st.bytes.Add(ok2 * perPart * msgSize)
		}
	}()
	go func() { <-ctx.Done(); rc.Close() }()
	finish := func() error {
		close(sent)
		if err, ok := <-readErr; ok {
			return err
		}
		return nil
	}
	reqBytes := perReq * msgSize
	for corr := int32(1); ; corr++ {
		binary.BigEndian.PutUint32(frame[8:], uint32(corr))
		if st.limit > 0 && st.claimed.Add(reqBytes)-reqBytes >= st.limit {
			return finish()
		}
		if !noAcks {
			select {
			case sent <- time.Now().UnixNano():
			case err := <-readErr:
				close(sent)
				return err
			case <-stop:
				return finish()
			case <-ctx.Done():
				close(sent)
				return nil
			}
		}
		if _, err := rc.c.Write(frame); err != nil {
			close(sent)
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("raw produce write: %w", err)
		}
		if noAcks {
			st.records.Add(perReq)
			st.bytes.Add(perReq * msgSize)
		}
	}
}

// readProduce parses a Produce response into resp (scratch space) and returns its
// partitions, or the first partition's error (counted in st.errs): a figure made of
// refused batches means nothing, so the run stops with the broker's error.
func readProduce(resp *kmsg.ProduceResponse, version int16, body []byte, st *rawStats) (int64, error) {
	resp.Default()
	resp.Version = version
	if err := resp.ReadFrom(body); err != nil {
		return 0, fmt.Errorf("%w: produce response: %v", ErrProtocol, err)
	}
	var n int64
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				st.errs.Add(1)
				return 0, fmt.Errorf("raw produce to %s[%d]: %w", t.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
			n++
		}
	}
	return n, nil
}

// rawFetch fetches parts from offset 0 onwards, one request at a time, counting
// records and bytes from batch headers. With until, a partition is fetched until its
// offset reaches until[p], and rawFetch returns once all have.
//
// From fetch v7 it fetches in a KIP-227 session, as consumers do: the first request
// names every partition and opens the session, later ones name only the partitions
// whose offset moved (and forget those done), and an answer carries only the
// partitions with records or changes. A session the broker lost
// (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH) is opened again with a
// full request; a broker that answers with no session id gets full requests from
// then on.
func rawFetch(ctx context.Context, rc *rawConn, topic string, parts []int32, until map[int32]int64, version int16, msgSize int64, st *rawStats) error {
	go func() { <-ctx.Done(); rc.Close() }()
	offsets := make(map[int32]int64, len(parts))
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.ReplicaID = -1
	req.MaxWaitMillis = 500
	req.MinBytes = 1
	req.MaxBytes = 64 << 20
	req.IsolationLevel = 0
	var active []int32
	for _, p := range parts {
		if until == nil || until[p] > 0 {
			active = append(active, p)
		}
	}
	session := version >= 7
	var sessID, epoch int32 // epoch 0: open a session (a full request)
	moved := map[int32]bool{}
	var forgotten []int32
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	resp := kmsg.NewPtrFetchResponse()
	var buf []byte
	for corr := int32(1); len(active) > 0; corr++ {
		full := !session || epoch == 0
		ft.Partitions = ft.Partitions[:0]
		add := func(p int32) {
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.Partition = p
			fp.FetchOffset = offsets[p]
			fp.PartitionMaxBytes = 8 << 20
			fp.CurrentLeaderEpoch = -1
			fp.LastFetchedEpoch = -1
			ft.Partitions = append(ft.Partitions, fp)
		}
		if full {
			for _, p := range active {
				add(p)
			}
		} else {
			for p := range moved { // not a walk over every partition
				if until == nil || offsets[p] < until[p] {
					add(p)
				}
			}
		}
		req.Topics, req.ForgottenTopics = req.Topics[:0], req.ForgottenTopics[:0]
		if len(ft.Partitions) > 0 {
			req.Topics = append(req.Topics, ft)
		}
		if !full && len(forgotten) > 0 {
			f := kmsg.NewFetchRequestForgottenTopic()
			f.Topic, f.Partitions = topic, forgotten
			req.ForgottenTopics = append(req.ForgottenTopics, f)
		}
		req.SessionID, req.SessionEpoch = sessID, epoch
		if !session {
			req.SessionID, req.SessionEpoch = 0, -1
		}
		buf = rc.appendRequest(buf[:0], req, corr)
		if _, err := rc.c.Write(buf); err != nil {
			return ignoreClosed(ctx, err)
		}
		clear(moved)
		forgotten = forgotten[:0]
		code, err := rc.readFetch(resp, version, corr, func(p fetchedPartition) {
			cur, ok := offsets[p.partition]
			if !ok && !slices.Contains(parts, p.partition) {
				return
			}
			if p.errorCode != 0 {
				st.errs.Add(1)
				return
			}
			if p.next > cur {
				offsets[p.partition] = p.next
				moved[p.partition] = true
			}
			st.records.Add(p.records)
			st.bytes.Add(p.records * msgSize) // payload bytes, as on the produce side
		})
		if err != nil {
			return ignoreClosed(ctx, err)
		}
		switch {
		case session && (code == kerr.FetchSessionIDNotFound.Code || code == kerr.InvalidFetchSessionEpoch.Code):
			sessID, epoch = 0, 0 // the next request opens a new one
		case code != 0:
			st.errs.Add(1)
		case session && epoch == 0:
			if sessID = resp.SessionID; sessID == 0 {
				session = false // sessions disabled: full requests
			} else {
				epoch = 1
			}
		case session:
			epoch = max(1, epoch+1) // after MaxInt32: 1
		}
		if until != nil {
			active = slices.DeleteFunc(active, func(p int32) bool {
				if offsets[p] >= until[p] {
					forgotten = append(forgotten, p)
					return true
				}
				return false
			})
		}
	}
	return nil
}

// fetchedPartition is what the raw fetcher learns of one partition of a Fetch
// response: its error code, the records and bytes of its whole batches (counted from
// the batch headers), and the offset after the last of them (-1 if none).
type fetchedPartition struct {
	partition      int32
	errorCode      int16
	records, bytes int64
	next           int64
}

// readFetch reads the Fetch response to corr and calls part for each partition in
// it; it returns the response's top-level error code. resp is scratch space.
func (rc *rawConn) readFetch(resp *kmsg.FetchResponse, version int16, corr int32, part func(fetchedPartition)) (int16, error) {
	body, err := rc.readResponse(1, version >= 12, corr)
	if err != nil {
		return 0, err
	}
	resp.Default()
	resp.Version = version
	if err := resp.UnsafeReadFrom(body); err != nil {
		return 0, fmt.Errorf("%w: fetch response: %v", ErrProtocol, err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			fp := fetchedPartition{partition: p.Partition, errorCode: p.ErrorCode, next: -1}
			if p.ErrorCode == 0 {
				fp.records, fp.bytes, fp.next = scanBatches(p.RecordBatches)
			}
			part(fp)
		}
	}
	return resp.ErrorCode, nil
}

func ignoreClosed(ctx context.Context, err error) error {
	if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
