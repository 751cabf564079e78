package kafka

import (
	"log/slog"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/samsa-broker/samsa/net/transport"
)

// Config is the broker's identity and the request-level settings handlers consult.
type Config struct {
	NodeID    int32
	ClusterID string
	// Host and Port are advertised in Metadata and DescribeCluster.
	Host string
	Port int32
	Rack *string

	// Registerer receives the broker's metrics; nil keeps them unregistered.
	Registerer prometheus.Registerer
}

// Broker serves the Kafka protocol on a transport: it implements transport.Handler and
// transport.ConnObserver. Serve runs on connection read goroutines, concurrently for
// different connections; everything a Broker holds is safe for that.
type Broker struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics

	apiVersions []apiKeyEntry // the table, as ApiVersions advertises it
	panics      atomic.Int64  // handler panics recovered (bugs)
}

var (
	_ transport.Handler      = (*Broker)(nil)
	_ transport.ConnObserver = (*Broker)(nil)
)

// New returns a Broker. log may be nil.
func New(cfg Config, log *slog.Logger) (*Broker, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &Broker{cfg: cfg, log: log}
	b.metrics = newMetrics(cfg.Registerer)
	b.apiVersions = buildApiVersions()
	return b, nil
}
