package node

import (
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/samsa-broker/samsa/engine"
)

// adminMux serves /metrics and /debug/pprof/.
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
