package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Figure is one measured quantity across the rounds of a comparison.
type Figure struct {
	Name   string       `json:"name"`
	Unit   string       `json:"unit"`
	Better string       `json:"better"` // higher or lower
	Stats  []FigureStat `json:"stats"`
}

// FigureStat is one target's min/median/max of a Figure over its rounds. Ratio is
// this target's median over the first target's median of the same mode (so above 1 is
// better where the figure's Better is "higher", below 1 where it is "lower"). Best
// marks the best median of the mode, when more than one target has the figure and
// they differ.
type FigureStat struct {
	Target string  `json:"target"`
	Mode   string  `json:"mode"`
	N      int     `json:"n"`
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
	Ratio  float64 `json:"ratio"`
	Best   bool    `json:"best,omitempty"`
}

type figureDef struct {
	name, unit, better string
	get                func(*Result) (float64, bool)
}

var figureDefs = []figureDef{
	{"publish rate", "msg/s", "higher", func(r *Result) (float64, bool) { return r.PubRate, r.PubRate > 0 }},
	{"publish bandwidth", "MB/s", "higher", func(r *Result) (float64, bool) { return r.PubMBps, r.PubMBps > 0 }},
	{"consume rate", "msg/s", "higher", func(r *Result) (float64, bool) { return r.ConsRate, r.ConsRate > 0 }},
	{"publish p50", "ms", "lower", lat(func(r *Result) Latency { return r.PublishLatency }, func(l Latency) float64 { return l.P50 })},
	{"publish p99", "ms", "lower", lat(func(r *Result) Latency { return r.PublishLatency }, func(l Latency) float64 { return l.P99 })},
	{"publish p99.9", "ms", "lower", lat(func(r *Result) Latency { return r.PublishLatency }, func(l Latency) float64 { return l.P999 })},
	{"publish max", "ms", "lower", lat(func(r *Result) Latency { return r.PublishLatency }, func(l Latency) float64 { return l.Max })},
	{"e2e p50", "ms", "lower", lat(func(r *Result) Latency { return r.E2ELatency }, func(l Latency) float64 { return l.P50 })},
	{"e2e p99", "ms", "lower", lat(func(r *Result) Latency { return r.E2ELatency }, func(l Latency) float64 { return l.P99 })},
	{"e2e p99.9", "ms", "lower", lat(func(r *Result) Latency { return r.E2ELatency }, func(l Latency) float64 { return l.P999 })},
	{"e2e max", "ms", "lower", lat(func(r *Result) Latency { return r.E2ELatency }, func(l Latency) float64 { return l.Max })},
	{"broker CPU per msg", "µs", "lower", func(r *Result) (float64, bool) {
		if r.Broker == nil {
			return 0, false
		}
		return r.Broker.CPUUsPerMsg, r.Broker.CPUUsPerMsg > 0
	}},
	{"broker CPU per MB", "µs", "lower", func(r *Result) (float64, bool) {
		if r.Broker == nil {
			return 0, false
		}
		return r.Broker.CPUUsPerMB, r.Broker.CPUUsPerMB > 0
	}},
	{"broker peak RSS", "MiB", "lower", func(r *Result) (float64, bool) {
		if r.Broker == nil {
			return 0, false
		}
		return float64(r.Broker.PeakRSS) / (1 << 20), r.Broker.PeakRSS > 0
	}},
	// The loader's own cost; left out where the broker ran in the loader's process.
	{"loader CPU per msg", "µs", "lower", func(r *Result) (float64, bool) {
		if r.Loader == nil || r.Loader.IncludesBroker {
			return 0, false
		}
		return r.Loader.CPUUsPerMsg, r.Loader.CPUUsPerMsg > 0
	}},
	{"loader cores", "cores", "lower", func(r *Result) (float64, bool) {
		if r.Loader == nil || r.Loader.IncludesBroker {
			return 0, false
		}
		return r.Loader.CPUCores, r.Loader.CPUCores > 0
	}},
	{"errors", "count", "lower", func(r *Result) (float64, bool) { return float64(r.Errors), true }},
	// A tiered catch-up's (tiered.go): the remote read, the local drain of the same
	// records, and the remote read's share of it.
	{"remote read rate", "msg/s", "higher", tiered(func(t *TieredFigures) float64 { return t.Remote.Rate })},
	{"remote read bandwidth", "MB/s", "higher", tiered(func(t *TieredFigures) float64 { return t.Remote.MBps })},
	{"local drain rate", "msg/s", "higher", tiered(func(t *TieredFigures) float64 { return t.Local.Rate })},
	{"local drain bandwidth", "MB/s", "higher", tiered(func(t *TieredFigures) float64 { return t.Local.MBps })},
	{"remote read / local drain", "ratio", "higher", tiered(func(t *TieredFigures) float64 { return t.RemoteShare })},
	// A samsa@tiered target's copies over a client run's window (tiered_target.go).
	{"remote copies in the window", "segments", "higher", copies(func(c *CopyFigures) float64 { return float64(c.Segments) })},
	{"remote copy bandwidth", "MB/s", "higher", copies(func(c *CopyFigures) float64 { return float64(c.Bytes) / max(c.Sec, 1e-9) / 1e6 })},
	{"remote copy lag max", "MB", "lower", copies(func(c *CopyFigures) float64 { return float64(c.LagMax) / 1e6 })},
	// A tiered catch-up's read-backs (readback.go), where the workload has them.
	{"franz-go read-back rate", "msg/s", "higher", readBack("franz-go")},
	{"kcat read-back rate", "msg/s", "higher", readBack("kcat")},
}

func copies(f func(*CopyFigures) float64) func(*Result) (float64, bool) {
	return func(r *Result) (float64, bool) {
		if r.Copies == nil {
			return 0, false
		}
		return f(r.Copies), true
	}
}

func readBack(reader string) func(*Result) (float64, bool) {
	return func(r *Result) (float64, bool) {
		if r.Tiered != nil {
			for _, rb := range r.Tiered.ReadBack {
				if rb.Reader == reader {
					return rb.Rate, true
				}
			}
		}
		return 0, false
	}
}

func tiered(f func(*TieredFigures) float64) func(*Result) (float64, bool) {
	return func(r *Result) (float64, bool) {
		if r.Tiered == nil {
			return 0, false
		}
		return f(r.Tiered), true
	}
}

func lat(pick func(*Result) Latency, f func(Latency) float64) func(*Result) (float64, bool) {
	return func(r *Result) (float64, bool) {
		l := pick(r)
		return f(l), l.Count > 0
	}
}

// Figures groups results by (mode, target), in first-seen order, and returns each
// figure's min/median/max per group, with ratios to the first target of the same mode.
// Failed runs are left out.
func Figures(results []*Result) []Figure {
	type key struct{ mode, target string }
	var order []key
	groups := map[key][]*Result{}
	for _, r := range results {
		if r.Failed != "" {
			continue
		}
		k := key{r.Mode, r.Target}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	// Ratios are to the first target of each mode; where that target lacks a figure
	// (kfake in process has no broker CPU), the figure has no ratios.
	firstTarget := map[string]string{}
	for _, k := range order {
		if _, ok := firstTarget[k.mode]; !ok {
			firstTarget[k.mode] = k.target
		}
	}
	var figs []Figure
	for _, d := range figureDefs {
		f := Figure{Name: d.name, Unit: d.unit, Better: d.better}
		firstOfMode := map[string]float64{}
		for _, k := range order {
			var vals []float64
			for _, r := range groups[k] {
				if v, ok := d.get(r); ok {
					vals = append(vals, v)
				}
			}
			if len(vals) == 0 {
				continue
			}
			s := FigureStat{Target: k.target, Mode: k.mode, N: len(vals)}
			s.Min, s.Median, s.Max = minMedMax(vals)
			if k.target == firstTarget[k.mode] {
				firstOfMode[k.mode] = s.Median
			}
			if base := firstOfMode[k.mode]; base != 0 {
				s.Ratio = s.Median / base
			}
			f.Stats = append(f.Stats, s)
		}
		if len(f.Stats) > 0 {
			markBest(&f)
			figs = append(figs, f)
		}
	}
	return figs
}

// markBest sets Best on the stats of each mode whose median is the best of that mode,
// when at least two targets have the figure and not all medians are equal.
func markBest(f *Figure) {
	byMode := map[string][]int{}
	for i, s := range f.Stats {
		byMode[s.Mode] = append(byMode[s.Mode], i)
	}
	for _, idx := range byMode {
		if len(idx) < 2 {
			continue
		}
		best, worst := f.Stats[idx[0]].Median, f.Stats[idx[0]].Median
		for _, i := range idx[1:] {
			m := f.Stats[i].Median
			if (f.Better == "higher") == (m > best) && m != best {
				best = m
			}
			if (f.Better == "higher") == (m < worst) && m != worst {
				worst = m
			}
		}
		if best == worst {
			continue
		}
		for _, i := range idx {
			f.Stats[i].Best = f.Stats[i].Median == best
		}
	}
}

func minMedMax(v []float64) (lo, med, hi float64) {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return s[0], med, s[n-1]
}

// CompareConfig describes a side-by-side run.
type CompareConfig struct {
	Workload *Workload
	Targets  []string // samsa, kfake, kfake-proc, host:port[+host:port]
	Rounds   int      // A B A B ... rounds (default 1)
	Spawn    SpawnOptions
	// Raw also runs the raw (broker capacity) mode after each client run.
	Raw       bool
	RawOnly   bool // run only the raw mode
	RawConfig RawConfig
	// Profile pulls CPU and heap profiles from targets with an admin URL.
	Profile    bool
	ProfileDir string
	Progress   io.Writer
	Logger     *slog.Logger
	// Names optionally relabels targets in results (same length as Targets).
	Names []string
	// AdminURLs gives the admin HTTP address (http://host:port) of targets that are
	// not spawned, by target spec: for --profile, and for the broker's CPU and RSS
	// (from its /metrics) when its PID is not known.
	AdminURLs map[string]string
	// PIDs gives the process id of targets that are not spawned but run on this
	// machine, by target spec: the broker's CPU and peak RSS come from /proc.
	PIDs map[string]int
	// ClientOpts gives the client security options (TLS, SASL: ClientSecurity) of
	// targets, by target spec. The raw mode has none: it is refused for them.
	ClientOpts map[string][]kgo.Opt
	// Interval, if set, cuts each client run's measured window into intervals of this
	// length (RunConfig.Interval): samsa-bench soak.
	Interval time.Duration
}

// Compare runs the workload against each target in turn, A B A B for Rounds rounds,
// starting spawned targets afresh for every run. A run that fails is kept as a Result
// with Failed set, and the comparison goes on.
func Compare(ctx context.Context, cfg CompareConfig) ([]*Result, error) {
	if cfg.Rounds < 1 {
		cfg.Rounds = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Spawn.Logger = cfg.Logger
	// Resolve relative paths (--samsa-bin bin/samsa) once, before any child runs in
	// another directory.
	if err := cfg.Spawn.defaults(); err != nil {
		return nil, err
	}
	if cfg.Spawn.SamsaBin == "" {
		for _, t := range cfg.Targets {
			if base, _, _ := strings.Cut(t, "@"); base == TargetSamsa || base == TargetSamsaCluster {
				dir, err := os.MkdirTemp(cfg.Spawn.WorkDir, "samsa-bin-")
				if err != nil {
					return nil, fmt.Errorf("%w: %w", ErrTarget, err)
				}
				defer os.RemoveAll(dir)
				bin := filepath.Join(dir, "samsa")
				if err := BuildSamsa(ctx, cfg.Spawn.ModuleRoot, bin); err != nil {
					return nil, err
				}
				cfg.Spawn.SamsaBin = bin
				break
			}
		}
	}
	var results []*Result
	for round := 1; round <= cfg.Rounds; round++ {
		for i, spec := range cfg.Targets {
			name := spec
			if i < len(cfg.Names) && cfg.Names[i] != "" {
				name = cfg.Names[i]
			}
			rs := runOne(ctx, cfg, spec, name, round)
			results = append(results, rs...)
			if ctx.Err() != nil {
				return results, ctx.Err()
			}
		}
	}
	return results, nil
}

// roundProfiler is the profiler of one mode of a round, its files named from prefix:
// nil without --profile or when the target has no admin URL.
func roundProfiler(cfg CompareConfig, t *Target, prefix string) *Profiler {
	if !cfg.Profile || t.AdminURL == "" {
		return nil
	}
	return &Profiler{AdminURL: t.AdminURL, Dir: cfg.ProfileDir, Prefix: prefix,
		CPUTime: min(10*time.Second, max(time.Second, cfg.Workload.Duration.D()/2))}
}

// collectProfile waits for prof's capture, which runs inside the measured window, and
// gives res its profiles, or a note saying why there are none.
func collectProfile(cfg CompareConfig, res *Result, prof *Profiler) {
	switch {
	case prof != nil:
		if err := prof.Wait(prof.CPUTime + time.Minute); err != nil {
			res.Notes = append(res.Notes, "profile: "+err.Error())
		} else {
			res.Profiles = prof.Results
		}
	case cfg.Profile:
		res.Notes = append(res.Notes, "profile: target has no admin URL")
	}
}

func runOne(ctx context.Context, cfg CompareConfig, spec, name string, round int) []*Result {
	fail := func(mode string, err error) *Result {
		cfg.Logger.Error("run failed", "target", name, "round", round, "mode", mode, "err", err)
		return &Result{Target: name, Workload: cfg.Workload.Name, Mode: mode, Round: round, Started: time.Now().UTC(), Failed: err.Error()}
	}
	sp, notes, store, err := targetSpawn(cfg, spec)
	if err != nil {
		return []*Result{fail("client", err)}
	}
	defer store.close()
	t, err := StartTarget(ctx, spec, sp)
	if err != nil {
		return []*Result{fail("client", err)}
	}
	defer func() {
		if err := t.Close(); err != nil {
			cfg.Logger.Warn("stop target", "target", name, "err", err)
		}
	}()
	if t.AdminURL == "" {
		t.AdminURL = cfg.AdminURLs[spec]
	}
	if pid := cfg.PIDs[spec]; pid != 0 && t.PID == 0 {
		// A process named by the caller: an error here means a wrong --pid, and a
		// run without the broker's cost would hide it.
		if _, err := procUsage(pid); err != nil {
			return []*Result{fail("client", fmt.Errorf("%w: pid %d of %s: %w", ErrTarget, pid, name, err))}
		}
		t.PID = pid
	}
	src := t.UsageSource()
	if src != nil {
		if _, err := src.Usage(); err != nil {
			notes = append(notes, "broker CPU and RSS not measured: "+err.Error())
			src = nil
		}
	}
	w := cfg.Workload
	if t.replicationFactor > 0 && t.replicationFactor != w.ReplicationFactor {
		wc := *w
		wc.ReplicationFactor = t.replicationFactor
		w = &wc
	}
	if len(t.topicConfigs) > 0 {
		var note string
		w, note = withTopicConfigs(w, t.topicConfigs)
		notes = append(notes, note)
	}
	rts := t.RuntimeSource()
	if rts != nil {
		if _, err := rts.Runtime(); err != nil {
			notes = append(notes, "broker runtime figures not measured: "+err.Error())
			rts = nil
		}
	}
	rc := RunConfig{Workload: w, Brokers: t.Brokers, Target: name, Progress: cfg.Progress,
		Logger: cfg.Logger, Broker: src, BrokerRuntime: rts, ClientOpts: cfg.ClientOpts[spec], BrokerInProcess: t.cluster != nil,
		Interval: cfg.Interval}
	if len(rc.ClientOpts) == 0 {
		rc.ClientOpts = t.ClientOpts // a spawned secured target's
	}
	prof := roundProfiler(cfg, t, fmt.Sprintf("%s-r%d-", name, round))
	if prof != nil {
		rc.OnSteady = prof.Capture
	}
	var out []*Result
	var res *Result
	rawOnly := cfg.RawOnly || w.TieredCatchup() // measured by the raw loader only (tiered.go)
	// The copies over the window, in a comparison with a samsa@tiered (tiered_target.go).
	var probe *copyProbe
	if !rawOnly && t.AdminURL != "" && slices.ContainsFunc(cfg.Targets, specTiered) {
		probe = newCopyProbe(t, w.Duration.D())
		rc.OnSteady = probe.around(rc.OnSteady)
	}
	if !rawOnly {
		res, err = Run(ctx, rc)
	}
	if rawOnly {
		// client mode skipped
	} else if err != nil {
		out = append(out, fail("client", err))
	} else {
		res.Round = round
		res.Notes = append(res.Notes, notes...)
		collectProfile(cfg, res, prof)
		if probe != nil {
			probe.finish(res)
		}
		out = append(out, res)
	}
	if (cfg.Raw || rawOnly) && len(rc.ClientOpts) > 0 {
		out = append(out, fail("raw", fmt.Errorf("%w: the raw mode speaks plaintext only; %s has client security options", ErrRun, name)))
	} else if cfg.Raw || rawOnly {
		rcfg := cfg.RawConfig
		rcfg.Workload, rcfg.Brokers, rcfg.Target, rcfg.Progress, rcfg.Broker = w, t.Brokers, name, cfg.Progress, src
		rcfg.BrokerInProcess, rcfg.BrokerRuntime, rcfg.ObjectStore = t.cluster != nil, rts, store.usage()
		if store == nil {
			rcfg.ObjectStore = t.store.usage() // samsa@tiered's own
		}
		rprof := roundProfiler(cfg, t, fmt.Sprintf("%s-r%d-raw-", name, round))
		if rprof != nil {
			rcfg.OnSteady = rprof.Capture
		}
		raw, err := RunRaw(ctx, rcfg)
		if err != nil {
			out = append(out, fail("raw", err))
		} else {
			raw.Round = round
			raw.Notes = append(raw.Notes, notes...)
			collectProfile(cfg, raw, rprof)
			out = append(out, raw)
		}
	}
	return out
}
