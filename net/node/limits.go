package node

import (
	"log/slog"
	"math"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/samsa-broker/samsa/net/transport"
)

// Connection limits (Kafka's ConnectionQuotas keys), applied by every broker
// listener's transport at accept through one shared transport.Limiter:
//
//	max.connections                                  all broker listeners but the inter-broker one
//	max.connections.per.ip, max.connections.per.ip.overrides (host:count,...)
//	max.connection.creation.rate                     accepted connections per second, all listeners
//	listener.name.<l>.max.connections                one listener
//	listener.name.<l>.max.connection.creation.rate   one listener
//
// Kafka's default for each is 2147483647: no limit in effect. The controller
// listener is not limited (brokers and voters only reach it).

// unlimited is Kafka's default of the connection limit keys.
const unlimited = math.MaxInt32

func limitOf(v int64) int {
	if v >= unlimited || v < 0 {
		return 0
	}
	if v == 0 {
		return transport.NoConnections // Kafka's 0 allows nothing; the Limiter's 0 is no limit
	}
	return int(v)
}

// deriveConnLimits reads the connection limit keys into c.ConnLimits.
func (c *Config) deriveConnLimits() error {
	l := transport.ConnLimits{Listeners: map[string]transport.ListenerLimits{}}
	l.MaxConns = limitOf(c.getInt("max.connections"))
	l.MaxConnsPerIP = limitOf(c.getInt("max.connections.per.ip"))
	if r := c.getInt("max.connection.creation.rate"); r > 0 && r < unlimited {
		l.MaxCreationRate = float64(r)
	}
	if s := c.Get("max.connections.per.ip.overrides"); s != "" {
		over, err := transport.ParseIPOverrides(s, nil)
		if err != nil {
			return errorf("%v", err)
		}
		l.PerIPOverrides = over
	}
	for _, ln := range c.BrokerListeners() {
		ll := transport.ListenerLimits{Protected: ln.Name == c.InterBrokerListener}
		prefix := "listener.name." + strings.ToLower(ln.Name) + "."
		for key, v := range c.Keys {
			k, ok := strings.CutPrefix(strings.ToLower(key), prefix)
			if !ok {
				continue
			}
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			switch k {
			case "max.connections":
				if err != nil || n < 0 {
					return errorf("%s=%q: want a non-negative integer", key, v)
				}
				ll.MaxConns = limitOf(n)
			case "max.connection.creation.rate":
				if err != nil || n < 0 {
					return errorf("%s=%q: want a non-negative integer", key, v)
				}
				if n < unlimited {
					ll.MaxCreationRate = float64(n)
				}
			}
		}
		l.Listeners[ln.Name] = ll
	}
	c.ConnLimits = l
	return nil
}

// newConnLimiter builds the broker listeners' Limiter over cfg's limits, counting
// refusals in samsa_connections_refused_total{listener, reason} (reason: the limit's
// key, or max.connection.creation.rate for a connection the accept loop held back).
// ipRate is the connection_creation_rate client quota of an address (nil: none).
func newConnLimiter(cfg *Config, reg prometheus.Registerer, ipRate func(ip string) (float64, bool), log *slog.Logger) *transport.Limiter {
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "samsa", Name: "connections_refused_total",
		Help: "Connections closed at accept by a connection limit, or held back by a creation rate, per listener and limit [ConnectionQuotas; socket-server-metrics connection-accept-throttle-time]."},
		[]string{"listener", "reason"})
	if reg != nil {
		reg.MustRegister(refused)
	}
	lim := cfg.ConnLimits
	lim.IPCreationRate = ipRate
	return transport.NewLimiter(lim, func(listener, reason string) { refused.WithLabelValues(listener, reason).Inc() }, log)
}
