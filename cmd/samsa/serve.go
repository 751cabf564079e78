package main

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/net/kafka"
	"github.com/samsa-broker/samsa/net/transport"
)

func init() {
	register("serve", "run a broker (one node, Kafka protocol on 127.0.0.1:9092, data in ./data)", runServe)
}

const serveHelp = `usage: samsa serve [flags]

Runs a one-node broker speaking the Kafka protocol.

Configuration, highest precedence first: flags; environment (SAMSA_ + the key
upper-cased with dots as underscores, e.g. SAMSA_LOG_RETENTION_MS=3600000); the
properties file given by --config (Kafka's server.properties key names: log.dirs,
num.partitions, auto.create.topics.enable, log.retention.ms, log.segment.bytes,
message.max.bytes, socket.request.max.bytes, connections.max.idle.ms, node.id,
listeners, advertised.listeners, ...); Kafka's defaults. Unknown keys are warned
about; bad values stop the broker with a message.

Data layout under --data-dir (default ./data):
  meta.properties           cluster id and node id of this data directory
  meta/                     the metadata log (topics, partitions, configs)
  logs/<topic>-<partition>/ partition logs (unless log.dirs names other dirs)

SIGTERM or SIGINT: stop accepting, let in-flight requests finish and their answers
leave, flush, close the logs (writing the clean-shutdown marker).

Flags:
`

func serveUsage(fs *flag.FlagSet) {
	fmt.Fprint(fs.Output(), serveHelp)
	fs.PrintDefaults()
}

func runServe(args []string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg, err := loadConfig(args, os.Environ(), log, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "samsa serve: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	s, err := startServer(cfg, log)
	if err != nil {
		log.Error("start failed", "err", err)
		return 1
	}
	select {
	case <-ctx.Done():
		log.Info("shutting down", "reason", "signal")
	case err := <-s.served:
		log.Error("listener failed", "err", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.shutdown(sctx); err != nil {
		log.Error("shutdown", "err", err)
		return 1
	}
	log.Info("stopped")
	return 0
}

// server is a running broker with its listeners.
type server struct {
	cfg     *serverConfig
	log     *slog.Logger
	eng     *engine.Manager
	meta    *metadata.Store
	broker  *kafka.Broker
	tr      transport.Transport
	ln      net.Listener
	admin   *http.Server
	adminLn net.Listener
	served  chan error // Serve's result, when it ends
}

// startServer opens the data directory and starts serving.
func startServer(cfg *serverConfig, log *slog.Logger) (_ *server, err error) {
	s := &server{cfg: cfg, log: log, served: make(chan error, 1)}
	defer func() {
		if err != nil {
			s.closeStores()
		}
	}()
	log.Info("starting", append([]any{"node_id", cfg.NodeID, "data_dir", cfg.DataDir, "sync", cfg.Sync.String(), "transport", cfg.Transport}, cfg.describe()...)...)
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	clusterID, err := loadMetaProperties(cfg.DataDir, cfg.NodeID)
	if err != nil {
		return nil, err
	}
	if s.meta, err = metadata.OpenStore(cfg.MetaDir, metadata.StoreOptions{Logger: log.With("component", "metadata")}); err != nil {
		return nil, fmt.Errorf("opening metadata store: %w", err)
	}
	if s.eng, err = engine.Open(engine.Options{
		Dirs: cfg.LogDirs, Sync: cfg.Sync, FlushInterval: cfg.FlushInterval,
		RetentionCheckInterval: cfg.RetentionCheckInterval,
		DefaultConfig:          configs.DefaultTopicLogConfig(cfg.set),
		Logger:                 log.With("component", "engine"),
	}); err != nil {
		return nil, fmt.Errorf("opening logs: %w", err)
	}

	if s.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, listenError("kafka listener", cfg.Listen, "--listen or LISTEN=", err)
	}
	host, port := advertised(cfg, s.ln.Addr().(*net.TCPAddr))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerEngineMetrics(reg, s.eng)
	if s.broker, err = kafka.New(kafka.Config{
		NodeID: cfg.NodeID, ClusterID: clusterID, Host: host, Port: port,
		Static: cfg.set, Registerer: reg,
		Derived: map[string]string{
			"log.dirs":             strings.Join(cfg.LogDirs, ","),
			"listeners":            "PLAINTEXT://" + s.ln.Addr().String(),
			"advertised.listeners": "PLAINTEXT://" + net.JoinHostPort(host, strconv.Itoa(int(port))),
		},
	}, s.eng, s.meta, log.With("component", "kafka")); err != nil {
		s.ln.Close()
		return nil, err
	}
	tcfg := transport.Config{MaxRequestBytes: cfg.MaxRequestBytes, IdleTimeout: cfg.IdleTimeout}
	switch cfg.Transport {
	case "std":
		s.tr = transport.NewStd(tcfg, s.broker, log.With("component", "transport"))
	case "reactor":
		// Loops park in Go's poller without holding an OS thread each: locked loops
		// cost two thread switches per wake-up, which lost on one connection here.
		rc := transport.ReactorConfig{Config: tcfg, Workers: int(cfg.getInt("num.io.threads")), UnlockedLoops: true}
		if _, ok := cfg.set["num.network.threads"]; ok {
			rc.Loops = int(cfg.getInt("num.network.threads"))
		}
		if s.tr, err = transport.NewReactor(rc, s.broker, log.With("component", "transport")); err != nil {
			s.ln.Close()
			return nil, err
		}
	default:
		s.ln.Close()
		return nil, fmt.Errorf("%w: transport %q (want std or reactor)", errConfig, cfg.Transport)
	}
	if cfg.AdminListen != "" {
		if s.adminLn, err = net.Listen("tcp", cfg.AdminListen); err != nil {
			s.ln.Close()
			return nil, listenError("admin listener", cfg.AdminListen, "--admin-listen or ADMIN=", err)
		}
		s.admin = &http.Server{Handler: adminMux(reg), ReadHeaderTimeout: 10 * time.Second}
		go s.admin.Serve(s.adminLn)
		log.Info("admin listening", "addr", s.adminLn.Addr().String())
	}
	// High watermarks of logs recovered after a crash catch up once their data is
	// durable, before any client asks.
	s.broker.StartDataPath()
	if _, ok := s.meta.Image().Topic("__consumer_offsets"); ok {
		// Load committed offsets now rather than on the first group request.
		if _, err := s.broker.GroupCoordinator(); err != nil {
			log.Warn("starting the group coordinator", "err", err)
		}
	}
	go func() { s.served <- s.tr.Serve(s.ln) }()
	log.Info("listening", "addr", s.ln.Addr().String(), "advertised", net.JoinHostPort(host, strconv.Itoa(int(port))), "cluster_id", clusterID)
	return s, nil
}

// listenError names the listener, its address and, when the address is taken, the fix:
// "kafka listener 127.0.0.1:9092: address already in use: pass --listen or LISTEN=".
// (LISTEN= and ADMIN= are the overrides of `make run`.)
func listenError(what, addr, fix string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s %s: %w: pass %s", what, addr, syscall.EADDRINUSE, fix)
	}
	return fmt.Errorf("%s %s: %w", what, addr, err)
}

// Addr is the Kafka listener's bound address.
func (s *server) Addr() string { return s.ln.Addr().String() }

// shutdown drains the transport, stops the admin listener and closes the stores.
func (s *server) shutdown(ctx context.Context) error {
	var errs []error
	if err := s.tr.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("draining connections: %w", err))
	}
	if s.admin != nil {
		if err := s.admin.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	// The handlers' background state (long-poll purgatory, group timers) stops before
	// the engine closes.
	s.broker.CloseDataPath()
	s.broker.CloseGroupCoordinator()
	errs = append(errs, s.closeStores())
	return errors.Join(errs...)
}

func (s *server) closeStores() error {
	var errs []error
	if s.meta != nil {
		if err := s.meta.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing metadata: %w", err))
		}
		s.meta = nil
	}
	if s.eng != nil {
		if err := s.eng.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing logs: %w", err))
		}
		s.eng = nil
	}
	return errors.Join(errs...)
}

// advertised picks the host and port clients are told to use.
func advertised(cfg *serverConfig, bound *net.TCPAddr) (string, int32) {
	host, port := cfg.AdvertiseHost, cfg.AdvertisePort
	if host == "" {
		host = bound.IP.String()
		if bound.IP.IsUnspecified() {
			if h, err := os.Hostname(); err == nil && h != "" {
				host = h
			} else {
				host = "127.0.0.1"
			}
		}
	}
	if port == 0 {
		port = int32(bound.Port)
	}
	return host, port
}

func adminMux(reg *prometheus.Registry) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// registerEngineMetrics exports the engine's fdatasync latency summary.
func registerEngineMetrics(reg prometheus.Registerer, eng *engine.Manager) {
	for _, q := range []struct {
		name string
		get  func(engine.FsyncStats) time.Duration
	}{
		{"p50", func(s engine.FsyncStats) time.Duration { return s.P50 }},
		{"p99", func(s engine.FsyncStats) time.Duration { return s.P99 }},
		{"p999", func(s engine.FsyncStats) time.Duration { return s.P999 }},
		{"max", func(s engine.FsyncStats) time.Duration { return s.Max }},
	} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "samsa", Subsystem: "engine", Name: "fsync_latency_seconds",
			Help: "fdatasync latency of the log directories' group commits.", ConstLabels: prometheus.Labels{"quantile": q.name},
		}, func() float64 { return q.get(eng.FsyncLatency()).Seconds() }))
	}
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: "samsa", Subsystem: "engine", Name: "fsyncs_total", Help: "fdatasync calls of group commits.",
	}, func() float64 { return float64(eng.FsyncLatency().Count) }))
}

// loadMetaProperties reads <dataDir>/meta.properties (Kafka's format: version,
// cluster.id, node.id), creating it with a new cluster id on first start. A node.id
// different from the configured one is refused, as Kafka does.
func loadMetaProperties(dataDir string, nodeID int32) (string, error) {
	path := filepath.Join(dataDir, "meta.properties")
	props, err := readProperties(path)
	if errors.Is(err, os.ErrNotExist) {
		id := metadata.NewUUID()
		clusterID := base64.RawURLEncoding.EncodeToString(id[:])
		body := fmt.Sprintf("#\n#%s\nversion=1\ncluster.id=%s\nnode.id=%d\n", time.Now().UTC().Format(time.RFC1123), clusterID, nodeID)
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			return "", err
		}
		if err := syncFile(tmp); err != nil {
			return "", err
		}
		return clusterID, os.Rename(tmp, path)
	}
	if err != nil {
		return "", err
	}
	var clusterID, node string
	for _, kv := range props {
		switch kv[0] {
		case "cluster.id":
			clusterID = kv[1]
		case "node.id":
			node = kv[1]
		}
	}
	if clusterID == "" {
		return "", fmt.Errorf("%w: %s has no cluster.id", errConfig, path)
	}
	if node != "" && node != strconv.Itoa(int(nodeID)) {
		return "", fmt.Errorf("%w: %s belongs to node.id %s, configured node.id is %d", errConfig, path, strings.TrimSpace(node), nodeID)
	}
	return clusterID, nil
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
