package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
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
	rec := w.MessageSize + rawRecordOverhead
	if w.ReadBack {
		rec += readBackKeyLen
	}
	return min(4096, max(1, w.Producer.BatchSize/w.MessageSize), max(1, rawMaxBatchBytes/rec))
}

// RawConfig configures the raw (broker capacity) mode. Zero values take defaults.
type RawConfig struct {
	Workload *Workload
	Brokers  []string
	Target   string
	Progress io.Writer
	Broker   UsageSource
	// BrokerRuntime, if set, reports the broker's Go runtime figures (runtime.go).
	BrokerRuntime RuntimeSource
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
	// ObjectStore, if set, is the object store's process of a tiered workload (the
	// versitygw a spawned samsa uses): its CPU over a tiered catch-up's remote read.
	ObjectStore UsageSource
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
// once. With stamp (a read-back's fill: readback.go), each write's records are
// numbered first, and each answer's base offsets go into stamp's ledger.
func rawProduce(ctx context.Context, stop <-chan struct{}, rc *rawConn, frame []byte, req *kmsg.ProduceRequest, inflight int, perReq, msgSize int64, st *rawStats, stamp *readBackStamp) error {
	noAcks := req.Acks == 0
	type sentReq struct {
		t0   int64
		seqs []int64 // with stamp: the first sequence number of each partition's batch
	}
	sent := make(chan sentReq, inflight)
	readErr := make(chan error, 1)
	go func() {
		defer close(readErr)
		if noAcks {
			return
		}
		resp := kmsg.NewPtrProduceResponse()
		for corr := int32(1); ; corr++ {
			sr, ok := <-sent
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
			if stamp != nil {
				stamp.acked(resp, sr.seqs)
			}
			st.lat.record(time.Now().UnixNano() - sr.t0)
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
		var seqs []int64
		if stamp != nil {
			seqs = stamp.stamp(frame, nil)
		}
		if !noAcks {
			select {
			case sent <- sentReq{time.Now().UnixNano(), seqs}:
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

// rawFetch fetches parts from from[p] (nil: offset 0) onwards, one request at a time, counting
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
func rawFetch(ctx context.Context, rc *rawConn, topic string, parts []int32, from, until map[int32]int64, version int16, msgSize int64, st *rawStats) error {
	go func() { <-ctx.Done(); rc.Close() }()
	f := newRawFetcher(topic, parts, from, until, version, msgSize, st)
	took := f.took
	resp := kmsg.NewPtrFetchResponse()
	var buf []byte
	for corr := int32(1); len(f.active) > 0; corr++ {
		f.fillRequest()
		buf = rc.appendRequest(buf[:0], f.req, corr)
		if _, err := rc.c.Write(buf); err != nil {
			return ignoreClosed(ctx, err)
		}
		clear(f.moved)
		f.forgotten = f.forgotten[:0]
		code, err := rc.readFetch(resp, version, corr, took)
		if err != nil {
			return ignoreClosed(ctx, err)
		}
		f.answered(code, resp.SessionID)
	}
	return nil
}

// rawFetcher is the state of rawFetch's connection: the next offset of each
// partition, the partitions still to read, and the fetch session.
type rawFetcher struct {
	topic     string
	parts     []int32
	until     map[int32]int64 // nil: read without end
	msgSize   int64
	st        *rawStats
	offsets   map[int32]int64
	active    []int32 // partitions still to read
	session   bool    // the version has sessions and the broker keeps them
	sessID    int32
	epoch     int32          // 0: open a session (a full request)
	moved     map[int32]bool // partitions whose offset moved in the last answer
	forgotten []int32        // partitions done since the last request
	req       *kmsg.FetchRequest
	ft        kmsg.FetchRequestTopic
}

func newRawFetcher(topic string, parts []int32, from, until map[int32]int64, version int16, msgSize int64, st *rawStats) *rawFetcher {
	f := &rawFetcher{topic: topic, parts: parts, until: until, msgSize: msgSize, st: st,
		offsets: make(map[int32]int64, len(parts)), session: version >= 7, moved: map[int32]bool{},
		req: kmsg.NewPtrFetchRequest(), ft: kmsg.NewFetchRequestTopic()}
	f.req.Version = version
	f.req.ReplicaID = -1
	f.req.MaxWaitMillis = 500
	f.req.MinBytes = 1
	f.req.MaxBytes = 64 << 20
	f.req.IsolationLevel = 0
	for _, p := range parts {
		f.offsets[p] = from[p] // nil from: every partition from offset 0
		if until == nil || until[p] > from[p] {
			f.active = append(f.active, p)
		}
	}
	f.ft.Topic = topic
	return f
}

// fillRequest fills the next request: a full one names every active partition; in
// a session, only those whose offset moved, and those done as forgotten.
func (f *rawFetcher) fillRequest() {
	req := f.req
	full := !f.session || f.epoch == 0
	f.ft.Partitions = f.ft.Partitions[:0]
	if full {
		for _, p := range f.active {
			f.add(p)
		}
	} else {
		for p := range f.moved { // not a walk over every partition
			if f.until == nil || f.offsets[p] < f.until[p] {
				f.add(p)
			}
		}
	}
	req.Topics, req.ForgottenTopics = req.Topics[:0], req.ForgottenTopics[:0]
	if len(f.ft.Partitions) > 0 {
		req.Topics = append(req.Topics, f.ft)
	}
	if !full && len(f.forgotten) > 0 {
		t := kmsg.NewFetchRequestForgottenTopic()
		t.Topic, t.Partitions = f.topic, f.forgotten
		req.ForgottenTopics = append(req.ForgottenTopics, t)
	}
	req.SessionID, req.SessionEpoch = f.sessID, f.epoch
	if !f.session {
		req.SessionID, req.SessionEpoch = 0, -1
	}
}

func (f *rawFetcher) add(p int32) {
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition = p
	fp.FetchOffset = f.offsets[p]
	fp.PartitionMaxBytes = 8 << 20
	fp.CurrentLeaderEpoch = -1
	fp.LastFetchedEpoch = -1
	f.ft.Partitions = append(f.ft.Partitions, fp)
}

// took counts a partition of an answer and moves its offset.
func (f *rawFetcher) took(p fetchedPartition) {
	cur, ok := f.offsets[p.partition]
	if !ok && !slices.Contains(f.parts, p.partition) {
		return
	}
	if p.errorCode != 0 {
		f.st.errs.Add(1)
		return
	}
	if p.next > cur {
		f.offsets[p.partition] = p.next
		f.moved[p.partition] = true
	}
	f.st.records.Add(p.records)
	f.st.bytes.Add(p.records * f.msgSize) // payload bytes, as on the produce side
}

// answered moves the session on after an answer with error code and session id,
// and drops the partitions read to their end.
func (f *rawFetcher) answered(code int16, sessionID int32) {
	switch {
	case f.session && (code == kerr.FetchSessionIDNotFound.Code || code == kerr.InvalidFetchSessionEpoch.Code):
		f.sessID, f.epoch = 0, 0 // the next request opens a new one
	case code != 0:
		f.st.errs.Add(1)
	case f.session && f.epoch == 0:
		if f.sessID = sessionID; f.sessID == 0 {
			f.session = false // sessions disabled: full requests
		} else {
			f.epoch = 1
		}
	case f.session:
		f.epoch = max(1, f.epoch+1) // after MaxInt32: 1
	}
	if f.until != nil {
		f.active = slices.DeleteFunc(f.active, func(p int32) bool {
			if f.offsets[p] >= f.until[p] {
				f.forgotten = append(f.forgotten, p)
				return true
			}
			return false
		})
	}
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
