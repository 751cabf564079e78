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
	// Raw gates on the raw (broker capacity) mode instead of the client mode.
	Raw       bool
	RawConfig RawConfig
	Spawn     SpawnOptions
	Progress  io.Writer
	Logger    *slog.Logger
}

// Verdict is the gate's decision.
type Verdict struct {
	Baseline        string   `json:"baseline"`
	BaselineCommit  string   `json:"baseline_commit"`
	CurrentCommit   string   `json:"current_commit"`
	Mode            string   `json:"mode"`
	Rounds          int      `json:"rounds"`
	Threshold       float64  `json:"threshold"`
	ThroughputRatio float64  `json:"throughput_ratio"` // current / baseline median publish rate
	P99Ratio        float64  `json:"p99_ratio"`        // current / baseline median publish p99
	Pass            bool     `json:"pass"`
	Reasons         []string `json:"reasons,omitempty"`
}

// Regress builds the broker at cfg.Baseline (in a temporary git worktree) and at the
// working tree, runs the workload against each alternately for Rounds rounds, and
// judges the medians: throughput may not fall, nor publish p99 rise, by more than
// Threshold. A failed run fails the gate.
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
	v := &Verdict{Baseline: cfg.Baseline, Rounds: cfg.Rounds, Threshold: cfg.Threshold, Mode: "client"}
	if cfg.Raw {
		v.Mode = "raw"
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
	v.Pass = len(v.Reasons) == 0
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
	fmt.Fprintf(w, "  throughput ratio (current/baseline, median): %.3f\n", v.ThroughputRatio)
	fmt.Fprintf(w, "  publish p99 ratio (current/baseline, median): %.3f\n", v.P99Ratio)
	for _, r := range v.Reasons {
		fmt.Fprintf(w, "  - %s\n", r)
	}
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
