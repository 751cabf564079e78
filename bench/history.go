package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// The regression history is a local file of JSON lines (default
// results/history.jsonl), one line per target, mode and round of every compare and
// regress run: the commit of the broker measured, the machine and its load, and the
// round's figures. `samsa-bench history` prints one figure across commits, the median
// over each run's rounds, and the HTML reports chart it. Lines are only ever
// appended; a line this version cannot read is skipped, and counted.
//
//	{"time":"2026-12-07T18:02:11Z","run":"2026-12-07T18:01:05.123Z","command":"compare",
//	 "commit":"894a3f0...","machine":{"cpus":2,"cpu_model":"AMD EPYC","kernel":"Linux 6.18",
//	 "load_avg":[1.2,0.9,0.7]},"target":"samsa","workload":"latency-20k","mode":"client",
//	 "round":1,"pub_msgs":20001,"pub_p50_ms":1.9,"pub_p99_ms":3.8,"pub_p999_ms":4.3,
//	 "pub_max_ms":6.9,"cpu_us_per_msg":12.1}

// DefaultHistoryFile is where compare and regress append their lines unless told.
const DefaultHistoryFile = "results/history.jsonl"

// HistoryEntry is one line of the history: one target, mode and round of a run.
type HistoryEntry struct {
	Time    time.Time `json:"time"`
	Run     string    `json:"run"`     // the invocation's start (RFC 3339): groups its lines
	Command string    `json:"command"` // compare or regress
	// Commit is the broker's commit: for compare the checkout's HEAD, for regress
	// the side's (baseline or current); "+dirty" when the work tree had changes; ""
	// outside a checkout.
	Commit   string         `json:"commit,omitempty"`
	Machine  HistoryMachine `json:"machine"`
	Target   string         `json:"target"`
	Workload string         `json:"workload"`
	Mode     string         `json:"mode"`
	Round    int            `json:"round"`
	PubRate  float64        `json:"pub_msgs"`
	P50      float64        `json:"pub_p50_ms"`
	P99      float64        `json:"pub_p99_ms"`
	P999     float64        `json:"pub_p999_ms"`
	Max      float64        `json:"pub_max_ms"`
	// CPUUsPerMsg is the broker's CPU per message, 0 when not measured.
	CPUUsPerMsg float64 `json:"cpu_us_per_msg,omitempty"`
	Failed      string  `json:"failed,omitempty"`
}

// HistoryMachine is where a line was measured: its CPUs and the load average
// (1, 5 and 15 minutes, /proc/loadavg) when the run ended.
type HistoryMachine struct {
	CPUs     int        `json:"cpus"`
	CPUModel string     `json:"cpu_model,omitempty"`
	Kernel   string     `json:"kernel,omitempty"`
	LoadAvg  [3]float64 `json:"load_avg"`
}

// HistoryEntries makes the lines of one run's results. commitOf gives the commit of
// a target's broker (nil: commit for all).
func HistoryEntries(rep *Report, command, commit string, commitOf func(target string) string) []HistoryEntry {
	m := HistoryMachine{CPUs: rep.Machine.CPUs, CPUModel: rep.Machine.CPUModel, Kernel: rep.Machine.Kernel, LoadAvg: loadAvg()}
	now := time.Now().UTC()
	var out []HistoryEntry
	for _, r := range rep.Results {
		e := HistoryEntry{Time: now, Run: rep.Started.UTC().Format(time.RFC3339Nano), Command: command, Commit: commit, Machine: m,
			Target: r.Target, Workload: r.Workload, Mode: r.Mode, Round: r.Round, Failed: r.Failed}
		if commitOf != nil {
			e.Commit = commitOf(r.Target)
		}
		if r.Failed == "" {
			p := r.PublishLatency
			e.PubRate, e.P50, e.P99, e.P999, e.Max = r.PubRate, p.P50, p.P99, p.P999, p.Max
			if r.Broker != nil {
				e.CPUUsPerMsg = r.Broker.CPUUsPerMsg
			}
		}
		out = append(out, e)
	}
	return out
}

// AppendHistory appends entries to the file at path, creating it and its directory.
func AppendHistory(path string, entries []HistoryEntry) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("bench: history: %w", err)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, e := range entries {
		if err := enc.Encode(e); err != nil {
			return fmt.Errorf("bench: history: %w", err)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("bench: history: %w", err)
	}
	// One write: lines of concurrent runs do not interleave within a line.
	if _, err := f.Write(b.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("bench: history: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("bench: history: %w", err)
	}
	return nil
}

// ReadHistory reads every line of the file it can; skipped is how many it could not.
func ReadHistory(path string) (entries []HistoryEntry, skipped int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("bench: history: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var e HistoryEntry
		if json.Unmarshal(line, &e) != nil || e.Run == "" {
			skipped++
			continue
		}
		entries = append(entries, e)
	}
	if err := sc.Err(); err != nil {
		return entries, skipped, fmt.Errorf("bench: history: %w", err)
	}
	return entries, skipped, nil
}

// HistoryFigures are the figures history can show, by name.
var HistoryFigures = map[string]struct {
	Unit string
	Get  func(HistoryEntry) float64
}{
	"throughput": {"msg/s", func(e HistoryEntry) float64 { return e.PubRate }},
	"p50":        {"ms", func(e HistoryEntry) float64 { return e.P50 }},
	"p99":        {"ms", func(e HistoryEntry) float64 { return e.P99 }},
	"p99.9":      {"ms", func(e HistoryEntry) float64 { return e.P999 }},
	"max":        {"ms", func(e HistoryEntry) float64 { return e.Max }},
	"cpu":        {"µs/msg", func(e HistoryEntry) float64 { return e.CPUUsPerMsg }},
}

// HistoryFigureNames lists HistoryFigures' names, sorted.
func HistoryFigureNames() []string {
	var n []string
	for k := range HistoryFigures {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// HistoryFilter selects lines; an empty field selects all.
type HistoryFilter struct {
	Targets   []string
	Workload  string
	Mode      string
	Commands  []string
	LastRuns  int // keep only the lines of the last N runs (0: all)
	MinRounds int
}

// HistoryPoint is one run's figure for one target and mode: the median over its
// rounds (failed rounds and unmeasured figures left out), with min and max.
type HistoryPoint struct {
	Run      string    `json:"run"`
	Time     time.Time `json:"time"`
	Command  string    `json:"command"`
	Commit   string    `json:"commit,omitempty"`
	Target   string    `json:"target"`
	Workload string    `json:"workload"`
	Mode     string    `json:"mode"`
	Rounds   int       `json:"rounds"`
	Median   float64   `json:"median"`
	Min      float64   `json:"min"`
	Max      float64   `json:"max"`
	LoadAvg  float64   `json:"load_avg_1m"` // the highest of the run's lines
	CPUs     int       `json:"cpus"`
}

// History is one figure across commits (Report.History).
type History struct {
	Figure string         `json:"figure"`
	Unit   string         `json:"unit"`
	File   string         `json:"file"`
	Points []HistoryPoint `json:"points"`
}

// ErrHistory is wrapped by errors of the history command's arguments.
var ErrHistory = errors.New("bench: history")

// BuildHistory groups entries into points of figure, oldest run first.
func BuildHistory(entries []HistoryEntry, figure string, f HistoryFilter) (*History, error) {
	fig, ok := HistoryFigures[figure]
	if !ok {
		return nil, fmt.Errorf("%w: figure %q: want one of %s", ErrHistory, figure, strings.Join(HistoryFigureNames(), ", "))
	}
	in := func(list []string, v string) bool {
		if len(list) == 0 {
			return true
		}
		for _, x := range list {
			if x == v {
				return true
			}
		}
		return false
	}
	type key struct{ run, commit, target, workload, mode string }
	groups := map[key]*HistoryPoint{}
	vals := map[key][]float64{}
	var order []key
	for _, e := range entries {
		if !in(f.Targets, e.Target) || (f.Workload != "" && e.Workload != f.Workload) || (f.Mode != "" && e.Mode != f.Mode) || !in(f.Commands, e.Command) {
			continue
		}
		k := key{e.Run, e.Commit, e.Target, e.Workload, e.Mode}
		p := groups[k]
		if p == nil {
			p = &HistoryPoint{Run: e.Run, Time: e.Time, Command: e.Command, Commit: e.Commit, Target: e.Target, Workload: e.Workload, Mode: e.Mode, CPUs: e.Machine.CPUs}
			groups[k] = p
			order = append(order, k)
		}
		p.LoadAvg = max(p.LoadAvg, e.Machine.LoadAvg[0])
		if v := fig.Get(e); e.Failed == "" && v > 0 {
			vals[k] = append(vals[k], v)
		}
	}
	h := &History{Figure: figure, Unit: fig.Unit}
	for _, k := range order {
		p := groups[k]
		p.Rounds = len(vals[k])
		if p.Rounds == 0 || p.Rounds < f.MinRounds {
			continue
		}
		p.Min, p.Median, p.Max = minMedMax(vals[k])
		h.Points = append(h.Points, *p)
	}
	sort.SliceStable(h.Points, func(i, j int) bool { return h.Points[i].Run < h.Points[j].Run })
	if f.LastRuns > 0 {
		var runs []string
		for _, p := range h.Points {
			if len(runs) == 0 || runs[len(runs)-1] != p.Run {
				runs = append(runs, p.Run)
			}
		}
		if len(runs) > f.LastRuns {
			first := runs[len(runs)-f.LastRuns]
			for i, p := range h.Points {
				if p.Run == first {
					h.Points = h.Points[i:]
					break
				}
			}
		}
	}
	return h, nil
}

// columns are the x positions of the chart: one per run and commit, oldest first.
func (h *History) columns() (cols []string, index map[string]int) {
	index = map[string]int{}
	for _, p := range h.Points {
		c := p.Run + " " + p.Commit
		if _, ok := index[c]; !ok {
			index[c] = len(cols) + 1
			cols = append(cols, c)
		}
	}
	return cols, index
}

// WriteTable prints one row per point: the run, the commit, the target and the
// figure's median, min–max and rounds.
func (h *History) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "publish %s (%s) across commits, median over each run's rounds; file %s\n", h.Figure, h.Unit, h.File)
	if len(h.Points) == 0 {
		fmt.Fprintln(w, "no lines match")
		return
	}
	_, index := h.columns()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\trun (UTC)\tcommand\tcommit\ttarget\tworkload\tmode\trounds\tmedian\tmin\tmax\tload 1m\tCPUs\t")
	for _, p := range h.Points {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%.2f\t%d\t\n", index[p.Run+" "+p.Commit], runLabel(p.Run), p.Command, short(p.Commit),
			p.Target, p.Workload, modeName(p.Mode), p.Rounds, fmtFig(p.Median), fmtFig(p.Min), fmtFig(p.Max), p.LoadAvg, p.CPUs)
	}
	tw.Flush()
}

func runLabel(run string) string {
	if t, err := time.Parse(time.RFC3339Nano, run); err == nil {
		return t.UTC().Format("2006-01-02 15:04")
	}
	return run
}

// html writes the history section: the chart (x: runs, oldest first, numbered as
// in the table) and the table.
func (h *History) html(b *bytes.Buffer, colors func(string) string) {
	if h == nil || len(h.Points) == 0 {
		return
	}
	esc := html.EscapeString
	cols, index := h.columns()
	bySeries := map[string]*svgSeries{}
	var names []string
	for _, p := range h.Points {
		name := p.Target + " " + modeName(p.Mode) + " " + p.Workload
		s := bySeries[name]
		if s == nil {
			s = &svgSeries{name: name, target: p.Target, color: colors(p.Target), dashed: p.Mode == "raw"}
			bySeries[name] = s
			names = append(names, name)
		}
		s.pts = append(s.pts, [2]float64{float64(index[p.Run+" "+p.Commit]), p.Median})
	}
	var series []svgSeries
	for _, n := range names {
		series = append(series, *bySeries[n])
	}
	section(b, "history", fmt.Sprintf("History: publish %s across commits", h.Figure))
	b.WriteString(lineChart("history", fmt.Sprintf("run (1 = oldest of %d; the table names each)", len(cols)), fmt.Sprintf("median publish %s (%s)", h.Figure, h.Unit), false, series))
	b.WriteString("<table>\n<tr><th>#</th><th class=\"l\">run (UTC)</th><th>command</th><th>commit</th><th class=\"l\">target</th><th>workload</th><th>mode</th><th>rounds</th><th>median</th><th>min</th><th>max</th><th>load 1m</th><th>CPUs</th></tr>\n")
	for _, p := range h.Points {
		fmt.Fprintf(b, "<tr><td>%d</td><td class=\"l\">%s</td><td>%s</td><td>%s</td><td class=\"l\">%s</td><td>%s</td><td>%s</td><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%.2f</td><td>%d</td></tr>\n",
			index[p.Run+" "+p.Commit], esc(runLabel(p.Run)), esc(p.Command), esc(short(p.Commit)), esc(p.Target), esc(p.Workload), esc(modeName(p.Mode)),
			p.Rounds, fmtFig(p.Median), fmtFig(p.Min), fmtFig(p.Max), p.LoadAvg, p.CPUs)
	}
	fmt.Fprintf(b, "</table>\n<p class=\"note\">From %s: one point per run and target, the median of its rounds (min and max beside it); the load average is the machine's when the run ended. Runs on other machines or at other loads are not comparable: compare within one run first.</p>\n</section>\n", esc(h.File))
}

// HeadCommit is the checkout's commit (git rev-parse HEAD in dir), with "+dirty"
// when tracked files have changes; "" outside a checkout.
func HeadCommit(ctx context.Context, dir string) string {
	c, err := git(ctx, dir, "rev-parse", "HEAD")
	if err != nil {
		return ""
	}
	if dirty, _ := git(ctx, dir, "status", "--porcelain", "--untracked-files=no"); dirty != "" {
		c += "+dirty"
	}
	return c
}
