package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/samsa-broker/samsa/coordinator/controller"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/controllerapi"
	"github.com/samsa-broker/samsa/net/kafka"
	"github.com/samsa-broker/samsa/net/peer"
	"github.com/samsa-broker/samsa/net/transport"
)

// The paths between nodes (docs/CLUSTER.md): a node of a cluster reaches the others
// through one net/peer client (voters by controller.quorum.voters, brokers by the
// endpoints of the published image), and a controller serves its CONTROLLER listener
// with net/controllerapi's Handler.

// imageRef holds the broker's published image for net/peer's broker addresses (set
// once the follower exists; nil on a controller-only node).
type imageRef struct {
	f atomic.Pointer[controller.MetadataFollower]
}

func (r *imageRef) image() *metadata.Image {
	f := r.f.Load()
	if f == nil {
		return nil
	}
	_, im := f.Image()
	return im
}

// newPeer returns the node's client of the other nodes. A broker-only node given
// controller.quorum.bootstrap.servers (voters with id -1) learns the voters from
// them; every connection to a voter checks that the voter lists the same voter ids.
func newPeer(cfg *Config, clusterID string, images *imageRef, sec *internode, log *slog.Logger) (*peer.Client, error) {
	voters := map[int32]string{}
	var bootstrap []string
	for _, v := range cfg.Voters {
		if v.Port == 0 {
			continue // a sole voter without a controller listener: reached by nobody
		}
		if v.ID < 0 {
			bootstrap = append(bootstrap, v.Addr())
			continue
		}
		voters[v.ID] = v.Addr()
	}
	pcfg := peer.Config{NodeID: cfg.NodeID, ClusterID: clusterID, Voters: voters, BootstrapServers: bootstrap,
		CheckVoterSet: true, VoterTimeout: cfg.getMs("controller.quorum.fetch.timeout.ms"),
		VoterSecurity: sec.voter, BrokerSecurity: sec.broker,
		Logger: log.With("component", "peer")}
	if cfg.Roles.Broker {
		pcfg.BrokerAddr = peer.ImageBrokerAddrs(images.image, cfg.InterBrokerListener)
	}
	return peer.New(pcfg)
}

// controllerListener is a voter's CONTROLLER listener: its handler and transport.
type controllerListener struct {
	h  *controllerapi.Handler
	tr transport.Transport
	ln net.Listener
}

// startControllerListener serves ln with the controller listener's handler over the
// role's controller and voter.
// A secured controller listener (sec.ctl) is served by the Std transport over TLS
// (SSL, SASL_SSL) and with SASL sessions (SASL_*), SCRAM credentials read from the
// voter's committed image.
func startControllerListener(cfg *Config, clusterID string, r *controllerRole, ln net.Listener, sec *internode, reg prometheus.Registerer, log *slog.Logger, fail func(error)) (*controllerListener, error) {
	var voters []controllerapi.VoterEndpoint
	for _, v := range cfg.Voters {
		if v.ID >= 0 { // not a bootstrap server (a dynamic quorum)
			voters = append(voters, controllerapi.VoterEndpoint{ID: v.ID, Host: v.Host, Port: int32(v.Port)})
		}
	}
	name := cfg.ControllerListenerNames[0]
	dynamicVoters := func() []controllerapi.VoterEndpoint {
		var out []controllerapi.VoterEndpoint
		for _, m := range r.q.Members() {
			if e, ok := (metadata.QuorumVoter{Endpoints: m.Endpoints}).Endpoint(name); ok {
				out = append(out, controllerapi.VoterEndpoint{ID: m.ID, Host: e.Host, Port: int32(e.Port)})
			}
		}
		return out
	}
	server, err := serverConfig(cfg)
	if err != nil {
		return nil, err
	}
	image := func() *metadata.Image { _, im := r.q.Committed(); return im }
	az, err := newAuthorizer(cfg)
	if err != nil {
		return nil, err
	}
	ls, err := sec.controllerSecurity(server, image, az)
	if err != nil {
		return nil, fmt.Errorf("%w: controller listener: %v", ErrConfig, err)
	}
	h, err := controllerapi.New(controllerapi.Config{
		NodeID: cfg.NodeID, ClusterID: clusterID, Listener: name, Voters: voters, DynamicVoters: dynamicVoters, Registerer: reg,
		Security: ls, Image: image, Rules: kafka.AuthzRule,
	}, r.ctl, r.q, log.With("component", "controller-listener"))
	if err != nil {
		return nil, err
	}
	if sec.ctl != nil && sec.ctl.tls != nil {
		if ln, err = sec.ctl.tls.Listener(ln); err != nil {
			return nil, fmt.Errorf("%w: controller listener: %v", ErrConfig, err)
		}
	}
	c := &controllerListener{h: h, ln: ln, tr: transport.NewStd(transport.Config{MaxRequestBytes: cfg.MaxRequestBytes, IdleTimeout: cfg.IdleTimeout}, h, log.With("component", "controller-transport"))}
	go func() {
		if err := c.tr.Serve(ln); err != nil && !errors.Is(err, transport.ErrClosed) {
			fail(fmt.Errorf("controller listener: %w", err))
		}
	}()
	proto := "PLAINTEXT"
	if sec.ctl != nil {
		proto = sec.ctl.proto.String()
	}
	log.Info("controller listener", "addr", ln.Addr().String(), "protocol", proto)
	return c, nil
}

// stop stops accepting, answers what was read, and ends the handler's waiting
// requests.
func (c *controllerListener) stop(ctx context.Context) error {
	err := c.tr.Shutdown(ctx)
	c.h.Close()
	c.ln.Close()
	if err != nil {
		return fmt.Errorf("controller listener: %w", err)
	}
	return nil
}

// checkListener tries a TCP connection to e (the controller's listener checks of
// brokers, coordinator/controller's liveness rules): accepted, refused (nothing
// listens there: ECONNREFUSED), or no verdict (a timeout, an unreachable network, a
// name that does not resolve).
func checkListener(ctx context.Context, e metadata.Endpoint) controller.ListenerState {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))))
	switch {
	case err == nil:
		c.Close()
		return controller.ListenerAccepts
	case errors.Is(err, syscall.ECONNREFUSED):
		return controller.ListenerRefuses
	}
	return controller.ListenerUnknown
}
