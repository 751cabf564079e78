package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/node"
)

// A procCluster is a cluster of `samsa serve` child processes on 127.0.0.1, one per
// node, each with a generated properties file under <dir>/node-<id>/: the local
// cluster of `samsa cluster start` and of the multi-process tests.
//
//	<dir>/cluster.id                  the cluster id every node is formatted with
//	<dir>/node-<id>/server.properties the node's keys (ports chosen free at creation)
//	<dir>/node-<id>/logs/, meta/      log.dirs and metadata.log.dir
//	<dir>/node-<id>/samsa.log         the process's output (appended across restarts)
//
// A directory made earlier is reused as it is (its properties files, ports and
// cluster id), so a cluster stopped and started again keeps its data.
//
// Methods are safe for concurrent use.
type procCluster struct {
	bin       string
	dir       string
	clusterID string
	nodes     []*procNode
	serveArgs []string // after `serve --config <file>` of every node (procSpec.ServeArgs)

	binMu sync.Mutex
	bins  map[int32]string // a node's own binary (SetBin), else bin
}

// procNode is one node of a procCluster.
type procNode struct {
	ID         int32
	Roles      string
	Dir        string
	ConfigFile string
	Client     string // host:port of the PLAINTEXT listener ("" on a controller-only node)
	Controller string // host:port of the CONTROLLER listener ("" on a broker-only node)
	Admin      string // host:port of the admin HTTP listener

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when the running process exited
	err    error         // its exit status
}

// procSpec describes a cluster to create.
type procSpec struct {
	// Roles of each node, in node-id order from 1: "broker,controller",
	// "controller" or "broker". Voters are the nodes with the controller role.
	Roles []string
	// Keys are added to every node's properties file (after the generated ones).
	Keys map[string]string
	// NodeKeys are added to one node's file (by node id).
	NodeKeys map[int32]map[string]string
	// FormatBin, when set, formats the nodes with that binary's `storage format`
	// (another build of samsa) instead of this one's.
	FormatBin string
	// ServeArgs are added to every node's `samsa serve --config <file>` (and to the
	// configuration its storage is formatted with): the --set KEY=VALUE flags of
	// `cluster start`, which apply whether the directory is new or reused.
	ServeArgs []string
}

// combined returns a spec of n combined nodes.
func combined(n int) procSpec {
	s := procSpec{}
	for range n {
		s.Roles = append(s.Roles, "broker,controller")
	}
	return s
}

// freePorts returns n distinct free TCP ports of 127.0.0.1 (held open until all are
// chosen, so they differ; another process may still take one before it is bound).
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// newProcCluster creates (or reuses) the cluster directory dir for spec and formats
// every node with one cluster id. bin is the samsa binary the nodes run.
func newProcCluster(bin, dir string, spec procSpec) (*procCluster, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c := &procCluster{bin: bin, dir: dir, serveArgs: spec.ServeArgs}
	idFile := filepath.Join(dir, "cluster.id")
	if b, err := os.ReadFile(idFile); err == nil {
		c.clusterID = strings.TrimSpace(string(b))
	} else {
		c.clusterID = node.RandomUUID()
		if err := os.WriteFile(idFile, []byte(c.clusterID+"\n"), 0o644); err != nil {
			return nil, err
		}
	}
	ports, err := freePorts(3 * len(spec.Roles))
	if err != nil {
		return nil, err
	}
	var voters []string
	for i, roles := range spec.Roles {
		n := &procNode{ID: int32(i + 1), Roles: roles, Dir: filepath.Join(dir, fmt.Sprintf("node-%d", i+1))}
		n.ConfigFile = filepath.Join(n.Dir, "server.properties")
		if strings.Contains(roles, "broker") {
			n.Client = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[3*i]))
		}
		if strings.Contains(roles, "controller") {
			n.Controller = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[3*i+1]))
			voters = append(voters, fmt.Sprintf("%d@%s", n.ID, n.Controller))
		}
		n.Admin = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[3*i+2]))
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		if _, err := os.Stat(n.ConfigFile); err == nil {
			if err := n.readAddrs(); err != nil {
				return nil, err
			}
			continue
		}
		if err := n.writeConfig(voters, spec); err != nil {
			return nil, err
		}
	}
	for _, n := range c.nodes {
		if spec.FormatBin != "" {
			out, err := exec.Command(spec.FormatBin, "storage", "format", "--config", n.ConfigFile, "--cluster-id", c.clusterID, "--ignore-formatted").CombinedOutput()
			if err != nil {
				return nil, fmt.Errorf("node %d: %s storage format: %v\n%s", n.ID, spec.FormatBin, err, out)
			}
			continue
		}
		cfg, err := loadConfig(append([]string{"--config", n.ConfigFile}, spec.ServeArgs...), nil, slog.New(slog.DiscardHandler), io.Discard)
		if err != nil {
			return nil, fmt.Errorf("node %d: %w", n.ID, err)
		}
		if _, err := node.Format(cfg.Config, c.clusterID, true); err != nil {
			return nil, fmt.Errorf("node %d: %w", n.ID, err)
		}
	}
	return c, nil
}

func (n *procNode) writeConfig(voters []string, spec procSpec) error {
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return err
	}
	var listeners []string
	if n.Client != "" {
		listeners = append(listeners, "PLAINTEXT://"+n.Client)
	}
	if n.Controller != "" {
		listeners = append(listeners, "CONTROLLER://"+n.Controller)
	}
	lines := []string{
		"# generated by samsa cluster start",
		"process.roles=" + n.Roles,
		"node.id=" + strconv.Itoa(int(n.ID)),
		"controller.quorum.voters=" + strings.Join(voters, ","),
		"listeners=" + strings.Join(listeners, ","),
		"controller.listener.names=CONTROLLER",
		"log.dirs=" + filepath.Join(n.Dir, "logs"),
		"metadata.log.dir=" + filepath.Join(n.Dir, "meta"),
		"admin.listen=" + n.Admin,
	}
	if n.Client != "" {
		lines = append(lines, "advertised.listeners=PLAINTEXT://"+n.Client, "inter.broker.listener.name=PLAINTEXT")
	}
	for _, kv := range []map[string]string{spec.Keys, spec.NodeKeys[n.ID]} {
		keys := make([]string, 0, len(kv))
		for k := range kv {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			lines = append(lines, k+"="+kv[k])
		}
	}
	return os.WriteFile(n.ConfigFile, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

// readAddrs reads the listeners of an existing properties file.
func (n *procNode) readAddrs() error {
	props, err := readProperties(n.ConfigFile)
	if err != nil {
		return err
	}
	n.Client, n.Controller = "", ""
	for _, kv := range props {
		switch kv[0] {
		case "listeners":
			ls, err := node.ParseListeners("listeners", kv[1])
			if err != nil {
				return err
			}
			for _, l := range ls {
				if l.Name == "CONTROLLER" {
					n.Controller = l.Addr()
				} else if n.Client == "" {
					n.Client = l.Addr()
				}
			}
		case "admin.listen":
			n.Admin = kv[1]
		case "process.roles":
			n.Roles = kv[1]
		}
	}
	return nil
}

// SetBin makes node id run bin from its next start (another build of samsa, as in
// a rolling upgrade).
func (c *procCluster) SetBin(id int32, bin string) {
	c.binMu.Lock()
	defer c.binMu.Unlock()
	if c.bins == nil {
		c.bins = map[int32]string{}
	}
	c.bins[id] = bin
}

func (c *procCluster) binOf(id int32) string {
	c.binMu.Lock()
	defer c.binMu.Unlock()
	if b, ok := c.bins[id]; ok {
		return b
	}
	return c.bin
}

// Node returns the node with id.
func (c *procCluster) Node(id int32) *procNode { return c.nodes[id-1] }

// Bootstrap is the client listeners of the broker nodes, comma-separated.
func (c *procCluster) Bootstrap() string {
	var out []string
	for _, n := range c.nodes {
		if n.Client != "" {
			out = append(out, n.Client)
		}
	}
	return strings.Join(out, ",")
}

// Brokers are the ids of the nodes with the broker role.
func (c *procCluster) Brokers() []int32 {
	var out []int32
	for _, n := range c.nodes {
		if n.Client != "" {
			out = append(out, n.ID)
		}
	}
	return out
}

// StartAll starts every node that is not running.
func (c *procCluster) StartAll() error {
	for _, n := range c.nodes {
		if err := c.Start(n.ID); err != nil {
			return err
		}
	}
	return nil
}

// Start starts node id's process (nothing if it runs). Its output is appended to
// <dir>/node-<id>/samsa.log.
func (c *procCluster) Start(id int32) error {
	n := c.Node(id)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		select {
		case <-n.exited:
		default:
			return nil
		}
	}
	logf, err := os.OpenFile(filepath.Join(n.Dir, "samsa.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "=== %s: start\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(c.binOf(id), c.ServeArgs(id)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = childEnv()
	cmd.SysProcAttr = childSysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("node %d: %w", id, err)
	}
	exited := make(chan struct{})
	n.cmd, n.exited, n.err = cmd, exited, nil
	go func() {
		err := cmd.Wait()
		logf.Close()
		n.mu.Lock()
		n.err = err
		n.mu.Unlock()
		close(exited)
	}()
	return nil
}

// ServeArgs are the arguments node id runs with after the binary: serve --config
// <its file> and the cluster's ServeArgs.
func (c *procCluster) ServeArgs(id int32) []string {
	return append([]string{"serve", "--config", c.Node(id).ConfigFile}, c.serveArgs...)
}

// childEnv is the environment of a node: this one without SAMSA_ keys (each node's
// file says everything).
func childEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SAMSA_") {
			out = append(out, kv)
		}
	}
	return out
}

// Running reports whether node id's process runs (a stopped process runs).
func (c *procCluster) Running(id int32) bool {
	n := c.Node(id)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// Pid is node id's process id (0 if it never started).
func (c *procCluster) Pid(id int32) int {
	n := c.Node(id)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Signal sends sig to node id's process.
func (c *procCluster) Signal(id int32, sig syscall.Signal) error {
	n := c.Node(id)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return fmt.Errorf("node %d is not running", id)
	}
	return n.cmd.Process.Signal(sig)
}

// Wait waits for node id's process to exit (or ctx to end) and returns its status.
func (c *procCluster) Wait(ctx context.Context, id int32) error {
	n := c.Node(id)
	n.mu.Lock()
	exited := n.exited
	n.mu.Unlock()
	if exited == nil {
		return nil
	}
	select {
	case <-exited:
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Kill SIGKILLs node id and waits for it to be gone.
func (c *procCluster) Kill(id int32) {
	if !c.Running(id) {
		return
	}
	c.Signal(id, syscall.SIGCONT) // a stopped process dies at once either way
	c.Signal(id, syscall.SIGKILL)
	c.Wait(context.Background(), id)
}

// Stop sends SIGTERM (a controlled shutdown) to node id and waits up to grace for it
// to exit, then kills it. It returns the exit status (nil: exit code 0).
func (c *procCluster) Stop(id int32, grace time.Duration) error {
	if !c.Running(id) {
		return nil
	}
	c.Signal(id, syscall.SIGCONT)
	if err := c.Signal(id, syscall.SIGTERM); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := c.Wait(ctx, id)
	if errors.Is(err, context.DeadlineExceeded) {
		c.Kill(id)
		return fmt.Errorf("node %d did not stop within %v: killed", id, grace)
	}
	return err
}

// StopAll stops every running node, all at once, each with grace.
func (c *procCluster) StopAll(grace time.Duration) error {
	var wg sync.WaitGroup
	errs := make([]error, len(c.nodes))
	for i, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Stop(n.ID, grace)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// KillAll SIGKILLs every running node.
func (c *procCluster) KillAll() {
	for _, n := range c.nodes {
		c.Kill(n.ID)
	}
}

// LogTail returns the last lines of node id's log.
func (c *procCluster) LogTail(id int32, lines int) string { return c.logTail(id, lines, "") }

// logTail returns the last lines of node id's log that do not contain skip ("": all).
func (c *procCluster) logTail(id int32, lines int, skip string) string {
	f, err := os.Open(filepath.Join(c.Node(id).Dir, "samsa.log"))
	if err != nil {
		return ""
	}
	defer f.Close()
	var all []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if skip != "" && strings.Contains(sc.Text(), skip) {
			continue
		}
		all = append(all, sc.Text())
		if len(all) > 4*lines {
			all = all[len(all)-lines:]
		}
	}
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// exitedEarly returns an error naming the first node that should run and does not,
// with the end of its log.
func (c *procCluster) exitedEarly(want []int32) error {
	for _, id := range want {
		if !c.Running(id) {
			return fmt.Errorf("node %d exited: %v\n%s", id, c.Wait(context.Background(), id), c.LogTail(id, 15))
		}
	}
	return nil
}

// WaitReady waits until the broker of node `via` answers Metadata listing every
// broker in want (all the cluster's brokers when want is nil), or a node of want
// exits, or ctx ends.
func (c *procCluster) WaitReady(ctx context.Context, via int32, want []int32) error {
	if want == nil {
		want = c.Brokers()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Node(via).Client), kgo.RetryTimeout(time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	var last error
	for {
		if err := c.exitedEarly(want); err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		req := kmsg.NewPtrMetadataRequest()
		resp, err := req.RequestWith(rctx, cl)
		cancel()
		if err == nil {
			have := map[int32]bool{}
			for _, b := range resp.Brokers {
				have[b.NodeID] = true
			}
			missing := 0
			for _, id := range want {
				if !have[id] {
					missing++
				}
			}
			if missing == 0 {
				return nil
			}
			last = fmt.Errorf("Metadata lists %d of %d brokers", len(want)-missing, len(want))
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster not ready: %v (last: %v)", ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
