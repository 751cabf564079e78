package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// TargetSamsaCluster is a local cluster of combined samsa nodes (broker and
// controller each) on 127.0.0.1, started by `samsa cluster start`: the command formats
// every node with one cluster id, writes their properties files, starts one `samsa
// serve` child per node, waits until every broker is listed in Metadata and prints
// the bootstrap servers; SIGTERM stops the nodes (a controlled shutdown each).
//
//	samsa-cluster                 3 nodes, topics of the workload's replication factor
//	samsa-cluster@rf=3            topics of replication factor 3 on this target
//	samsa-cluster@nodes=5@rf=3    5 nodes
//
// The nodes' own keys are the ones `cluster start` generates (its defaults, among
// them the fsync durability policy), and a workload's brokerConfigs, which `cluster
// start --set` passes to every node; serve flags (--sync, --samsa-arg) are refused.
const TargetSamsaCluster = "samsa-cluster"

// clusterSpec is a parsed samsa-cluster target.
type clusterSpec struct {
	nodes, rf int
}

// parseClusterSpec parses samsa-cluster[@nodes=N][@rf=N]; ok is false when spec
// names another target.
func parseClusterSpec(spec string) (cs clusterSpec, ok bool, err error) {
	base, extra, hasExtra := strings.Cut(spec, "@")
	if base != TargetSamsaCluster {
		return cs, false, nil
	}
	cs.nodes = 3
	if !hasExtra {
		return cs, true, nil
	}
	for _, a := range strings.Split(extra, "@") {
		k, v, _ := strings.Cut(a, "=")
		n, perr := strconv.Atoi(v)
		switch {
		case k == "nodes" && perr == nil && n >= 1 && n <= 9:
			cs.nodes = n
		case k == "rf" && perr == nil && n >= 1 && n <= 32:
			cs.rf = n
		default:
			return cs, true, fmt.Errorf("%w: %q: samsa-cluster takes @nodes=1..9 and @rf=1..32, not %q", ErrTarget, spec, a)
		}
	}
	if cs.rf > cs.nodes {
		return cs, true, fmt.Errorf("%w: %q: replication factor %d above %d nodes", ErrTarget, spec, cs.rf, cs.nodes)
	}
	return cs, true, nil
}

// clusterNode is one node line of `samsa cluster start`:
//
//	node 1: pid 1234, kafka 127.0.0.1:40001, controller 127.0.0.1:40002, admin http://127.0.0.1:40003, config ..., log ...
type clusterNode struct {
	pid   int
	kafka string
	admin string
}

// parseClusterOutput reads the output of `samsa cluster start` so far: its node
// lines and, once the cluster formed, the bootstrap servers of its ready line
// ("cluster <id> ready: --bootstrap-server a,b,c").
func parseClusterOutput(out string) (nodes []clusterNode, bootstrap []string) {
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if _, rest, ok := strings.Cut(line, " ready: --bootstrap-server "); ok && strings.HasPrefix(line, "cluster ") {
			bootstrap = strings.Split(strings.TrimSpace(rest), ",")
			continue
		}
		if !strings.HasPrefix(line, "node ") {
			continue
		}
		var n clusterNode
		for _, f := range strings.Split(line, ", ") {
			if _, after, ok := strings.Cut(f, ": pid "); ok {
				n.pid, _ = strconv.Atoi(after)
			} else if v, ok := strings.CutPrefix(f, "kafka "); ok {
				n.kafka = v
			} else if v, ok := strings.CutPrefix(f, "admin "); ok {
				n.admin = v
			}
		}
		if n.pid > 0 {
			nodes = append(nodes, n)
		}
	}
	return nodes, bootstrap
}

// startCluster runs `samsa cluster start --nodes N --data-dir <tmp>/cluster` and
// waits for its ready line. The target's cost is the nodes' processes' (their CPU
// summed, their peak RSS summed); its admin URL is the first node's.
func startCluster(ctx context.Context, spec string, cs clusterSpec, o SpawnOptions) (*Target, error) {
	if len(o.SamsaArgs) > 0 {
		return nil, fmt.Errorf("%w: %s: serve flags %q do not apply (cluster start writes each node's properties)", ErrTarget, spec, o.SamsaArgs)
	}
	bin := o.SamsaBin
	tmp, err := os.MkdirTemp(o.WorkDir, "samsa-bench-cluster-")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTarget, err)
	}
	if bin == "" {
		bin = filepath.Join(tmp, "samsa")
		if err := BuildSamsa(ctx, o.ModuleRoot, bin); err != nil {
			os.RemoveAll(tmp)
			return nil, err
		}
	}
	logPath := filepath.Join(tmp, "cluster.log")
	logf, err := os.Create(logPath)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("%w: %w", ErrTarget, err)
	}
	defer logf.Close()
	timeout := o.StartTimeout
	args := []string{"cluster", "start", "--nodes", strconv.Itoa(cs.nodes),
		"--data-dir", filepath.Join(tmp, "cluster"), "--timeout", timeout.String()}
	cmd := exec.Command(bin, append(args, o.BrokerSets...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = tmp
	cmd.SysProcAttr = childAttr() // the nodes die with `cluster start` (their own Pdeathsig)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("%w: start %s: %w", ErrTarget, bin, err)
	}
	// cluster start stops its nodes with a 30 s grace each, all at once.
	o.StopGrace = max(o.StopGrace, 45*time.Second)
	t := &Target{Name: spec, LogPath: logPath, opts: o, cmd: cmd, exited: make(chan struct{}), tmpDir: tmp,
		replicationFactor: cs.rf}
	go func() { t.waitErr = cmd.Wait(); close(t.exited) }()
	o.Logger.Info("spawned cluster", "target", spec, "pid", cmd.Process.Pid, "cmd", strings.Join(cmd.Args, " "))

	deadline := time.Now().Add(timeout + 10*time.Second)
	for {
		b, _ := os.ReadFile(logPath)
		nodes, bootstrap := parseClusterOutput(string(b))
		if len(bootstrap) > 0 && len(nodes) == cs.nodes {
			t.Brokers = bootstrap
			t.AdminURL = nodes[0].admin
			for _, n := range nodes {
				t.pids = append(t.pids, n.pid)
				t.nodeAdmins = append(t.nodeAdmins, n.admin)
			}
			return t, nil
		}
		select {
		case <-t.exited:
			tail := logTail(logPath)
			t.Close()
			return nil, fmt.Errorf("%w: %s: cluster start exited before the cluster formed (%v); its output:\n%s", ErrTarget, spec, t.waitErr, tail)
		case <-ctx.Done():
			t.Close()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tail := logTail(logPath)
			t.Close()
			return nil, fmt.Errorf("%w: %s did not form within %v; cluster start's output:\n%s", ErrTarget, spec, timeout, tail)
		}
	}
}

// ProcsUsage measures several local processes through /proc as one broker: CPU
// seconds summed, the sum of each process's peak RSS (at least the peak of the
// sum), and their current RSS summed.
type ProcsUsage []int

// Usage implements UsageSource.
func (p ProcsUsage) Usage() (Usage, error) {
	var total Usage
	for _, pid := range p {
		u, err := procUsage(pid)
		if err != nil {
			return Usage{}, err
		}
		total.CPUSeconds += u.CPUSeconds
		total.PeakRSS += u.PeakRSS
		total.RSS += u.RSS
	}
	return total, nil
}

// String names the source in reports.
func (p ProcsUsage) String() string {
	s := make([]string, len(p))
	for i, pid := range p {
		s[i] = fmt.Sprintf("/proc/%d", pid)
	}
	return strings.Join(s, "+")
}
