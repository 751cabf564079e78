// Command samsa-bench measures Kafka-compatible brokers over the wire: throughput,
// tail latency and broker CPU cost, side by side, with a regression gate.
//
//	samsa-bench run      --workload max-throughput-100b --spawn samsa|samsa-cluster|kfake|kfake-proc | --brokers host:port,...
//	samsa-bench compare  --workload ... --targets samsa,kfake,host:port --rounds 3
//	samsa-bench limits   --dir /data/dir
//	samsa-bench regress  --baseline origin/main --workload ... --rounds 3 --threshold 0.10
//	samsa-bench history  --figure p99.9 --target samsa --workload latency-20k
//	samsa-bench soak     --spawn samsa --workload steady-1h [--interval 1m]
//	samsa-bench workloads
//
// Every run prints a progress line per second and a summary table, and writes
// report.json and report.html into --out. compare and regress also append their
// figures to a local history file (results/history.jsonl), which history prints and
// charts across commits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-broker/samsa/bench"
	"github.com/samsa-broker/samsa/internal/kafkaprops"
)

// stdout receives the tables and verdicts (a variable for the tests).
var stdout io.Writer = os.Stdout

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var code int
	switch os.Args[1] {
	case "run":
		code = runCmd(os.Args[2:], false)
	case "compare":
		code = runCmd(os.Args[2:], true)
	case "limits":
		code = limitsCmd(os.Args[2:])
	case "regress":
		code = regressCmd(os.Args[2:])
	case "history":
		code = historyCmd(os.Args[2:])
	case "partitions":
		code = partitionsCmd(os.Args[2:])
	case "soak":
		code = soakCmd(os.Args[2:])
	case "workloads":
		for _, n := range bench.BuiltinWorkloads() {
			w, err := bench.LoadWorkload(n)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			fmt.Printf("%-22s %s\n", n, w.Description)
		}
	case "kfake-serve":
		code = kfakeServe(os.Args[2:])
	case "help", "-h", "--help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "samsa-bench: unknown command %q\n", os.Args[1])
		usage()
		code = 2
	}
	os.Exit(code)
}

func usage() {
	fmt.Fprint(os.Stderr, `usage: samsa-bench <command> [flags]
  run        run a workload against one target (--spawn samsa|samsa-cluster|kfake|kfake-proc or --brokers;
             samsa@security=SSL|SASL_SSL: a TLS or SASL_SSL (SCRAM-SHA-512) client listener;
             samsa@tiered: versitygw as its object store, the topics tiered (KIP-405);
             --command-config FILE: the security of a running target's clients)
  compare    run a workload against several targets, A B A B for --rounds rounds
  limits     measure this machine's disk, fdatasync, loopback and sendfile limits
  regress    gate: baseline git ref vs working tree, exit 1 on regression
  history    one figure (--figure p99.9) of compare's and regress's history file across commits
  partitions many partitions on one broker it starts: create, idle cost, Metadata, restart
  soak       one fixed-rate workload for long (steady-1h): per-minute publish p99 and broker RSS,
             PASS when the p99 varies by at most 2x and the RSS does not grow after the first quarter
  workloads  list the built-in workloads
  kfake-serve --listen host:port   serve franz-go's kfake (used by --spawn kfake-proc)
'samsa-bench <command> -h' lists a command's flags.
`)
}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// common holds the flags shared by run, compare and regress.
type common struct {
	workload   string
	duration   time.Duration
	warmup     time.Duration
	rate       int
	out        string
	samsaBin   string
	samsaArgs  multiFlag
	sync       string
	workDir    string
	raw        bool
	rawOnly    bool
	rawConns   int
	rawFlight  int
	rawPaced   bool
	profile    bool
	quiet      bool
	verbose    bool
	withLimits bool
	loaderProf string
	summary    bool
	rf         int
	minISR     int
	topicConfs multiFlag
}

func (c *common) rawConfig() bench.RawConfig {
	return bench.RawConfig{Connections: c.rawConns, InFlight: c.rawFlight, Paced: c.rawPaced}
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.workload, "workload", "max-throughput-100b", "built-in workload name or YAML path")
	fs.DurationVar(&c.duration, "duration", 0, "override the workload's duration")
	fs.DurationVar(&c.warmup, "warmup", -1, "override the workload's warm-up")
	fs.IntVar(&c.rate, "rate", -1, "override the producer rate (msg/s in total; 0 = max)")
	fs.IntVar(&c.rf, "replication-factor", 0, "override the workload's replication factor of the topics it creates (samsa-cluster@rf=N sets it for one target)")
	fs.Var(&c.topicConfs, "topic-config", "`KEY=VALUE`: a topic config of the topics the workload creates, on every target, over the workload's (e.g. segment.bytes=1048576; repeatable)")
	fs.IntVar(&c.minISR, "min-insync-replicas", -1, "min.insync.replicas of the created topics whose replication factor is at least this (0: the broker's default; default: the workload's)")
	fs.StringVar(&c.out, "out", "", "report directory (default bench-out/<time>)")
	fs.StringVar(&c.samsaBin, "samsa-bin", "", "prebuilt samsa binary (default: go build ./cmd/samsa)")
	fs.Var(&c.samsaArgs, "samsa-arg", "extra flag for `samsa serve` (repeatable)")
	fs.StringVar(&c.sync, "sync", "", "samsa durability policy: fsync, interval or none")
	fs.StringVar(&c.workDir, "work-dir", "", "where spawned brokers keep their temporary data dirs (default $TMPDIR)")
	fs.BoolVar(&c.raw, "raw", false, "also run the raw broker-capacity mode")
	fs.BoolVar(&c.rawOnly, "raw-only", false, "run only the raw mode")
	fs.IntVar(&c.rawConns, "raw-connections", 0, "raw mode: produce connections (0: 2, or with --raw-paced the workload's producers)")
	fs.IntVar(&c.rawFlight, "raw-inflight", 0, "raw mode: pipelined requests per connection (0: 8, or with --raw-paced the workload's maxInFlight)")
	fs.BoolVar(&c.rawPaced, "raw-paced", false, "raw mode: produce at the workload's fixed rate (--rate), one request per connection per linger, instead of at the broker's capacity")
	fs.BoolVar(&c.profile, "profile", false, "pull CPU and heap profiles from the broker's /debug/pprof in the steady state")
	fs.BoolVar(&c.quiet, "q", false, "no per-second progress lines")
	fs.BoolVar(&c.summary, "summary", false, "print only the verdict lines (no progress, no tables); the reports are still written")
	fs.BoolVar(&c.verbose, "v", false, "log spawned processes and warnings")
	fs.BoolVar(&c.withLimits, "limits", false, "also measure the physical limits (in --work-dir)")
	fs.StringVar(&c.loaderProf, "loader-cpuprofile", "", "write the load generator's own CPU profile here (to check it is not the bottleneck)")
}

// startLoaderProfile starts profiling this process if asked; the returned func stops it.
func (c *common) startLoaderProfile() func() {
	if c.loaderProf == "" {
		return func() {}
	}
	f, err := os.Create(c.loaderProf)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, err)
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

func (c *common) load() (*bench.Workload, error) {
	w, err := bench.LoadWorkload(c.workload)
	if err != nil {
		return nil, err
	}
	if c.duration > 0 {
		w.Duration = bench.Duration(c.duration)
	}
	if c.warmup >= 0 {
		w.Warmup = bench.Duration(c.warmup)
	}
	if c.rate >= 0 {
		w.ProducerRate = c.rate
	}
	if c.rf > 0 {
		w.ReplicationFactor = c.rf
	}
	if c.minISR >= 0 {
		w.MinInsyncReplicas = c.minISR
	}
	for _, kv := range c.topicConfs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("samsa-bench: --topic-config %q: want KEY=VALUE", kv)
		}
		if w.TopicConfigs == nil {
			w.TopicConfigs = map[string]string{}
		}
		w.TopicConfigs[k] = v
	}
	return w, w.Validate()
}

func (c *common) logger() *slog.Logger {
	if !c.verbose {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, nil))
}

func (c *common) spawn() bench.SpawnOptions {
	o := bench.SpawnOptions{SamsaBin: c.samsaBin, SamsaArgs: c.samsaArgs, WorkDir: c.workDir, Logger: c.logger()}
	if c.sync != "" {
		o.SamsaArgs = append(o.SamsaArgs, "--sync", c.sync)
	}
	return o
}

func (c *common) outDir() string {
	if c.out == "" {
		c.out = filepath.Join("bench-out", time.Now().UTC().Format("20060102-150405"))
	}
	return c.out
}

func runCmd(args []string, compare bool) int {
	name := "run"
	if compare {
		name = "compare"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var c common
	c.register(fs)
	spawn := fs.String("spawn", "", "start a target: samsa, samsa@flag=value..., samsa@security=SSL|SASL_SSL (a secured client listener), samsa@tiered (with versitygw as its object store and tiered topics), samsa-cluster[@nodes=N][@rf=N] (N combined nodes through `samsa cluster start`, default 3), kfake, kfake-proc or kfake-null")
	brokers := fs.String("brokers", "", "a running broker: host:port,host:port")
	var admins, pids multiFlag
	fs.Var(&admins, "admin", "admin `URL` (http://host:port) of a running target: /metrics for its CPU and RSS, /debug/pprof for --profile; with several targets, TARGET=URL (repeatable)")
	fs.Var(&pids, "pid", "process id of a running target on this machine: its CPU and peak RSS from /proc; with several targets, TARGET=PID (repeatable)")
	var cmdConfigs multiFlag
	fs.Var(&cmdConfigs, "command-config", "Kafka client properties `FILE` for the clients of a running target (security.protocol, sasl.mechanism, sasl.jaas.config or sasl.username/sasl.password, ssl.truststore.location, ...: as samsa's --command-config); with several targets, TARGET=FILE (repeatable)")
	targets := fs.String("targets", "", "compare: targets, comma separated (samsa, samsa@tiered, samsa-cluster@rf=3, kfake, kfake-proc, kfake-null, host:port, host:port+host:port)")
	rounds := fs.Int("rounds", 1, "compare: A B A B rounds")
	var hist historyFlags
	if compare {
		hist.register(fs)
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "samsa-bench %s: unexpected arguments %q\n", name, fs.Args())
		return 2
	}
	w, err := c.load()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var list []string
	switch {
	case compare && *targets != "":
		list = strings.Split(*targets, ",")
	case *spawn != "" && *brokers != "":
		fmt.Fprintln(os.Stderr, "samsa-bench: --spawn and --brokers are exclusive")
		return 2
	case *spawn != "":
		list = []string{*spawn}
	case *brokers != "":
		list = []string{strings.ReplaceAll(*brokers, ",", "+")}
	default:
		fmt.Fprintln(os.Stderr, "samsa-bench: need --spawn, --brokers or (compare) --targets")
		return 2
	}
	adminURLs, pidOf, err := targetValues(list, admins, pids)
	if err != nil {
		fmt.Fprintln(os.Stderr, "samsa-bench:", err)
		return 2
	}
	clientOpts, err := targetClientConfigs(list, cmdConfigs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "samsa-bench:", err)
		return 2
	}
	ctx, cancel := signalContext()
	defer cancel()
	out := c.outDir()
	cc := bench.CompareConfig{Workload: w, Targets: list, Rounds: *rounds, Spawn: c.spawn(),
		Raw: c.raw, RawOnly: c.rawOnly, RawConfig: c.rawConfig(),
		Profile: c.profile, ProfileDir: out, Logger: c.logger(), AdminURLs: adminURLs, PIDs: pidOf, ClientOpts: clientOpts}
	if !c.quiet && !c.summary {
		cc.Progress = os.Stderr
	}
	stopProf := c.startLoaderProfile()
	results, err := bench.Compare(ctx, cc)
	stopProf()
	rep := newReport(name, w, results)
	if c.withLimits {
		if rep.Limits, err = bench.MeasureLimits(limitsDir(c.workDir), 256<<20); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	if compare {
		hist.record(rep, "compare", bench.HeadCommit(ctx, "."), nil)
	}
	return finish(rep, out, err, c.summary)
}

// targetClientConfigs reads the --command-config files (FILE for the only target,
// TARGET=FILE for one of several) into each target's client options.
func targetClientConfigs(targets []string, values []string) (map[string][]kgo.Opt, error) {
	out := map[string][]kgo.Opt{}
	for _, v := range values {
		target, file := "", v
		for _, t := range targets {
			if f, ok := strings.CutPrefix(v, t+"="); ok {
				target, file = t, f
				break
			}
		}
		if target == "" {
			if len(targets) != 1 {
				return nil, fmt.Errorf("--command-config %s: with %d targets, write TARGET=%s", v, len(targets), v)
			}
			target = targets[0]
		}
		kvs, err := kafkaprops.ReadProperties(file)
		if err != nil {
			return nil, fmt.Errorf("--command-config: %w", err)
		}
		opts, err := kafkaprops.ClientOptions(kvs, func(key string) {
			fmt.Fprintf(os.Stderr, "samsa-bench: --command-config %s: %s is not used; ignored\n", file, key)
		})
		if err != nil {
			return nil, fmt.Errorf("--command-config %s: %w", file, err)
		}
		out[target] = opts
	}
	return out, nil
}

// targetValues maps --admin and --pid values onto targets: a bare value belongs to
// the only target; TARGET=VALUE names one (the target as given in --targets).
func targetValues(targets []string, admins, pids []string) (map[string]string, map[string]int, error) {
	known := map[string]bool{}
	for _, t := range targets {
		known[t] = true
	}
	split := func(flagName, v string, bare func(string) bool) (string, string, error) {
		if bare(v) {
			if len(targets) != 1 {
				return "", "", fmt.Errorf("--%s %s: with %d targets, write TARGET=%s", flagName, v, len(targets), v)
			}
			return targets[0], v, nil
		}
		i := strings.LastIndex(v, "=")
		if flagName == "admin" {
			i = max(strings.Index(v, "=http://"), strings.Index(v, "=https://"))
		}
		if i <= 0 || !known[v[:i]] {
			return "", "", fmt.Errorf("--%s %q: want a value for the only target, or TARGET=value with TARGET one of %s", flagName, v, strings.Join(targets, ", "))
		}
		return v[:i], v[i+1:], nil
	}
	urls := map[string]string{}
	for _, a := range admins {
		t, u, err := split("admin", a, func(s string) bool { return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") })
		if err != nil {
			return nil, nil, err
		}
		urls[t] = strings.TrimSuffix(u, "/")
	}
	byPID := map[string]int{}
	for _, p := range pids {
		t, v, err := split("pid", p, func(s string) bool { _, err := strconv.Atoi(s); return err == nil })
		if err != nil {
			return nil, nil, err
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return nil, nil, fmt.Errorf("--pid %q: not a process id", p)
		}
		byPID[t] = n
	}
	return urls, byPID, nil
}

func newReport(name string, w *bench.Workload, results []*bench.Result) *bench.Report {
	m := bench.DescribeMachine()
	m.Commit = gitCommit()
	return &bench.Report{
		Title:   fmt.Sprintf("samsa-bench %s: %s", name, w.Name),
		Command: bench.CommandLine(os.Args),
		Started: time.Now().UTC(),
		Machine: m,
		Results: results,
		Compare: bench.Figures(results),
	}
}

// finish prints the table (or, with summary, only the verdict lines), writes the
// files and picks the exit code: 1 if the run stopped with an error, or the report
// has problems (a run failed or counted errors, a read-back failed, the gate
// failed).
func finish(rep *bench.Report, out string, runErr error, summary bool) int {
	if summary {
		rep.WriteSummary(stdout)
	} else {
		rep.WriteTable(stdout)
	}
	code := 0
	if err := os.MkdirAll(out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := rep.WriteJSON(filepath.Join(out, "report.json")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if err := rep.WriteHTMLFile(filepath.Join(out, "report.html")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if !summary {
		fmt.Fprintf(stdout, "\nreport: %s, %s\n", filepath.Join(out, "report.json"), filepath.Join(out, "report.html"))
	}
	if runErr != nil {
		fmt.Fprintln(os.Stderr, "samsa-bench:", runErr)
		code = 1
	}
	if len(rep.Problems()) > 0 {
		code = 1
	}
	return code
}

func limitsDir(d string) string {
	if d == "" {
		return os.TempDir()
	}
	return d
}

func limitsCmd(args []string) int {
	fs := flag.NewFlagSet("limits", flag.ContinueOnError)
	dir := fs.String("dir", "", "directory on the data file system (default $TMPDIR)")
	size := fs.Int64("size-mb", 256, "file size for the disk tests, MiB")
	out := fs.String("out", "", "also write report.json and report.html here")
	summary := fs.Bool("summary", false, "print only the one-line verdict")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "samsa-bench limits: unexpected arguments %q\n", fs.Args())
		return 2
	}
	started := time.Now().UTC()
	l, err := bench.MeasureLimits(limitsDir(*dir), *size<<20)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	m := bench.DescribeMachine()
	m.Commit = gitCommit()
	rep := &bench.Report{Title: "samsa-bench limits", Command: bench.CommandLine(os.Args), Started: started, Machine: m, Limits: l}
	if *summary {
		rep.WriteSummary(stdout)
	} else {
		l.WriteTable(stdout)
	}
	if *out != "" {
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
		if !*summary {
			fmt.Fprintf(stdout, "\nreport: %s, %s\n", filepath.Join(*out, "report.json"), filepath.Join(*out, "report.html"))
		}
	}
	return 0
}

func regressCmd(args []string) int {
	fs := flag.NewFlagSet("regress", flag.ContinueOnError)
	var c common
	c.register(fs)
	baseline := fs.String("baseline", "", "git ref of the baseline broker (required)")
	rounds := fs.Int("rounds", 3, "baseline/current rounds")
	threshold := fs.Float64("threshold", 0.10, "allowed relative regression of median throughput, publish p99 and broker CPU per message")
	p999 := fs.Float64("p999-threshold", 0, "allowed relative rise of median publish p99.9 (0: its ratio is reported, not gated)")
	var hist historyFlags
	hist.register(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *baseline == "" {
		fmt.Fprintln(os.Stderr, "samsa-bench regress: --baseline is required")
		return 2
	}
	w, err := c.load()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, cancel := signalContext()
	defer cancel()
	rc := bench.RegressConfig{Baseline: *baseline, Workload: w, Rounds: *rounds, Threshold: *threshold, P999Threshold: *p999,
		Raw: c.rawOnly, RawConfig: c.rawConfig(),
		Spawn: c.spawn(), Logger: c.logger()}
	if !c.quiet && !c.summary {
		rc.Progress = os.Stderr
	}
	v, results, err := bench.Regress(ctx, rc)
	rep := newReport("regress", w, results)
	rep.Regress = v
	if v != nil {
		hist.record(rep, "regress", "", func(target string) string {
			if target == "baseline" {
				return v.BaselineCommit
			}
			return v.CurrentCommit
		})
	}
	out := c.outDir()
	code := finish(rep, out, err, c.summary)
	if v == nil {
		return 1
	}
	if !c.summary { // the summary holds the verdict already
		fmt.Fprintln(stdout)
		v.WriteVerdict(stdout)
	}
	if !v.Pass {
		return 1
	}
	return code
}

func kfakeServe(args []string) int {
	fs := flag.NewFlagSet("kfake-serve", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9092", "address")
	null := fs.Bool("null", false, "store nothing, serve canned fetches (the loader's ceiling)")
	admin := fs.String("admin-listen", "", "also serve /metrics (the Go runtime's figures) and /debug/pprof on this address")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, cancel := signalContext()
	defer cancel()
	if err := bench.ServeKfake(ctx, *listen, *admin, *null); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func gitCommit() string {
	root, err := bench.FindModuleRoot()
	if err != nil {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(root, ".git", "HEAD"))
	if err != nil {
		return ""
	}
	head := strings.TrimSpace(string(b))
	if ref, ok := strings.CutPrefix(head, "ref: "); ok {
		if c, err := os.ReadFile(filepath.Join(root, ".git", ref)); err == nil {
			return strings.TrimSpace(string(c))
		}
		return ref
	}
	return head
}
