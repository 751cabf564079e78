package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/samsa-broker/samsa/net/node"
)

func init() {
	register("serve", "run a node (default: one combined node, Kafka protocol on 127.0.0.1:9092, data in ./data)", runServe)
}

const serveHelp = `usage: samsa serve [flags]

Runs one node speaking the Kafka protocol. Without process.roles it is a combined
single node (broker and the only controller voter) that formats its directories
itself. A node of a cluster is configured with Kafka's KRaft keys and formatted first
with ` + "`samsa storage format`" + `.

Configuration, highest precedence first: flags; environment (SAMSA_ + the key
upper-cased with dots as underscores, e.g. SAMSA_LOG_RETENTION_MS=3600000; a
listener's override listener.name.<l>.<key> as SAMSA_LISTENER_NAME_<L>_<KEY>, e.g.
SAMSA_LISTENER_NAME_SASL_SSL_PLAIN_SASL_JAAS_CONFIG); the properties file given by --config (Kafka's server.properties key names); Kafka's
defaults. Unknown keys are warned about; bad values stop the node with a message.

The cluster's keys (Kafka's KRaft names):
  process.roles                  broker, controller or broker,controller
  node.id                        this node's id
  controller.quorum.voters       id@host:port,... (the voters' controller listeners)
  listeners                      NAME://host:port,..., e.g.
                                 PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
  advertised.listeners           what clients and followers are told
  controller.listener.names      e.g. CONTROLLER
  inter.broker.listener.name     default PLAINTEXT
  listener.security.protocol.map NAME:PROTOCOL,... (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL: docs/SECURITY.md)
  log.dirs, metadata.log.dir     partition logs; the metadata (default <data.dir>/meta)
  broker.heartbeat.interval.ms, broker.session.timeout.ms, broker.rack
  sync                           fsync, replicated, interval, none

Data layout under --data-dir (default ./data):
  logs/meta.properties      cluster id, node id, directory id (Kafka's version 1)
  logs/<topic>-<partition>/ partition logs (unless log.dirs names other dirs)
  meta/meta.properties      the same ids, in the metadata dir
  meta/                     the metadata log (topics, partitions, configs)

SIGTERM or SIGINT: stop accepting, let in-flight requests finish and their answers
leave, flush, close the logs (writing the clean-shutdown marker).

Flags:
`

func serveUsage(fs *flag.FlagSet) {
	fmt.Fprint(fs.Output(), serveHelp)
	fs.PrintDefaults()
}

// serveListenHints name the flag (and `make run` variable) that sets each listener.
var serveListenHints = map[string]string{"PLAINTEXT": "--listen or LISTEN=", "admin": "--admin-listen or ADMIN="}

func runServe(args []string) int {
	level := new(slog.LevelVar) // info until the configuration is read
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg, err := loadConfig(args, os.Environ(), log, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "samsa serve: %v\n", err)
		return 2
	}
	if err := level.UnmarshalText([]byte(cfg.Get("samsa.log.level"))); err != nil {
		fmt.Fprintf(os.Stderr, "samsa serve: samsa.log.level: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log.Info("configuration", cfg.describe()...)
	log.Info("runtime", "go", runtime.Version(), "gomaxprocs", runtime.GOMAXPROCS(0), "sysmon", sysmonMode(linkedGODEBUG, os.Getenv("GODEBUG")))
	if cfg.formatClusterID != "" {
		if err := formatBeforeServe(cfg, log); err != nil {
			log.Error("start failed: formatting the node's directories", "cluster_id", cfg.formatClusterID, "err", err)
			return 1
		}
	}
	n, err := startNode(cfg, log)
	if err != nil {
		log.Error("start failed", "err", err)
		return 1
	}
	select {
	case <-ctx.Done():
		log.Info("shutting down", "reason", "signal")
	case err := <-n.Failed():
		log.Error("listener failed", "err", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Shutdown(sctx); err != nil {
		log.Error("shutdown", "err", err)
		return 1
	}
	log.Info("stopped")
	return 0
}

// formatBeforeServe formats the node's unformatted directories with the cluster id of
// --cluster-id (or CLUSTER_ID) and the latest release's feature levels, as `samsa
// storage format --ignore-formatted` would: a container or a unit starts a new node
// without a separate format step. A directory formatted for another cluster or node
// stops the start.
func formatBeforeServe(cfg *serverConfig, log *slog.Logger) error {
	o := node.FormatOptions{IgnoreFormatted: true}
	var err error
	if o.Features, err = node.BootstrapFeatures(cfg.Config, "", nil); err != nil {
		return err
	}
	res, err := node.FormatWith(cfg.Config, cfg.formatClusterID, o)
	if err != nil {
		return err
	}
	for _, r := range res {
		if !r.Skipped {
			log.Info("formatted", "dir", r.Dir, "cluster_id", cfg.formatClusterID)
		}
	}
	return nil
}

// startNode starts the node of cfg.
func startNode(cfg *serverConfig, log *slog.Logger) (*node.Node, error) {
	hints := map[string]string{}
	for k, v := range serveListenHints {
		hints[k] = v
	}
	if l, ok := cfg.ClientListener(); ok && l.Name != "PLAINTEXT" {
		hints[l.Name] = hints["PLAINTEXT"]
	}
	return node.Start(cfg.Config, node.Options{Logger: log, ListenHint: hints})
}
