package bench

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// The side-by-side table: one row per figure (and mode), one column per target.
//
//	figure          unit   better             samsa            kfake-proc
//	publish rate    msg/s  higher is better   * 675k           392k  0.58×
//	publish p99     ms     lower is better    600              * 410  0.68×
//
// A cell is the target's median over its rounds (min–max beside it when there was
// more than one round) and its ratio to the first target's median; * marks the best.

// figureRow is one row of the side-by-side table.
type figureRow struct {
	name, unit, better, mode string
	cells                    []*FigureStat // one per column; nil where the target lacks the figure
}

// sideBySide lays rep.Compare out as rows per mode (client first, then raw, in the
// order met) and columns per target (in the order of the results).
func (rep *Report) sideBySide() (targets []string, modes []string, rows map[string][]figureRow) {
	col := map[string]int{}
	seenMode := map[string]bool{}
	for _, f := range rep.Compare {
		for _, s := range f.Stats {
			if _, ok := col[s.Target]; !ok {
				col[s.Target] = len(targets)
				targets = append(targets, s.Target)
			}
			if !seenMode[s.Mode] {
				seenMode[s.Mode] = true
				modes = append(modes, s.Mode)
			}
		}
	}
	rows = map[string][]figureRow{}
	for _, mode := range modes {
		for _, f := range rep.Compare {
			row := figureRow{name: f.Name, unit: f.Unit, better: f.Better, mode: mode, cells: make([]*FigureStat, len(targets))}
			found := false
			for i := range f.Stats {
				if s := &f.Stats[i]; s.Mode == mode {
					row.cells[col[s.Target]] = s
					found = true
				}
			}
			if found {
				rows[mode] = append(rows[mode], row)
			}
		}
	}
	return targets, modes, rows
}

// showSideBySide: the table says something beyond the results table when there are
// several targets or several rounds.
func (rep *Report) showSideBySide() bool {
	targets, _, rows := rep.sideBySide()
	if len(targets) > 1 {
		return true
	}
	for _, rs := range rows {
		for _, r := range rs {
			for _, c := range r.cells {
				if c != nil && c.N > 1 {
					return true
				}
			}
		}
	}
	return false
}

func betterText(b string) string { return b + " is better" }

func (rep *Report) modeTitle(mode string) string {
	if mode == "raw" {
		for _, r := range rep.Results {
			if r.Mode == "raw" && r.RawRate > 0 {
				return fmt.Sprintf("RAW mode paced at %d msg/s (pre-encoded batches at the workload's rate, undecoded Fetch; publish latency per record from its due time)", r.RawRate)
			}
		}
		return "RAW mode (pre-encoded batches, pipelined Produce, undecoded Fetch)"
	}
	return mode + " mode (franz-go producers and consumers)"
}

// ratioNote states what the ratio is and which way is better.
func ratioNote(first string) string {
	return fmt.Sprintf("× is the median divided by %s's median in the same mode: above 1× is better for \"higher is better\" figures, below 1× for \"lower is better\" ones; * marks the best median", first)
}

// WriteFigures prints the side-by-side table, one block per mode.
func (rep *Report) WriteFigures(w io.Writer) {
	targets, modes, rows := rep.sideBySide()
	if len(targets) == 0 {
		return
	}
	fmt.Fprintf(w, "side by side: median over the rounds (min–max when more than one)\n")
	for _, mode := range modes {
		fmt.Fprintf(w, "\n%s\n", rep.modeTitle(mode))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprint(tw, "figure\tunit\tbetter\t")
		for _, t := range targets {
			fmt.Fprintf(tw, "%s\t", t)
		}
		fmt.Fprintln(tw)
		for _, r := range rows[mode] {
			fmt.Fprintf(tw, "%s\t%s\t%s\t", r.name, r.unit, betterText(r.better))
			for i, c := range r.cells {
				fmt.Fprintf(tw, "%s\t", cellText(c, i == 0))
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
	fmt.Fprintln(w, ratioNote(targets[0]))
}

func cellText(c *FigureStat, first bool) string {
	if c == nil {
		return "-"
	}
	s := fmtFig(c.Median)
	if c.Best {
		s = "* " + s
	}
	if c.N > 1 && c.Min != c.Max {
		s += fmt.Sprintf(" (%s–%s)", fmtFig(c.Min), fmtFig(c.Max))
	}
	if !first && c.Ratio != 0 {
		s += fmt.Sprintf(" %.2f×", c.Ratio)
	}
	return s
}

// fmtFig prints a figure with three significant digits: 675k, 2.06M, 0.261, 12.6.
func fmtFig(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v):
		return "-"
	case a >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.3gk", v/1e3)
	case a >= 100 || v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// headline figures are the ones a summary states.
var headline = map[string]bool{
	"publish rate": true, "consume rate": true, "publish p99": true, "e2e p99": true,
	"broker CPU per msg": true, "broker peak RSS": true, "errors": true,
	"remote copies in the window": true,
}

// Problems lists why the invocation should exit non-zero: failed runs, runs that
// counted errors, a failed regression gate.
func (rep *Report) Problems() []string {
	var out []string
	for _, r := range rep.Results {
		switch {
		case r.Failed != "":
			out = append(out, fmt.Sprintf("%s %s r%d failed: %s", r.Target, modeName(r.Mode), r.Round, oneLine(r.Failed, 200)))
		case r.Errors > 0:
			out = append(out, fmt.Sprintf("%s %s r%d: %d errors", r.Target, modeName(r.Mode), r.Round, r.Errors))
		}
		if r.Tiered == nil {
			continue
		}
		for _, rb := range r.Tiered.ReadBack {
			if !rb.Pass {
				out = append(out, fmt.Sprintf("%s %s r%d: %s", r.Target, modeName(r.Mode), r.Round, oneLine(rb.verdict(), 300)))
			}
		}
	}
	if rep.Regress != nil && !rep.Regress.Pass {
		out = append(out, "regression gate failed")
	}
	return out
}

func modeName(m string) string {
	if m == "raw" {
		return "RAW"
	}
	return m
}

// WriteSummary prints only the verdict lines: with several targets, who is best on
// each headline figure and by how much; with one, each run's headline figures; the
// regression gate's verdict; the limits in one line; and a last line, "verdict: ok"
// or "verdict: FAIL (...)", that agrees with the exit code.
func (rep *Report) WriteSummary(w io.Writer) {
	for _, l := range rep.verdictLines() {
		fmt.Fprintln(w, l)
	}
}

func (rep *Report) verdictLines() []string {
	var out []string
	targets, modes, rows := rep.sideBySide()
	switch {
	case rep.Regress != nil:
		var b strings.Builder
		rep.Regress.WriteVerdict(&b)
		out = append(out, strings.Split(strings.TrimRight(b.String(), "\n"), "\n")...)
	case len(targets) > 1:
		for _, mode := range modes {
			for _, r := range rows[mode] {
				if headline[r.name] {
					out = append(out, figureVerdict(r, targets))
				}
			}
		}
	default:
		for _, r := range rep.Results {
			if r.Failed == "" {
				out = append(out, resultVerdict(r))
			}
		}
	}
	if rep.Limits != nil {
		l := rep.Limits
		out = append(out, fmt.Sprintf("limits (%s): page-cache write %s MB/s, 1 MiB write+fdatasync %s MB/s, 4 KiB fdatasync p50 %s ms p99 %s ms, loopback TCP %s MB/s, sendfile %s MB/s",
			l.Dir, fmtFig(l.WriteMBps), fmtFig(l.WriteSyncMBps), fmtFig(l.FdatasyncP50Ms), fmtFig(l.FdatasyncP99Ms), fmtFig(l.LoopbackMBps), fmtFig(l.SendfileMBps)))
	}
	probs := rep.Problems()
	for _, p := range probs {
		out = append(out, "  - "+p)
	}
	switch {
	case len(probs) > 0:
		out = append(out, fmt.Sprintf("verdict: FAIL (%d problem(s) above)", len(probs)))
	case len(rep.Results) == 0 && rep.Limits == nil:
		out = append(out, "verdict: FAIL (nothing was measured)")
	default:
		out = append(out, "verdict: ok")
	}
	return out
}

// figureVerdict: "publish rate, client (msg/s, higher is better): kfake best at 1.65M
// (1.29× samsa); samsa 1.28M". With no best (all equal): "errors, client (count, lower
// is better): all 0"; a target without the figure is "not measured".
func figureVerdict(r figureRow, targets []string) string {
	head := fmt.Sprintf("%s, %s (%s, %s): ", r.name, modeName(r.mode), r.unit, betterText(r.better))
	var best, others []string
	var vals []float64
	for i, c := range r.cells {
		if c == nil {
			others = append(others, targets[i]+" not measured")
			continue
		}
		vals = append(vals, c.Median)
		v := fmtFig(c.Median)
		if i > 0 && c.Ratio != 0 {
			v += fmt.Sprintf(" (%.2f× %s)", c.Ratio, targets[0])
		}
		if c.Best {
			best = append(best, targets[i]+" best at "+v)
		} else {
			others = append(others, targets[i]+" "+v)
		}
	}
	if len(best) == 0 && len(vals) == len(r.cells) && len(vals) > 1 {
		same := true
		for _, v := range vals {
			same = same && v == vals[0]
		}
		if same {
			return head + "all " + fmtFig(vals[0])
		}
	}
	return head + strings.Join(append(best, others...), "; ")
}

// resultVerdict: one run's headline figures.
func resultVerdict(r *Result) string {
	var parts []string
	if r.PubRate > 0 {
		parts = append(parts, fmt.Sprintf("publish %s msg/s (%s MB/s)", fmtFig(r.PubRate), fmtFig(r.PubMBps)))
	}
	if r.ConsRate > 0 {
		parts = append(parts, fmt.Sprintf("consume %s msg/s", fmtFig(r.ConsRate)))
	}
	if r.PublishLatency.Count > 0 {
		what := "publish p99"
		if r.Mode == "raw" && r.RawRate == 0 {
			what = "request p99"
		}
		parts = append(parts, fmt.Sprintf("%s %s ms", what, fmtFig(r.PublishLatency.P99)))
	}
	if r.E2ELatency.Count > 0 {
		parts = append(parts, fmt.Sprintf("e2e p99 %s ms", fmtFig(r.E2ELatency.P99)))
	}
	if b := r.Broker; b != nil {
		parts = append(parts, fmt.Sprintf("broker %s µs/msg, %.2f cores, RSS %s MiB", fmtFig(b.CPUUsPerMsg), b.CPUCores, fmtFig(float64(b.PeakRSS)/(1<<20))))
	}
	if l := r.Loader; l != nil {
		parts = append(parts, fmt.Sprintf("loader %s µs/msg, %.2f cores", fmtFig(l.CPUUsPerMsg), l.CPUCores))
	}
	parts = append(parts, fmt.Sprintf("%d errors", r.Errors))
	if r.Tiered != nil {
		for _, rb := range r.Tiered.ReadBack {
			v := "PASS"
			if !rb.Pass {
				v = "FAIL"
			}
			parts = append(parts, fmt.Sprintf("read-back %s %s (%s msg/s)", rb.Reader, v, fmtFig(rb.Rate)))
		}
	}
	if r.Mode == "client" && !r.CaughtUp {
		parts = append(parts, "consumers did not catch up")
	}
	return fmt.Sprintf("%s %s r%d: %s", r.Target, modeName(r.Mode), r.Round, strings.Join(parts, ", "))
}

// CommandLine renders argv as one shell command that can be pasted back: arguments
// with spaces or shell characters are single-quoted, and a `go run` binary (its
// path is in the build cache) is shown as `go run ./cmd/<name>`.
func CommandLine(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	parts := make([]string, len(argv))
	for i, a := range argv {
		parts[i] = shellQuote(a)
	}
	if strings.Contains(argv[0], string(filepath.Separator)+"go-build") && strings.Contains(argv[0], string(filepath.Separator)+"exe"+string(filepath.Separator)) {
		parts[0] = "go run ./cmd/" + filepath.Base(argv[0])
	}
	return strings.Join(parts, " ")
}

func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,+@%^", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
