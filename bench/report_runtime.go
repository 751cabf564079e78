package bench

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"strings"
	"text/tabwriter"
)

// The runtime table: per run, the publish tail (p99, p99.9, max) beside the Go
// runtime's own figures over the same window, the broker's and the loader's
// (runtime.go), so that a spike can be laid beside a GC pause or a scheduling
// latency of either process. The spike notes themselves are among the run's notes.

var runtimeHeader = []string{"target", "mode", "round", "pub p99", "pub p99.9", "pub max",
	"broker GC pauses", "GC p99", "GC max", "sched p99", "sched max", "GC CPU", "fdatasyncs", "fdatasync p99", "fdatasync max", "flush queue max",
	"loader GC pauses", "GC p99", "GC max", "sched p99", "sched max", "GC CPU"}

// runtimeRows are the table's rows: one per run that has runtime figures.
func (rep *Report) runtimeRows() [][]string {
	var rows [][]string
	for _, r := range rep.Results {
		if r.Failed != "" || (r.LoaderRuntime == nil && r.BrokerRuntime == nil) {
			continue
		}
		p := r.PublishLatency
		row := []string{r.Target, modeName(r.Mode), fmt.Sprint(r.Round), ms(p.P99, p.Count), ms(p.P999, p.Count), ms(p.Max, p.Count)}
		broker := r.BrokerRuntime
		if r.LoaderRuntime != nil && r.LoaderRuntime.IncludesBroker {
			broker = r.LoaderRuntime // one process: the same figures
		}
		row = append(row, runtimeCells(broker)...)
		row = append(row, engineCells(broker)...)
		row = append(row, runtimeCells(r.LoaderRuntime)...)
		rows = append(rows, row)
	}
	return rows
}

func runtimeCells(s *RuntimeStats) []string {
	if s == nil {
		return []string{"n/a", "n/a", "n/a", "n/a", "n/a", "n/a"}
	}
	gc := "n/a"
	if s.GCCPUShare >= 0 {
		gc = fmt.Sprintf("%.1f%%", 100*s.GCCPUShare)
	}
	pause := func(v float64) string {
		if s.GCPauses == 0 {
			return "-"
		}
		return fmt.Sprintf("%.3f", v)
	}
	return []string{fmt.Sprint(s.GCPauses), pause(s.GCPauseP99Ms), pause(s.GCPauseMaxMs),
		fmt.Sprintf("%.3f", s.SchedP99Ms), fmt.Sprintf("%.3f", s.SchedMaxMs), gc}
}

// engineCells are a Samsa broker's group-commit columns: fdatasyncs, their p99 and
// max, and the flush queue's longest wait; n/a for a broker that does not export them.
func engineCells(s *RuntimeStats) []string {
	if s == nil || !s.Engine {
		return []string{"n/a", "n/a", "n/a", "n/a"}
	}
	if s.Fsyncs == 0 {
		return []string{"0", "-", "-", fmt.Sprintf("%.3f", s.FlushQueueMaxMs)}
	}
	return []string{fmt.Sprint(s.Fsyncs), fmt.Sprintf("%.3f", s.FsyncP99Ms), fmt.Sprintf("%.3f", s.FsyncMaxMs), fmt.Sprintf("%.3f", s.FlushQueueMaxMs)}
}

const runtimeFootnote = "latencies in ms, over the measured window; GC pauses: stop-the-world pauses (runtime/metrics /gc/pauses:seconds); sched: time a runnable goroutine waited to run (/sched/latencies:seconds); GC CPU: the runtime's estimate of GC's share of the process's CPU, assists included; the broker's from its /metrics (a cluster's nodes summed), n/a without an admin URL; fdatasync and flush queue (a durability waiter's wait for its flusher round): a Samsa broker's group commits, n/a for other brokers; a note names each round whose max exceeds 10× its p99"

// writeRuntimeText prints the runtime table, when a run has runtime figures.
func (rep *Report) writeRuntimeText(w io.Writer) {
	rows := rep.runtimeRows()
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\nGo runtime over the window (broker | loader):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(runtimeHeader, "\t")+"\t")
	for _, row := range rows {
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
	fmt.Fprintln(w, runtimeFootnote)
	for _, r := range rep.Results {
		if r.LoaderRuntime != nil && r.LoaderRuntime.IncludesBroker {
			fmt.Fprintf(w, "  note [%s r%d %s]: the broker ran in the loader's process: its runtime figures are the loader's\n", r.Target, r.Round, r.Mode)
		}
	}
}

// htmlRuntime is the runtime section, when a run has runtime figures.
func (rep *Report) htmlRuntime(b *bytes.Buffer) {
	rows := rep.runtimeRows()
	if len(rows) == 0 {
		return
	}
	esc := html.EscapeString
	section(b, "runtime", "Go runtime over the window")
	b.WriteString("<table>\n<tr><th class=\"l\" rowspan=\"2\">target</th><th rowspan=\"2\">mode</th><th rowspan=\"2\">round</th><th colspan=\"3\">publish (ms)</th>" +
		"<th colspan=\"10\">broker</th><th colspan=\"6\">loader</th></tr>\n<tr>")
	for _, h := range runtimeHeader[3:] {
		fmt.Fprintf(b, "<th>%s</th>", esc(strings.TrimPrefix(strings.TrimPrefix(h, "broker "), "loader ")))
	}
	b.WriteString("</tr>\n")
	for _, row := range rows {
		fmt.Fprintf(b, "<tr><td class=\"l\">%s</td>", esc(row[0]))
		for _, c := range row[1:] {
			fmt.Fprintf(b, "<td>%s</td>", esc(c))
		}
		b.WriteString("</tr>\n")
	}
	fmt.Fprintf(b, "</table>\n<p class=\"note\">%s.</p>\n", esc(runtimeFootnote))
	var spikes []string
	for _, r := range rep.Results {
		for _, n := range r.Notes {
			if strings.HasPrefix(n, "spike: ") {
				spikes = append(spikes, fmt.Sprintf("%s %s r%d: %s", r.Target, modeName(r.Mode), r.Round, n))
			}
		}
	}
	if len(spikes) > 0 {
		b.WriteString("<ul class=\"notes\">\n")
		for _, n := range spikes {
			fmt.Fprintf(b, "<li>%s</li>\n", esc(n))
		}
		b.WriteString("</ul>\n")
	}
	b.WriteString("</section>\n")
}
