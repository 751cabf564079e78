package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrTarget is wrapped by errors starting, reaching or stopping a target.
var ErrTarget = errors.New("bench: target")

// Target names understood by StartTarget besides host:port lists.
const (
	TargetSamsa     = "samsa"      // this repository's broker, built and spawned
	TargetKfake     = "kfake"      // franz-go's kfake, in this process
	TargetKfakeProc = "kfake-proc" // kfake in a child process, so its CPU is measurable
	// TargetKfakeNull is kfake in a child process that discards produced records and
	// answers every fetch from one canned batch: a broker that costs almost nothing,
	// so a run against it measures the load generator's own ceiling.
	TargetKfakeNull = "kfake-null"
)

// KfakeNullEnv, set with KfakeServeEnv, makes the served kfake a null broker.
const KfakeNullEnv = "SAMSA_BENCH_KFAKE_NULL"

// KfakeAdminEnv, set with KfakeServeEnv, is the address where the served kfake's
// process answers /metrics (its Go runtime's figures, runtime.go) and /debug/pprof.
const KfakeAdminEnv = "SAMSA_BENCH_KFAKE_ADMIN"

// KfakeServeEnv, when set in a child's environment, tells a program that embeds
// ServeKfake (samsa-bench, or a test binary's TestMain) to serve kfake on the address
// it holds instead of doing anything else.
const KfakeServeEnv = "SAMSA_BENCH_KFAKE_LISTEN"

// SpawnOptions configures how targets are started.
type SpawnOptions struct {
	// SamsaBin is a prebuilt broker; empty means build ./cmd/samsa from ModuleRoot.
	SamsaBin   string
	ModuleRoot string // default: FindModuleRoot()
	// WorkDir is where temporary data directories go (default os.TempDir()); put it
	// on the file system you mean to measure.
	WorkDir string
	// SamsaArgs are added to `samsa serve` (e.g. --sync none).
	SamsaArgs []string
	// BrokerSets are broker config flags (--set KEY=VALUE pairs, Workload.BrokerArgs)
	// for every samsa started: added to a spawned samsa's `samsa serve`, and to a
	// samsa-cluster's `samsa cluster start`, which passes them to every node's serve.
	BrokerSets []string
	// SelfExe serves kfake for kfake-proc when run with KfakeServeEnv set
	// (default os.Executable()).
	SelfExe      string
	StartTimeout time.Duration // default 60s
	StopGrace    time.Duration // default 10s
	Logger       *slog.Logger

	security string // samsa@security=: the client listener's protocol (secure.go)
	tiered   bool   // samsa@tiered: with an object store and tiered topics (tiered_target.go)
}

// defaults fills the zero fields and makes every path absolute: a spawned broker runs
// in its own temporary directory, where a path relative to the caller's working
// directory (bin/samsa, --work-dir bench-tmp) would name nothing.
func (o *SpawnOptions) defaults() error {
	if o.WorkDir == "" {
		o.WorkDir = os.TempDir()
	}
	var err error
	if o.WorkDir, err = filepath.Abs(o.WorkDir); err != nil {
		return fmt.Errorf("%w: work dir: %w", ErrTarget, err)
	}
	if err := os.MkdirAll(o.WorkDir, 0o755); err != nil {
		return fmt.Errorf("%w: work dir: %w", ErrTarget, err)
	}
	if o.SamsaBin != "" {
		if o.SamsaBin, err = absBinary(o.SamsaBin); err != nil {
			return err
		}
	}
	if o.SelfExe != "" {
		if o.SelfExe, err = absBinary(o.SelfExe); err != nil {
			return err
		}
	}
	if o.ModuleRoot != "" {
		if o.ModuleRoot, err = filepath.Abs(o.ModuleRoot); err != nil {
			return fmt.Errorf("%w: module root: %w", ErrTarget, err)
		}
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 60 * time.Second
	}
	if o.StopGrace == 0 {
		o.StopGrace = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// absBinary resolves a program path the way a shell would, against the current
// working directory (a path with a slash) or $PATH (a bare name), and checks that it
// is there: "bench: target: samsa binary bin/samsa: no such file or directory (run make
// build first)".
func absBinary(p string) (string, error) {
	if !strings.ContainsRune(p, filepath.Separator) {
		found, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("%w: binary %s: %w", ErrTarget, p, err)
		}
		p = found
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("%w: binary %s: %w", ErrTarget, p, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("%w: binary %s: %w (run make build first)", ErrTarget, p, errors.Unwrap(err))
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%w: binary %s (%s) is not an executable file", ErrTarget, p, abs)
	}
	return abs, nil
}

// Target is a broker under test.
type Target struct {
	Name     string
	Brokers  []string
	AdminURL string // http://host:port of /metrics and /debug/pprof, or ""
	PID      int    // broker process, or 0 when it is not a local child
	LogPath  string

	opts    SpawnOptions
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	tmpDir  string
	cluster *kfake.Cluster
	metrics *MetricsUsage
	// pids are the nodes of a samsa-cluster target (PID is then 0: the cost is theirs).
	pids []int
	// nodeAdmins are the admin URLs of a samsa-cluster target's nodes (AdminURL is
	// the first), whose runtime figures are read together.
	nodeAdmins []string
	// replicationFactor, when positive, is the replication factor of the topics a
	// run on this target creates (samsa-cluster@rf=N).
	replicationFactor int
	// ClientOpts are the options its clients need (TLS, SASL: secure.go).
	ClientOpts []kgo.Opt
	extraDir   string // removed with the target (secure.go's certificates)
	// store is a samsa@tiered target's object store, stopped with it, and
	// topicConfigs the topic configs a run on it adds to the workload's
	// (tiered_target.go).
	store        *objectStore
	topicConfigs map[string]string
}

// Usage reads the broker process's CPU and peak RSS.
func (t *Target) Usage() (Usage, error) {
	if len(t.pids) > 0 && t.PID == 0 {
		return ProcsUsage(t.pids).Usage()
	}
	if t.PID == 0 {
		return Usage{}, fmt.Errorf("%w: %s is not a local process", ErrTarget, t.Name)
	}
	return procUsage(t.PID)
}

// UsageSource returns the broker's cost source: its process through /proc when it is a
// local process (spawned, or PID set by the caller), else its admin /metrics when
// AdminURL is set, else nil.
func (t *Target) UsageSource() UsageSource {
	switch {
	case t.PID != 0:
		return ProcUsage(t.PID)
	case len(t.pids) > 0:
		return ProcsUsage(t.pids)
	case t.AdminURL != "":
		if t.metrics == nil || t.metrics.URL != strings.TrimSuffix(t.AdminURL, "/") {
			t.metrics = NewMetricsUsage(t.AdminURL)
		}
		return t.metrics
	}
	return nil
}

// RuntimeSource returns where the broker's Go runtime figures come from: every
// node's admin /metrics for a samsa-cluster target, its admin /metrics when AdminURL
// is set, else nil.
func (t *Target) RuntimeSource() RuntimeSource {
	if len(t.nodeAdmins) > 1 && t.AdminURL == t.nodeAdmins[0] {
		var nodes NodesRuntime
		for _, a := range t.nodeAdmins {
			nodes = append(nodes, NewMetricsUsage(a))
		}
		return nodes
	}
	if t.AdminURL == "" {
		return nil
	}
	if t.metrics == nil || t.metrics.URL != strings.TrimSuffix(t.AdminURL, "/") {
		t.metrics = NewMetricsUsage(t.AdminURL)
	}
	return t.metrics
}

// StartTarget starts or names a target: samsa, samsa-cluster (see
// TargetSamsaCluster), kfake, kfake-proc, or a list of host:port separated by commas
// or '+'. samsa@k=v@k2=v2 spawns samsa with extra
// flags --k=v --k2=v2 (e.g. samsa@sync=none against samsa@sync=fsync); samsa@tiered
// spawns it with an object store and tiered topics (tiered_target.go). For samsa, SamsaBin must be set or the broker
// is built first (use BuildSamsa once and pass SamsaBin to spawn it many times).
func StartTarget(ctx context.Context, spec string, o SpawnOptions) (*Target, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if cs, ok, err := parseClusterSpec(spec); err != nil {
		return nil, err
	} else if ok {
		return startCluster(ctx, spec, cs, o)
	}
	if base, extra, ok := strings.Cut(spec, "@"); ok && base == TargetSamsa {
		// samsa@sync=none@transport=std: the same broker with extra serve flags;
		// security=SSL|SASL_SSL is the client listener's protocol (secure.go),
		// tiered an object store and tiered topics (tiered_target.go).
		tiered, extras := tieredOf(strings.Split(extra, "@"))
		protocol, flags, err := securityOf(extras)
		if err != nil {
			return nil, err
		}
		for _, a := range flags {
			if a == "" {
				return nil, fmt.Errorf("%w: empty flag in %q", ErrTarget, spec)
			}
			o.SamsaArgs = append(append([]string(nil), o.SamsaArgs...), "--"+a)
		}
		o.security, o.tiered = protocol, tiered
		t, err := StartTarget(ctx, base, o)
		if t != nil {
			t.Name = spec
		}
		return t, err
	}
	switch spec {
	case TargetKfake:
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			return nil, fmt.Errorf("%w: kfake: %w", ErrTarget, err)
		}
		return &Target{Name: spec, Brokers: c.ListenAddrs(), cluster: c, opts: o}, nil
	case TargetKfakeProc, TargetKfakeNull:
		self := o.SelfExe
		if self == "" {
			var err error
			if self, err = os.Executable(); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrTarget, err)
			}
		}
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		admin, err := freeAddr()
		if err != nil {
			return nil, err
		}
		args := []string{"kfake-serve", "--listen", addr, "--admin-listen", admin}
		env := []string{KfakeServeEnv + "=" + addr, KfakeAdminEnv + "=" + admin}
		if spec == TargetKfakeNull {
			args, env = append(args, "--null"), append(env, KfakeNullEnv+"=1")
		}
		return spawn(ctx, spec, self, args, env, addr, admin, o)
	case TargetSamsa:
		if o.tiered {
			return startTieredSamsa(ctx, o)
		}
		bin := o.SamsaBin
		if bin == "" {
			dir, err := os.MkdirTemp(o.WorkDir, "samsa-bin-")
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrTarget, err)
			}
			bin = filepath.Join(dir, "samsa")
			if err := BuildSamsa(ctx, o.ModuleRoot, bin); err != nil {
				return nil, err
			}
		}
		if o.security == "SSL" || o.security == "SASL_SSL" {
			return startSecureSamsa(ctx, bin, o.security, o)
		}
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		admin, err := freeAddr()
		if err != nil {
			return nil, err
		}
		args := []string{"serve", "--listen", addr, "--admin-listen", admin}
		return spawn(ctx, spec, bin, args, nil, addr, admin, o)
	}
	var brokers []string
	for _, b := range strings.FieldsFunc(spec, func(r rune) bool { return r == ',' || r == '+' }) {
		if _, _, err := net.SplitHostPort(b); err != nil {
			return nil, fmt.Errorf("%w: %q is not samsa, kfake, kfake-proc or host:port", ErrTarget, b)
		}
		brokers = append(brokers, b)
	}
	if len(brokers) == 0 {
		return nil, fmt.Errorf("%w: empty target", ErrTarget)
	}
	return &Target{Name: spec, Brokers: brokers, opts: o}, nil
}

// spawn starts bin in a fresh temporary directory (its data dir is <tmp>/data, passed
// as --data-dir for samsa) and waits until addr answers ApiVersions.
func spawn(ctx context.Context, name, bin string, args, env []string, addr, admin string, o SpawnOptions) (*Target, error) {
	tmp, err := os.MkdirTemp(o.WorkDir, "samsa-bench-"+name+"-")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTarget, err)
	}
	if name == TargetSamsa {
		data := filepath.Join(tmp, "data")
		if err := os.Mkdir(data, 0o755); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrTarget, err)
		}
		args = append(args, "--data-dir", data)
		args = append(args, o.SamsaArgs...)
		args = append(args, o.BrokerSets...)
	}
	logPath := filepath.Join(tmp, "broker.log")
	logf, err := os.Create(logPath)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("%w: %w", ErrTarget, err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = tmp
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("%w: start %s: %w", ErrTarget, bin, err)
	}
	t := &Target{Name: name, Brokers: []string{addr}, PID: cmd.Process.Pid, LogPath: logPath,
		opts: o, cmd: cmd, exited: make(chan struct{}), tmpDir: tmp}
	if admin != "" {
		t.AdminURL = "http://" + admin
	}
	go func() { t.waitErr = cmd.Wait(); close(t.exited) }()
	o.Logger.Info("spawned broker", "target", name, "pid", t.PID, "addr", addr, "cmd", strings.Join(cmd.Args, " "))

	deadline := time.Now().Add(o.StartTimeout)
	for {
		_, err := apiVersions(ctx, addr, time.Second)
		if err == nil {
			return t, nil
		}
		select {
		case <-t.exited:
			tail := logTail(logPath)
			t.Close()
			return nil, fmt.Errorf("%w: %s exited before answering ApiVersions (%v); log tail:\n%s", ErrTarget, name, t.waitErr, tail)
		case <-ctx.Done():
			t.Close()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tail := logTail(logPath)
			t.Close()
			return nil, fmt.Errorf("%w: %s did not answer ApiVersions on %s within %v (%v); log tail:\n%s", ErrTarget, name, addr, o.StartTimeout, err, tail)
		}
	}
}

// Close stops the target: SIGTERM, then SIGKILL after the grace period, and removes
// its temporary directory. An in-process kfake is closed.
func (t *Target) Close() error {
	if t.cluster != nil {
		t.cluster.Close()
		t.cluster = nil
		return nil
	}
	if t.cmd == nil {
		return nil
	}
	var err error
	select {
	case <-t.exited:
	default:
		_ = t.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-t.exited:
		case <-time.After(t.opts.StopGrace):
			err = fmt.Errorf("%w: %s did not stop within %v of SIGTERM; killed", ErrTarget, t.Name, t.opts.StopGrace)
			_ = t.cmd.Process.Kill()
			<-t.exited
		}
	}
	t.cmd = nil
	t.store.close() // after the broker: it copies until it stops
	t.store = nil
	for _, d := range []string{t.tmpDir, t.extraDir} {
		if d == "" {
			continue
		}
		if rerr := os.RemoveAll(d); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("%w: free port: %w", ErrTarget, err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log)"
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(bytes.TrimSpace(b))
}

// FindModuleRoot walks up from the working directory to this repository's go.mod.
func FindModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module github.com/samsa-broker/samsa")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%w: no go.mod of github.com/samsa-broker/samsa above the working directory", ErrTarget)
		}
		dir = parent
	}
}

// SamsaLDFlags are the broker's link flags as the Makefile's SAMSA_LDFLAGS gives
// them (the Go runtime's monitor thread kept awake: cmd/samsa/sysmon.go), so that a
// broker samsa-bench builds is the one `make build` builds.
const SamsaLDFlags = "-X runtime.godebugDefault=schedtrace=2147483647 -X main.linkedGODEBUG=schedtrace=2147483647"

// BuildSamsa builds ./cmd/samsa of the module at root (default FindModuleRoot) to out.
func BuildSamsa(ctx context.Context, root, out string) error {
	if root == "" {
		var err error
		if root, err = FindModuleRoot(); err != nil {
			return err
		}
	}
	// go build runs in root: a relative out would land there, not where the caller meant.
	out, err := filepath.Abs(out)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrTarget, err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags", SamsaLDFlags, "-o", out, "./cmd/samsa")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: go build ./cmd/samsa in %s: %w\n%s", ErrTarget, root, err, b)
	}
	return nil
}

// ServeKfake runs a one-broker kfake cluster on listen until ctx ends, with its
// admin endpoint on admin (kfakeAdminMux) unless that is "". A null
// cluster stores nothing and serves synthetic fetches (see TargetKfakeNull).
func ServeKfake(ctx context.Context, listen, admin string, null bool) error {
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrTarget, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return fmt.Errorf("%w: port %q", ErrTarget, port)
	}
	opts := []kfake.Opt{kfake.Ports(p)}
	if null {
		opts = append(opts, kfake.BlackholeProduce(), kfake.SyntheticFetch(kfake.SyntheticBatch{}))
	}
	var srv *http.Server
	if admin != "" {
		ln, err := net.Listen("tcp", admin)
		if err != nil {
			return fmt.Errorf("%w: kfake admin: %w", ErrTarget, err)
		}
		srv = &http.Server{Handler: kfakeAdminMux(), ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		if srv != nil {
			srv.Close()
		}
		return fmt.Errorf("%w: kfake: %w", ErrTarget, err)
	}
	<-ctx.Done()
	c.Close()
	if srv != nil {
		srv.Close()
	}
	return nil
}

// kfakeAdminMux serves a kfake process's /metrics (the Go runtime's figures that
// samsa-bench reads of a broker, WriteRuntimeMetrics) and /debug/pprof (for
// --profile), so that the peer is measured as Samsa is.
func kfakeAdminMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		WriteRuntimeMetrics(w)
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	return mux
}
