package remote

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkClient measures the S3 client against versitygw on this machine
// (it chose aws-sdk-go-v2 over minio-go: BENCHMARKS.md): an upload of a file (one PUT up to the 5 MiB part size, a
// multipart upload past it) and ranged reads of it (the whole object as one
// range; 1 MiB ranges one after the other), at 8 and 64 MiB. Besides the
// throughput and the allocations it reports the CPU time per byte of the
// client (this process) and of the server (versitygw, from /proc).
//
//	go test -run '^$' -bench BenchmarkClient -benchtime 10x -count 5 ./engine/remote
func BenchmarkClient(b *testing.B) {
	g := startGateway(b)
	g.makeBucket(b, "bench")
	cfg := g.config("bench")
	stores := []struct {
		name string
		new  func(*Config) (objectStore, error)
	}{
		{"aws-sdk-go-v2", func(c *Config) (objectStore, error) { return newAWSStore(c) }},
	}
	for _, st := range stores {
		s, err := st.new(&cfg)
		if err != nil {
			b.Fatal(err)
		}
		for _, size := range []int64{8 << 20, 64 << 20} {
			f := benchFile(b, size)
			key := fmt.Sprintf("%s/%d", st.name, size)
			name := fmt.Sprintf("%s/%dMiB", st.name, size>>20)
			b.Run("put/"+name, func(b *testing.B) {
				measure(b, g, size, func() {
					if err := s.put(context.Background(), key, f, size); err != nil {
						b.Fatal(err)
					}
				})
			})
			buf := make([]byte, 256<<10)
			b.Run("get-range/"+name, func(b *testing.B) {
				measure(b, g, size, func() { readRange(b, s, key, 0, size-1, buf) })
			})
			b.Run("get-1MiB-ranges/"+name, func(b *testing.B) {
				measure(b, g, size, func() {
					for off := int64(0); off < size; off += 1 << 20 {
						readRange(b, s, key, off, off+1<<20-1, buf)
					}
				})
			})
		}
	}
}

func readRange(b *testing.B, s objectStore, key string, start, end int64, buf []byte) {
	rc, err := s.get(context.Background(), key, start, end)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.CopyBuffer(io.Discard, rc, buf)
	rc.Close()
	if err != nil || n != end-start+1 {
		b.Fatalf("read %d bytes of [%d, %d]: %v", n, start, end, err)
	}
}

// measure runs op b.N times with b.SetBytes(size) and reports the CPU time
// per byte of this process and of the gateway.
func measure(b *testing.B, g *gateway, size int64, op func()) {
	b.ReportAllocs()
	b.SetBytes(size)
	c0, s0 := selfCPU(), procCPU(b, g.Pid())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		op()
	}
	b.StopTimer()
	c1, s1 := selfCPU(), procCPU(b, g.Pid())
	bytes := float64(size) * float64(b.N)
	b.ReportMetric(float64(c1-c0)/bytes, "client-cpu-ns/B")
	b.ReportMetric(float64(s1-s0)/bytes, "server-cpu-ns/B")
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is a process's user plus system time, from /proc/<pid>/stat
// (fields 14 and 15, in clock ticks of 1/100 s on Linux).
func procCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(fields[11], 10, 64)
	st, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func benchFile(b *testing.B, size int64) *os.File {
	f, err := os.Create(filepath.Join(b.TempDir(), "data"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for off := int64(0); off < size; off += int64(len(buf)) {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	return f
}
