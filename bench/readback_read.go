package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadBackFigures are one read-back of a tiered catch-up's backlog (readback.go):
// its reader (franz-go or kcat), its figures, and its verdict against the
// acknowledged records.
type ReadBackFigures struct {
	Reader string `json:"reader"`
	DrainFigures
	Acked int64 `json:"acked"` // the records acknowledged, all of which it must read
	// Remote is how many of them lay below the partitions' earliest local offsets
	// (ListOffsets -4) when it read: only in remote storage.
	Remote int64 `json:"remote_records"`
	Pass   bool  `json:"pass"`
	// Discrepancies counts the records missing, read twice, out of order, not
	// acknowledged or not what was acknowledged at their offset; First is the first.
	Discrepancies int64  `json:"discrepancies"`
	First         string `json:"first_discrepancy,omitempty"`
}

// verdict is the read-back's verdict line.
func (f ReadBackFigures) verdict() string {
	if !f.Pass {
		return fmt.Sprintf("read-back %s: FAIL: %s (%d discrepancies; %d records read of %d acknowledged in %.2fs)",
			f.Reader, f.First, f.Discrepancies, f.Records, f.Acked, f.Sec)
	}
	return fmt.Sprintf("read-back %s: PASS: every acknowledged record once and in order, %d records from offset 0 to the end (%.1f%% of them only in remote storage) in %.2fs: %.0f msg/s, %.1f MB/s",
		f.Reader, f.Records, 100*float64(f.Remote)/float64(max(f.Acked, 1)), f.Sec, f.Rate, f.MBps)
}

// readBackReader reads a topic from offset 0 on every partition to its end and
// feeds every record to chk, in the order each partition's records came.
type readBackReader func(ctx context.Context, brokers []string, topic string, chk *readBackCheck) error

// readBack reads the backlog (every partition to end, below localStart only in
// remote storage) back through a franz-go consumer, then through kcat, each checked
// against the acknowledged records; a read that fails is a FAIL verdict, not an
// error of the run.
func (tc *tieredRun) readBack(ctx context.Context, end, localStart map[int32]int64) error {
	r := tc.r
	acked, n, err := r.ledger.acked(end)
	if err != nil {
		return fmt.Errorf("read-back: the acknowledged records: %w", err)
	}
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		return fmt.Errorf("read-back: %w (apt-get install -y kcat)", err)
	}
	for _, rd := range []struct {
		name string
		read readBackReader
	}{
		{"franz-go", readBackClient},
		{"kcat", func(ctx context.Context, brokers []string, topic string, chk *readBackCheck) error {
			return readBackKcat(ctx, kcat, brokers, topic, chk)
		}},
	} {
		f, err := tc.readBackOne(ctx, rd.name, rd.read, newReadBackCheck(acked, r.value))
		if err != nil {
			return err
		}
		f.Acked = n
		for p, e := range end {
			f.Remote += min(localStart[p], e)
		}
		tc.fig.ReadBack = append(tc.fig.ReadBack, f)
		tc.res.Notes = append(tc.res.Notes, f.verdict())
		tc.say("%s", f.verdict())
	}
	return nil
}

// readBackOne runs one reader over chk, for at most the workload's duration, and
// returns its figures and verdict; only ctx's end is an error.
func (tc *tieredRun) readBackOne(ctx context.Context, name string, read readBackReader, chk *readBackCheck) (ReadBackFigures, error) {
	cfg := tc.r.cfg
	rctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var use0 Usage
	if cfg.Broker != nil {
		use0, _ = cfg.Broker.Usage()
	}
	start := time.Now()
	errc := make(chan error, 1)
	go func() { errc <- read(rctx, cfg.Brokers, tc.r.topic.name, chk) }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var readErr error
	var last int64
	for waiting := true; waiting; {
		select {
		case readErr = <-errc:
			waiting = false
		case now := <-tick.C:
			cur := chk.bytes.Load()
			tc.say("%4.0fs %-8s read-back %7.1f MB/s, %d records", now.Sub(start).Seconds(), name, float64(cur-last)/1e6, chk.records.Load())
			last = cur
		}
	}
	if ctx.Err() != nil {
		return ReadBackFigures{}, ctx.Err()
	}
	secs := max(time.Since(start).Seconds(), 1e-9)
	f := ReadBackFigures{Reader: name, DrainFigures: DrainFigures{Records: chk.records.Load(), Bytes: chk.bytes.Load(), Sec: secs}}
	f.Rate, f.MBps = float64(f.Records)/secs, float64(f.Bytes)/secs/1e6
	if cfg.Broker != nil {
		if use1, err := cfg.Broker.Usage(); err == nil && use1.CPUSeconds > 0 {
			f.BrokerCPUUsPerMsg = brokerCost(cfg.Broker, use0, use1, f.Records, f.Bytes).CPUUsPerMsg
		}
	}
	if readErr != nil {
		f.Errors = 1
		if errors.Is(readErr, context.DeadlineExceeded) {
			readErr = fmt.Errorf("not read to the end within %v", cfg.Duration)
		}
		chk.fail("%s stopped: %v", name, readErr)
	}
	f.Pass, f.First = chk.verdict()
	f.Discrepancies = chk.problems
	return f, nil
}

// readBackClient reads topic with a franz-go consumer at its defaults but for the
// topic and the start offset (the earliest, ConsumeResetOffset), with no group,
// until every partition of chk is read to its acknowledged end. An error a fetch
// returns (data loss, a partition that cannot be read) ends it.
func readBackClient(ctx context.Context, brokers []string, topic string, chk *readBackCheck) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	for !chk.done() {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("partition %d: %w", p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			chk.record(readRecord{partition: r.Partition, offset: r.Offset, key: r.Key, valueLen: len(r.Value), value: r.Value})
		})
		if ferr != nil {
			return ferr
		}
	}
	return nil
}

// readBackKcat reads topic with `kcat -C -b BROKERS -t TOPIC -o beginning -e -q
// -f kcatFormat` and checks its output line by line as it streams (the lines are
// not kept).
func readBackKcat(ctx context.Context, kcat string, brokers []string, topic string, chk *readBackCheck) error {
	cmd := exec.CommandContext(ctx, kcat, "-C", "-b", strings.Join(brokers, ","), "-t", topic, "-o", "beginning", "-e", "-q", "-f", kcatFormat)
	var stderr tailWriter
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("kcat: %w", err)
	}
	br := bufio.NewReaderSize(out, 1<<20)
	var readErr error
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 && err == nil {
			if rec, perr := parseKcatLine(line[:len(line)-1]); perr != nil {
				chk.fail("kcat: %v", perr)
			} else {
				chk.record(rec)
			}
			continue
		}
		if err != io.EOF || len(line) > 0 {
			readErr = fmt.Errorf("kcat's output: %w (%q)", err, line)
			_, _ = io.Copy(io.Discard, br)
		}
		break
	}
	if err := cmd.Wait(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("kcat: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return readErr
}

// tailWriter keeps the last 4 KiB written to it.
type tailWriter struct{ b []byte }

func (w *tailWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	if len(w.b) > 4096 {
		w.b = append(w.b[:0], w.b[len(w.b)-4096:]...)
	}
	return len(p), nil
}

func (w *tailWriter) String() string { return string(w.b) }
