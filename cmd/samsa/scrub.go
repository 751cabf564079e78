package main

// samsa scrub: check the CRC of every batch in the log directories of a stopped node.
//
//	samsa scrub --config F             the log dirs of the node's properties file
//	samsa scrub --log-dirs D1,D2,...   the given log dirs
//
// It opens the directories with the engine (engine.Open locks them: a running broker's
// are refused), runs Manager.Scrub, which checks the CRC-32C and record framing of
// every batch of every segment, sealed or active, and prints every damaged range the
// engine then knows (found by the scrub, or by Open's check of the active segments'
// tails), grouped by partition, and every log Open cut. Exit status: 0 no damage, 1
// damage found (a damaged range, or a log cut at open after a clean shutdown; a torn
// tail cut after an unclean stop is crash recovery, reported only), 2 the scrub could
// not be carried out (usage, a directory missing or in use, an I/O error; with damage
// found as well, 1).
//
// Opening is what a broker's start does, writes included: the engine's Open cuts a
// log whose tail it finds broken (a torn tail after an unclean stop, or what it takes
// for broken framing after a clean one: FINDINGS.md Finding 7), exactly as the
// broker's next start would; the cut is printed. There is no read-only mode yet: copy
// the directories first to keep the bytes. The cleaner, retention and the background
// scrubber do not run. The online counterpart is the broker's background scrubber,
// samsa.log.scrub.bytes.per.second (0: off) and samsa.log.scrub.interval.ms.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/engine"
)

func init() {
	register("scrub", "check every batch's CRC in a stopped node's log dirs; exit 1 on damage", runScrub)
}

const scrubUsage = `usage: samsa scrub (--config F | --log-dirs D1,D2,...)
  --config F  (-c)    the node's properties file (as samsa serve --config): its log.dirs
  --log-dirs D,...    the log directories themselves

Checks the CRC-32C and record framing of every batch of every partition log in the
directories of a stopped node and prints the damaged ranges per partition. Exit
status: 0 no damage, 1 damage found, 2 the scrub could not be carried out (a
directory missing or in use by a running broker, an I/O error). Opening the
directories is what a broker start does, writes included: a tail the engine finds
broken is cut (and said so), as the next start would cut it; copy the directories
first to keep the bytes. A running broker checks its logs with its background
scrubber (samsa.log.scrub.bytes.per.second, 0: off; samsa.log.scrub.interval.ms).`

func runScrub(args []string) int {
	fs := flag.NewFlagSet("scrub", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var configFile, logDirs string
	for _, name := range []string{"config", "c"} {
		fs.StringVar(&configFile, name, "", "the node's properties file")
	}
	fs.StringVar(&logDirs, "log-dirs", "", "comma-separated log directories")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || (configFile == "") == (logDirs == "") {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stdout, scrubUsage)
			return 0
		}
		switch {
		case err != nil:
		case fs.NArg() > 0:
			err = fmt.Errorf("unexpected arguments %q", fs.Args())
		default:
			err = errors.New("give one of --config and --log-dirs")
		}
		fmt.Fprintf(os.Stderr, "samsa scrub: %v\n%s\n", err, scrubUsage)
		return 2
	}
	opts, err := scrubOptions(configFile, logDirs)
	if err != nil {
		fmt.Fprintf(os.Stderr, "samsa scrub: %v\n", err)
		return 2
	}
	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return scrub(ctx, os.Stdout, os.Stderr, opts)
}

// scrubOptions are the engine options of a scrub: the node's log dirs (and, with
// --config, its default topic configuration and sync policy), nothing in the
// background.
func scrubOptions(configFile, logDirs string) (engine.Options, error) {
	var o engine.Options
	if configFile != "" {
		cfg, err := storageConfig(configFile)
		if err != nil {
			return o, err
		}
		o.Dirs, o.Sync = cfg.LogDirs, cfg.Sync.Engine
		o.DefaultConfig = configs.DefaultTopicLogConfig(cfg.Keys)
	} else {
		for _, d := range strings.Split(logDirs, ",") {
			if d = strings.TrimSpace(d); d != "" {
				o.Dirs = append(o.Dirs, d)
			}
		}
	}
	if len(o.Dirs) == 0 {
		return o, errors.New("no log directory")
	}
	// engine.Open creates a missing directory; a scrub of one is a mistake.
	for _, d := range o.Dirs {
		st, err := os.Stat(d)
		if err != nil {
			return o, fmt.Errorf("log directory: %w", err)
		}
		if !st.IsDir() {
			return o, fmt.Errorf("log directory %s is not a directory", d)
		}
	}
	o.Cleaner.Disable = true
	o.RetentionCheckInterval = 0
	o.ScrubBytesPerSecond = 0
	return o, nil
}

// scrub opens the engine over opts, scrubs every log, prints the report on w
// (problems on errw) and returns the exit status.
func scrub(ctx context.Context, w, errw io.Writer, opts engine.Options) int {
	m, err := engine.Open(opts)
	if err != nil {
		fmt.Fprintf(errw, "samsa scrub: opening the log directories (is the broker stopped?): %v\n", err)
		return 2
	}
	// What Open cut, per log: after a clean shutdown a cut tail is damage (exit 1); after
	// an unclean stop it is the crash recovery a start does (reported, not counted).
	var cutClean, cutCrash []string
	for _, l := range m.Logs() {
		r := l.Recovery()
		if r.BytesTruncated == 0 && r.SegmentsDeleted == 0 {
			continue
		}
		line := fmt.Sprintf("%s: %d byte(s) cut, %d segment(s) deleted", l.TopicPartition(), r.BytesTruncated, r.SegmentsDeleted)
		if r.RecoveredLogs > 0 {
			cutCrash = append(cutCrash, line)
		} else {
			cutClean = append(cutClean, line)
		}
	}
	sort.Strings(cutClean)
	sort.Strings(cutCrash)
	for _, c := range cutCrash {
		fmt.Fprintf(w, "open: recovered after an unclean stop, torn tail cut (as a broker start would): %s\n", c)
	}
	for _, c := range cutClean {
		fmt.Fprintf(w, "CUT at open after a clean shutdown (as a broker start would): %s\n", c)
	}
	rep, scrubErr := m.Scrub(ctx)
	damage := m.Damaged() // the scrub's and Open's, each range once
	closeErr := m.Close()

	fmt.Fprintf(w, "scrubbed %d log dir(s): %d partition log(s), %d segment(s), %d byte(s) of batches checked\n",
		len(opts.Dirs), rep.Logs, rep.Segments, rep.Bytes)
	byTP := map[engine.TopicPartition][]engine.Damage{}
	var tps []engine.TopicPartition
	for _, d := range damage {
		if _, ok := byTP[d.TP]; !ok {
			tps = append(tps, d.TP)
		}
		byTP[d.TP] = append(byTP[d.TP], d)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	for _, tp := range tps {
		ds := byTP[tp]
		sort.Slice(ds, func(i, j int) bool { return ds[i].FirstOffset < ds[j].FirstOffset })
		fmt.Fprintf(w, "DAMAGED %s: %d range(s)\n", tp, len(ds))
		for _, d := range ds {
			fmt.Fprintf(w, "  offsets %d..%d: segment %d, bytes %d..%d, found by %s: %v\n",
				d.FirstOffset, d.LastOffset, d.Segment, d.Pos, d.Pos+d.Size, d.FoundBy, d.Err)
		}
	}
	failed := false
	for _, e := range []error{scrubErr, closeErr} {
		if e != nil {
			failed = true
			fmt.Fprintf(errw, "samsa scrub: %v\n", e)
		}
	}
	switch {
	case len(damage) > 0 || len(cutClean) > 0:
		fmt.Fprintf(w, "damage found: %d range(s) in %d partition(s), %d log(s) cut at open after a clean shutdown\n", len(damage), len(tps), len(cutClean))
		return 1
	case failed:
		fmt.Fprintln(w, "the scrub did not complete: no damage found in what it checked")
		return 2
	}
	fmt.Fprintln(w, "no damage found")
	return 0
}
