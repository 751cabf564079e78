// Package cluster starts and controls N `samsa serve` processes for the fault harness,
// from outside: it writes their configuration, starts each as a child process (in
// its own network namespace when asked), sends it signals, and watches its log. It
// imports no broker package.
//
// Two launch modes, chosen at run time from the binary:
//
//   - KRaft mode, when `samsa storage random-uuid` exits 0: every node gets a Kafka
//     KRaft properties file (process.roles=broker,controller, node.id,
//     controller.quorum.voters, listeners with a CONTROLLER listener, log.dirs,
//     metadata.log.dir, ...; see props.go), is formatted with `samsa storage format
//     --config F --cluster-id ID` and served with `samsa serve --config F`.
//   - single-node mode, for binaries without cluster commands: `samsa serve
//     --data-dir D --listen H:P --admin-listen H:P --set log.dirs=...`. More than one
//     node is refused in this mode, with the reason.
//
// Layout of a run directory, per node i:
//
//	node<i>/server.properties   (KRaft mode)
//	node<i>/meta/               metadata log
//	node<i>/disk/               a tmpfs of Config.DiskSize when set (the disk-full nemesis)
//	node<i>/disk/logs/          log.dirs
//	node<i>/disk/ballast        the file that fills the disk
//	node<i>/power-loss.journal  samsa.test.power.loss.journal, when Config.PowerLoss
//	node<i>/samsa.log           the process's stdout and stderr, every start appended
//	objstore/chaos/             the object store's bucket, with Config.ObjectStore (tiered storage)
//	objstore.log                its output, every start appended
//
// Nodes are numbered from 1 (the node.id). All methods are safe for concurrent use.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// NetMode says how nodes are networked.
type NetMode int

const (
	// Loopback: every node on 127.0.0.1 with its own free ports.
	Loopback NetMode = iota
	// Netns: every node in its own network namespace, joined by veth pairs to a bridge
	// the harness reaches; partitions and slow links are possible.
	Netns
)

// PowerLossKey is the broker's test-only key: with it, every write a killed node had
// not fdatasynced is lost at its next start.
const PowerLossKey = "samsa.test.power.loss.journal"

// Config describes a cluster to start.
type Config struct {
	Bin   string // the samsa binary
	Nodes int
	Dir   string // the run directory (created)
	Net   NetMode
	// Env is added to every node's environment (the harness's own SAMSA_ variables are
	// not inherited, so a run does not depend on the caller's shell); NodeEnv to one
	// node's.
	Env     []string
	NodeEnv map[int][]string
	// Set holds extra key=value config for every node.
	Set []string
	// PowerLoss starts every node with PowerLossKey.
	PowerLoss bool
	// DiskSize, when positive, puts each node's log dir on a tmpfs of that many bytes.
	DiskSize int64
	// SessionTimeout and HeartbeatInterval: broker.session.timeout.ms and
	// broker.heartbeat.interval.ms (KRaft mode); 0 means 9s and 2s.
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	// StartTimeout bounds a node's start until it answers Metadata; 0 means 60s.
	StartTimeout time.Duration
	// OnExit is called (from a goroutine of the cluster) when a node's process exits
	// without the cluster having killed or stopped it.
	OnExit func(Exit)
	// Secure runs the cluster with TLS, SASL (SCRAM-SHA-512) and ACLs on every
	// listener (security.go); KRaft mode only.
	Secure bool
	// OnAuthFailure is called (from a goroutine of the cluster, which it must not
	// block) for each line a node logs about a failed authentication (IsAuthFailure).
	OnAuthFailure func(AuthFailure)
	// ObjectStore, the path of versitygw, runs the cluster with tiered storage: an
	// S3-compatible store of the run (objstore.go), started before the nodes, and
	// every node with remote.log.storage.system.enable over it.
	ObjectStore string
	Log         *slog.Logger
}

// Exit describes a node process that ended on its own.
type Exit struct {
	Node int
	Err  string
	At   time.Time
	Tail []string // the last lines of its log
}

// AuthFailure is a node's log line about a failed authentication.
type AuthFailure struct {
	Node int
	At   time.Time
	Msg  string
	Line string
}

// ErrNoClusterMode: the binary cannot run more than one node.
var ErrNoClusterMode = errors.New("cluster: this samsa binary has no cluster mode (`samsa storage random-uuid` failed); run one node")

// Cluster is a set of running (or stopped) nodes.
type Cluster struct {
	cfg       Config
	kraft     bool
	clusterID string
	net       *Network
	sec       *security
	store     *ObjectStore
	mounted   []string
	nodes     []*Node
	closeOnce sync.Once
}

// New prepares a cluster: directories, network, mounts, configuration and storage
// format. It starts no process; Start does. On error, what was set up is torn down.
func New(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	if err := cfg.prepare(); err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg}
	defer func() {
		if err != nil {
			c.teardown()
		}
	}()
	c.kraft = HasClusterMode(ctx, cfg.Bin)
	if !c.kraft && cfg.Nodes > 1 {
		return nil, ErrNoClusterMode
	}
	if cfg.Secure {
		if !c.kraft {
			return nil, fmt.Errorf("cluster: a secured cluster needs KRaft mode (properties files): %w", ErrNoClusterMode)
		}
		if c.sec, err = newSecurity(cfg.Dir); err != nil {
			return nil, err
		}
	}
	hosts, ports, err := c.addresses()
	if err != nil {
		return nil, err
	}
	if cfg.ObjectStore != "" {
		host := "127.0.0.1"
		if c.net != nil {
			host = c.net.HostIP() // the nodes' way out of their namespaces
		}
		if c.store, err = newObjectStore(cfg.ObjectStore, cfg.Dir, host); err != nil {
			return nil, err
		}
	}
	for i := 0; i < cfg.Nodes; i++ {
		if err := c.addNode(i+1, hosts[i], ports[i]); err != nil {
			return nil, err
		}
	}
	if c.kraft {
		if err := c.format(ctx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// prepare checks the config, fills in its defaults, makes the binary's and the
// run directory's paths absolute and creates the run directory, marked as the
// cluster's.
func (cfg *Config) prepare() error {
	if cfg.Nodes < 1 {
		return fmt.Errorf("cluster: %d nodes", cfg.Nodes)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 9 * time.Second
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 2 * time.Second
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	bin, err := filepath.Abs(cfg.Bin)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	cfg.Bin = bin
	if cfg.Dir, err = filepath.Abs(cfg.Dir); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if strings.ContainsAny(cfg.Dir, ", \t\n") {
		// log.dirs and controller.quorum.voters are comma-separated lists in a
		// properties file: a node would take the path for several.
		return fmt.Errorf("cluster: the run directory %q holds a comma or a space, which log.dirs (a comma-separated list) cannot", cfg.Dir)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return writeOwnerMark(cfg.Dir)
}

// addresses are each node's host and its Kafka, controller and admin ports: in
// network namespaces (made here) each node's own address with the usual ports, else
// loopback with free ports.
func (c *Cluster) addresses() ([]string, [][3]int, error) {
	hosts := make([]string, c.cfg.Nodes)
	var ports [][3]int
	if c.cfg.Net == Netns {
		var err error
		c.net, err = NewNetwork(c.cfg.Nodes)
		if err != nil {
			return nil, nil, err
		}
		for i := range hosts {
			hosts[i] = c.net.IP(i + 1)
			ports = append(ports, [3]int{9092, 9093, 9644})
		}
		return hosts, ports, nil
	}
	free, err := FreePorts(3 * c.cfg.Nodes)
	if err != nil {
		return nil, nil, err
	}
	for i := range hosts {
		hosts[i] = "127.0.0.1"
		ports = append(ports, [3]int{free[3*i], free[3*i+1], free[3*i+2]})
	}
	return hosts, ports, nil
}

// addNode adds node id: its directories (its disk on a tmpfs of DiskSize if set)
// and, on a secured cluster, its certificate.
func (c *Cluster) addNode(id int, host string, ports [3]int) error {
	cfg := c.cfg
	n := &Node{c: c, ID: id, Host: host, KafkaPort: ports[0], ControllerPort: ports[1], AdminPort: ports[2]}
	n.Dir = filepath.Join(cfg.Dir, fmt.Sprintf("node%d", n.ID))
	n.DiskDir = filepath.Join(n.Dir, "disk")
	n.LogDir = filepath.Join(n.DiskDir, "logs")
	n.MetaDir = filepath.Join(n.Dir, "meta")
	if cfg.PowerLoss {
		n.Journal = filepath.Join(n.Dir, "power-loss.journal")
	}
	if err := os.MkdirAll(n.DiskDir, 0o755); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if cfg.DiskSize > 0 {
		if err := MountTmpfs(n.DiskDir, cfg.DiskSize); err != nil {
			return err
		}
		c.mounted = append(c.mounted, n.DiskDir)
	}
	if err := os.MkdirAll(n.LogDir, 0o755); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	c.nodes = append(c.nodes, n)
	if c.sec != nil {
		if _, err := c.sec.issue(n, 0); err != nil {
			return err
		}
	}
	return nil
}

// KRaft reports whether the cluster runs in KRaft mode (properties files, storage format).
func (c *Cluster) KRaft() bool { return c.kraft }

// ClusterID is the id the nodes were formatted with (KRaft mode).
func (c *Cluster) ClusterID() string { return c.clusterID }

// Network is the namespaces' network, nil in loopback mode.
func (c *Cluster) Network() *Network { return c.net }

// Nodes returns the nodes, by id order.
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Node returns node id (1-based), or nil.
func (c *Cluster) Node(id int) *Node {
	if id < 1 || id > len(c.nodes) {
		return nil
	}
	return c.nodes[id-1]
}

// Bootstrap is every node's Kafka address.
func (c *Cluster) Bootstrap() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.Addr())
	}
	return out
}

// ObjectStore is the tiered cluster's object store, nil without one.
func (c *Cluster) ObjectStore() *ObjectStore { return c.store }

// Start starts the object store, if any, then every node, and waits until each
// answers Metadata naming all of them.
func (c *Cluster) Start(ctx context.Context) error {
	if c.store != nil {
		if err := c.store.Start(ctx); err != nil {
			return err
		}
	}
	for _, n := range c.nodes {
		if err := n.start(); err != nil {
			return err
		}
	}
	for _, n := range c.nodes {
		if err := n.WaitReady(ctx, len(c.nodes)); err != nil {
			return err
		}
	}
	return nil
}

// Close stops every node (SIGTERM, then SIGKILL after 15 s), and removes the
// network and the mounts. It returns the first error.
func (c *Cluster) Close() error {
	var first error
	c.closeOnce.Do(func() {
		var wg sync.WaitGroup
		errs := make([]error, len(c.nodes))
		for i, n := range c.nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = n.Stop(15 * time.Second)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil && first == nil {
				first = err
			}
		}
		if err := c.teardown(); err != nil && first == nil {
			first = err
		}
	})
	return first
}

func (c *Cluster) teardown() error {
	var first error
	for _, n := range c.nodes {
		n.kill() // a process still alive holds the mounts
	}
	if c.store != nil {
		c.store.Kill()
	}
	for _, m := range c.mounted {
		if err := Unmount(m); err != nil && first == nil {
			first = err
		}
	}
	c.mounted = nil
	if c.net != nil {
		if err := c.net.Close(); err != nil && first == nil {
			first = err
		}
	}
	os.Remove(filepath.Join(c.cfg.Dir, ownerMark))
	return first
}

// HasClusterMode reports whether bin knows `storage random-uuid` (and so `storage
// format` and KRaft configuration).
func HasClusterMode(ctx context.Context, bin string) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "storage", "random-uuid").Output()
	return err == nil && len(strings.TrimSpace(string(out))) > 0
}

// format makes a cluster id and formats every node's storage with it.
func (c *Cluster) format(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.cfg.Bin, "storage", "random-uuid").Output()
	if err != nil {
		return fmt.Errorf("cluster: samsa storage random-uuid: %w", err)
	}
	c.clusterID = strings.TrimSpace(string(out))
	for _, n := range c.nodes {
		n.ConfigPath = filepath.Join(n.Dir, "server.properties")
		if err := os.WriteFile(n.ConfigPath, []byte(c.properties(n)), 0o644); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
		args := []string{"storage", "format", "--config", n.ConfigPath, "--cluster-id", c.clusterID}
		if c.sec != nil {
			args = append(args, c.sec.addScram()...)
		}
		cmd := exec.CommandContext(ctx, c.cfg.Bin, args...)
		cmd.Env = c.env(n)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("cluster: samsa storage format (node %d): %w: %s", n.ID, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// env is a node's environment: the harness's, without SAMSA_ variables, plus the
// configured ones.
func (c *Cluster) env(n *Node) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SAMSA_") {
			env = append(env, kv)
		}
	}
	env = append(env, c.cfg.Env...)
	return append(env, c.cfg.NodeEnv[n.ID]...)
}

// args is the command line of a node's `samsa serve`.
func (c *Cluster) args(n *Node) []string {
	if c.kraft {
		return []string{"serve", "--config", n.ConfigPath}
	}
	args := []string{"serve",
		"--data-dir", filepath.Join(n.Dir, "data"),
		"--listen", net.JoinHostPort(n.Host, strconv.Itoa(n.KafkaPort)),
		"--admin-listen", net.JoinHostPort(n.Host, strconv.Itoa(n.AdminPort)),
		"--node-id", strconv.Itoa(n.ID),
		"--set", "log.dirs=" + n.LogDir,
	}
	if n.Journal != "" {
		args = append(args, "--set", PowerLossKey+"="+n.Journal)
	}
	if c.store != nil {
		for _, kv := range c.store.BrokerKeys() {
			args = append(args, "--set", kv)
		}
	}
	for _, kv := range c.cfg.Set {
		args = append(args, "--set", kv)
	}
	return args
}

// FreePorts returns n distinct free TCP ports on 127.0.0.1 (held open together while
// chosen, so they differ; another process may still take one before it is used).
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("cluster: free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// ownerMark names the file in a run directory holding the harness's pid, so that
// Cleanup can tell a dead run's mounts from a live one's.
const ownerMark = ".samsa-chaos.pid"

func writeOwnerMark(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, ownerMark), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

// OwnerOf returns the pid of a live harness process other than this one that owns
// the run directory dir, or 0.
func OwnerOf(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, ownerMark))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid == os.Getpid() || !pidAlive(pid) {
		return 0
	}
	return pid
}

func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
