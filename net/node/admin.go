package node

import (
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/samsa-broker/samsa/engine"
)

// adminMux serves /metrics, /debug/pprof/, and n's probes /live and /ready (health.go).
func adminMux(reg *prometheus.Registry, n *Node) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /live", n.handleLive)
	mux.HandleFunc("GET /ready", n.handleReady)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// registerEngineMetrics exports the engine's state (metrics_engine.go): per-partition
// log size and offsets, the fdatasync latency histogram, storage failures, recovery.
func registerEngineMetrics(reg prometheus.Registerer, eng *engine.Manager) {
	reg.MustRegister(newEngineCollector(eng))
}
