package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The paced raw mode: the workload's fixed rate, sent as pre-encoded batches. Each
// connection owns every conns-th partition of the leader's and, once per tick (the
// workload's linger, at least rawMinTick), sends one Produce request with the
// records its schedule says are due (record i of a connection is due at
// start + i/rate). Where those records go follows what the client mode's franz-go
// producer does with the workload's keys: keyless records (keyDistributor none) go
// to one partition per batch, the next batch to the next partition in turn (the
// sticky partitioner, a batch at most the workload's batchSize); keyed records are
// spread over the partitions one at a time, as hashing spreads them. A record's
// publish latency is from its due time to its request's acknowledgement
// (coordinated omission corrected: a request held back by a full pipeline, or a
// tick that came late, counts from when its records were due); the uncorrected
// latency is from the request's write.
//
// What it leaves out of the loader is the client library's work per record (the
// record's encoding, partitioning, buffering, compression and its promise): the
// loader's CPU is a frame's encoding per tick and the reads of responses, so that the
// broker's own latency and CPU per message can be seen where a client loader would
// take cores of its own.

// rawMinTick bounds the tick below: a linger under it (or none) still sends at most
// one request per connection per rawMinTick.
const rawMinTick = time.Millisecond

// rawPacedMaxRecords bounds one request's records when a stalled broker let many come
// due (the rest go in the next requests, their latency counted from their due time).
const rawPacedMaxRecords = 16384

// pacedConn is one connection's share of a paced raw run.
type pacedConn struct {
	rc    *rawConn
	req   *kmsg.ProduceRequest
	parts []int32
	rate  float64 // records per second on this connection
	value []byte
	// batches[n] is a pre-encoded batch of n records (built on first use).
	batches map[int][]byte
	next    int // index in parts of the next record's (sticky: batch's) partition
	// sticky: keyless records, a batch of at most perBatch records per partition.
	sticky   bool
	perBatch int
}

// newPacedConn is connection i of conns over the leader's parts: every conns-th
// partition from the i-th, at the workload's rate in proportion to its partitions'
// share of all totalParts. tmpl gives the topic, version, acks and timeout.
func newPacedConn(rc *rawConn, tmpl *kmsg.ProduceRequest, parts []int32, i, conns, totalParts int, w *Workload, value []byte, perBatch int) *pacedConn {
	var mine []int32
	for j := i; j < len(parts); j += conns {
		mine = append(mine, parts[j])
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = tmpl.Version, tmpl.Acks, tmpl.TimeoutMillis
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = tmpl.Topics[0].Topic
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	return &pacedConn{rc: rc, req: req, parts: mine, value: value, batches: map[int][]byte{},
		sticky: w.KeyDistributor == KeyNone, perBatch: perBatch,
		rate: float64(w.ProducerRate) * float64(len(mine)) / float64(totalParts)}
}

// pacedReq is what the response reader needs to know of a request in flight.
type pacedReq struct {
	first, n int64 // the records' schedule indexes
	sent     int64 // unix nanoseconds of the write
}

// batch is a pre-encoded batch of n records.
func (pc *pacedConn) batch(n int, ts int64) []byte {
	b, ok := pc.batches[n]
	if !ok {
		b = AppendRecordBatch(nil, n, pc.value, ts)
		pc.batches[n] = b
	}
	return b
}

// fill sets pc.req's partitions for n records from pc.next on: spread one record at
// a time over the connection's partitions, or (sticky) in batches of at most
// pc.perBatch records, one partition each.
func (pc *pacedConn) fill(n int, ts int64) {
	parts := len(pc.parts)
	rt := &pc.req.Topics[0]
	rt.Partitions = rt.Partitions[:0]
	add := func(p int32, cnt int) {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = p
		rp.Records = pc.batch(cnt, ts)
		rt.Partitions = append(rt.Partitions, rp)
	}
	if pc.sticky {
		for n > 0 {
			cnt := min(n, pc.perBatch)
			add(pc.parts[pc.next], cnt)
			pc.next = (pc.next + 1) % parts
			n -= cnt
		}
		return
	}
	each, extra := n/parts, n%parts
	for k := range min(n, parts) {
		cnt := each
		if k < extra {
			cnt++
		}
		add(pc.parts[(pc.next+k)%parts], cnt)
	}
	pc.next = (pc.next + n) % parts
}

// rawPaced sends pc's schedule from start until stop is closed (then waits for the
// answers in flight) or ctx ends, with at most inflight requests outstanding. Each
// acknowledged record adds its latency to st.lat (from its due time) and to uncorr
// (from its request's write).
func rawPaced(ctx context.Context, stop <-chan struct{}, pc *pacedConn, start time.Time, tick time.Duration, inflight int, msgSize int64, st *rawStats, uncorr *recorder) error {
	if pc.req.Acks == 0 {
		return fmt.Errorf("%w: raw: the paced mode measures acknowledgements; acks=0 has none", ErrRun)
	}
	startNs := start.UnixNano()
	nsPer := float64(time.Second) / pc.rate
	due := func(i int64) int64 { return startNs + int64(float64(i)*nsPer) }
	// sent carries the requests written, in order, to the reader; outstanding counts
	// those not yet answered (the reader has taken one off sent while it waits).
	sent := make(chan pacedReq, inflight)
	var outstanding atomic.Int64
	readErr := make(chan error, 1)
	go func() {
		defer close(readErr)
		resp := kmsg.NewPtrProduceResponse()
		for corr := int32(1); ; corr++ {
			r, ok := <-sent
			if !ok {
				return
			}
			body, err := pc.rc.readResponse(pc.req.Key(), pc.req.IsFlexible(), corr)
			if err != nil {
				readErr <- err
				return
			}
			now := time.Now().UnixNano()
			if _, err := readProduce(resp, pc.req.Version, body, st); err != nil {
				readErr <- err
				return
			}
			for i := r.first; i < r.first+r.n; i++ {
				st.lat.record(now - due(i))
			}
			uncorr.recordN(now-r.sent, r.n)
			outstanding.Add(-1)
			st.records.Add(r.n)
			st.bytes.Add(r.n * msgSize)
		}
	}()
	go func() { <-ctx.Done(); pc.rc.Close() }()
	finish := func() error {
		close(sent)
		if err, ok := <-readErr; ok {
			return err
		}
		return nil
	}
	ts := start.UnixMilli()
	t := time.NewTicker(tick)
	defer t.Stop()
	var issued int64
	var frame []byte
	for corr := int32(1); ; {
		select {
		case <-t.C:
		case err := <-readErr:
			close(sent)
			return err
		case <-stop:
			return finish()
		case <-ctx.Done():
			close(sent)
			return nil
		}
		// Every record due by now, in requests of at most rawPacedMaxRecords, as long
		// as the pipeline has room; what it has no room for waits for the next tick.
		dueNow := int64(float64(time.Now().UnixNano()-startNs)/nsPer) + 1
		for issued < dueNow && outstanding.Load() < int64(inflight) {
			n := min(dueNow-issued, rawPacedMaxRecords)
			pc.fill(int(n), ts)
			frame = pc.rc.appendRequest(frame[:0], pc.req, corr)
			outstanding.Add(1)
			sent <- pacedReq{first: issued, n: n, sent: time.Now().UnixNano()}
			if _, err := pc.rc.c.Write(frame); err != nil {
				close(sent)
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("raw produce write: %w", err)
			}
			issued += n
			corr++
		}
	}
}
