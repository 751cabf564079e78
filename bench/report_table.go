package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable prints one row per result, then the comparison figures, then profiles.
func (rep *Report) WriteTable(w io.Writer) {
	if rep.Title != "" {
		fmt.Fprintln(w, rep.Title)
	}
	if rep.Command != "" {
		fmt.Fprintln(w, "command:", rep.Command)
	}
	if len(rep.Results) == 0 {
		rep.writeLimitsText(w)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tmode\tround\tpub msg/s\tpub MB/s\tcons msg/s\tpub p50\tpub p99\tpub p99.9\tpub max\te2e p50\te2e p99\te2e p99.9\te2e p99.99\te2e max\tCPU µs/msg\tCPU µs/MB\tcores\tRSS MiB\tloader µs/msg\tloader cores\terrors\t")
	for _, r := range rep.Results {
		mode := r.Mode
		if mode == "raw" {
			mode = "RAW"
		}
		if r.Failed != "" {
			fmt.Fprintf(tw, "%s\t%s\t%d\tFAILED: %s\t\n", r.Target, mode, r.Round, oneLine(r.Failed, 100))
			continue
		}
		cpuMsg, cpuMB, cores, rss := "n/a", "n/a", "n/a", "n/a"
		if r.Broker != nil {
			cpuMsg, cpuMB, cores, rss = fmt.Sprintf("%.3f", r.Broker.CPUUsPerMsg), fmt.Sprintf("%.0f", r.Broker.CPUUsPerMB), fmt.Sprintf("%.2f", r.Broker.CPUCores), fmt.Sprintf("%.0f", float64(r.Broker.PeakRSS)/(1<<20))
		}
		lMsg, lCores := loaderCells(r)
		p, e := r.PublishLatency, r.E2ELatency
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.1f\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n",
			r.Target, mode, r.Round, r.PubRate, r.PubMBps, r.ConsRate,
			ms(p.P50, p.Count), ms(p.P99, p.Count), ms(p.P999, p.Count), ms(p.Max, p.Count),
			ms(e.P50, e.Count), ms(e.P99, e.Count), ms(e.P999, e.Count), ms(e.P9999, e.Count), ms(e.Max, e.Count),
			cpuMsg, cpuMB, cores, rss, lMsg, lCores, r.Errors)
	}
	tw.Flush()
	rawNote := "publish latency there is per request"
	for _, r := range rep.Results {
		if r.Mode == "raw" && r.RawRate > 0 {
			rawNote = fmt.Sprintf("paced at %d msg/s, publish latency per record from its due time", r.RawRate)
			break
		}
	}
	fmt.Fprintln(w, "latencies in ms; publish latency from the intended send time (coordinated omission corrected); RAW rows: pre-encoded batches, pipelined Produce, undecoded Fetch; "+rawNote)
	for _, r := range rep.Results {
		if r.Broker != nil && r.Broker.Source != "" {
			fmt.Fprintf(w, "  note [%s r%d %s]: broker CPU and RSS from %s\n", r.Target, r.Round, r.Mode, r.Broker.Source)
		}
		if n := loaderNote(r); n != "" {
			fmt.Fprintf(w, "  note [%s r%d %s]: %s\n", r.Target, r.Round, r.Mode, n)
		}
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  note [%s r%d %s]: %s\n", r.Target, r.Round, r.Mode, n)
		}
		for _, e := range r.ErrorSamples {
			fmt.Fprintf(w, "  error [%s r%d %s]: %s\n", r.Target, r.Round, r.Mode, e)
		}
		if r.Mode == "client" && r.Failed == "" && !r.CaughtUp {
			fmt.Fprintf(w, "  WARNING [%s r%d]: consumers did not catch up: acked %d × %d subscriptions, consumed %d\n", r.Target, r.Round, r.Acked, r.Subscriptions, r.Consumed)
		}
	}
	rep.writeRuntimeText(w)
	if rep.showSideBySide() {
		fmt.Fprintln(w)
		rep.WriteFigures(w)
	}
	for _, r := range rep.Results {
		for _, p := range r.Profiles {
			fmt.Fprintf(w, "\n[%s r%d] ", r.Target, r.Round)
			p.WriteTop(w)
		}
	}
	rep.writeLimitsText(w)
}

func (rep *Report) writeLimitsText(w io.Writer) {
	if rep.Limits != nil {
		fmt.Fprintln(w)
		rep.Limits.WriteTable(w)
		rep.writeLimitRatios(w)
	}
}

// writeLimitRatios states client and raw bandwidth as a share of loopback TCP.
func (rep *Report) writeLimitRatios(w io.Writer) {
	l := rep.Limits
	if l.LoopbackMBps <= 0 {
		return
	}
	for _, r := range rep.Results {
		if r.Failed != "" || r.PubMBps == 0 {
			continue
		}
		fmt.Fprintf(w, "  [%s r%d %s] publish %.1f MB/s = %.1f%% of loopback TCP, %.1f%% of 1 MiB write+fdatasync; consume %.1f MB/s = %.1f%% of sendfile\n",
			r.Target, r.Round, r.Mode, r.PubMBps, 100*r.PubMBps/l.LoopbackMBps, 100*r.PubMBps/l.WriteSyncMBps, r.ConsMBps, 100*r.ConsMBps/l.SendfileMBps)
	}
}

// loaderCells are the loader columns of a run's row: CPU µs per message and cores.
func loaderCells(r *Result) (perMsg, cores string) {
	if r.Loader == nil {
		return "n/a", "n/a"
	}
	return fmt.Sprintf("%.3f", r.Loader.CPUUsPerMsg), fmt.Sprintf("%.2f", r.Loader.CPUCores)
}

// loaderNote says where the loader's figures come from when they include a broker.
func loaderNote(r *Result) string {
	if r.Loader == nil || !r.Loader.IncludesBroker {
		return ""
	}
	return "loader CPU (" + r.Loader.Source + ") includes the broker, which ran in the loader's process"
}

func ms(v float64, n int64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

func oneLine(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
