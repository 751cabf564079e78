package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// RegressConfig describes a regression gate run.
type RegressConfig struct {
	Baseline   string // git ref
	ModuleRoot string // default FindModuleRoot()
	Workload   *Workload
	Rounds     int     // default 3
	Threshold  float64 // default 0.10
	// P999Threshold, when positive, gates the median publish p99.9 too: it may not
	// rise by more than this. 0 reports its ratio without gating it.
	P999Threshold float64
	// Raw gates on the raw (broker capacity) mode instead of the client mode.
	Raw       bool
	RawConfig RawConfig
	Spawn     SpawnOptions
	Progress  io.Writer
	Logger    *slog.Logger
}

// Verdict is the gate's decision.
type Verdict struct {
	Baseline        string  `json:"baseline"`
	BaselineCommit  string  `json:"baseline_commit"`
	CurrentCommit   string  `json:"current_commit"`
	Mode            string  `json:"mode"`
	Rounds          int     `json:"rounds"`
	Threshold       float64 `json:"threshold"`
	ThroughputRatio float64 `json:"throughput_ratio"` // current / baseline median publish rate
	P99Ratio        float64 `json:"p99_ratio"`        // current / baseline median publish p99
	// P999Ratio is current / baseline median publish p99.9, gated at P999Threshold
	// when that is positive.
	P999Ratio     float64 `json:"p999_ratio"`
	P999Threshold float64 `json:"p999_threshold,omitempty"`
	// CPUPerMsgRatio is current / baseline median broker CPU per message; 0 when
	// either side has no CPU figure (then Notes says so and the check is skipped).
	CPUPerMsgRatio float64 `json:"cpu_per_msg_ratio"`
	// TargetRate is the workload's fixed producer rate (msg/s in total), or 0 at max
	// rate; with it the throughput check catches a shortfall only (see judge).
	TargetRate float64  `json:"target_rate,omitempty"`
	Pass       bool     `json:"pass"`
	Reasons    []string `json:"reasons,omitempty"`
	// Notes are what the gate could not judge or the reader should know: a figure
	// not measured, a fixed rate neither side reached.
	Notes []string `json:"notes,omitempty"`
}

// Regress builds the broker at cfg.Baseline (in a temporary git worktree) and at the
// working tree, runs the workload against each alternately for Rounds rounds, and
// judges the medians: throughput may not fall, nor publish p99 or broker CPU per
// message rise, by more than Threshold, nor publish p99.9 by more than
// P999Threshold when it is set. A failed run fails the gate.
//
// Broker CPU per message comes from /proc of the spawned broker. Where a side has no
// CPU figure at all (no /proc: not Linux) the CPU check is not made, and the verdict
// says so in Notes and in its text ("unmeasured"): it neither fails nor passes on a
// figure it does not have. Where only some runs have it, the median is of those, and
// a note gives the count.
//
// A fixed-rate workload (producerRate > 0, such as latency-20k) publishes at the
// target rate whenever the broker keeps up, so its throughput ratio is about 1 and
// says nothing about speed; the gate there is on publish p99 and CPU per message. The
// throughput check is still made, and catches a shortfall: the current broker
// falling more than Threshold behind the baseline's achieved rate. When a side's
// median is below 95% of the target rate, a note says so (if both fall short, the
// machine did not keep up, and the latency figures compare overloaded runs).
func Regress(ctx context.Context, cfg RegressConfig) (*Verdict, []*Result, error) {
	if cfg.Rounds < 1 {
		cfg.Rounds = 3
	}
	if cfg.Threshold <= 0 {
		cfg.Threshold = 0.10
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	root := cfg.ModuleRoot
	if root == "" {
		var err error
		if root, err = FindModuleRoot(); err != nil {
			return nil, nil, err
		}
	}
	if err := cfg.Spawn.defaults(); err != nil {
		return nil, nil, err
	}
	tmp, err := os.MkdirTemp(cfg.Spawn.WorkDir, "samsa-regress-")
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrTarget, err)
	}
	defer os.RemoveAll(tmp)
	v := &Verdict{Baseline: cfg.Baseline, Rounds: cfg.Rounds, Threshold: cfg.Threshold, P999Threshold: cfg.P999Threshold, Mode: "client"}
	if cfg.Raw {
		v.Mode = "raw"
	} else if cfg.Workload != nil && cfg.Workload.ProducerRate > 0 {
		v.TargetRate = float64(cfg.Workload.ProducerRate)
	}
	v.BaselineCommit, err = git(ctx, root, "rev-parse", cfg.Baseline+"^{commit}")
	if err != nil {
		return nil, nil, err
	}
	v.CurrentCommit, _ = git(ctx, root, "rev-parse", "HEAD")
	if dirty, _ := git(ctx, root, "status", "--porcelain", "--untracked-files=no"); dirty != "" {
		v.CurrentCommit += "+dirty"
	}

	baseBin := filepath.Join(tmp, "samsa-baseline")
	curBin := filepath.Join(tmp, "samsa-current")
	wt := filepath.Join(tmp, "src")
	if _, err := git(ctx, root, "worktree", "add", "--detach", wt, v.BaselineCommit); err != nil {
		return nil, nil, err
	}
	berr := BuildSamsa(ctx, wt, baseBin)
	if _, err := git(context.WithoutCancel(ctx), root, "worktree", "remove", "--force", wt); err != nil {
		cfg.Logger.Warn("remove worktree", "dir", wt, "err", err)
	}
	if berr != nil {
		return nil, nil, fmt.Errorf("baseline %s: %w", cfg.Baseline, berr)
	}
	if err := BuildSamsa(ctx, root, curBin); err != nil {
		return nil, nil, fmt.Errorf("current: %w", err)
	}

	var results []*Result
	for round := 1; round <= cfg.Rounds; round++ {
		for _, side := range []struct{ name, bin string }{{"baseline", baseBin}, {"current", curBin}} {
			sp := cfg.Spawn
			sp.SamsaBin = side.bin
			cc := CompareConfig{Workload: cfg.Workload, Targets: []string{TargetSamsa}, Names: []string{side.name},
				Rounds: 1, Spawn: sp, RawOnly: cfg.Raw, RawConfig: cfg.RawConfig, Progress: cfg.Progress, Logger: cfg.Logger}
			rs, err := Compare(ctx, cc)
			for _, r := range rs {
				r.Round = round
			}
			results = append(results, rs...)
			if err != nil {
				return nil, results, err
			}
		}
	}
	judge(v, results)
	return v, results, nil
}

// judge fills v from the results of the chosen mode.
func judge(v *Verdict, results []*Result) {
	var base, cur []*Result
	for _, r := range results {
		if r.Mode != v.Mode {
			continue
		}
		if r.Failed != "" {
			v.Reasons = append(v.Reasons, fmt.Sprintf("%s round %d failed: %s", r.Target, r.Round, r.Failed))
			continue
		}
		if r.Target == "baseline" {
			base = append(base, r)
		} else {
			cur = append(cur, r)
		}
	}
	med := func(rs []*Result, f func(*Result) float64) float64 {
		var vs []float64
		for _, r := range rs {
			vs = append(vs, f(r))
		}
		_, m, _ := minMedMax(vs)
		return m
	}
	if len(base) == 0 || len(cur) == 0 {
		v.Reasons = append(v.Reasons, "no successful run on one side")
		return
	}
	rate := func(r *Result) float64 { return r.PubRate }
	p99 := func(r *Result) float64 { return r.PublishLatency.P99 }
	if b := med(base, rate); b > 0 {
		v.ThroughputRatio = med(cur, rate) / b
	}
	if b := med(base, p99); b > 0 {
		v.P99Ratio = med(cur, p99) / b
	}
	if v.ThroughputRatio < 1-v.Threshold {
		v.Reasons = append(v.Reasons, fmt.Sprintf("throughput ratio %.3f < %.3f", v.ThroughputRatio, 1-v.Threshold))
	}
	if v.P99Ratio > 1+v.Threshold {
		v.Reasons = append(v.Reasons, fmt.Sprintf("publish p99 ratio %.3f > %.3f", v.P99Ratio, 1+v.Threshold))
	}
	p999 := func(r *Result) float64 { return r.PublishLatency.P999 }
	if b := med(base, p999); b > 0 {
		v.P999Ratio = med(cur, p999) / b
	}
	if v.P999Threshold > 0 && v.P999Ratio > 1+v.P999Threshold {
		v.Reasons = append(v.Reasons, fmt.Sprintf("publish p99.9 ratio %.3f > %.3f", v.P999Ratio, 1+v.P999Threshold))
	}
	judgeCPU(v, base, cur)
	if v.TargetRate > 0 {
		for _, side := range []struct {
			name string
			rs   []*Result
		}{{"baseline", base}, {"current", cur}} {
			if m := med(side.rs, rate); m < rateShortShare*v.TargetRate {
				v.Notes = append(v.Notes, fmt.Sprintf("%s median publish rate %s msg/s is %.0f%% of the fixed %s msg/s: it did not keep up",
					side.name, fmtFig(m), 100*m/v.TargetRate, fmtFig(v.TargetRate)))
			}
		}
	}
	v.Pass = len(v.Reasons) == 0
}

// judgeCPU sets CPUPerMsgRatio from the runs that have a broker CPU figure, or notes
// that a side has none.
func judgeCPU(v *Verdict, base, cur []*Result) {
	meds := make([]float64, 2)
	for i, side := range []struct {
		name string
		rs   []*Result
	}{{"baseline", base}, {"current", cur}} {
		var vs []float64
		for _, r := range side.rs {
			if r.Broker != nil && r.Broker.CPUUsPerMsg > 0 {
				vs = append(vs, r.Broker.CPUUsPerMsg)
			}
		}
		switch {
		case len(vs) == 0:
			v.Notes = append(v.Notes, fmt.Sprintf("broker CPU per message unmeasured on the %s side (no /proc or /metrics figure): not gated", side.name))
		case len(vs) < len(side.rs):
			v.Notes = append(v.Notes, fmt.Sprintf("broker CPU per message measured in %d of %d %s runs: the median is of those", len(vs), len(side.rs), side.name))
		}
		if len(vs) > 0 {
			_, meds[i], _ = minMedMax(vs)
		}
	}
	if meds[0] <= 0 || meds[1] <= 0 {
		return
	}
	v.CPUPerMsgRatio = meds[1] / meds[0]
	if v.CPUPerMsgRatio > 1+v.Threshold {
		v.Reasons = append(v.Reasons, fmt.Sprintf("broker CPU per message ratio %.3f > %.3f", v.CPUPerMsgRatio, 1+v.Threshold))
	}
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%w: git %s: %w: %s", ErrTarget, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// WriteVerdict prints the gate's decision.
func (v *Verdict) WriteVerdict(w io.Writer) {
	state := "PASS"
	if !v.Pass {
		state = "FAIL"
	}
	fmt.Fprintf(w, "regress %s: baseline %s (%s) vs current %s, %s mode, %d rounds, threshold %.0f%%\n",
		state, v.Baseline, short(v.BaselineCommit), short(v.CurrentCommit), v.Mode, v.Rounds, v.Threshold*100)
	fixed := ""
	if v.TargetRate > 0 {
		fixed = fmt.Sprintf(" (fixed %s msg/s: catches a shortfall only)", fmtFig(v.TargetRate))
	}
	fmt.Fprintf(w, "  throughput ratio (current/baseline, median): %.3f%s\n", v.ThroughputRatio, fixed)
	fmt.Fprintf(w, "  publish p99 ratio (current/baseline, median): %.3f\n", v.P99Ratio)
	p999Gate := "not gated"
	if v.P999Threshold > 0 {
		p999Gate = fmt.Sprintf("threshold %.0f%%", 100*v.P999Threshold)
	}
	fmt.Fprintf(w, "  publish p99.9 ratio (current/baseline, median): %.3f (%s)\n", v.P999Ratio, p999Gate)
	fmt.Fprintf(w, "  broker CPU/msg ratio (current/baseline, median): %s\n", v.cpuRatioText())
	for _, r := range v.Reasons {
		fmt.Fprintf(w, "  - %s\n", r)
	}
	for _, n := range v.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

func (v *Verdict) cpuRatioText() string {
	if v.CPUPerMsgRatio == 0 {
		return "unmeasured"
	}
	return fmt.Sprintf("%.3f", v.CPUPerMsgRatio)
}

func short(c string) string {
	sha, dirty := strings.CutSuffix(c, "+dirty")
	if len(sha) > 12 {
		sha = sha[:12]
	}
	if dirty {
		sha += "+dirty"
	}
	return sha
}
