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

	Connections     int // produce connections (default 2)
	InFlight        int // pipelined Produce requests per connection (default 8)
	RecordsPerBatch int // default batchSize/messageSize, at most 4096 and within rawMaxBatchBytes
	Duration        time.Duration
	Warmup          time.Duration
	NoConsume       bool // skip the raw fetchers
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
}

// RunRaw measures broker capacity with pre-encoded Produce requests, pipelined, and
// Fetch requests whose records are never decoded. One topic of the workload's
// partitions is used; every request carries one batch per partition.
func RunRaw(ctx context.Context, cfg RawConfig) (*Result, error) {
	w := cfg.Workload
	if w == nil || len(cfg.Brokers) == 0 {
		return nil, fmt.Errorf("%w: raw: need a workload and brokers", ErrRun)
	}
	if cfg.Connections <= 0 {
		cfg.Connections = 2
	}
	if cfg.InFlight <= 0 {
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
	stopCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
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
		notes = append(notes, fmt.Sprintf("raw %s: %d connections × %d in flight, %d records/batch, %d partitions/request (%d KiB), produce v%d, fetch v%d",
			addr, cfg.Connections, cfg.InFlight, cfg.RecordsPerBatch, len(parts), len(batch)*len(parts)>>10, pver, fver))
		for i := 0; i < cfg.Connections; i++ {
			rc, err := dialRaw(ctx, addr)
			if err != nil {
				return nil, fmt.Errorf("%w: raw dial %s: %w", ErrRun, addr, err)
			}
			frame := rc.appendRequest(nil, req, 0)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer rc.Close()
				if err := rawProduce(stopCtx, rc, frame, req, cfg.InFlight, perReq, int64(w.MessageSize), prod); err != nil && stopCtx.Err() == nil {
					errc <- err
				}
			}()
		}
		if !cfg.NoConsume {
			rc, err := dialRaw(ctx, addr)
			if err != nil {
				return nil, fmt.Errorf("%w: raw dial %s: %w", ErrRun, addr, err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer rc.Close()
				if err := rawFetch(stopCtx, rc, topic, parts, fver, int64(w.MessageSize), cons); err != nil && stopCtx.Err() == nil {
					errc <- err
				}
			}()
		}
	}

	res := &Result{Target: cfg.Target, Workload: w.Name, Mode: "raw", Started: time.Now().UTC(), Notes: notes}
	start := time.Now()
	last, lastT := [4]int64{}, start
	pubTotal, iPub := newHist(), newHist()
	var win0 [4]int64
	var use0 Usage
	measuring := cfg.Warmup <= 0
	if measuring && cfg.Broker != nil {
		use0, _ = cfg.Broker.Usage()
	}
	var snap0 cpuSnap
	if measuring {
		snap0 = takeCPUSnap()
	}
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	end := start.Add(cfg.Warmup + cfg.Duration)
	// A backlog workload bounds the volume too: raw mode produces at the broker's full
	// speed, and a 10-minute run at disk speed would fill the disk, not a backlog.
	var capBytes int64
	if w.ConsumerBacklogSizeGB > 0 {
		capBytes = int64(w.ConsumerBacklogSizeGB * (1 << 30))
	}
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
		case now := <-ticker.C:
			prod.lat.drainInto(iPub)
			cur := [4]int64{prod.records.Load(), prod.bytes.Load(), cons.records.Load(), cons.bytes.Load()}
			dt := now.Sub(lastT).Seconds()
			phase := PhaseMeasure
			if !measuring {
				phase = PhaseWarmup
			}
			pt := Point{T: now.Sub(start).Seconds(), Phase: phase,
				PubRate: float64(cur[0]-last[0]) / dt, PubMBps: float64(cur[1]-last[1]) / dt / 1e6,
				ConsRate: float64(cur[2]-last[2]) / dt, ConsMBps: float64(cur[3]-last[3]) / dt / 1e6,
				Backlog: max(0, cur[0]-cur[2]), PubP50: usToMs(iPub.ValueAtQuantile(50)), PubP99: usToMs(iPub.ValueAtQuantile(99)),
				Errors: prod.errs.Load() + cons.errs.Load()}
			res.Series = append(res.Series, pt)
			if measuring {
				pubTotal.Merge(iPub)
			}
			iPub.Reset()
			last, lastT = cur, now
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "[%s %s RAW] %4.0fs %-7s produce %9s rec/s %7.1f MB/s | fetch %9s rec/s %7.1f MB/s | request p50 %6.2f p99 %6.2f ms | err %d\n",
					cfg.Target, w.Name, pt.T, phase, siCount(pt.PubRate), pt.PubMBps, siCount(pt.ConsRate), pt.ConsMBps, pt.PubP50, pt.PubP99, pt.Errors)
			}
			if !measuring && now.Sub(start) >= cfg.Warmup {
				measuring = true
				win0 = cur
				if cfg.Broker != nil {
					use0, _ = cfg.Broker.Usage()
				}
				snap0 = takeCPUSnap()
			}
			if !now.Before(end) || (capBytes > 0 && cur[1] >= capBytes) {
				break loop
			}
		}
	}
	winEnd := [4]int64{prod.records.Load(), prod.bytes.Load(), cons.records.Load(), cons.bytes.Load()}
	secs := time.Since(start).Seconds() - cfg.Warmup.Seconds()
	var use1 Usage
	if cfg.Broker != nil {
		use1, _ = cfg.Broker.Usage()
	}
	snap1 := takeCPUSnap()
	stop()
	wg.Wait()
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
	if cfg.Broker != nil && use1.CPUSeconds > 0 {
		res.Broker = brokerCost(cfg.Broker, use0, use1, winEnd[0]-win0[0], winEnd[1]-win0[1])
		res.Broker.CPUCores = res.Broker.CPUSeconds / secs
	}
	if res.Loader = loaderCost(snap0, snap1, winEnd[0]-win0[0], secs, "produced", cfg.BrokerInProcess); res.Loader != nil {
		res.Notes = append(res.Notes, saturationNotes(res, runtime.NumCPU(), runtime.GOMAXPROCS(0))...)
	}
	return res, nil
}

// rawProduce writes frame over and over (patching the correlation id) with up to
// inflight requests outstanding, reading responses on a second goroutine.
func rawProduce(ctx context.Context, rc *rawConn, frame []byte, req *kmsg.ProduceRequest, inflight int, perReq, msgSize int64, st *rawStats) error {
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
			resp.Default()
			resp.Version = req.Version
			if err := resp.ReadFrom(body); err != nil {
				readErr <- fmt.Errorf("%w: produce response: %v", ErrProtocol, err)
				return
			}
			st.lat.record(time.Now().UnixNano() - t0)
			var ok2 int64
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode == 0 {
						ok2++
						continue
					}
					// A capacity figure made of refused batches means nothing:
					// stop the run with the broker's error.
					st.errs.Add(1)
					readErr <- fmt.Errorf("raw produce to %s[%d]: %w", t.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
					return
				}
			}
			perPart := perReq / int64(len(req.Topics[0].Partitions))
			st.records.Add(ok2 * perPart)
			st.bytes.Add(ok2 * perPart * msgSize)
		}
	}()
	go func() { <-ctx.Done(); rc.Close() }()
	defer close(sent)
	for corr := int32(1); ; corr++ {
		binary.BigEndian.PutUint32(frame[8:], uint32(corr))
		if !noAcks {
			select {
			case sent <- time.Now().UnixNano():
			case err := <-readErr:
				return err
			case <-ctx.Done():
				return nil
			}
		}
		if _, err := rc.c.Write(frame); err != nil {
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

// rawFetch fetches parts from offset 0 onwards, one request at a time, counting
// records and bytes from batch headers.
func rawFetch(ctx context.Context, rc *rawConn, topic string, parts []int32, version int16, msgSize int64, st *rawStats) error {
	go func() { <-ctx.Done(); rc.Close() }()
	offsets := make([]int64, len(parts))
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.ReplicaID = -1
	req.MaxWaitMillis = 500
	req.MinBytes = 1
	req.MaxBytes = 64 << 20
	req.IsolationLevel = 0
	req.SessionEpoch = -1 // no fetch session
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	for _, p := range parts {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition = p
		fp.PartitionMaxBytes = 8 << 20
		fp.CurrentLeaderEpoch = -1
		fp.LastFetchedEpoch = -1
		ft.Partitions = append(ft.Partitions, fp)
	}
	req.Topics = []kmsg.FetchRequestTopic{ft}
	resp := kmsg.NewPtrFetchResponse()
	var buf []byte
	for corr := int32(1); ; corr++ {
		for i := range parts {
			req.Topics[0].Partitions[i].FetchOffset = offsets[i]
		}
		buf = rc.appendRequest(buf[:0], req, corr)
		if _, err := rc.c.Write(buf); err != nil {
			return ignoreClosed(ctx, err)
		}
		body, err := rc.readResponse(req.Key(), req.IsFlexible(), corr)
		if err != nil {
			return ignoreClosed(ctx, err)
		}
		resp.Default()
		resp.Version = version
		if err := resp.UnsafeReadFrom(body); err != nil {
			return fmt.Errorf("%w: fetch response: %v", ErrProtocol, err)
		}
		if resp.ErrorCode != 0 {
			st.errs.Add(1)
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				idx := -1
				for i, q := range parts {
					if q == p.Partition {
						idx = i
					}
				}
				if idx < 0 {
					continue
				}
				if p.ErrorCode != 0 {
					st.errs.Add(1)
					continue
				}
				n, _, next := scanBatches(p.RecordBatches)
				if next > offsets[idx] {
					offsets[idx] = next
				}
				st.records.Add(n)
				st.bytes.Add(n * msgSize) // payload bytes, as on the produce side
			}
		}
	}
}

func ignoreClosed(ctx context.Context, err error) error {
	if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
