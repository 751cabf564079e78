package transport

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// staticHandler answers every request at once with a response of the request's size:
// bytes of a preallocated buffer (echo-shaped, nothing allocated per request), or a
// file range (sendfile). The request frame is not kept.
type staticHandler struct {
	chunks []Chunk // shared, read-only: every answer is the same
}

func newStaticHandler(size int, file *os.File) *staticHandler {
	if file != nil {
		return &staticHandler{chunks: []Chunk{{File: file, Length: int64(size)}}}
	}
	return &staticHandler{chunks: []Chunk{{Bytes: make([]byte, size)}}}
}

func (h *staticHandler) Serve(r Request) {
	if int64(len(r.Frame)) != h.chunks[0].Len() {
		r.Ticket.CloseConn()
		return
	}
	r.Ticket.Respond(Response{Chunks: h.chunks})
}

// benchWindow is how many requests each benchmark connection keeps in flight (Kafka
// producers default to max.in.flight.requests.per.connection = 5).
const benchWindow = 5

// BenchmarkTransport compares the transports on the same workload, one connection
// count and size per sub-benchmark: each connection keeps benchWindow requests in
// flight and answers are the request's size (echo from memory, or sendfile from a
// page-cached file). It reports requests per second, round-trip percentiles
// (p50/p99/p99.9, microseconds, from send to the answer's last byte) and the process's
// CPU time per request (client and server together: same client for every transport,
// so differences are the transport's). Run the kinds alternately:
//
//	go test -run '^$' -bench 'Transport/' -count 5 ./net/transport
func BenchmarkTransport(b *testing.B) {
	for _, mode := range []string{"echo", "sendfile"} {
		for _, size := range []int{100, 16 << 10} {
			for _, conns := range []int{1, 16, 256} {
				for _, k := range transportKinds() {
					b.Run(fmt.Sprintf("%s/%d/conns=%d/%s", mode, size, conns, k.name), func(b *testing.B) {
						benchTransport(b, k, mode, size, conns)
					})
				}
			}
		}
	}
}

func benchTransport(b *testing.B, k transportKind, mode string, size, conns int) {
	var file *os.File
	if mode == "sendfile" {
		f, err := os.Create(filepath.Join(b.TempDir(), "seg"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		f.Write(make([]byte, size))
		file = f
	}
	h := newStaticHandler(size, file)
	s, err := k.make(Config{}, h)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go s.Serve(ln)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	}()
	cs := make([]net.Conn, conns)
	for i := range cs {
		c, err := k.dialConn(ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		cs[i] = c
	}
	// Split b.N over the connections.
	per := make([]int, conns)
	for i := range b.N {
		per[i%conns]++
	}
	hists := make([]*hdrhistogram.Histogram, conns)
	for i := range hists {
		hists[i] = hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 2*conns)
	for i, c := range cs {
		wg.Add(2)
		window := make(chan time.Time, benchWindow)
		go func() { // writer: keeps the window full
			defer wg.Done()
			frame := make([]byte, 4+size)
			binary.BigEndian.PutUint32(frame, uint32(size))
			for range per[i] {
				window <- time.Now()
				if _, err := c.Write(frame); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() { // reader: one answer frees one window slot
			defer wg.Done()
			buf := make([]byte, 4+size)
			hist := hists[i]
			for range per[i] {
				if _, err := io.ReadFull(c, buf); err != nil {
					errs <- err
					return
				}
				hist.RecordValue(int64(time.Since(<-window) / time.Microsecond))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	all := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
	for _, h := range hists {
		all.Merge(h)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(all.ValueAtQuantile(50)), "p50-µs")
	b.ReportMetric(float64(all.ValueAtQuantile(99)), "p99-µs")
	b.ReportMetric(float64(all.ValueAtQuantile(99.9)), "p99.9-µs")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/1e3, "cpu-µs/req")
}
