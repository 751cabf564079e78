package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/samsa-broker/samsa/bench"
)

// historyFlags are compare's and regress's --history and --no-history.
type historyFlags struct {
	file string
	off  bool
}

func (h *historyFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&h.file, "history", bench.DefaultHistoryFile, "append one JSON line per target, mode and round (commit, machine, figures) to this `FILE`")
	fs.BoolVar(&h.off, "no-history", false, "append nothing to the history file")
}

// record appends rep's lines to the history file and gives rep the history of its
// workload's publish p99.9 for its targets (the report's history section). A
// failure to write is printed, not fatal: the run's own report stands.
func (h *historyFlags) record(rep *bench.Report, command, commit string, commitOf func(string) string) {
	if h.off || len(rep.Results) == 0 {
		return
	}
	if err := bench.AppendHistory(h.file, bench.HistoryEntries(rep, command, commit, commitOf)); err != nil {
		fmt.Fprintln(os.Stderr, "samsa-bench:", err)
		return
	}
	entries, _, err := bench.ReadHistory(h.file)
	if err != nil {
		fmt.Fprintln(os.Stderr, "samsa-bench:", err)
		return
	}
	var targets []string
	seen := map[string]bool{}
	for _, r := range rep.Results {
		if !seen[r.Target] {
			seen[r.Target] = true
			targets = append(targets, r.Target)
		}
	}
	hist, err := bench.BuildHistory(entries, "p99.9", bench.HistoryFilter{Targets: targets, Workload: rep.Results[0].Workload, LastRuns: 50})
	if err != nil {
		fmt.Fprintln(os.Stderr, "samsa-bench:", err)
		return
	}
	hist.File = h.file
	rep.History = hist
}

// historyCmd prints one figure of the history file across commits, and with --out
// writes report.json and report.html with its chart.
func historyCmd(args []string) int {
	fs := flag.NewFlagSet("history", flag.ContinueOnError)
	file := fs.String("history", bench.DefaultHistoryFile, "the history `FILE` compare and regress append to")
	figure := fs.String("figure", "p99.9", "the figure: "+strings.Join(bench.HistoryFigureNames(), ", ")+" (latencies are publish latencies; cpu is broker CPU µs per message)")
	target := fs.String("target", "", "only these targets, comma separated (regress writes baseline and current)")
	workload := fs.String("workload", "", "only this workload")
	mode := fs.String("mode", "", "only this mode: client or raw")
	command := fs.String("command", "", "only lines of this command: compare or regress")
	last := fs.Int("last", 0, "only the last N runs (0: all)")
	out := fs.String("out", "", "also write report.json and report.html (with the chart) here")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "samsa-bench history: unexpected arguments %q\n", fs.Args())
		return 2
	}
	entries, skipped, err := bench.ReadHistory(*file)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	f := bench.HistoryFilter{Workload: *workload, Mode: *mode, LastRuns: *last}
	if *target != "" {
		f.Targets = strings.Split(*target, ",")
	}
	if *command != "" {
		f.Commands = []string{*command}
	}
	h, err := bench.BuildHistory(entries, *figure, f)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	h.File = *file
	h.WriteTable(stdout)
	if skipped > 0 {
		fmt.Fprintf(stdout, "note: %d lines of %s could not be read and were skipped\n", skipped, *file)
	}
	if *out == "" {
		return 0
	}
	m := bench.DescribeMachine()
	m.Commit = gitCommit()
	rep := &bench.Report{Title: "samsa-bench history: publish " + *figure, Command: bench.CommandLine(os.Args), Started: time.Now().UTC(), Machine: m, History: h}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := rep.WriteJSON(filepath.Join(*out, "report.json")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := rep.WriteHTMLFile(filepath.Join(*out, "report.html")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "\nreport: %s, %s\n", filepath.Join(*out, "report.json"), filepath.Join(*out, "report.html"))
	return 0
}
