// Command samsa-chaos is Samsa's fault harness: it starts a cluster of `samsa serve`
// processes, runs a queue workload against it over the Kafka wire, injects faults on
// a seeded schedule (kills, pauses, power loss, partitions, slow links, full disks),
// then checks the history for lost, duplicated or reordered records and stalls.
//
//	samsa-chaos run      [--samsa-bin bin/samsa] [--nodes N] [--seed S] [--faults auto|all|kill,pause,...]
//	                     [--duration 90s] [--quiet 30s] [--out DIR] ...
//	samsa-chaos check    --history DIR/history.jsonl [--out DIR]
//	samsa-chaos schedule --seed S --faults ... --nodes N --duration D   (print a schedule)
//	samsa-chaos damage   [--samsa-bin bin/samsa] [--kinds all|flip-sealed,...] [--targets single,follower] [--out DIR]
//	samsa-chaos cleanup  (remove namespaces, bridges and mounts of dead runs)
//
// The exit code is 0 when the history is valid, 1 when the checker found anomalies,
// 2 on usage errors or when the run could not be carried out. The code lives in
// tools/chaos and its subpackages.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/samsa-broker/samsa/tools/chaos"
	"github.com/samsa-broker/samsa/tools/chaos/cluster"
	"github.com/samsa-broker/samsa/tools/chaos/damage"
	"github.com/samsa-broker/samsa/tools/chaos/nemesis"
	"github.com/samsa-broker/samsa/tools/chaos/report"
	"github.com/samsa-broker/samsa/tools/chaos/runner"
)

const usage = `usage: samsa-chaos <command> [flags]
  run       start a cluster, load it, inject the seeded faults, check, report
  check     check a recorded history again and write its reports
  schedule  print the schedule a seed gives
  damage    damage a stopped node's segment files (flipped byte, torn tail, deleted
            index) and check what the cluster then serves
  cleanup   remove the namespaces, bridges and tmpfs mounts of runs that died
Run "samsa-chaos <command> -h" for the flags.`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	var code int
	switch os.Args[1] {
	case "run":
		code = runCmd(os.Args[2:])
	case "check":
		code = checkCmd(os.Args[2:])
	case "schedule":
		code = scheduleCmd(os.Args[2:])
	case "damage":
		code = damageCmd(os.Args[2:])
	case "cleanup":
		code = cleanupCmd()
	case "help", "-h", "--help":
		fmt.Println(usage)
	default:
		fmt.Fprintf(os.Stderr, "samsa-chaos: unknown command %q\n%s\n", os.Args[1], usage)
		code = 2
	}
	os.Exit(code)
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

// durRange is "lo-hi" or one duration.
type durRange struct{ lo, hi time.Duration }

func (d *durRange) String() string { return d.lo.String() + "-" + d.hi.String() }
func (d *durRange) Set(v string) error {
	a, b, ok := strings.Cut(v, "-")
	if !ok {
		b = a
	}
	lo, err := time.ParseDuration(a)
	if err != nil {
		return err
	}
	hi, err := time.ParseDuration(b)
	if err != nil {
		return err
	}
	if hi < lo || lo < 0 {
		return fmt.Errorf("want lo-hi with 0 <= lo <= hi")
	}
	d.lo, d.hi = lo, hi
	return nil
}

// bytesFlag reads 256m, 1g, 4096.
type bytesFlag struct{ n int64 }

func (b *bytesFlag) String() string { return strconv.FormatInt(b.n, 10) }
func (b *bytesFlag) Set(v string) error {
	mult := int64(1)
	switch s := strings.ToLower(v); {
	case strings.HasSuffix(s, "k"):
		mult, v = 1<<10, v[:len(v)-1]
	case strings.HasSuffix(s, "m"):
		mult, v = 1<<20, v[:len(v)-1]
	case strings.HasSuffix(s, "g"):
		mult, v = 1<<30, v[:len(v)-1]
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("want a positive size like 256m")
	}
	b.n = n * mult
	return nil
}

func runCmd(args []string) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var cfg runner.Config
	var env, nodeEnv, set multi
	gap := durRange{3 * time.Second, 8 * time.Second}
	flen := durRange{2 * time.Second, 8 * time.Second}
	disk := bytesFlag{256 << 20}
	fs.StringVar(&cfg.Bin, "samsa-bin", "bin/samsa", "the samsa binary")
	fs.IntVar(&cfg.Nodes, "nodes", 0, "nodes (0: 3 when the binary has cluster mode, `storage format`, else 1)")
	fs.Int64Var(&cfg.Seed, "seed", 0, "schedule seed (0: chosen and printed)")
	fs.StringVar(&cfg.Faults, "faults", "auto", "faults: auto, all, none, or a list of "+nemesis.JoinKinds(nemesis.AllKinds))
	fs.DurationVar(&cfg.Warmup, "warmup", 5*time.Second, "load before the first fault")
	fs.DurationVar(&cfg.Duration, "duration", 90*time.Second, "the fault phase")
	fs.DurationVar(&cfg.Quiet, "quiet", 30*time.Second, "quiet period after the last fault (producers run for its first third)")
	fs.DurationVar(&cfg.Liveness, "liveness", 20*time.Second, "bound of the liveness checks after the last heal")
	fs.Var(&gap, "gap", "time between faults, lo-hi")
	fs.Var(&flen, "fault-len", "length of a fault, lo-hi")
	fs.DurationVar(&cfg.SessionTimeout, "session-timeout", 9*time.Second, "broker.session.timeout.ms (pauses last longer)")
	fs.BoolVar(&cfg.Secure, "secure", false, "a secured cluster: SASL_SSL listeners, SCRAM-SHA-512 between nodes, ACLs; the clients authenticate as a user without super powers")
	fs.BoolVar(&cfg.Cover, "cover", false, "draw the faults' kinds in rounds, every kind once per round (a phase with room for as many faults has each)")
	fs.DurationVar(&cfg.ReplicaInterval, "replica-interval", 300*time.Millisecond, "the replica monitor's period: each node's Metadata, log ends and HWs, checked for isr-behind-hw (negative: off)")
	fs.StringVar(&cfg.Netns, "netns", "auto", "network namespaces: auto (when a fault needs them), on, off")
	fs.StringVar(&cfg.Tiered, "tiered", "auto", "tiered storage against an object store of the run (versitygw) and tiered topics: auto (when objstore-down is among the faults), on, off")
	fs.StringVar(&cfg.ObjectStoreBin, "versitygw", "", "the versitygw binary of --tiered (default: on PATH or in $GOPATH/bin)")
	fs.Var(&disk, "disk-size", "tmpfs size of each node's log dir when disk-full runs")
	fs.StringVar(&cfg.Topic, "topic", "chaos", "topic")
	var parts int
	fs.IntVar(&parts, "partitions", 4, "partitions")
	fs.IntVar(&cfg.Producers, "producers", 2, "producers")
	fs.Float64Var(&cfg.Rate, "rate", 200, "sends per second, all producers")
	fs.DurationVar(&cfg.ProduceTimeout, "produce-timeout", 0, "the producers' request timeout: how long a broker may hold an acks=all produce (0: 10s)")
	fs.DurationVar(&cfg.MetadataMaxAge, "metadata-max-age", 0, "how often the clients refresh their metadata unprompted (0: 5s)")
	fs.IntVar(&cfg.GroupConsumers, "group-consumers", 2, "consumers in the group (-1: none)")
	fs.IntVar(&cfg.AssignedConsumers, "assigned-consumers", 1, "consumers of every partition outside a group (-1: none)")
	fs.IntVar(&cfg.TxnProducers, "txn-producers", 1, "transactional producers on topic <topic>-txn (-1: none, and no read_committed consumers)")
	fs.IntVar(&cfg.TxnConsumers, "txn-consumers", 1, "read_committed consumers of <topic>-txn (-1: none)")
	fs.Float64Var(&cfg.TxnRate, "txn-rate", 10, "transactions per second, all transactional producers")
	fs.IntVar(&cfg.TxnCopiers, "txn-copiers", 1, "consume-transform-produce transactions reading and writing <topic>-txn, 4 a second each (-1: none)")
	fs.Var(&env, "env", "KEY=VALUE for every node (repeatable), e.g. SAMSA_FAULT_SKIP_FDATASYNC=1")
	fs.Var(&nodeEnv, "node-env", "ID:KEY=VALUE for one node (repeatable)")
	fs.Var(&set, "set", "key=value config for every node (repeatable)")
	fs.StringVar(&cfg.Out, "out", "chaos-out", "output directory")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "samsa-chaos run: unexpected arguments %v\n", fs.Args())
		return 2
	}
	cfg.Partitions = int32(parts)
	cfg.GapMin, cfg.GapMax, cfg.DurMin, cfg.DurMax = gap.lo, gap.hi, flen.lo, flen.hi
	cfg.DiskSize = disk.n
	cfg.Env, cfg.Set = env, set
	for _, ne := range nodeEnv {
		id, kv, ok := strings.Cut(ne, ":")
		n, err := strconv.Atoi(id)
		if !ok || err != nil || n < 1 || !strings.Contains(kv, "=") {
			fmt.Fprintf(os.Stderr, "samsa-chaos run: --node-env %q: want ID:KEY=VALUE\n", ne)
			return 2
		}
		if cfg.NodeEnv == nil {
			cfg.NodeEnv = map[int][]string{}
		}
		cfg.NodeEnv[n] = append(cfg.NodeEnv[n], kv)
	}
	bin, err := filepath.Abs(cfg.Bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg.Bin = bin
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() { <-ctx.Done(); stop() }() // a second signal ends the process
	out, err := runner.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "samsa-chaos: run failed: %v\n", err)
		return 2
	}
	if !out.Result.Valid {
		return 1
	}
	return 0
}

func checkCmd(args []string) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	path := fs.String("history", "", "history.jsonl of a run")
	outDir := fs.String("out", "", "where to write the reports (default: beside the history)")
	live := fs.Duration("liveness", 0, "liveness bound (default: the run's)")
	windows := fs.Int("windows", 8, "porcupine windows (negative: off)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *path == "" {
		fmt.Fprintln(os.Stderr, "samsa-chaos check: --history is required")
		return 2
	}
	h, err := chaos.ReadHistory(*path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "samsa-chaos check: %v\n", err)
		return 2
	}
	dir := *outDir
	if dir == "" {
		dir = filepath.Dir(*path)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	start := time.Now()
	res := chaos.Check(h, chaos.Options{Liveness: *live, Linear: chaos.LinearOptions{Windows: *windows, VisualizeDir: dir}})
	sched, _ := os.ReadFile(filepath.Join(filepath.Dir(*path), "schedule.txt"))
	rep := report.Build(h, res, report.Extra{Schedule: string(sched), Took: time.Duration(lastEnd(h))})
	if err := rep.WriteFiles(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println(rep.Verdict)
	fmt.Printf("checked %d ops in %.1fs; reports in %s\n", len(h.Ops), time.Since(start).Seconds(), dir)
	if !res.Valid {
		return 1
	}
	return 0
}

func lastEnd(h *chaos.History) int64 {
	var t int64
	for _, op := range h.Ops {
		t = max(t, op.End)
	}
	return t
}

func scheduleCmd(args []string) int {
	fs := flag.NewFlagSet("schedule", flag.ContinueOnError)
	seed := fs.Int64("seed", 1, "seed")
	faults := fs.String("faults", "all", "faults")
	nodes := fs.Int("nodes", 3, "nodes")
	parts := fs.Int("partitions", 4, "partitions")
	dur := fs.Duration("duration", 90*time.Second, "fault phase")
	sess := fs.Duration("session-timeout", 9*time.Second, "session timeout")
	gap := durRange{3 * time.Second, 8 * time.Second}
	flen := durRange{2 * time.Second, 8 * time.Second}
	fs.Var(&gap, "gap", "time between faults, lo-hi")
	fs.Var(&flen, "fault-len", "length of a fault, lo-hi")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var ks []nemesis.Kind
	if *faults == "auto" {
		ks = runner.AutoKinds(*nodes)
	} else if *faults != "none" {
		var err error
		if ks, err = nemesis.ParseKinds(*faults); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	fmt.Print(nemesis.Generate(nemesis.Params{Seed: *seed, Kinds: ks, Duration: *dur, Nodes: *nodes, Partitions: int32(*parts),
		GapMin: gap.lo, GapMax: gap.hi, DurMin: flen.lo, DurMax: flen.hi, SessionTimeout: *sess}).String())
	return 0
}

func cleanupCmd() int {
	a, err1 := cluster.CleanupNetworks()
	b, err2 := cluster.CleanupMounts()
	for _, x := range append(a, b...) {
		fmt.Println("removed", x)
	}
	if err := errors.Join(err1, err2); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if len(a)+len(b) == 0 {
		fmt.Println("nothing to remove")
	}
	return 0
}

func damageCmd(args []string) int {
	fs := flag.NewFlagSet("damage", flag.ContinueOnError)
	bin := fs.String("samsa-bin", "bin/samsa", "the samsa binary")
	kinds := fs.String("kinds", "all", "damages: all, or a list of flip-sealed, flip-tail, torn-tail, delete-index")
	targets := fs.String("targets", "single,follower", "damaged replicas: single (a one-node cluster), follower (of a partition on 2 of 3 nodes)")
	out := fs.String("out", "chaos-out/damage", "output directory")
	stall := fs.Duration("stall", 10*time.Second, "a read without progress for this long has stalled")
	var set multi
	fs.Var(&set, "set", "key=value config for every node (repeatable), e.g. samsa.log.scrub.bytes.per.second=10485760")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ks, err := damage.ParseKinds(*kinds)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	abs, err := filepath.Abs(*bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var rs []*damage.Result
	code := 0
	for _, t := range strings.Split(*targets, ",") {
		for _, k := range ks {
			dir := damage.Dir(*out, k, damage.Target(strings.TrimSpace(t)))
			os.RemoveAll(dir)
			r, err := damage.Run(ctx, damage.Config{Bin: abs, Kind: k, Target: damage.Target(strings.TrimSpace(t)), Dir: dir, Stall: *stall, Set: set, Stdout: os.Stdout})
			if err != nil {
				fmt.Fprintf(os.Stderr, "samsa-chaos damage: %s/%s: %v\n", k, t, err)
				return 2
			}
			if !r.Pass {
				code = 1
			}
			rs = append(rs, r)
		}
	}
	var b strings.Builder
	damage.Table(&b, rs)
	fmt.Print("\n" + b.String())
	os.WriteFile(filepath.Join(*out, "damage.txt"), []byte(b.String()), 0o644)
	if js, err := json.MarshalIndent(rs, "", "  "); err == nil {
		os.WriteFile(filepath.Join(*out, "damage.json"), js, 0o644)
	}
	return code
}
