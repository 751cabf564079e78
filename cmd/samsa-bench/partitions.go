package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/samsa-broker/samsa/bench"
)

// partitionsCmd runs the many-partitions measurement (bench.RunPartitions) against
// a broker it starts itself, on a fresh data directory per round.
func partitionsCmd(args []string) int {
	fs := flag.NewFlagSet("partitions", flag.ContinueOnError)
	bin := fs.String("samsa-bin", "bin/samsa", "the samsa binary")
	layout := fs.String("layout", "10x1000", "TOPICSxPARTITIONS: the topics created, e.g. 10x1000 or 1x10000")
	rounds := fs.Int("rounds", 3, "rounds, each on a fresh data directory")
	idle := fs.Duration("idle", 30*time.Second, "idle CPU window")
	mdReqs := fs.Int("metadata-requests", 20, "Metadata requests for every topic, timed")
	records := fs.Int("records", 1, "records produced to and read back from every partition (0: none)")
	size := fs.Int("record-size", 1024, "record size, bytes")
	noRestart := fs.Bool("no-restart", false, "skip the clean restart and the restart after SIGKILL")
	workDir := fs.String("work-dir", "", "where the data directories go (default $TMPDIR)")
	out := fs.String("out", "", "also write partitions.json here")
	var extra multiFlag
	fs.Var(&extra, "samsa-arg", "extra flag for samsa serve (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	t, p, ok := strings.Cut(*layout, "x")
	nt, err1 := strconv.Atoi(t)
	np, err2 := strconv.Atoi(p)
	if !ok || err1 != nil || err2 != nil || nt <= 0 || np <= 0 {
		fmt.Fprintf(os.Stderr, "samsa-bench partitions: --layout %q: want TOPICSxPARTITIONS, e.g. 10x1000\n", *layout)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench.RunPartitions(ctx, bench.PartitionsConfig{
		SamsaBin: *bin, SamsaArgs: extra, WorkDir: *workDir, Topics: nt, PartitionsPerTopic: np,
		Rounds: *rounds, Idle: *idle, MetadataRequests: *mdReqs, RecordsPerPartition: *records,
		RecordSize: *size, SkipRestart: *noRestart, Progress: os.Stderr,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	rep.Machine.Commit = gitCommit()
	rep.WriteTable(stdout)
	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		f, err := os.Create(filepath.Join(*out, "partitions-"+*layout+".json"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer f.Close()
		if err := rep.WriteJSON(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}
