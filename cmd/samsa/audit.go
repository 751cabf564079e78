package main

// samsa audit: a correctness auditor for a running Kafka-compatible cluster (Samsa,
// Kafka, kfake), over the wire only (tools/audit).
//
//	samsa audit --bootstrap-server B [--duration D] [--metrics-listen host:port]
//	      [--command-config F] [--topic T] [--rate N] [--report-interval D]
//	      [--partitions N] [--horizon D] [--drain D]
//
// It writes a low-rate canary stream to its topic with an idempotent and a
// transactional producer, reads it back in a consumer group and with a
// read_committed consumer, and reports lost, duplicated, reordered, aborted-read and
// phantom records and records not read within the horizon (unseen), with end-to-end
// latency and each partition's longest time without an acknowledgement. It runs for
// --duration or until SIGINT/SIGTERM (a second signal cuts the final drain short).
// Exit status: 0 no anomaly, 1 anomalies, 2 a usage error or an audit that could not
// start (no cluster, no topic, a bad --command-config or --metrics-listen).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-broker/samsa/tools/audit"
)

func init() {
	register("audit", "audit a running cluster with canary records; exit 1 on anomalies", runAudit)
}

const auditUsage = `usage: samsa audit [flags]
  --bootstrap-server host:port,...  the cluster (default 127.0.0.1:9092)
  --command-config FILE   Kafka client properties: security.protocol, sasl.*, ssl.*
  --topic T               the canary topic (default samsa-audit-canary), created when
                          missing: --partitions (default 3), replication factor
                          min(3, brokers); names starting with "__" are internal
  --rate N                records per second per partition of each producer (default 2)
  --duration D            how long to produce (default 0: until SIGINT or SIGTERM)
  --report-interval D     a verdict line every D while running (default 1m; 0: none)
  --horizon D             how long a reader has to return an acknowledged record
                          before it is judged lost or unseen (default 1m)
  --drain D               at the end, how long to wait for the readers (default 30s)
  --metrics-listen host:port   serve Prometheus metrics (samsa_audit_*) at /metrics

An idempotent and a transactional producer (4 transactions in 5 committed) write
canary records; a consumer group (read_uncommitted) and a read_committed consumer read
them back. The checks: lost, duplicated, reordered, aborted-read, phantom, unseen; with
end-to-end latency and each partition's longest time without an acknowledgement.
Exit status: 0 no anomaly, 1 anomalies, 2 usage or the audit could not start.`

func runAudit(args []string) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	abort := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		<-sigs
		cancel() // stop producing, drain, judge
		<-sigs
		close(abort) // and now
	}()
	return auditMain(ctx, args, os.Stdout, os.Stderr, abort)
}

// auditMain runs `samsa audit` with its verdict on out and its errors and warnings on
// errOut; ctx ending stops production, abort closing cuts the drain short.
func auditMain(ctx context.Context, args []string, out, errOut io.Writer, abort <-chan struct{}) int {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		bootstrap, config, topic, metricsAddr string
		rate                                  float64
		partitions                            int
		duration, interval, horizon, drain    time.Duration
	)
	fs.StringVar(&bootstrap, "bootstrap-server", "127.0.0.1:9092", "brokers to connect to (host:port,...)")
	fs.StringVar(&config, "command-config", "", "Kafka client properties (clientconfig.go)")
	fs.StringVar(&topic, "topic", audit.DefaultTopic, "the canary topic")
	fs.IntVar(&partitions, "partitions", 3, "partitions of the canary topic when it is created")
	fs.Float64Var(&rate, "rate", 2, "records per second per partition of each producer")
	fs.DurationVar(&duration, "duration", 0, "how long to produce (0: until SIGINT or SIGTERM)")
	fs.DurationVar(&interval, "report-interval", time.Minute, "a verdict line every interval (0: only at the end)")
	fs.DurationVar(&horizon, "horizon", audit.DefaultHorizon, "how long a reader has to return an acknowledged record")
	fs.DurationVar(&drain, "drain", 30*time.Second, "how long to wait for the readers at the end")
	fs.StringVar(&metricsAddr, "metrics-listen", "", "host:port to serve Prometheus metrics on (/metrics)")
	usage := func(err error) int {
		fmt.Fprintf(errOut, "samsa audit: %v\n%s\n", err, auditUsage)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(out, auditUsage)
			return 0
		}
		return usage(err)
	}
	switch {
	case fs.NArg() > 0:
		return usage(fmt.Errorf("unexpected arguments %q", fs.Args()))
	case topic == "" || strings.HasPrefix(topic, "__"):
		return usage(fmt.Errorf("--topic %q: a topic name, not one of the internal \"__\" ones", topic))
	case !(rate > 0) || rate > 10000:
		return usage(fmt.Errorf("--rate %g: records per second per partition, above 0 and at most 10000", rate))
	case partitions < 1:
		return usage(fmt.Errorf("--partitions %d: at least 1", partitions))
	case duration < 0 || interval < 0 || drain < 0:
		return usage(errors.New("--duration, --report-interval and --drain cannot be negative"))
	case horizon <= 0:
		return usage(fmt.Errorf("--horizon %s: above 0", horizon))
	}
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(bootstrap, ",")...)}
	if config != "" {
		more, err := loadClientConfig(config, errOut)
		if err != nil {
			fmt.Fprintf(errOut, "samsa audit: %v\n", err)
			return 2
		}
		opts = append(opts, more...)
	}
	reg := prometheus.NewRegistry()
	if metricsAddr != "" {
		ln, err := net.Listen("tcp", metricsAddr)
		if err != nil {
			fmt.Fprintf(errOut, "samsa audit: --metrics-listen: %v\n", err)
			return 2
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }() // until Close
		defer srv.Close()
		fmt.Fprintf(out, "audit: metrics on http://%s/metrics\n", ln.Addr())
	}
	rep, err := audit.Run(ctx, audit.Config{
		Client: opts, Topic: topic, Partitions: int32(partitions), Rate: rate,
		Duration: duration, ReportInterval: interval, Horizon: horizon, Drain: drain,
		Out: out, Log: slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Registerer: reg, Abort: abort,
	})
	if err != nil {
		fmt.Fprintf(errOut, "samsa %v\n", err) // "samsa audit: cannot start: ..."
		return 2
	}
	if !rep.Valid() {
		return 1
	}
	return 0
}
