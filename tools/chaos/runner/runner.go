// Package runner runs one fault-harness run end to end: it learns what the samsa
// binary supports, chooses the faults that can run (saying why the others cannot),
// prints the seeded schedule and the command that replays it, starts the cluster and
// the queue workload, injects the faults, lets the cluster settle in a quiet period,
// reads every partition back, checks the history and writes the reports.
//
// Timeline of a run:
//
//	|warmup|<------------ fault phase (Duration) ------------>|<--- quiet --->|final|check
//	        fault ··· heal   fault ··· heal   ···    last heal|producers stop |drain|
//	                                                          |  at a third   |     |
//	                                                          |readers catch up     |
//
// Out directory: history.jsonl (re-check with `samsa-chaos check`), report.txt,
// report.json, report.html, schedule.txt, clients.log, node<i>/samsa.log (each node's
// output), porcupine-*.html for windows found not linearizable.
package runner

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/samsa-broker/samsa/tools/chaos"
	"github.com/samsa-broker/samsa/tools/chaos/cluster"
	"github.com/samsa-broker/samsa/tools/chaos/nemesis"
	"github.com/samsa-broker/samsa/tools/chaos/report"
	"github.com/samsa-broker/samsa/tools/chaos/workload"
)

// Config is one run.
type Config struct {
	Bin string
	// Nodes: 0 chooses 3 when the binary has cluster mode (`storage format`), else 1.
	Nodes int
	Seed  int64
	// Faults: "auto" (the set for the node count), "all", or a list (nemesis.ParseKinds).
	Faults   string
	Warmup   time.Duration
	Duration time.Duration // the fault phase
	Quiet    time.Duration
	Liveness time.Duration
	GapMin   time.Duration
	GapMax   time.Duration
	DurMin   time.Duration
	DurMax   time.Duration
	// Netns: "auto" (when a chosen fault needs it and namespaces can be made), "on", "off".
	Netns    string
	DiskSize int64
	// Workload.
	Topic             string
	Partitions        int32
	Producers         int
	Rate              float64
	GroupConsumers    int
	AssignedConsumers int
	// The transactional workload on topic Topic+"-txn" (Partitions partitions):
	// TxnProducers transactional producers at TxnRate transactions per second in
	// all, TxnConsumers read_committed consumers. 0 takes 1, 1 and 10/s; -1 turns
	// it off.
	TxnProducers int
	TxnConsumers int
	TxnRate      float64
	// TxnCopiers consume-transform-produce transactions on the same topic (the
	// wr edges of the G1c check); 0 takes 1, -1 none.
	TxnCopiers int
	// ProduceTimeout is the producers' request timeout, MetadataMaxAge the clients'
	// metadata refresh period (workload.Config); 0: 10 s and 5 s.
	ProduceTimeout time.Duration
	MetadataMaxAge time.Duration
	// Env for every node, NodeEnv for one (e.g. a fault switch); Set adds config keys.
	Env     []string
	NodeEnv map[int][]string
	Set     []string
	// SessionTimeout: broker.session.timeout.ms (and the pause length's floor).
	SessionTimeout time.Duration
	// Secure runs the cluster with SASL_SSL listeners, SCRAM-SHA-512 between nodes and
	// ACLs (cluster/security.go); the workload's clients authenticate as a user that is
	// no super user, with the ACLs they need (secure.go).
	Secure bool
	// Cover draws the faults' kinds in rounds, every kind once per round
	// (nemesis.Params.Cover).
	Cover bool
	// Tiered: "auto" (tiered storage when objstore-down is among the faults asked
	// for and versitygw is found), "on", "off". With it the cluster runs an object
	// store of the run (cluster.ObjectStore) and the workload's topics are tiered
	// (TieredTopicConfigs). ObjectStoreBin is versitygw ("": on PATH or in
	// $GOPATH/bin).
	Tiered         string
	ObjectStoreBin string
	// ReplicaInterval is the replica monitor's period (runner/replicas.go, the
	// isr-behind-hw check); 0 means 300 ms, negative turns it off.
	ReplicaInterval time.Duration
	Out             string
	// Command is the command line that replays this run (the CLI fills it in).
	Command string
	Stdout  io.Writer
}

// Defaults fills zero fields with the values of a 2-minute run.
func (c *Config) Defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Warmup, 5*time.Second)
	def(&c.Duration, 90*time.Second)
	def(&c.Quiet, 30*time.Second)
	def(&c.Liveness, 20*time.Second)
	def(&c.GapMin, 3*time.Second)
	def(&c.GapMax, 8*time.Second)
	def(&c.DurMin, 2*time.Second)
	def(&c.DurMax, 8*time.Second)
	def(&c.SessionTimeout, 9*time.Second)
	if c.ReplicaInterval == 0 {
		c.ReplicaInterval = 300 * time.Millisecond
	}
	if c.Faults == "" {
		c.Faults = "auto"
	}
	if c.Netns == "" {
		c.Netns = "auto"
	}
	if c.Tiered == "" {
		c.Tiered = "auto"
	}
	if c.DiskSize <= 0 {
		c.DiskSize = 256 << 20
	}
	if c.Topic == "" {
		c.Topic = "chaos"
	}
	if c.Partitions <= 0 {
		c.Partitions = 4
	}
	if c.Producers <= 0 {
		c.Producers = 2
	}
	if c.Rate <= 0 {
		c.Rate = 200
	}
	if c.GroupConsumers < 0 {
		c.GroupConsumers = 0
	} else if c.GroupConsumers == 0 {
		c.GroupConsumers = 2
	}
	if c.AssignedConsumers < 0 {
		c.AssignedConsumers = 0
	} else if c.AssignedConsumers == 0 {
		c.AssignedConsumers = 1
	}
	if c.TxnProducers < 0 {
		c.TxnProducers = 0
	} else if c.TxnProducers == 0 {
		c.TxnProducers = 1
	}
	if c.TxnConsumers < 0 {
		c.TxnConsumers = 0
	} else if c.TxnConsumers == 0 {
		c.TxnConsumers = 1
	}
	if c.TxnRate <= 0 {
		c.TxnRate = 10
	}
	if c.TxnCopiers < 0 || c.TxnProducers == 0 {
		c.TxnCopiers = 0
	} else if c.TxnCopiers == 0 {
		c.TxnCopiers = 1
	}
	if c.Out == "" {
		c.Out = "chaos-out"
	}
	if c.Stdout == nil {
		c.Stdout = os.Stdout
	}
	if c.Seed == 0 {
		c.Seed = time.Now().UnixNano() % 1_000_000_000
	}
}

// AutoKinds is the fault set "auto" chooses for n nodes.
func AutoKinds(n int) []nemesis.Kind {
	if n == 1 {
		return []nemesis.Kind{nemesis.Kill, nemesis.Pause, nemesis.PowerLoss, nemesis.DiskFull}
	}
	ks := []nemesis.Kind{nemesis.Kill, nemesis.KillLeader, nemesis.KillController, nemesis.KillAll, nemesis.Pause, nemesis.PauseLeader,
		nemesis.PowerLoss, nemesis.PowerLossAll, nemesis.PartitionLeader, nemesis.PartitionHalves, nemesis.Slow, nemesis.DiskFull}
	if n >= 3 {
		ks = append(ks, nemesis.PartitionBridge)
	}
	return ks
}

// Outcome is what a run produced.
type Outcome struct {
	Result *chaos.Result
	Report *report.Report
	Dir    string
	Took   time.Duration
}

type run struct {
	cfg   Config
	start time.Time
	out   io.Writer
	mu    sync.Mutex
	notes []string
}

func (r *run) printf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.out, "[%7.2fs] %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
}

func (r *run) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.notes = append(r.notes, s)
	r.mu.Unlock()
	r.printf("%s", s)
}

// Run performs one run. An error means the run could not be carried out (the
// binary does not start, the cluster cannot be made); anomalies are in the result.
func Run(ctx context.Context, cfg Config) (*Outcome, error) {
	cfg.Defaults()
	r := &run{cfg: cfg, start: time.Now(), out: cfg.Stdout}
	out, err := prepareOut(cfg)
	if err != nil {
		return nil, err
	}
	r.printf("samsa-chaos: seed %d, binary %s, out %s", cfg.Seed, cfg.Bin, out)

	feat, err := cluster.Probe(ctx, cfg.Bin, out, cfg.Env)
	if err != nil {
		return nil, err
	}
	r.chooseNodes(&cfg, feat)
	kinds, err := r.chooseKinds(&cfg, feat)
	if err != nil {
		return nil, err
	}
	sched, replay := r.schedule(cfg, kinds, out)

	hist, err := chaos.CreateHistory(filepath.Join(out, "history.jsonl"), chaos.Header{Topic: cfg.Topic, Partitions: cfg.Partitions, Seed: cfg.Seed,
		Command: replay, Nodes: cfg.Nodes, Liveness: int64(cfg.Liveness), Notes: r.notes}, r.start)
	if err != nil {
		return nil, err
	}
	histClosed := false
	defer func() {
		if !histClosed {
			hist.Close()
		}
	}()

	exits := &exitRecorder{r: r, hist: hist}
	ccfg := r.clusterConfig(cfg, kinds, out, hist, exits.record)
	c, err := r.startCluster(ctx, cfg, ccfg, out)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	adm, err := c.Admin()
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	txnTopic, err := r.createTopics(ctx, cfg, c, adm)
	if err != nil {
		return nil, err
	}
	clientLog, err := os.Create(filepath.Join(out, "clients.log"))
	if err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	defer clientLog.Close()
	wl, err := workload.Start(ctx, workload.Config{Brokers: c.Bootstrap(), Topic: cfg.Topic, Partitions: cfg.Partitions, Producers: cfg.Producers,
		Rate: cfg.Rate, ProduceTimeout: cfg.ProduceTimeout, MetadataMaxAge: cfg.MetadataMaxAge, GroupConsumers: cfg.GroupConsumers, AssignedConsumers: cfg.AssignedConsumers,
		TxnTopic: txnTopic, TxnPartitions: cfg.Partitions, TxnProducers: cfg.TxnProducers, TxnConsumers: cfg.TxnConsumers, TxnRate: cfg.TxnRate,
		TxnCopiers: cfg.TxnCopiers, Seed: cfg.Seed, History: hist, ClientLog: clientLog, ClientOpts: c.ClientOpts()})
	if err != nil {
		return nil, err
	}
	mon := r.startReplicas(ctx, cfg, c, hist, txnTopic, ccfg.PowerLoss)
	defer mon.finishOnce()
	nem := nemesis.New(nemesis.Env{Cluster: c, Admin: adm, Topic: cfg.Topic, History: hist, Printf: r.printf, Seed: cfg.Seed})
	exits.setNemesis(nem)

	stopProgress := r.progress(wl)
	r.printf("workload: %d producers at %.0f/s, %d group members, %d assigned consumers, %d partitions; %d transactional producers at %.0f/s, %d consume-transform-produce copiers, %d read_committed consumers; warmup %s",
		cfg.Producers, cfg.Rate, cfg.GroupConsumers, cfg.AssignedConsumers, cfg.Partitions, cfg.TxnProducers, cfg.TxnRate, cfg.TxnCopiers, cfg.TxnConsumers, cfg.Warmup)
	sleep(ctx, cfg.Warmup)
	phase := time.Now()
	herr := nem.Run(ctx, sched, phase)
	if herr != nil {
		r.note("the cluster could not be healed: %v", herr)
	}
	r.quietPeriod(ctx, cfg, nem, wl, mon)
	stopProgress()
	r.finalRead(ctx, cfg, adm, wl, txnTopic)
	r.noteTiered(ctx, c)
	if err := c.Close(); err != nil {
		r.note("stopping the cluster: %v", err)
	}
	histClosed = true
	if err := hist.Close(); err != nil {
		return nil, err
	}
	rep, res, err := r.checkAndReport(cfg, out, sched.String(), feat)
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(r.out, rep.Verdict)
	fmt.Fprintln(r.out, rep.Figures())
	fmt.Fprintf(r.out, "reports: %s/report.txt, report.html, report.json; replay: %s\n", out, replay)
	return &Outcome{Result: res, Report: rep, Dir: out, Took: time.Since(r.start)}, nil
}

// chooseNodes sets the node count when none was asked for: three on a binary that
// formats storage (should they not form a cluster, the start fails with their
// complaint: a run on one node instead would hide it), else one.
func (r *run) chooseNodes(cfg *Config, feat cluster.Features) {
	if cfg.Nodes != 0 {
		return
	}
	cfg.Nodes = 1
	if !feat.ClusterMode {
		r.note("nodes: 1 (this samsa binary has no cluster mode)")
	} else {
		cfg.Nodes = 3
		r.note("nodes: 3 (the binary has `storage format`)")
	}
}

// schedule generates the seeded fault schedule and the command that replays it,
// prints both and writes them to schedule.txt.
func (r *run) schedule(cfg Config, kinds []nemesis.Kind, out string) (nemesis.Schedule, string) {
	sched := nemesis.Generate(nemesis.Params{Seed: cfg.Seed, Kinds: kinds, Duration: cfg.Duration, Nodes: cfg.Nodes, Partitions: cfg.Partitions,
		GapMin: cfg.GapMin, GapMax: cfg.GapMax, DurMin: cfg.DurMin, DurMax: cfg.DurMax, SessionTimeout: cfg.SessionTimeout, Cover: cfg.Cover})
	replay := cfg.Command
	if replay == "" {
		replay = ReplayCommand(cfg, kinds)
	}
	fmt.Fprint(r.out, sched.String())
	fmt.Fprintf(r.out, "replay: %s\n", replay)
	os.WriteFile(filepath.Join(out, "schedule.txt"), []byte(sched.String()+"replay: "+replay+"\n"), 0o644)
	return sched, replay
}

// exitRecorder records a node that exited on its own in the history and tells the
// nemesis, once there is one (a node may exit while the cluster starts).
type exitRecorder struct {
	r    *run
	hist *chaos.Writer
	mu   sync.Mutex
	nem  *nemesis.Nemesis
}

func (x *exitRecorder) setNemesis(n *nemesis.Nemesis) {
	x.mu.Lock()
	x.nem = n
	x.mu.Unlock()
}

func (x *exitRecorder) record(e cluster.Exit) {
	now, wall := x.hist.Now()
	x.hist.Append(chaos.Op{Proc: "cluster", F: chaos.FEvent, Status: chaos.Info, Start: now, End: now, Wall: wall, V: "node-exit",
		Parts: []int32{int32(e.Node)}, Err: fmt.Sprintf("node %d exited on its own: %s; last log: %s", e.Node, e.Err, strings.Join(lastN(e.Tail, 3), " | "))})
	x.r.printf("node %d exited on its own: %s", e.Node, e.Err)
	x.mu.Lock()
	n := x.nem
	x.mu.Unlock()
	if n != nil {
		n.NodeExited(e.Node)
	}
}

// prepareOut makes the out directory (absolute), clears a previous run's files from
// it and checks that the samsa binary is there.
func prepareOut(cfg Config) (string, error) {
	out, err := filepath.Abs(cfg.Out)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", fmt.Errorf("runner: %w", err)
	}
	if err := clearPrevious(out); err != nil {
		return "", err
	}
	if _, err := os.Stat(cfg.Bin); err != nil {
		return "", fmt.Errorf("runner: samsa binary: %w", err)
	}
	return out, nil
}

// clusterConfig is the cluster the chosen faults need: network namespaces for the
// network faults, power-loss support, a small tmpfs per node for disk-full.
func (r *run) clusterConfig(cfg Config, kinds []nemesis.Kind, out string, hist *chaos.Writer, onExit func(cluster.Exit)) cluster.Config {
	ccfg := cluster.Config{Bin: cfg.Bin, Nodes: cfg.Nodes, Dir: out, Env: cfg.Env, NodeEnv: cfg.NodeEnv, Set: cfg.Set,
		SessionTimeout: cfg.SessionTimeout, HeartbeatInterval: min(2*time.Second, cfg.SessionTimeout/3), OnExit: onExit,
		Secure: cfg.Secure, OnAuthFailure: authFailed(hist)}
	if slices.ContainsFunc(kinds, nemesis.NeedsNetns) {
		ccfg.Net = cluster.Netns
	}
	if slices.Contains(kinds, nemesis.PowerLoss) || slices.Contains(kinds, nemesis.PowerLossAll) {
		ccfg.PowerLoss = true
	}
	if cfg.Tiered == "on" {
		ccfg.ObjectStore = cfg.ObjectStoreBin
		r.note("tiered storage: an object store of the run (%s over %s/objstore), every node with remote.log.storage.system.enable over it, the workload's topics with %s",
			cfg.ObjectStoreBin, out, describeConfigs(TieredTopicConfigs()))
	}
	if slices.Contains(kinds, nemesis.DiskFull) {
		// The engine preallocates each segment's indexes (10 MiB each by default, for
		// every partition of __consumer_offsets too): smaller ones fit a small tmpfs.
		ccfg.DiskSize = cfg.DiskSize
		ccfg.Set = append([]string{"log.index.size.max.bytes=262144"}, ccfg.Set...)
		r.note("disk-full: each node's log dir on a tmpfs of %d MiB, with log.index.size.max.bytes=262144 so that preallocated indexes fit", cfg.DiskSize>>20)
	}
	return ccfg
}

// startCluster makes and starts the cluster, noting how it runs and any fault
// switches its nodes report. On an error after it was made, the cluster is closed.
func (r *run) startCluster(ctx context.Context, cfg Config, ccfg cluster.Config, out string) (*cluster.Cluster, error) {
	c, err := cluster.New(ctx, ccfg)
	if err != nil {
		return nil, err
	}
	r.printf("cluster: %d node(s), %s mode, %s: %s", cfg.Nodes, map[bool]string{true: "KRaft", false: "single-node"}[c.KRaft()],
		map[bool]string{true: "network namespaces", false: "loopback"}[c.Network() != nil], strings.Join(c.Bootstrap(), ","))
	if c.Secure() {
		r.note("secured: SASL_SSL listeners (SCRAM-SHA-512 only), SCRAM-SHA-512 between nodes and to the controllers, StandardAuthorizer with ACLs; clients as %s (no super user), the harness as %s; certificates from two CAs made for the run (%s/pki)",
			cluster.UserClient, cluster.UserAdmin, out)
	}
	if err := c.Start(ctx); err != nil {
		c.Close()
		return nil, err
	}
	for _, n := range c.Nodes() {
		if sw := n.Switches(); len(sw) > 0 {
			r.note("node %d reports fault switches active: %s", n.ID, strings.Join(sw, ","))
		}
	}
	return c, nil
}

// createTopics creates the queue topic and, with transactional producers, its -txn
// topic (returned, else ""), and on a secured cluster grants the client its ACLs.
func (r *run) createTopics(ctx context.Context, cfg Config, c *cluster.Cluster, adm *cluster.Admin) (string, error) {
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var configs map[string]*string
	if c.ObjectStore() != nil {
		configs = TieredTopicConfigs()
	}
	err := adm.CreateTopicWith(tctx, cfg.Topic, cfg.Partitions, int16(min(3, cfg.Nodes)), configs)
	txnTopic := ""
	if err == nil && cfg.TxnProducers > 0 {
		txnTopic = cfg.Topic + "-txn"
		err = adm.CreateTopicWith(tctx, txnTopic, cfg.Partitions, int16(min(3, cfg.Nodes)), configs)
	}
	if err == nil && c.Secure() {
		err = r.grantClient(tctx, c, adm, cfg, txnTopic)
	}
	return txnTopic, err
}

// TieredTopicConfigs are the workload's topics' configs on a tiered cluster: 16 KiB
// segments, so that the workload seals one every few seconds per partition and the
// copies run all through the run, and local.retention.bytes 0, so that every copied
// segment leaves the nodes' disks and the readers behind (after a fault, a rebalance,
// and the final drain from offset 0) read from the store.
func TieredTopicConfigs() map[string]*string {
	on, seg, local := "true", "16384", "0"
	return map[string]*string{"remote.storage.enable": &on, "segment.bytes": &seg, "local.retention.bytes": &local}
}

func describeConfigs(m map[string]*string) string {
	var kv []string
	for k, v := range m {
		kv = append(kv, k+"="+*v)
	}
	slices.Sort(kv)
	return strings.Join(kv, ", ")
}

// noteTiered notes, on a tiered cluster, what its object store holds and what the
// nodes count of their copies and remote reads: a run whose nodes copied nothing, or
// read nothing back, did not exercise tiered storage, and says so.
func (r *run) noteTiered(ctx context.Context, c *cluster.Cluster) {
	s := c.ObjectStore()
	if s == nil {
		return
	}
	n, b := s.Copies()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	st, err := c.RemoteStats(sctx)
	if err != nil {
		r.note("tiered storage: %d segment copies in the store (%d KiB), started %d times; the nodes' counters unread: %v", n, b>>10, s.Starts(), err)
		return
	}
	r.note("tiered storage: %d segment copies in the store (%d KiB), started %d times; the running nodes count %.0f bytes copied, %.0f read from the store, %.0f copy errors, %.0f remote fetch errors",
		n, b>>10, s.Starts(), st["copy_bytes_total"], st["fetch_bytes_total"], st["copy_errors_total"], st["fetch_errors_total"])
	if n == 0 || st["fetch_bytes_total"] == 0 {
		r.note("tiered storage: the run copied %d segments and read %.0f bytes from the store: it did not exercise both", n, st["fetch_bytes_total"])
	}
}

// quietPeriod lets the cluster settle after the faults: the nemesis keeps restarting
// nodes that exit, producers stop at a third of the period, readers catch up, then
// the replica monitor and the consumers stop.
func (r *run) quietPeriod(ctx context.Context, cfg Config, nem *nemesis.Nemesis, wl *workload.Workload, mon *replicas) {
	r.printf("faults done; quiet period of up to %s (producers stop at %s)", cfg.Quiet, (cfg.Quiet / 3).Round(100*time.Millisecond))
	qctx, qcancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.Quiet)
	if ctx.Err() != nil {
		qcancel()
		qctx, qcancel = context.WithTimeout(context.Background(), 5*time.Second)
	}
	supervised := make(chan struct{})
	go func() { defer close(supervised); nem.Supervise(qctx) }()
	sleep(qctx, cfg.Quiet/3)
	wl.StopProducers(10 * time.Second)
	r.printf("producers stopped; waiting for every reader to catch up")
	waitCaughtUp(qctx, wl)
	qcancel()
	<-supervised
	if st, ok := mon.finishOnce(); ok {
		r.printf("%s", st.Summary())
	}
	wl.StopConsumers()
}

// finalRead reads every partition to its end offset, and the transactional topic
// read_committed to its stable offsets; what fails is noted.
func (r *run) finalRead(ctx context.Context, cfg Config, adm *cluster.Admin, wl *workload.Workload, txnTopic string) {
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer fcancel()
	end, err := adm.EndOffsets(fctx, cfg.Topic)
	if err != nil {
		r.note("final read: no end offsets: %v", err)
	} else if err := wl.FinalDrain(fctx, end); err != nil {
		r.note("final read: %v", err)
	}
	if txnTopic != "" {
		if stable, err := adm.StableOffsets(fctx, txnTopic); err != nil {
			r.note("final read_committed read: no stable offsets: %v", err)
		} else if err := wl.FinalTxnDrain(fctx, stable); err != nil {
			r.note("%v", err)
		}
	}
}

// checkAndReport reads the closed history back, checks it and writes the reports.
func (r *run) checkAndReport(cfg Config, out, schedule string, feat cluster.Features) (*report.Report, *chaos.Result, error) {
	h, err := chaos.ReadHistory(filepath.Join(out, "history.jsonl"))
	if err != nil {
		return nil, nil, err
	}
	h.Header.Notes = r.notes
	r.printf("checking %d operations", len(h.Ops))
	res := chaos.Check(h, chaos.Options{Liveness: cfg.Liveness, Linear: chaos.LinearOptions{VisualizeDir: out}})
	rep := report.Build(h, res, report.Extra{Schedule: schedule, Took: time.Since(r.start), Features: fingerprint(cfg.Bin) + "; " + describeFeatures(feat)})
	if err := rep.WriteFiles(out); err != nil {
		return nil, nil, err
	}
	return rep, res, nil
}

// chooseKinds resolves cfg.Faults against what the run can do, noting every fault
// left out and why.
func (r *run) chooseKinds(cfg *Config, feat cluster.Features) ([]nemesis.Kind, error) {
	var want []nemesis.Kind
	switch cfg.Faults {
	case "auto":
		want = AutoKinds(cfg.Nodes)
	case "none":
	default:
		var err error
		if want, err = nemesis.ParseKinds(cfg.Faults); err != nil {
			return nil, err
		}
	}
	caps := nemesis.Capabilities{Nodes: cfg.Nodes, PowerLoss: feat.PowerLoss, PowerWhy: feat.PowerLossNote}
	if os.Geteuid() != 0 {
		caps.DiskWhy = "needs root to mount a tmpfs"
	} else {
		caps.DiskFull = true
	}
	needNet := slices.ContainsFunc(want, nemesis.NeedsNetns)
	switch cfg.Netns {
	case "off":
		caps.NetnsWhy = "--netns off"
	case "on", "auto":
		if !needNet && cfg.Netns == "auto" {
			caps.NetnsWhy = "not needed"
			break
		}
		x, err := cluster.NewNetwork(1)
		if err != nil {
			if cfg.Netns == "on" {
				return nil, err
			}
			caps.NetnsWhy = err.Error()
			break
		}
		x.Close()
		caps.Netns = true
	default:
		return nil, fmt.Errorf("runner: --netns %q: want auto, on or off", cfg.Netns)
	}
	if err := chooseObjectStore(cfg, want, &caps); err != nil {
		return nil, err
	}
	var kinds []nemesis.Kind
	for _, k := range want {
		if ok, why := nemesis.Available(k, caps); ok {
			kinds = append(kinds, k)
		} else {
			r.note("fault %s skipped: %s", k, why)
		}
	}
	if len(kinds) == 0 && len(want) > 0 {
		r.note("no fault can run: the run is a plain workload")
	}
	return kinds, nil
}

// chooseObjectStore resolves cfg.Tiered: with "on", or "auto" when objstore-down is
// among the faults wanted, it finds versitygw (cfg.ObjectStoreBin, else on PATH or in
// $GOPATH/bin) and sets cfg.Tiered to "on"; otherwise caps says why there is no store.
// Not finding it fails the run only under "on".
func chooseObjectStore(cfg *Config, want []nemesis.Kind, caps *nemesis.Capabilities) error {
	switch cfg.Tiered {
	case "off":
		caps.ObjectStoreWhy = "--tiered off"
		return nil
	case "on", "auto":
	default:
		return fmt.Errorf("runner: --tiered %q: want auto, on or off", cfg.Tiered)
	}
	if cfg.Tiered == "auto" && !slices.Contains(want, nemesis.ObjstoreDown) {
		caps.ObjectStoreWhy = "not needed"
		return nil
	}
	bin := cfg.ObjectStoreBin
	if bin == "" {
		var err error
		if bin, err = cluster.FindVersitygw(); err != nil {
			if cfg.Tiered == "on" {
				return err
			}
			caps.ObjectStoreWhy = err.Error()
			return nil
		}
	}
	cfg.ObjectStoreBin, cfg.Tiered = bin, "on"
	caps.ObjectStore = true
	return nil
}

// offIfZero is a count as the command line says it: -1 for none (0 asks the default).
func offIfZero(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// ReplayCommand is the samsa-chaos command line that replays cfg's schedule.
func ReplayCommand(cfg Config, kinds []nemesis.Kind) string {
	args := []string{"samsa-chaos", "run", "--samsa-bin", cfg.Bin, "--seed", fmt.Sprint(cfg.Seed), "--nodes", fmt.Sprint(cfg.Nodes),
		"--faults", nemesis.JoinKinds(kinds), "--duration", cfg.Duration.String(), "--quiet", cfg.Quiet.String(),
		"--gap", cfg.GapMin.String() + "-" + cfg.GapMax.String(), "--fault-len", cfg.DurMin.String() + "-" + cfg.DurMax.String(),
		"--warmup", cfg.Warmup.String(), "--liveness", cfg.Liveness.String(), "--session-timeout", cfg.SessionTimeout.String(),
		"--partitions", fmt.Sprint(cfg.Partitions), "--rate", fmt.Sprint(cfg.Rate), "--producers", fmt.Sprint(cfg.Producers),
		"--group-consumers", fmt.Sprint(cfg.GroupConsumers), "--assigned-consumers", fmt.Sprint(cfg.AssignedConsumers),
		"--txn-producers", fmt.Sprint(offIfZero(cfg.TxnProducers)), "--txn-consumers", fmt.Sprint(offIfZero(cfg.TxnConsumers)),
		"--txn-rate", fmt.Sprint(cfg.TxnRate), "--txn-copiers", fmt.Sprint(offIfZero(cfg.TxnCopiers)), "--netns", cfg.Netns}
	if cfg.Secure {
		args = append(args, "--secure")
	}
	if cfg.Cover {
		args = append(args, "--cover")
	}
	if cfg.Tiered == "on" {
		args = append(args, "--tiered", "on")
	}
	if cfg.ReplicaInterval != 300*time.Millisecond {
		args = append(args, "--replica-interval", cfg.ReplicaInterval.String())
	}
	if cfg.ProduceTimeout > 0 {
		args = append(args, "--produce-timeout", cfg.ProduceTimeout.String())
	}
	if cfg.MetadataMaxAge > 0 {
		args = append(args, "--metadata-max-age", cfg.MetadataMaxAge.String())
	}
	for _, e := range cfg.Env {
		args = append(args, "--env", e)
	}
	for id, es := range cfg.NodeEnv {
		for _, e := range es {
			args = append(args, "--node-env", fmt.Sprintf("%d:%s", id, e))
		}
	}
	for _, s := range cfg.Set {
		args = append(args, "--set", s)
	}
	if len(kinds) == 0 {
		args[9] = "none"
	}
	return strings.Join(args, " ")
}

// fingerprint names the binary by the start of its SHA-256.
func fingerprint(bin string) string {
	f, err := os.Open(bin)
	if err != nil {
		return "binary " + bin
	}
	defer f.Close()
	h := sha256.New()
	io.Copy(h, f)
	return fmt.Sprintf("binary %s (sha256 %x)", bin, h.Sum(nil)[:6])
}

func describeFeatures(f cluster.Features) string {
	s := fmt.Sprintf("cluster mode %v; power-loss journal %v", f.ClusterMode, f.PowerLoss)
	if !f.PowerLoss {
		s += " (" + f.PowerLossNote + ")"
	}
	if len(f.Switches) > 0 {
		s += "; fault switches " + strings.Join(f.Switches, ",")
	}
	return s
}

// progress prints a line every 10 s until the returned func is called.
func (r *run) progress(wl *workload.Workload) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p := wl.Progress()
				r.printf("progress: %d sent, %d acknowledged, %d records read; readers behind in partitions: %v; transactions %d committed, %d aborted, %d unknown, %d records read_committed",
					p.Sent, p.Acked, p.Read, p.Behind, p.Committed, p.Aborted, p.TxnUnknown, p.TxnRead)
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func waitCaughtUp(ctx context.Context, wl *workload.Workload) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for !wl.CaughtUp() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// clearPrevious removes what an earlier run left in out (only the files and
// directories a run writes), so that nodes start on empty directories.
func clearPrevious(out string) error {
	if pid := cluster.OwnerOf(out); pid != 0 {
		return fmt.Errorf("runner: %s is in use by another run (pid %d)", out, pid)
	}
	cluster.CleanupMounts()   // tmpfs mounts of a run that died
	cluster.CleanupNetworks() // and its namespaces and bridge
	for _, pat := range []string{"node*", "probe-*", "pki", "history.jsonl", "report.*", "schedule.txt", "clients.log", "porcupine-*.html", "objstore", "objstore.log"} {
		ms, _ := filepath.Glob(filepath.Join(out, pat))
		for _, m := range ms {
			if err := os.RemoveAll(m); err != nil {
				return fmt.Errorf("runner: clearing the previous run: %w", err)
			}
		}
	}
	return nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

func lastN(xs []string, k int) []string {
	if len(xs) > k {
		return xs[len(xs)-k:]
	}
	return xs
}
