package kafka

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

// rusageCPU is the process's user+system CPU time.
func rusageCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pipeline sends frame n times over c with up to depth requests in flight and reads
// the n answers. It allocates nothing per request.
func pipeline(b *testing.B, c net.Conn, frame []byte, n, depth int) {
	credits := make(chan struct{}, depth)
	errc := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			credits <- struct{}{}
			if _, err := c.Write(frame); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	br := bufio.NewReaderSize(c, 1<<20)
	var hdr [8]byte
	for i := 0; i < n; i++ {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			b.Fatal(err)
		}
		size := int64(binary.BigEndian.Uint32(hdr[:])) - 4
		if _, err := br.Discard(int(size)); err != nil {
			b.Fatal(err)
		}
		<-credits
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkProduce sends pre-encoded Produce requests (acks=1, one batch of N
// 100-byte records) over loopback, 8 in flight. allocs/op counts the whole process
// (the broker's side included) per request; cpu-µs/msg is process CPU (client and
// broker) per record.
func BenchmarkProduce(b *testing.B) {
	for _, sync := range []engine.SyncPolicy{engine.SyncNone, engine.SyncFsync} {
		for _, n := range []int{1, 100, 1000} {
			b.Run(fmt.Sprintf("sync=%s/records=%d", sync, n), func(b *testing.B) {
				tb := startDataBroker(b, testBrokerOptions{Sync: sync, Static: map[string]string{"log.segment.bytes": "1073741824"}})
				rc := tb.raw(b)
				req := kmsg.NewPtrCreateTopicsRequest()
				ct := kmsg.NewCreateTopicsRequestTopic()
				ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "bench", 1, 1
				req.Topics = append(req.Topics, ct)
				rc.roundTrip(req)
				batch := appendBatch(nil, batchSpec{pid: -1, epoch: -1, seq: -1, n: n, valueBytes: 100})
				preq := produceReq("bench", 1, batch)
				preq.SetVersion(9)
				frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench")).AppendRequest(nil, preq, 1)
				rc.c.SetDeadline(time.Time{})
				pipeline(b, rc.c, frame, 100, 8) // warm the pools

				var ms0, ms1 runtime.MemStats
				runtime.ReadMemStats(&ms0)
				cpu0 := rusageCPU()
				b.ReportAllocs()
				b.SetBytes(int64(len(batch)))
				b.ResetTimer()
				pipeline(b, rc.c, frame, b.N, 8)
				b.StopTimer()
				cpu := rusageCPU() - cpu0
				runtime.ReadMemStats(&ms1)
				msgs := float64(b.N) * float64(n)
				b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/msgs, "allocs/record")
				b.ReportMetric(float64(cpu.Microseconds())/msgs, "cpu-µs/msg")
				b.ReportMetric(msgs/b.Elapsed().Seconds(), "msgs/s")
			})
		}
	}
}

// BenchmarkFetch fetches the same 1 MiB from a filled partition over loopback
// (sendfile), 4 in flight; b.SetBytes is the records' size per request.
func BenchmarkFetch(b *testing.B) {
	for _, maxBytes := range []int32{64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("maxBytes=%d", maxBytes), func(b *testing.B) {
			tb := startDataBroker(b)
			rc := tb.raw(b)
			req := kmsg.NewPtrCreateTopicsRequest()
			ct := kmsg.NewCreateTopicsRequestTopic()
			ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "bench", 1, 1
			req.Topics = append(req.Topics, ct)
			rc.roundTrip(req)
			batch := appendBatch(nil, batchSpec{pid: -1, epoch: -1, seq: -1, n: 100, valueBytes: 100})
			for i := 0; i < (2<<20)/len(batch)+1; i++ {
				preq := produceReq("bench", 1, batch)
				preq.SetVersion(9)
				rc.roundTrip(preq)
			}
			freq := fetchReq(12, 0, 1, 0, -1, []fetchPartReq{{topic: "bench", offset: 0, maxBytes: maxBytes, curEpoch: -1, lastEpoch: -1}}, nil)
			freq.MaxBytes = maxBytes
			resp := rc.roundTrip(freq).(*kmsg.FetchResponse)
			got := len(resp.Topics[0].Partitions[0].RecordBatches)
			if got == 0 {
				b.Fatal("nothing fetched")
			}
			frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench")).AppendRequest(nil, freq, 1)
			rc.c.SetDeadline(time.Time{})
			pipeline(b, rc.c, frame, 20, 4)

			cpu0 := rusageCPU()
			b.ReportAllocs()
			b.SetBytes(int64(got))
			b.ResetTimer()
			pipeline(b, rc.c, frame, b.N, 4)
			b.StopTimer()
			cpu := rusageCPU() - cpu0
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/req")
		})
	}
}

// BenchmarkLongPoll is the low-rate path: a producer sends Produce requests (acks=1,
// one 100-byte record to each of 6 partitions) one at a time, while a consumer keeps a
// long-poll Fetch (MinBytes 1) parked on the 6 partitions. One op is one Produce
// request and what it wakes. fetches/produce counts the consumer's answers per
// request (1 is ideal); cpu-µs/produce and allocs/op are the whole process's (client
// included) per request.
func BenchmarkLongPoll(b *testing.B) {
	for _, sync := range []engine.SyncPolicy{engine.SyncNone, engine.SyncFsync} {
		b.Run("sync="+sync.String(), func(b *testing.B) {
			const nparts = 6
			tb := startDataBroker(b, testBrokerOptions{Sync: sync})
			rc := tb.raw(b)
			req := kmsg.NewPtrCreateTopicsRequest()
			ct := kmsg.NewCreateTopicsRequestTopic()
			ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "bench", nparts, 1
			req.Topics = append(req.Topics, ct)
			rc.roundTrip(req)
			rc.c.SetDeadline(time.Time{})
			cons := tb.raw(b)
			cons.c.SetDeadline(time.Time{})

			preq := kmsg.NewPtrProduceRequest()
			preq.SetVersion(9)
			preq.Acks, preq.TimeoutMillis = 1, 5000
			pt := kmsg.NewProduceRequestTopic()
			pt.Topic = "bench"
			for p := range int32(nparts) {
				pp := kmsg.NewProduceRequestTopicPartition()
				pp.Partition = p
				pp.Records = appendBatch(nil, batchSpec{pid: -1, epoch: -1, seq: -1, n: 1, valueBytes: 100})
				pt.Partitions = append(pt.Partitions, pp)
			}
			preq.Topics = append(preq.Topics, pt)
			pframe := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench")).AppendRequest(nil, preq, 1)

			// The consumer: fetch from the partitions' next offsets until it has want
			// records in all, counting the answers.
			var fetches atomic.Int64
			fmtr := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench"))
			parts := make([]fetchPartReq, nparts)
			for p := range parts {
				parts[p] = fetchPartReq{topic: "bench", partition: int32(p), curEpoch: -1, lastEpoch: -1}
			}
			freq := fetchReq(12, 5000, 1, 0, -1, parts, nil)
			var frame, buf []byte
			var resp kmsg.FetchResponse
			br := bufio.NewReaderSize(cons.c, 1<<20)
			consume := func(want int64, done chan<- error) {
				for {
					have := want
					for p := range freq.Topics[0].Partitions {
						have = min(have, freq.Topics[0].Partitions[p].FetchOffset)
					}
					if have >= want {
						done <- nil
						return
					}
					frame = fmtr.AppendRequest(frame[:0], freq, 1)
					if _, err := cons.c.Write(frame); err != nil {
						done <- err
						return
					}
					var hdr [4]byte
					if _, err := io.ReadFull(br, hdr[:]); err != nil {
						done <- err
						return
					}
					n := int(binary.BigEndian.Uint32(hdr[:]))
					if cap(buf) < n {
						buf = make([]byte, n)
					}
					buf = buf[:n]
					if _, err := io.ReadFull(br, buf); err != nil {
						done <- err
						return
					}
					resp.SetVersion(12)
					if err := resp.ReadFrom(buf[5:]); err != nil { // correlation id, header tags
						done <- err
						return
					}
					fetches.Add(1)
					for _, t := range resp.Topics {
						for _, p := range t.Partitions {
							rb := p.RecordBatches
							for len(rb) >= 61 {
								size := int(binary.BigEndian.Uint32(rb[8:])) + 12
								if size > len(rb) {
									break
								}
								next := int64(binary.BigEndian.Uint64(rb)) + int64(binary.BigEndian.Uint32(rb[23:])) + 1
								freq.Topics[0].Partitions[p.Partition].FetchOffset = next
								rb = rb[size:]
							}
						}
					}
				}
			}
			run := func(n int) {
				done := make(chan error, 1)
				go consume(freq.Topics[0].Partitions[0].FetchOffset+int64(n), done)
				pipeline(b, rc.c, pframe, n, 1)
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
			run(20) // warm the pools
			fetches.Store(0)
			cpu0 := rusageCPU()
			b.ReportAllocs()
			b.ResetTimer()
			run(b.N)
			b.StopTimer()
			cpu := rusageCPU() - cpu0
			b.ReportMetric(float64(fetches.Load())/float64(b.N), "fetches/produce")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/produce")
		})
	}
}

// BenchmarkFetchSession is a consumer's incremental fetch session (KIP-227) over
// loopback, one request at a time, each naming no partition (MaxWait 0):
//   - records: 100 partitions of one 10-record batch each, read from offset 0 by
//     every request (the session's offsets never move), so every answer carries
//     them all: the session's collect and choose for each partition, with reads;
//   - idle: 1,000 partitions read at their end, which go quiet after the first
//     answer: what an idle consumer's request costs.
//
// cpu-µs/req is process CPU (client and broker) per request.
func BenchmarkFetchSession(b *testing.B) {
	for _, c := range []struct {
		name   string
		nparts int
		atEnd  bool
	}{{"records/partitions=100", 100, false}, {"idle/partitions=1000", 1000, true}} {
		b.Run(c.name, func(b *testing.B) {
			tb := startDataBroker(b)
			rc := tb.raw(b)
			req := kmsg.NewPtrCreateTopicsRequest()
			ct := kmsg.NewCreateTopicsRequestTopic()
			ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "bench", int32(c.nparts), 1
			req.Topics = append(req.Topics, ct)
			rc.roundTrip(req)
			preq := kmsg.NewPtrProduceRequest()
			preq.SetVersion(9)
			preq.Acks, preq.TimeoutMillis = 1, 5000
			pt := kmsg.NewProduceRequestTopic()
			pt.Topic = "bench"
			batch := appendBatch(nil, batchSpec{pid: -1, epoch: -1, seq: -1, n: 10, valueBytes: 100})
			for p := range int32(c.nparts) {
				pp := kmsg.NewProduceRequestTopicPartition()
				pp.Partition, pp.Records = p, batch
				pt.Partitions = append(pt.Partitions, pp)
			}
			preq.Topics = append(preq.Topics, pt)
			rc.roundTrip(preq)

			parts := make([]fetchPartReq, c.nparts)
			for p := range parts {
				parts[p] = fetchPartReq{topic: "bench", partition: int32(p), maxBytes: 64 << 10, curEpoch: -1, lastEpoch: -1}
				if c.atEnd {
					parts[p].offset = 10
				}
			}
			freq := fetchReq(12, 0, 1, 0, 0, parts, nil)
			resp := rc.roundTrip(freq).(*kmsg.FetchResponse)
			if resp.ErrorCode != 0 || resp.SessionID == 0 {
				b.Fatalf("opening the session: error %d, session %d", resp.ErrorCode, resp.SessionID)
			}
			inc := fetchReq(12, 0, 1, resp.SessionID, 1, nil, nil)
			fmtr := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench"))
			br := bufio.NewReaderSize(rc.c, 1<<20)
			rc.c.SetDeadline(time.Time{})
			var frame []byte
			var answered int64
			send := func(n int) {
				for range n {
					frame = fmtr.AppendRequest(frame[:0], inc, 1)
					if _, err := rc.c.Write(frame); err != nil {
						b.Fatal(err)
					}
					var hdr [4]byte
					if _, err := io.ReadFull(br, hdr[:]); err != nil {
						b.Fatal(err)
					}
					size := int(binary.BigEndian.Uint32(hdr[:]))
					if _, err := br.Discard(size); err != nil {
						b.Fatal(err)
					}
					answered += int64(size)
					inc.SessionEpoch++
				}
			}
			send(20) // warm the pools; the idle session's partitions go quiet
			answered = 0
			cpu0 := rusageCPU()
			b.ReportAllocs()
			b.ResetTimer()
			send(b.N)
			b.StopTimer()
			cpu := rusageCPU() - cpu0
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/req")
			b.ReportMetric(float64(answered)/float64(b.N), "B/answer")
		})
	}
}
