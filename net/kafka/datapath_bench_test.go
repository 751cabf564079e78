package kafka

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime"
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
