package node

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/samsa-broker/samsa/coordinator/acl"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/auth"
	"github.com/samsa-broker/samsa/net/kafka"
	"github.com/samsa-broker/samsa/net/peer"
	"github.com/samsa-broker/samsa/net/transport"
)

// TLS and SASL between nodes, from Kafka's keys:
//
//	the path                    listener                    SASL mechanism key
//	broker → broker (replica    inter.broker.listener.name  sasl.mechanism.inter.broker.protocol
//	fetch, transaction markers)
//	node → voter (raft,         controller.listener.names'  sasl.mechanism.controller.protocol
//	registration, heartbeats,   first
//	metadata, forwarding)
//
// Each path's protocol is its listener's in listener.security.protocol.map. With SSL
// or SASL_SSL the node dials with TLS from the listener's [listener.name.<l>.]ssl.*
// keys (transport.SSLConfigFromProps: the trust store verifies the peer, the key
// store, if any, is the client certificate for ssl.client.auth; the peer's name is
// checked unless ssl.endpoint.identification.algorithm is empty). With SASL_* it
// authenticates with the mechanism key's value (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512;
// default PLAIN) and the username and password of
// listener.name.<l>.<mechanism>.sasl.jaas.config (else sasl.jaas.config), and
// re-authenticates before the session lifetime the peer answers (KIP-368; net/peer's
// Security). A controller serves its CONTROLLER listener with the same listener
// security as a broker listener: TLS from the listener's ssl.* keys, SASL with its
// sasl.enabled.mechanisms, PLAIN users from its plain.sasl.jaas.config's user_
// options (else SCRAM credentials of the controller's committed image).
//
// Refused at start-up, each with the fix: a SASL path without a username and password
// for its mechanism; a mechanism the node's own listener does not enable (the other
// nodes, configured alike, would refuse it).

// internode is a node's security of the paths between nodes: what net/peer dials
// with, and the controller listener's server side.
type internode struct {
	voter, broker peer.Security
	ctl           *listenerSecurity // the controller listener; nil: PLAINTEXT or none
	tlss          []*transport.TLS  // the client sides' stores, watched
}

// listenerProtocol is the security protocol of listener name: its listener's, else
// listener.security.protocol.map's (a broker-only node's controller listener).
func listenerProtocol(cfg *Config, name string) (auth.SecurityProtocol, error) {
	proto := name
	if l, ok := cfg.Listener(name); ok {
		proto = l.Protocol
	} else {
		pm, err := protocolMap(cfg.Get("listener.security.protocol.map"))
		if err != nil {
			return 0, err
		}
		if p, ok := pm[name]; ok {
			proto = p
		}
	}
	p, ok := auth.ParseSecurityProtocol(proto)
	if !ok {
		return 0, fmt.Errorf("%w: listener %s has no security protocol: add %s:PLAINTEXT (or SSL, SASL_PLAINTEXT, SASL_SSL) to listener.security.protocol.map", ErrConfig, name, name)
	}
	return p, nil
}

// newInternode reads the security of the paths this node dials and of its controller
// listener; errors are start-up errors (ErrConfig).
func newInternode(cfg *Config, log *slog.Logger) (_ *internode, err error) {
	in := &internode{}
	defer func() {
		if err != nil {
			in.close()
		}
	}()
	ctlName := firstOr(cfg.ControllerListenerNames)
	if l, ok := cfg.ControllerListener(); ok {
		if ls, err := readListenerSecurity(cfg, l, log); err != nil {
			return nil, err
		} else if ls.proto != auth.Plaintext {
			in.ctl = ls
			if ls.tls != nil {
				if _, err := ls.tls.ServerConfig(); err != nil {
					return nil, fmt.Errorf("%w: controller listener %s: %v (set listener.name.%s.ssl.keystore.location or ssl.keystore.location)", ErrConfig, l.Name, err, strings.ToLower(l.Name))
				}
				ls.tls.Watch()
			}
			if err := mechanismEnabled(cfg, ls, "sasl.mechanism.controller.protocol"); err != nil {
				return nil, err
			}
		}
	}
	if ctlName != "" && !cfg.SoleVoter() {
		if in.voter, err = in.dialSecurity(cfg, ctlName, "sasl.mechanism.controller.protocol", log); err != nil {
			return nil, err
		}
	}
	if cfg.Roles.Broker {
		brokerSec := func() (peer.Security, error) {
			if l, ok := cfg.Listener(cfg.InterBrokerListener); ok {
				ls, err := readListenerSecurity(cfg, l, log)
				if err != nil {
					return peer.Security{}, err
				}
				if err := mechanismEnabled(cfg, ls, "sasl.mechanism.inter.broker.protocol"); err != nil {
					return peer.Security{}, err
				}
			}
			return in.dialSecurity(cfg, cfg.InterBrokerListener, "sasl.mechanism.inter.broker.protocol", log)
		}
		switch in.broker, err = brokerSec(); {
		case err != nil && cfg.SoleVoter():
			// A sole voter dials other brokers only if broker-only nodes join it:
			// its own listener's configuration is no reason to refuse to start.
			log.Info("no security to dial other brokers with; there are none until broker-only nodes join this sole voter", "err", err)
			in.broker, err = peer.Security{}, nil
		case err != nil:
			return nil, err
		}
	}
	return in, nil
}

// mechanismEnabled checks that a SASL listener enables the mechanism this node dials
// it with (key).
func mechanismEnabled(cfg *Config, ls *listenerSecurity, key string) error {
	if !ls.proto.SASL() {
		return nil
	}
	mech := strings.ToUpper(strings.TrimSpace(cfg.Get(key)))
	if !slices.Contains(ls.sasl, mech) {
		return fmt.Errorf("%w: %s=%s is not among listener %s's sasl.enabled.mechanisms (%s): add it to listener.name.%s.sasl.enabled.mechanisms (or sasl.enabled.mechanisms), or set %s to one of them",
			ErrConfig, key, mech, ls.l.Name, strings.Join(ls.sasl, ","), strings.ToLower(ls.l.Name), key)
	}
	return nil
}

// dialSecurity is how this node dials listener name: TLS and SASL per its protocol.
func (in *internode) dialSecurity(cfg *Config, name, mechKey string, log *slog.Logger) (peer.Security, error) {
	var sec peer.Security
	p, err := listenerProtocol(cfg, name)
	if err != nil {
		return sec, err
	}
	get := lookup(cfg, name)
	if p.TLS() {
		sc, err := transport.SSLConfigFromProps(get)
		if err != nil {
			return sec, fmt.Errorf("%w: listener %s (client side): %v", ErrConfig, name, err)
		}
		t, err := transport.NewTLS(sc, log.With("listener", name, "side", "client"))
		if err != nil {
			return sec, fmt.Errorf("%w: listener %s (client side): %v", ErrConfig, name, err)
		}
		if _, err := t.ClientConfig("localhost"); err != nil {
			t.Close()
			return sec, fmt.Errorf("%w: listener %s (client side): %v", ErrConfig, name, err)
		}
		t.Watch()
		in.tlss = append(in.tlss, t)
		sec.TLS = t.ClientConfig
	}
	if p.SASL() {
		if sec.SASL, err = clientMechanism(cfg, name, mechKey); err != nil {
			return sec, err
		}
	}
	return sec, nil
}

// clientMechanism is the SASL mechanism (mechKey's value) and credentials this node
// authenticates with on listener name.
func clientMechanism(cfg *Config, name, mechKey string) (sasl.Mechanism, error) {
	mech := strings.ToUpper(strings.TrimSpace(cfg.Get(mechKey)))
	jaasKey := "listener.name." + strings.ToLower(name) + "." + strings.ToLower(mech) + ".sasl.jaas.config"
	text, ok := cfg.Keys[jaasKey]
	if !ok {
		if text, ok = cfg.Keys["sasl.jaas.config"]; ok {
			jaasKey = "sasl.jaas.config"
		}
	}
	if !ok {
		return nil, fmt.Errorf("%w: listener %s is SASL and this node authenticates on it with %s=%s: set %s to a %s entry with username=\"...\" password=\"...\"",
			ErrConfig, name, mechKey, mech, jaasKey, loginModule(mech))
	}
	j, err := auth.ParseJAAS(text)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrConfig, jaasKey, err)
	}
	user, pass := j.Options["username"], j.Options["password"]
	if user == "" || pass == "" {
		return nil, fmt.Errorf("%w: %s has no username and password options: they are what this node authenticates with on listener %s (%s)",
			ErrConfig, jaasKey, name, mech)
	}
	switch mech {
	case auth.MechPlain:
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case auth.MechScramSHA256:
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case auth.MechScramSHA512:
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("%w: %s=%s: only PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are served", ErrConfig, mechKey, mech)
}

func loginModule(mech string) string {
	if mech == auth.MechPlain {
		return auth.PlainLoginModule
	}
	return auth.ScramLoginModule
}

// controllerSecurity is the controller listener's kafka.ListenerSecurity (nil:
// PLAINTEXT) over the shared settings of server, SCRAM credentials and ACLs read from
// image, authorizing with az (nil: no authorizer; its own, as it follows another
// image than the broker listeners' authorizer).
func (in *internode) controllerSecurity(server auth.ServerConfig, image func() *metadata.Image, az *acl.Authorizer) (*kafka.ListenerSecurity, error) {
	if in.ctl == nil {
		return nil, nil
	}
	srv, err := in.ctl.authServer(server, image)
	if err != nil {
		return nil, err
	}
	return &kafka.ListenerSecurity{Name: in.ctl.l.Name, Protocol: in.ctl.proto, Auth: srv, Authorizer: az}, nil
}

// close stops the stores' watchers.
func (in *internode) close() {
	if in == nil {
		return
	}
	for _, t := range in.tlss {
		t.Close()
	}
	if in.ctl != nil && in.ctl.tls != nil {
		in.ctl.tls.Close()
	}
}

// registerPeerMetrics exports the authentication counters of c, the node's client of
// the other nodes.
func registerPeerMetrics(reg prometheus.Registerer, c *peer.Client) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "samsa", Subsystem: "peer", Name: "reauthentications_total",
			Help: "Sessions of connections to other nodes renewed on the connection (KIP-368)."},
			func() float64 { return float64(c.Reauthentications()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "samsa", Subsystem: "peer", Name: "authentication_failures_total",
			Help: "Connections to other nodes whose TLS handshake or SASL authentication (or re-authentication) failed."},
			func() float64 { return float64(c.AuthenticationFailures()) }),
	)
}
