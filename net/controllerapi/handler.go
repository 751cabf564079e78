package controllerapi

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/samsa-broker/samsa/coordinator/controller"
	"github.com/samsa-broker/samsa/coordinator/controller/quorum"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/authz"
	"github.com/samsa-broker/samsa/net/connauth"
	"github.com/samsa-broker/samsa/net/request"
	"github.com/samsa-broker/samsa/net/transport"
)

// Config is a controller listener's identity.
type Config struct {
	NodeID    int32
	ClusterID string
	// Listener is the controller listener's name (controller.listener.names' first;
	// default "CONTROLLER").
	Listener string
	// Voters are the voters' controller listeners (controller.quorum.voters), for
	// DescribeCluster with EndpointType 2.
	Voters []VoterEndpoint
	// DynamicVoters, when set and it returns any, replaces Voters: a dynamic
	// quorum's members as the metadata log records them (KIP-853).
	DynamicVoters func() []VoterEndpoint
	// Registerer receives the listener's metrics (samsa_controller_listener_*); nil
	// keeps them unregistered.
	Registerer prometheus.Registerer
	// Security, when set, is the listener's protocol, authentication (SSL,
	// SASL_PLAINTEXT, SASL_SSL) and authorizer: see security.go. Nil: PLAINTEXT, every
	// connection served.
	Security *connauth.Security
	// Image is the metadata the authorizer takes its ACLs from (the voter's
	// committed image); needed with Security.Authorizer.
	Image func() *metadata.Image
	// Rules are the broker listener's authorisation rules by API key (net/kafka's
	// AuthzRule, the registrations' API.Authz), which the authorizer applies here
	// too; nil: none (the API's row of acl.APIs decides alone).
	Rules func(key int16) authz.Rule
}

// forwardTimeout bounds a request to the Controller whose API carries no timeout
// (Kafka's request.timeout.ms).
const forwardTimeout = 30 * time.Second

// VoterEndpoint is a voter's controller listener.
type VoterEndpoint struct {
	ID   int32
	Host string
	Port int32
}

// Service is the active-controller logic the listener hands requests to
// (*coordinator/controller.Controller): Handle blocks until the change commits or ctx
// ends, answers NOT_CONTROLLER while this voter is not the active controller, and
// returns an error only for a request type it does not serve.
type Service interface {
	Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// ConnAwareController is a Service that ties brokers' heartbeats to the
// connection they arrive on (*coordinator/controller.Controller): the listener hands
// it BrokerRegistration and BrokerHeartbeat with their connection's id, and tells it
// when a connection that carried one closes (a killed broker's connections are
// closed by its kernel at once; the controller's liveness rules use it).
type ConnAwareController interface {
	Service
	HandleConn(ctx context.Context, conn uint64, req kmsg.Request) (kmsg.Response, error)
	ConnClosed(conn uint64)
}

// Voter is what the listener needs of this node's voter (*quorum.Quorum): raft
// messages in (Step never blocks), the committed log out (brokers' metadata fetches),
// the quorum's leadership (DescribeCluster).
type Voter interface {
	Step(m *raftpb.Message)
	ReadCommitted(from uint64, maxBytes int) (quorum.ReadResult, error)
	Snapshot() (offset, term uint64, data []byte, err error)
	WaitCommitted(ctx context.Context, after uint64) (uint64, error)
	Leader() (int32, uint64)
}

var (
	_ Voter                  = (*quorum.Quorum)(nil)
	_ Service                = (*controller.Controller)(nil)
	_ ConnAwareController    = (*controller.Controller)(nil)
	_ transport.Handler      = (*Handler)(nil)
	_ transport.ConnObserver = (*Handler)(nil)
)

// Handler serves the CONTROLLER listener of a voter (docs/CLUSTER.md, "The
// paths between nodes"): raft messages between voters (SamsaRaft, key 10000), the
// brokers' requests to the active controller (BrokerRegistration, BrokerHeartbeat,
// AlterPartition, AllocateProducerIds), the admin requests brokers forward
// (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
// IncrementalAlterConfigs, ElectLeaders, AlterPartitionReassignments,
// ListPartitionReassignments, UpdateFeatures) and DescribeQuorum, all answered by the
// Controller;
// the brokers' metadata fetches (Fetch and FetchSnapshot of __cluster_metadata)
// answered from the voter's committed log; DescribeCluster of the controllers;
// AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter run by the voter (a VoterChanger,
// voters.go); and ApiVersions of this table. Its handler table is its own (table.go):
// an API it does not list closes the connection, as Kafka does for an API a listener
// does not serve.
//
// Requests that wait (the Controller's, long-poll metadata fetches) run on a
// goroutine each, which Close ends and waits for; raft messages are stepped inline
// (Step only queues). A ConnAwareController gets a broker's registration and
// heartbeats with their connection's id, and hears when such a connection closes.
// Safe for concurrent use.
type Handler struct {
	cfg     Config
	log     *slog.Logger
	metrics *request.Metrics
	ctrl    Service
	voter   Voter

	apiVersions []kmsg.ApiVersionsResponseApiKey
	sec         *connauth.Listener // the connections' sessions; nil: PLAINTEXT
	panics      atomic.Int64
	raftDropped atomic.Int64 // SamsaRaft bodies that did not decode

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool

	// hbConns are the connections that carried a BrokerRegistration or a
	// BrokerHeartbeat (marked on the connection's read path, so before it can be
	// reported closed); their close is reported to a ConnAwareController.
	hbConns sync.Map // uint64 → struct{}
}

// New returns the controller listener's handler over ctrl and voter.
// log may be nil.
func New(cfg Config, ctrl Service, voter Voter, log *slog.Logger) (*Handler, error) {
	if ctrl == nil || voter == nil {
		return nil, errors.New("controllerapi: the controller listener needs a controller and a voter")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Listener == "" {
		cfg.Listener = "CONTROLLER"
	}
	h := &Handler{cfg: cfg, log: log, ctrl: ctrl, voter: voter}
	h.metrics = request.NewMetrics(cfg.Registerer, "controller_listener", keys(), apiName)
	h.apiVersions = apiVersions()
	if cfg.Security != nil {
		var err error
		if h.sec, err = newControllerSessions(h, *cfg.Security); err != nil {
			return nil, err
		}
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "samsa", Subsystem: "controller_listener", Name: "raft_malformed_total",
			Help: "SamsaRaft bodies that did not decode (the connection was closed).",
		}, func() float64 { return float64(h.raftDropped.Load()) }))
	}
	return h, nil
}

// Serve implements transport.Handler.
func (h *Handler) Serve(tr transport.Request) {
	var cs *connauth.Conn
	if h.sec != nil {
		if cs = h.sec.Admit(tr, h.metrics); cs == nil {
			return
		}
	}
	r := request.Parse(tr, lookup, h.metrics, h.log, h.apiVersions)
	if r == nil {
		return
	}
	if cs != nil {
		r.Sec = cs
	}
	defer request.Recover(r, h.log, &h.panics)
	if !h.authorize(r) { // security.go
		return
	}
	apis[r.Header.Key].handle(h, r)
}

// ConnOpened implements transport.ConnObserver.
func (h *Handler) ConnOpened(c transport.Conn) {
	h.metrics.Connections.Inc()
	h.metrics.Accepted.Inc()
	if h.sec != nil {
		h.sec.Opened(c)
	}
}

// ConnClosed implements transport.ConnObserver: a connection that carried a
// broker's heartbeats is reported to a ConnAwareController.
func (h *Handler) ConnClosed(c transport.Conn) {
	h.metrics.Connections.Dec()
	if c == nil {
		return
	}
	if h.sec != nil {
		h.sec.Closed(c)
	}
	if _, ok := h.hbConns.LoadAndDelete(c.ID()); ok {
		if ca, ok := h.ctrl.(ConnAwareController); ok {
			ca.ConnClosed(c.ID())
		}
	}
}

// Close ends the requests still waiting (the Controller answers them
// REQUEST_TIMED_OUT, metadata fetches answer what they have) and waits for them. Call
// it after the listener's transport has drained and before stopping the controller.
// Idempotent.
func (h *Handler) Close() {
	if h.closed.Swap(true) {
		return
	}
	h.cancel()
	h.wg.Wait()
}

// async runs fn on a goroutine Close waits for.
func (h *Handler) async(fn func(ctx context.Context)) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		fn(h.ctx)
	}()
}

// controllerAPIKeys are the APIs the listener hands to the Controller as they are.
var controllerAPIKeys = []struct {
	key, min, max int16
}{
	{19, 0, 7}, // CreateTopics
	{20, 0, 6}, // DeleteTopics
	{33, 0, 2}, // AlterConfigs
	{37, 0, 3}, // CreatePartitions
	{43, 0, 2}, // ElectLeaders
	{44, 0, 1}, // IncrementalAlterConfigs
	{45, 0, 1}, // AlterPartitionReassignments
	{46, 0, 0}, // ListPartitionReassignments
	{55, 0, 2}, // DescribeQuorum
	{56, 0, 3}, // AlterPartition
	{62, 0, 4}, // BrokerRegistration
	{63, 0, 2}, // BrokerHeartbeat
	{67, 0, 0}, // AllocateProducerIds
	{29, 0, 3}, // DescribeAcls
	{30, 0, 3}, // CreateAcls
	{31, 0, 3}, // DeleteAcls
	{50, 0, 0}, // DescribeUserScramCredentials
	{51, 0, 0}, // AlterUserScramCredentials
	{48, 0, 1}, // DescribeClientQuotas
	{49, 0, 1}, // AlterClientQuotas
	{57, 0, 2}, // UpdateFeatures
}

func init() {
	for _, a := range controllerAPIKeys {
		register(request.Spec{Key: a.key, MinVersion: a.min, MaxVersion: a.max}, handleControllerRequest)
	}
}

// handleControllerRequest hands r to the Controller on a goroutine of its own and
// answers with its response, bounded by the request's TimeoutMillis where it has one
// (else 30 s): past it the Controller answers REQUEST_TIMED_OUT (the change may still
// commit). A broker's registration and heartbeats go with their connection's id to a
// ConnAwareController.
func handleControllerRequest(h *Handler, r *request.Request) {
	req := r.Body
	var conn uint64
	if _, ok := h.ctrl.(ConnAwareController); ok && r.Conn != nil {
		switch req.(type) {
		case *kmsg.BrokerRegistrationRequest, *kmsg.BrokerHeartbeatRequest:
			conn = r.Conn.ID()
			h.hbConns.Store(conn, struct{}{})
		}
	}
	h.async(func(ctx context.Context) {
		timeout := requestTimeout(req)
		if timeout <= 0 {
			timeout = forwardTimeout
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		var (
			resp kmsg.Response
			err  error
		)
		if ca, ok := h.ctrl.(ConnAwareController); ok && conn != 0 {
			resp, err = ca.HandleConn(ctx, conn, req)
		} else {
			resp, err = h.ctrl.Handle(ctx, req)
		}
		if err != nil {
			h.log.Warn("controller refused a request", "api", kmsg.NameForKey(req.Key()), "err", err)
			resp = controller.ErrorResponse(req, kerr.InvalidRequest.Code, err.Error())
		}
		r.Respond(resp)
	})
}

// requestTimeout is a request's own TimeoutMillis, for the APIs that carry one.
func requestTimeout(req kmsg.Request) time.Duration {
	var ms int32
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		ms = r.TimeoutMillis
	case *kmsg.DeleteTopicsRequest:
		ms = r.TimeoutMillis
	case *kmsg.CreatePartitionsRequest:
		ms = r.TimeoutMillis
	case *kmsg.ElectLeadersRequest:
		ms = r.TimeoutMillis
	case *kmsg.AlterPartitionAssignmentsRequest:
		ms = r.TimeoutMillis
	case *kmsg.ListPartitionReassignmentsRequest:
		ms = r.TimeoutMillis
	case *kmsg.UpdateFeaturesRequest:
		ms = r.TimeoutMillis
	}
	return time.Duration(ms) * time.Millisecond
}

// checkClusterID answers INCONSISTENT_CLUSTER_ID to a request naming another cluster
// (nil: any).
func (h *Handler) checkClusterID(id *string) int16 {
	if id != nil && h.cfg.ClusterID != "" && *id != h.cfg.ClusterID {
		return kerr.InconsistentClusterID.Code
	}
	return 0
}

// voterList is the voters' controller listeners: the dynamic quorum's members, else
// controller.quorum.voters.
func (h *Handler) voterList() []VoterEndpoint {
	if h.cfg.DynamicVoters != nil {
		if vs := h.cfg.DynamicVoters(); len(vs) > 0 {
			return vs
		}
	}
	return h.cfg.Voters
}

// Panics is how many handler panics (bugs) were recovered.
func (h *Handler) Panics() int64 { return h.panics.Load() }
