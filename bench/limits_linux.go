package bench

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"time"

	"golang.org/x/sys/unix"
)

// MeasureLimits measures this machine's physical limits in dir (put it on the data
// directory's file system). size bounds the files written (default 256 MiB); each
// network test runs for about a second.
func MeasureLimits(dir string, size int64) (*Limits, error) {
	if size <= 0 {
		size = 256 << 20
	}
	size = max(size&^(1<<20-1), 4<<20)
	l := &Limits{Dir: dir, FileBytes: size}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLimits, err)
	}
	f, err := os.CreateTemp(dir, "samsa-limits-")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLimits, err)
	}
	path := f.Name()
	defer os.Remove(path)
	defer f.Close()

	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i * 31)
	}
	// 1. Sequential buffered write (page cache), then one fdatasync, timed apart.
	t0 := time.Now()
	for off := int64(0); off < size; off += int64(len(chunk)) {
		if _, err := f.Write(chunk); err != nil {
			return nil, fmt.Errorf("%w: write: %w", ErrLimits, err)
		}
	}
	l.WriteMBps = float64(size) / time.Since(t0).Seconds() / 1e6
	t1 := time.Now()
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return nil, fmt.Errorf("%w: fdatasync: %w", ErrLimits, err)
	}
	l.WriteThenSyncMBps = float64(size) / time.Since(t0).Seconds() / 1e6
	l.FinalSyncMs = float64(time.Since(t1).Microseconds()) / 1000

	// 2. 1 MiB write + fdatasync, repeated (at most size/2 bytes or 5 s).
	g, err := os.CreateTemp(dir, "samsa-limits-sync-")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLimits, err)
	}
	defer os.Remove(g.Name())
	defer g.Close()
	var written int64
	t0 = time.Now()
	for written < size/2 && time.Since(t0) < 5*time.Second {
		if _, err := g.Write(chunk); err != nil {
			return nil, fmt.Errorf("%w: write: %w", ErrLimits, err)
		}
		if err := unix.Fdatasync(int(g.Fd())); err != nil {
			return nil, fmt.Errorf("%w: fdatasync: %w", ErrLimits, err)
		}
		written += int64(len(chunk))
	}
	l.WriteSyncMBps = float64(written) / time.Since(t0).Seconds() / 1e6

	// 3. 4 KiB append + fdatasync latency (at most 2000 or 3 s).
	var lats []time.Duration
	small := chunk[:4096]
	t0 = time.Now()
	for len(lats) < 2000 && time.Since(t0) < 3*time.Second {
		s := time.Now()
		if _, err := g.Write(small); err != nil {
			return nil, fmt.Errorf("%w: write: %w", ErrLimits, err)
		}
		if err := unix.Fdatasync(int(g.Fd())); err != nil {
			return nil, fmt.Errorf("%w: fdatasync: %w", ErrLimits, err)
		}
		lats = append(lats, time.Since(s))
	}
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	l.FdatasyncSamples = len(lats)
	l.FdatasyncP50Ms = float64(lats[len(lats)/2].Microseconds()) / 1000
	l.FdatasyncP99Ms = float64(lats[len(lats)*99/100].Microseconds()) / 1000

	// 4. Loopback TCP, 1 MiB writes, ~1 s.
	if l.LoopbackMBps, err = loopbackBandwidth(chunk, time.Second); err != nil {
		return nil, err
	}
	// 5. sendfile from the (cached) file of step 1 to a loopback socket, ~1 s.
	if l.SendfileMBps, err = sendfileBandwidth(f, size, time.Second); err != nil {
		return nil, err
	}
	l.Dir, _ = filepath.Abs(dir)
	return l, nil
}

// sink accepts one connection and discards what it reads, returning the count.
func sink() (addr string, total <-chan int64, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrLimits, err)
	}
	ch := make(chan int64, 1)
	go func() {
		defer ln.Close()
		c, err := ln.Accept()
		if err != nil {
			ch <- 0
			return
		}
		defer c.Close()
		// A plain read loop: io.Copy to io.Discard would read in 8 KiB pieces.
		buf := make([]byte, 1<<20)
		var n int64
		for {
			k, err := c.Read(buf)
			n += int64(k)
			if err != nil {
				break
			}
		}
		ch <- n
	}()
	return ln.Addr().String(), ch, nil
}

func loopbackBandwidth(chunk []byte, d time.Duration) (float64, error) {
	addr, total, err := sink()
	if err != nil {
		return 0, err
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrLimits, err)
	}
	t0 := time.Now()
	for time.Since(t0) < d {
		if _, err := c.Write(chunk); err != nil {
			c.Close()
			return 0, fmt.Errorf("%w: loopback write: %w", ErrLimits, err)
		}
	}
	c.Close()
	n := <-total
	return float64(n) / time.Since(t0).Seconds() / 1e6, nil
}

func sendfileBandwidth(f *os.File, size int64, d time.Duration) (float64, error) {
	addr, total, err := sink()
	if err != nil {
		return 0, err
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrLimits, err)
	}
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		c.Close()
		return 0, fmt.Errorf("%w: %w", ErrLimits, err)
	}
	in := int(f.Fd())
	t0 := time.Now()
	var serr error
	for time.Since(t0) < d && serr == nil {
		var off int64
		werr := raw.Write(func(out uintptr) bool {
			for off < size {
				n, err := unix.Sendfile(int(out), in, &off, int(min(size-off, 1<<30)))
				if errors.Is(err, unix.EAGAIN) {
					return false // wait until writable; off has advanced by n already
				}
				if err != nil {
					serr = err
					return true
				}
				if n == 0 {
					serr = io.ErrUnexpectedEOF
					return true
				}
			}
			return true
		})
		if werr != nil && serr == nil {
			serr = werr
		}
	}
	c.Close()
	n := <-total
	if serr != nil {
		return 0, fmt.Errorf("%w: sendfile: %w", ErrLimits, serr)
	}
	return float64(n) / time.Since(t0).Seconds() / 1e6, nil
}
