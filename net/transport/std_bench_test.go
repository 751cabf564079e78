package transport

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// benchHandler answers every request at once: with its own bytes (echo), or with a
// file range of the same length (sendfile) when file is set.
type benchHandler struct {
	file *os.File
}

func (h *benchHandler) Serve(r Request) {
	if h.file != nil {
		r.Ticket.Respond(Response{Chunks: []Chunk{{File: h.file, Offset: 0, Length: int64(len(r.Frame))}}})
		return
	}
	// The frame is recycled once answered, and the answer is written later: copy.
	r.Ticket.Respond(Response{Chunks: []Chunk{{Bytes: append([]byte(nil), r.Frame...)}}})
}

// serveStdBench serves h with a Std of cfg on a loopback listener and returns a
// client connection to it; both end at the benchmark's cleanup.
func serveStdBench(b *testing.B, cfg Config, h Handler) net.Conn {
	s := NewStd(cfg, h, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go s.Serve(ln)
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkStdRoundTrip pipelines requests of each size over one loopback connection
// (a reader goroutine drains the answers; the transport's MaxInFlight bounds the
// window): request throughput of the transport alone, bytes answered from memory
// (echo) or from a file with sendfile.
func BenchmarkStdRoundTrip(b *testing.B) {
	for _, mode := range []string{"echo", "sendfile"} {
		for _, size := range []int{100, 1 << 10, 16 << 10, 256 << 10} {
			b.Run(fmt.Sprintf("%s/%d", mode, size), func(b *testing.B) {
				h := &benchHandler{}
				if mode == "sendfile" {
					f, err := os.Create(filepath.Join(b.TempDir(), "seg"))
					if err != nil {
						b.Fatal(err)
					}
					defer f.Close()
					f.Write(make([]byte, size))
					h.file = f
				}
				c := serveStdBench(b, Config{}, h)
				frame := make([]byte, 4+size)
				binary.BigEndian.PutUint32(frame, uint32(size))
				done := make(chan error, 1)
				go func() {
					buf := make([]byte, 4+size)
					for range b.N {
						if _, err := io.ReadFull(c, buf); err != nil {
							done <- err
							return
						}
					}
					done <- nil
				}()
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				for range b.N {
					if _, err := c.Write(frame); err != nil {
						b.Fatal(err)
					}
				}
				if err := <-done; err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
			})
		}
	}
}

// BenchmarkStdPingPong sends one request at a time over one loopback connection and
// waits for its answer (echo), as a producer at a fixed rate does with a request per
// linger: the transport's cost per request when nothing is pipelined behind it.
// Sizes: latency-20k's request (about 2.6 KiB), omb-1topic-100p-1kb's (about 13 KiB),
// and one larger than the read buffer.
func BenchmarkStdPingPong(b *testing.B) {
	for _, inline := range []bool{false, true} {
		for _, size := range []int{100, 2600, 13 << 10, 64 << 10} {
			b.Run(fmt.Sprintf("inline=%v/%d", inline, size), func(b *testing.B) {
				c := serveStdBench(b, Config{InlineWrites: inline}, &benchHandler{})
				frame := make([]byte, 4+size)
				binary.BigEndian.PutUint32(frame, uint32(size))
				buf := make([]byte, 4+size)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				cpu0 := processCPU()
				for range b.N {
					if _, err := c.Write(frame); err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadFull(c, buf); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
