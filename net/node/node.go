package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/engine/vfs"
	"github.com/samsa-broker/samsa/net/kafka"
	"github.com/samsa-broker/samsa/net/transport"
)

// ErrNotSupported: the configuration asks for a part of the cluster this build does
// not wire yet (see the package doc, "What is wired").
var ErrNotSupported = errors.New("node: not supported by this build")

// Options are what Start needs besides the configuration.
type Options struct {
	// Logger receives the node's events (nil: discard).
	Logger *slog.Logger
	// ListenHint names, per listener, the flag or variable that sets its address,
	// for the error when the address is taken ("--listen or LISTEN="). Keys are
	// listener names and "admin".
	ListenHint map[string]string
}

// Node is one running node: its storage, its listeners, the components of its roles.
// Start returns it serving; Shutdown stops it. Its methods are safe for concurrent use.
type Node struct {
	cfg       *Config
	log       *slog.Logger
	clusterID string
	hints     map[string]string

	fs     *vfs.CrashFS // samsa.test.power.loss.journal; nil otherwise
	eng    *engine.Manager
	meta   *metadata.Store
	reg    *prometheus.Registry
	broker *kafka.Broker
	tr     transport.Transport

	lns       map[string]net.Listener // bound listeners by name
	admin     *http.Server
	adminLn   net.Listener
	failed    chan error // the first listener or component that failed
	failOnce  sync.Once
	closeOnce sync.Once
	closeErr  error
}

// Start brings a node up from its configuration, in this order (each step undone if a
// later one fails):
//
//  1. storage: meta.properties of every directory checked (formatting a sole combined
//     voter, adopting an earlier single-node directory); the power-loss journal;
//  2. the engine (log.dirs) and the metadata (the single-node metadata store);
//  3. the broker listeners bound (so an address in use fails before anything serves),
//     the Kafka broker and its transport;
//  4. the admin HTTP listener (/metrics, /debug/pprof/);
//  5. the data path started (high watermarks of recovered logs), the group coordinator
//     loaded when __consumer_offsets exists, then the listeners accept.
func Start(cfg *Config, opts Options) (_ *Node, err error) {
	n := &Node{cfg: cfg, log: opts.Logger, hints: opts.ListenHint, lns: map[string]net.Listener{}, failed: make(chan error, 1)}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	defer func() {
		if err != nil {
			n.closeAll()
		}
	}()
	n.log.Info("starting", "node_id", cfg.NodeID, "roles", cfg.Roles.String(), "voters", voterList(cfg.Voters),
		"log_dirs", strings.Join(cfg.LogDirs, ","), "metadata_dir", cfg.MetadataDir, "sync", cfg.Sync.Name, "transport", cfg.Transport)
	for _, d := range cfg.Dirs() {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrStorage, err)
		}
	}
	if n.clusterID, err = checkStorage(cfg, n.log); err != nil {
		return nil, err
	}
	if err := checkSupported(cfg); err != nil {
		return nil, err
	}
	if err := n.openStorage(); err != nil {
		return nil, err
	}
	if err := n.startBroker(); err != nil {
		return nil, err
	}
	if err := n.startAdmin(); err != nil {
		return nil, err
	}
	n.serve()
	return n, nil
}

// Feature is a kind of node or cluster a configuration asks for.
type Feature string

// The features beyond one combined node.
const (
	// FeatureQuorum: a controller quorum of several voters (process.roles with
	// controller, controller.quorum.voters naming more than this node).
	FeatureQuorum Feature = "quorum"
	// FeatureControllerOnly: process.roles=controller.
	FeatureControllerOnly Feature = "controller-only"
	// FeatureBrokerOnly: process.roles=broker, following the quorum over the network.
	FeatureBrokerOnly Feature = "broker-only"
	// FeatureReplication: partitions with replicas on several brokers (followers
	// fetching from leaders, the ISR, acks=all across brokers).
	FeatureReplication Feature = "replication"
)

// unwired names, per feature, the parts this build does not wire yet. A feature
// without an entry runs.
var unwired = map[Feature]string{
	FeatureQuorum:         "the raft quorum (coordinator/controller/quorum), the Controller (coordinator/controller) and the controller listener's handler (net/kafka)",
	FeatureControllerOnly: "the raft quorum (coordinator/controller/quorum), the Controller (coordinator/controller) and the controller listener's handler (net/kafka)",
	FeatureBrokerOnly:     "the BrokerLifecycle and MetadataFollower (coordinator/controller) and the broker's routing on a published image (net/kafka)",
	FeatureReplication:    "the replica manager (replication) wired into the broker (net/kafka) and the controller",
}

// Missing returns, for the features given, what this build does not wire yet (empty
// when all of them run). Tests skip with it.
func Missing(fs ...Feature) []string {
	var out []string
	for _, f := range fs {
		if why, ok := unwired[f]; ok && !slices.Contains(out, why) {
			out = append(out, why)
		}
	}
	return out
}

// Features are the features cfg asks for.
func (c *Config) Features() []Feature {
	var out []Feature
	switch {
	case !c.Roles.Broker:
		out = append(out, FeatureControllerOnly)
	case !c.Roles.Controller:
		out = append(out, FeatureBrokerOnly)
	}
	if !c.SoleVoter() {
		out = append(out, FeatureQuorum)
	}
	return out
}

// checkSupported refuses what this build cannot run yet, with the reason.
func checkSupported(cfg *Config) error {
	for _, f := range cfg.Features() {
		if why, ok := unwired[f]; ok {
			what := map[Feature]string{
				FeatureQuorum:         fmt.Sprintf("controller.quorum.voters names %d voters (%s): a quorum of several voters", len(cfg.Voters), voterList(cfg.Voters)),
				FeatureControllerOnly: "process.roles=controller (a controller-only node)",
				FeatureBrokerOnly:     "process.roles=broker (a broker-only node)",
			}[f]
			return fmt.Errorf("%w: %s needs %s; this build runs one combined node (a quorum of one)", ErrNotSupported, what, why)
		}
	}
	return nil
}

func voterList(vs []Voter) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		if v.Port == 0 {
			parts[i] = strconv.Itoa(int(v.ID))
			continue
		}
		parts[i] = strconv.Itoa(int(v.ID)) + "@" + v.Addr()
	}
	return strings.Join(parts, ",")
}

// openStorage opens the power-loss journal (tests), the engine and the metadata.
func (n *Node) openStorage() error {
	cfg := n.cfg
	var fsys vfs.FS
	if cfg.PowerLossJournal != "" {
		cfs, err := vfs.OpenJournal(vfs.Default, cfg.PowerLossJournal)
		if err != nil {
			return fmt.Errorf("samsa.test.power.loss.journal: %w", err)
		}
		if st := cfs.LastCut(); st != (vfs.CutStats{}) {
			n.log.Warn("power-loss journal: cut the files back to what was synced", "journal", cfg.PowerLossJournal, "cut", fmt.Sprintf("%+v", st))
		}
		n.fs, fsys = cfs, cfs
	}
	var err error
	if n.meta, err = metadata.OpenStore(cfg.MetadataDir, metadata.StoreOptions{Logger: n.log.With("component", "metadata")}); err != nil {
		return fmt.Errorf("opening metadata store: %w", err)
	}
	if n.eng, err = engine.Open(engine.Options{
		Dirs: cfg.LogDirs, Sync: cfg.Sync.Engine, FlushInterval: cfg.FlushInterval,
		RetentionCheckInterval: cfg.RetentionCheckInterval,
		DefaultConfig:          configs.DefaultTopicLogConfig(cfg.Keys),
		Logger:                 n.log.With("component", "engine"),
		FS:                     fsys,
	}); err != nil {
		return fmt.Errorf("opening logs: %w", err)
	}
	return nil
}

// listen binds one listener, naming the fix when the address is taken.
func (n *Node) listen(what, hintKey, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		fix := n.hints[hintKey]
		if fix == "" {
			fix = "another port in listeners"
			if hintKey == "admin" {
				fix = "another admin.listen"
			}
		}
		return nil, fmt.Errorf("%s %s: %w: pass %s", what, addr, syscall.EADDRINUSE, fix)
	}
	return nil, fmt.Errorf("%s %s: %w", what, addr, err)
}

// advertisedAddr is what clients are told for listener l bound at bound.
func (n *Node) advertisedAddr(l Listener, bound *net.TCPAddr) (string, int32) {
	if a, ok := n.cfg.Advertised[l.Name]; ok {
		return a.Host, int32(a.Port)
	}
	host := bound.IP.String()
	if bound.IP.IsUnspecified() {
		if h, err := os.Hostname(); err == nil && h != "" {
			host = h
		} else {
			host = "127.0.0.1"
		}
	}
	return host, int32(bound.Port)
}

// startBroker binds the broker listeners and builds the Kafka broker and transport.
func (n *Node) startBroker() error {
	cfg := n.cfg
	brokerLns := cfg.BrokerListeners()
	for _, l := range brokerLns {
		what := "kafka listener"
		if len(brokerLns) > 1 {
			what = "kafka listener " + l.Name
		}
		ln, err := n.listen(what, l.Name, l.Addr())
		if err != nil {
			return err
		}
		n.lns[l.Name] = ln
	}
	if len(brokerLns) > 1 {
		n.log.Warn("several broker listeners: Metadata advertises the inter-broker listener's address on all of them", "listeners", listenerNames(brokerLns), "advertised", cfg.InterBrokerListener)
	}
	client, _ := cfg.ClientListener()
	host, port := n.advertisedAddr(client, n.lns[client.Name].Addr().(*net.TCPAddr))

	n.reg = prometheus.NewRegistry()
	n.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerEngineMetrics(n.reg, n.eng)
	var bound, adv []string
	for _, l := range brokerLns {
		bound = append(bound, l.Name+"://"+n.lns[l.Name].Addr().String())
		h, p := n.advertisedAddr(l, n.lns[l.Name].Addr().(*net.TCPAddr))
		adv = append(adv, l.Name+"://"+net.JoinHostPort(h, strconv.Itoa(int(p))))
	}
	var err error
	if n.broker, err = kafka.New(kafka.Config{
		NodeID: cfg.NodeID, ClusterID: n.clusterID, Host: host, Port: port, Rack: cfg.Rack,
		Static: cfg.Keys, Registerer: n.reg,
		Derived: map[string]string{
			"log.dirs":                 strings.Join(cfg.LogDirs, ","),
			"metadata.log.dir":         cfg.MetadataDir,
			"listeners":                strings.Join(bound, ","),
			"advertised.listeners":     strings.Join(adv, ","),
			"process.roles":            cfg.Roles.String(),
			"controller.quorum.voters": voterList(cfg.Voters),
		},
	}, n.eng, n.meta, n.log.With("component", "kafka")); err != nil {
		return err
	}
	tcfg := transport.Config{MaxRequestBytes: cfg.MaxRequestBytes, IdleTimeout: cfg.IdleTimeout}
	switch cfg.Transport {
	case "std":
		n.tr = transport.NewStd(tcfg, n.broker, n.log.With("component", "transport"))
	case "reactor":
		// Loops park in Go's poller without holding an OS thread each: locked loops
		// cost two thread switches per wake-up, which lost on one connection here.
		rc := transport.ReactorConfig{Config: tcfg, Workers: cfg.IOThreads, UnlockedLoops: true, Loops: cfg.NetLoops}
		if n.tr, err = transport.NewReactor(rc, n.broker, n.log.With("component", "transport")); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: transport %q (want std or reactor)", ErrConfig, cfg.Transport)
	}
	return nil
}

// startAdmin binds the admin HTTP listener, if configured.
func (n *Node) startAdmin() error {
	if n.cfg.AdminListen == "" {
		return nil
	}
	ln, err := n.listen("admin listener", "admin", n.cfg.AdminListen)
	if err != nil {
		return err
	}
	n.adminLn = ln
	n.admin = &http.Server{Handler: adminMux(n.reg), ReadHeaderTimeout: 10 * time.Second}
	go n.admin.Serve(ln)
	n.log.Info("admin listening", "addr", ln.Addr().String())
	return nil
}

// serve starts the data path and the listeners' accept loops.
func (n *Node) serve() {
	// High watermarks of logs recovered after a crash catch up once their data is
	// durable, before any client asks.
	n.broker.StartDataPath()
	if _, ok := n.meta.Image().Topic("__consumer_offsets"); ok {
		// Load committed offsets now rather than on the first group request.
		if _, err := n.broker.GroupCoordinator(); err != nil {
			n.log.Warn("starting the group coordinator", "err", err)
		}
	}
	for name, ln := range n.lns {
		go func() {
			if err := n.tr.Serve(ln); err != nil && !errors.Is(err, transport.ErrClosed) {
				n.fail(fmt.Errorf("listener %s: %w", name, err))
			}
		}()
	}
	client, _ := n.cfg.ClientListener()
	host, port := n.advertisedAddr(client, n.lns[client.Name].Addr().(*net.TCPAddr))
	n.log.Info("listening", "addr", n.lns[client.Name].Addr().String(), "advertised", net.JoinHostPort(host, strconv.Itoa(int(port))), "cluster_id", n.clusterID)
}

func (n *Node) fail(err error) {
	n.failOnce.Do(func() { n.failed <- err })
}

// Failed delivers the first error of a listener or component that stopped on its own
// (the node should then be shut down).
func (n *Node) Failed() <-chan error { return n.failed }

// ClusterID is the cluster id of the node's directories.
func (n *Node) ClusterID() string { return n.clusterID }

// NodeID is the node's id.
func (n *Node) NodeID() int32 { return n.cfg.NodeID }

// Config is the node's configuration.
func (n *Node) Config() *Config { return n.cfg }

// Addr is the bound address of the client listener (the inter-broker listener).
func (n *Node) Addr() string {
	l, _ := n.cfg.ClientListener()
	return n.ListenerAddr(l.Name)
}

// ListenerAddr is the bound address of the listener named name ("" if not bound).
func (n *Node) ListenerAddr(name string) string {
	if ln, ok := n.lns[name]; ok {
		return ln.Addr().String()
	}
	return ""
}

// AdminAddr is the bound address of the admin HTTP listener ("" if off).
func (n *Node) AdminAddr() string {
	if n.adminLn == nil {
		return ""
	}
	return n.adminLn.Addr().String()
}

// Shutdown stops the node, in this order: the transport drains (stops accepting,
// answers what it read, closes connections), the admin listener stops, the handlers'
// background state (long-poll purgatory, group timers) stops, then the metadata and
// the logs close (writing the clean-shutdown marker). When ctx ends first the
// remaining connections are closed at once. Calling it again returns the first
// result.
func (n *Node) Shutdown(ctx context.Context) error {
	n.closeOnce.Do(func() {
		var errs []error
		if n.tr != nil {
			if err := n.tr.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("draining connections: %w", err))
			}
		}
		if n.admin != nil {
			if err := n.admin.Shutdown(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		if n.broker != nil {
			n.broker.CloseDataPath()
			n.broker.CloseGroupCoordinator()
		}
		errs = append(errs, n.closeStores())
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

// closeAll undoes a partial Start.
func (n *Node) closeAll() {
	for _, ln := range n.lns {
		ln.Close()
	}
	if n.admin != nil {
		n.admin.Close()
	}
	if n.tr != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		n.tr.Shutdown(ctx)
		cancel()
	}
	if n.broker != nil {
		n.broker.CloseDataPath()
		n.broker.CloseGroupCoordinator()
	}
	n.closeStores()
}

func (n *Node) closeStores() error {
	var errs []error
	if n.meta != nil {
		if err := n.meta.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing metadata: %w", err))
		}
		n.meta = nil
	}
	if n.eng != nil {
		if err := n.eng.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing logs: %w", err))
		}
		n.eng = nil
	}
	if n.fs != nil {
		if err := n.fs.CloseJournal(); err != nil {
			errs = append(errs, fmt.Errorf("closing the power-loss journal: %w", err))
		}
		n.fs = nil
	}
	return errors.Join(errs...)
}
