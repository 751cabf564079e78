package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// errSamples keeps the first few distinct error messages of a run.
type errSamples struct {
	mu   sync.Mutex
	msgs []string
}

func (e *errSamples) add(where string, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.msgs) >= 10 {
		return
	}
	msg := where + ": " + err.Error()
	for _, m := range e.msgs {
		if m == msg {
			return
		}
	}
	e.msgs = append(e.msgs, msg)
}

func (e *errSamples) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.msgs...)
}

// producer is one kgo client producing to one topic from one goroutine. kgo calls
// onAck serially, so pub and pubRaw each have one writer.
type producer struct {
	cl     *kgo.Client
	pool   *recPool
	keys   *keyPicker
	rate   float64 // msg/s; 0 = max
	pub    *recorder
	pubRaw *recorder
	errs   *errSamples

	sent       atomic.Int64
	acked      atomic.Int64
	ackedBytes atomic.Int64
	failed     atomic.Int64

	ack    func(*kgo.Record, error) // onAck as a value, made once
	sendFn func(intended int64)     // send, replaceable in tests of the schedule
}

func producerOpts(w *Workload, brokers []string, delivery time.Duration) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ProducerLinger(w.Producer.Linger.D()),
		kgo.ProducerBatchMaxBytes(int32(w.Producer.BatchSize)),
		kgo.MaxBufferedRecords(w.Producer.MaxBufferedRecords),
		kgo.RecordDeliveryTimeout(delivery),
		kgo.ProduceRequestTimeout(30 * time.Second),
		kgo.DisableClientMetrics(),
	}
	switch w.Producer.Acks {
	case -1:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case 1:
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	case 0:
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
	}
	if !w.Producer.Idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite(),
			kgo.MaxProduceRequestsInflightPerBroker(w.Producer.MaxInFlight))
	}
	switch w.Producer.Compression {
	case "gzip":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.GzipCompression()))
	case "snappy":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	case "lz4":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	case "zstd":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	default:
		opts = append(opts, kgo.ProducerBatchCompression(kgo.NoCompression()))
	}
	return opts
}

// extra are the client's security options (RunConfig.ClientOpts).
func newProducer(w *Workload, brokers []string, topic string, pl [][]byte, keys [][]byte, seed int64, rate float64, delivery time.Duration, errs *errSamples, extra ...kgo.Opt) (*producer, error) {
	cl, err := kgo.NewClient(append(producerOpts(w, brokers, delivery), extra...)...)
	if err != nil {
		return nil, fmt.Errorf("bench: producer client: %w", err)
	}
	p := &producer{
		cl:     cl,
		pool:   &recPool{topic: topic, payloads: pl},
		keys:   newKeyPicker(w, keys, seed),
		rate:   rate,
		pub:    newRecorder(),
		pubRaw: newRecorder(),
		errs:   errs,
	}
	p.ack = p.onAck
	p.sendFn = p.send
	return p, nil
}

func (p *producer) onAck(r *kgo.Record, err error) {
	if err != nil {
		p.failed.Add(1)
		p.errs.add("produce", err)
	} else {
		now := time.Now().UnixNano()
		intended := int64(binary.BigEndian.Uint64(r.Value[0:8]))
		sent := int64(binary.BigEndian.Uint64(r.Value[8:16]))
		p.pub.record(now - intended)
		p.pubRaw.record(now - sent)
		p.acked.Add(1)
		p.ackedBytes.Add(int64(len(r.Value)))
	}
	p.pool.put(r)
}

// send produces one record whose schedule said it should leave at intended.
func (p *producer) send(intended int64) {
	r := p.pool.get()
	now := time.Now()
	ns := now.UnixNano()
	if intended == 0 {
		intended = ns
	}
	binary.BigEndian.PutUint64(r.Value[0:8], uint64(intended))
	binary.BigEndian.PutUint64(r.Value[8:16], uint64(ns))
	r.Key = p.keys.pick()
	r.Timestamp = now
	p.sent.Add(1)
	p.cl.Produce(context.Background(), r, p.ack)
}

// loop produces until stop is closed. At a fixed rate, record i is due at
// start + i/rate; records that fell behind keep their due time, so their latency
// counts the stall (coordinated omission correction). When stopAtBytes > 0 the loop
// also ends once that many bytes are acknowledged (backlog fill).
func (p *producer) loop(start time.Time, stop <-chan struct{}, stopAtBytes int64) {
	if p.rate <= 0 {
		for i := 0; ; i++ {
			if i&255 == 0 {
				select {
				case <-stop:
					return
				default:
				}
				if stopAtBytes > 0 && p.ackedBytes.Load() >= stopAtBytes {
					return
				}
			}
			p.sendFn(0)
		}
	}
	interval := float64(time.Second) / p.rate
	base := start.UnixNano()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var i int64
	for {
		due := int64(float64(time.Since(start))/interval) + 1
		for ; i < due; i++ {
			if i&255 == 0 {
				select {
				case <-stop:
					return
				default:
				}
				if stopAtBytes > 0 && p.ackedBytes.Load() >= stopAtBytes {
					return
				}
			}
			p.sendFn(base + int64(float64(i)*interval))
		}
		wait := time.Duration(float64(i)*interval) - time.Since(start)
		if wait < 50*time.Microsecond {
			wait = 50 * time.Microsecond
		}
		timer.Reset(wait)
		select {
		case <-stop:
			return
		case <-timer.C:
		}
	}
}

// subscription counts what one consumer group has read.
type subscription struct {
	name     string
	consumed atomic.Int64
}

// consumer is one kgo client reading in one goroutine; e2e has that one writer.
type consumer struct {
	cl       *kgo.Client
	sub      *subscription
	e2e      *recorder
	errs     *errSamples
	bytes    atomic.Int64
	msgs     atomic.Int64
	failed   atomic.Int64
	assigned atomic.Bool
	since    int64        // unix ns: records stamped earlier are not this run's
	foreign  atomic.Int64 // records without a plausible send stamp
}

func newConsumer(w *Workload, brokers []string, topic string, sub *subscription, idx int, since int64, errs *errSamples, extra ...kgo.Opt) (*consumer, error) {
	c := &consumer{sub: sub, e2e: newRecorder(), errs: errs, since: since}
	opts := []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.FetchMaxBytes(int32(w.Consumer.FetchMaxBytes)),
		kgo.FetchMaxWait(w.Consumer.FetchMaxWait.D()),
		kgo.DisableClientMetrics(),
	}
	if w.Consumer.Mode == "group" {
		opts = append(opts,
			kgo.ConsumeTopics(topic),
			kgo.ConsumerGroup(sub.name),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { c.assigned.Store(true) }),
		)
	} else {
		parts := map[int32]kgo.Offset{}
		for p := idx; p < w.PartitionsPerTopic; p += w.ConsumerPerSubscription {
			parts[int32(p)] = kgo.NewOffset().AtStart()
		}
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
		c.assigned.Store(true)
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("bench: consumer client: %w", err)
	}
	c.cl = cl
	return c, nil
}

// loop polls until ctx ends. One clock read per poll: records that arrive in one
// fetch arrived at the same moment as far as the client can tell.
func (c *consumer) loop(ctx context.Context) {
	for {
		fs := c.cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		now := time.Now().UnixNano()
		var n, nb int64
		for _, f := range fs {
			for ti := range f.Topics {
				t := &f.Topics[ti]
				for pi := range t.Partitions {
					p := &t.Partitions[pi]
					if p.Err != nil {
						if !errors.Is(p.Err, context.Canceled) {
							c.failed.Add(1)
							c.errs.add("fetch", p.Err)
						}
						continue
					}
					if len(p.Records) == 0 {
						continue
					}
					c.e2e.mu.Lock()
					for _, r := range p.Records {
						// Only records this run stamped: a send time before the run
						// or after now is someone else's bytes.
						if len(r.Value) >= 8 {
							if sent := int64(binary.BigEndian.Uint64(r.Value)); sent >= c.since && sent <= now {
								_ = c.e2e.mu.cur.RecordValue(max((now-sent)/1000, histMinUS))
							} else {
								c.foreign.Add(1)
							}
						}
						nb += int64(len(r.Value))
					}
					c.e2e.mu.Unlock()
					n += int64(len(p.Records))
				}
			}
		}
		c.msgs.Add(n)
		c.bytes.Add(nb)
		c.sub.consumed.Add(n)
	}
}
