package request

import (
	"net"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// ListenerConns counts a broker's open connections per listener name
// (samsa_listener_connections, Kafka's SocketServer connection-count per listener).
// Safe for concurrent use.
type ListenerConns struct {
	listeners string               // the bound listeners, NAME://host:port,...
	vec       *prometheus.GaugeVec // open connections per listener name
	names     sync.Map             // local address -> prometheus.Gauge child, resolved on first connection
}

// NewListenerConns returns the gauges of the listeners bound as listeners says
// (NAME://host:port, comma-separated, as the node wiring fills Config.Derived
// ["listeners"]), registered with reg (nil: none).
func NewListenerConns(reg prometheus.Registerer, listeners string) *ListenerConns {
	lc := &ListenerConns{listeners: listeners, vec: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "samsa", Name: "listener_connections",
		Help: "Open client connections per broker listener (its name in listeners) [SocketServer connection-count]."}, []string{"listener"})}
	if reg != nil {
		reg.MustRegister(lc.vec)
	}
	return lc
}

// Gauge is the connection gauge of the listener bound at addr, named from the bound
// listeners; a listener it cannot name is labelled by its address (nil: no address).
func (lc *ListenerConns) Gauge(addr net.Addr) prometheus.Gauge {
	if lc == nil || addr == nil {
		return nil
	}
	key := addr.String()
	if g, ok := lc.names.Load(key); ok {
		return g.(prometheus.Gauge)
	}
	name := key
	_, port, _ := net.SplitHostPort(key)
	for _, l := range strings.Split(lc.listeners, ",") {
		n, hp, ok := strings.Cut(strings.TrimSpace(l), "://")
		if !ok {
			continue
		}
		h, p, err := net.SplitHostPort(hp)
		if hp == key || err == nil && p == port && (h == "" || net.ParseIP(h) != nil && net.ParseIP(h).IsUnspecified()) {
			name = n
			break
		}
	}
	g, _ := lc.names.LoadOrStore(key, lc.vec.WithLabelValues(name))
	return g.(prometheus.Gauge)
}
