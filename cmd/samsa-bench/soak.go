package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/samsa-broker/samsa/bench"
)

// soakCmd runs one fixed-rate workload (steady-1h: an hour) against one target, cuts
// its measured window into intervals (a minute), prints them, and judges them
// (bench.JudgeSoak): the interval publish p99's max over median, and the slope of
// the broker's RSS after the first quarter. Exit 1 on FAIL.
func soakCmd(args []string) int {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	var c common
	c.register(fs)
	fs.Lookup("workload").DefValue, c.workload = "steady-1h", "steady-1h"
	spawn := fs.String("spawn", "samsa", "the target to start: samsa, samsa@flag=value..., samsa-cluster[@nodes=N][@rf=N], kfake-proc")
	brokers := fs.String("brokers", "", "a running broker instead: host:port,host:port (its RSS through --pid or --admin)")
	var admins, pids multiFlag
	fs.Var(&admins, "admin", "admin `URL` (http://host:port) of a running target: its CPU and RSS from /metrics")
	fs.Var(&pids, "pid", "process id of a running target on this machine: its CPU and RSS from /proc")
	interval := fs.Duration("interval", time.Minute, "length of the intervals the measured window is cut into")
	var crit bench.SoakCriteria
	fs.Float64Var(&crit.P99RatioMax, "p99-ratio-max", 2, "bound on the largest interval publish p99 over their median")
	fs.Float64Var(&crit.RSSSlopeMax, "rss-slope-max", 0.002, "bound on the broker RSS slope a minute, as a fraction of its mean, fitted over the intervals after the first quarter of the window")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || *interval < time.Second {
		fmt.Fprintf(os.Stderr, "samsa-bench soak: unexpected arguments %q, or --interval under 1s\n", fs.Args())
		return 2
	}
	if c.raw || c.rawOnly {
		fmt.Fprintln(os.Stderr, "samsa-bench soak: the soak is a client run; --raw and --raw-only do not apply")
		return 2
	}
	w, err := c.load()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if w.ProducerRate <= 0 || w.ConsumerBacklogSizeGB > 0 {
		fmt.Fprintf(os.Stderr, "samsa-bench soak: %s is not a fixed-rate steady workload (producerRate > 0, no backlog)\n", w.Name)
		return 2
	}
	target := *spawn
	if *brokers != "" {
		target = strings.ReplaceAll(*brokers, ",", "+")
	}
	list := []string{target}
	adminURLs, pidOf, err := targetValues(list, admins, pids)
	if err != nil {
		fmt.Fprintln(os.Stderr, "samsa-bench:", err)
		return 2
	}
	ctx, cancel := signalContext()
	defer cancel()
	out := c.outDir()
	cc := bench.CompareConfig{Workload: w, Targets: list, Rounds: 1, Spawn: c.spawn(), Profile: c.profile, ProfileDir: out,
		Logger: c.logger(), AdminURLs: adminURLs, PIDs: pidOf, Interval: *interval}
	if !c.quiet && !c.summary {
		cc.Progress = os.Stderr
	}
	results, err := bench.Compare(ctx, cc)
	rep := newReport("soak", w, results)
	var ivs []bench.Interval
	if len(results) > 0 {
		ivs = results[0].Intervals
	}
	rep.Soak = bench.JudgeSoak(ivs, crit)
	code := finish(rep, out, err, c.summary)
	if !c.summary {
		fmt.Fprintf(stdout, "\nintervals of %v:\n", *interval)
		bench.WriteIntervals(stdout, ivs)
	}
	fmt.Fprintln(stdout)
	for _, l := range rep.Soak.Lines() {
		fmt.Fprintln(stdout, l)
	}
	if !rep.Soak.Pass() {
		code = 1
	}
	return code
}
