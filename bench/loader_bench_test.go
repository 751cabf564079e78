package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

func BenchmarkRecorderRecord(b *testing.B) {
	r := newRecorder()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r.record(int64(i&0xFFFFF) * 1000)
	}
}

func BenchmarkRecPool(b *testing.B) {
	w := &Workload{MessageSize: 100, RandomizedPayloadPoolSize: 10}
	p := &recPool{topic: "t", payloads: payloads(w, 1)}
	p.put(p.get())
	b.ReportAllocs()
	for b.Loop() {
		p.put(p.get())
	}
}

func BenchmarkAppendRecordBatch(b *testing.B) {
	for _, size := range []int{100, 1024} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			v := make([]byte, size)
			var dst []byte
			b.SetBytes(int64(100 * size))
			b.ReportAllocs()
			for b.Loop() {
				dst = AppendRecordBatch(dst[:0], 100, v, 0)
			}
		})
	}
}

func BenchmarkScanBatches(b *testing.B) {
	var buf []byte
	for i := 0; i < 64; i++ {
		buf = AppendRecordBatch(buf, 100, make([]byte, 100), 0)
	}
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if n, _, _ := scanBatches(buf); n != 6400 {
			b.Fatal(n)
		}
	}
}

// BenchmarkProduceBlackhole is the loader's produce path per record (pool, stamps,
// key, kgo, promise, histogram) against an in-process kfake that discards records.
func BenchmarkProduceBlackhole(b *testing.B) {
	for _, size := range []int{100, 1024} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.BlackholeProduce(), kfake.SeedTopics(6, "t"))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			w := &Workload{MessageSize: size, RandomizedPayloadPoolSize: 100, KeyDistributor: KeyNone}
			w.applyDefaults()
			var errs errSamples
			p, err := newProducer(w, c.ListenAddrs(), "t", payloads(w, 1), nil, 1, 0, time.Minute, &errs)
			if err != nil {
				b.Fatal(err)
			}
			defer p.cl.Close()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				p.send(0)
			}
			if err := p.cl.Flush(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
			if p.failed.Load() != 0 {
				b.Fatal(errs.list())
			}
		})
	}
}
