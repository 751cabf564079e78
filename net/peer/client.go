package peer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// Sentinel errors; errors returned with detail wrap one of them. Check with errors.Is.
var (
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("peer: client closed")
	// ErrUnknownNode: no address is known for the target (not a voter, or a broker the
	// published image does not list with the listener).
	ErrUnknownNode = errors.New("peer: no address for node")
	// ErrBackoff: the last dial of this connection failed and the reconnect backoff has
	// not passed; the error also wraps the dial's error.
	ErrBackoff = errors.New("peer: reconnect backoff")
	// ErrConnection: the connection failed (dial, handshake, write, read, peer closed).
	// A request that failed this way may have been processed by the peer.
	ErrConnection = errors.New("peer: connection failed")
	// ErrTimeout: the peer did not answer within the request timeout; the connection
	// was closed.
	ErrTimeout = errors.New("peer: request timed out")
	// ErrMalformedResponse: a response that does not parse, has the wrong correlation
	// id, or exceeds MaxResponseBytes; the connection was closed.
	ErrMalformedResponse = errors.New("peer: malformed response")
	// ErrUnsupportedVersion: the peer does not serve the API at any version kmsg knows.
	ErrUnsupportedVersion = errors.New("peer: api not supported by the peer")
	// ErrWrongNode: the peer answered ApiVersions saying it belongs to another cluster
	// or is another node (KIP-1242's REBOOTSTRAP_REQUIRED).
	ErrWrongNode = errors.New("peer: peer is another node or cluster")
	// ErrVoterSetMismatch: a voter's controller.quorum.voters names other voter ids
	// than this node's (Config.CheckVoterSet): the connection was refused.
	ErrVoterSetMismatch = errors.New("peer: the voter lists another voter set")
)

// Role is how a node is reached: a voter on its controller listener, a broker on its
// inter-broker listener.
type Role uint8

// The roles.
const (
	RoleVoter Role = iota + 1
	RoleBroker
	// roleBootstrap: controller.quorum.bootstrap.servers entry Node (an index), asked
	// for the voters before their ids are known.
	roleBootstrap
)

func (r Role) String() string {
	switch r {
	case RoleVoter:
		return "voter"
	case RoleBroker:
		return "broker"
	case roleBootstrap:
		return "bootstrap server"
	}
	return "role(" + strconv.Itoa(int(r)) + ")"
}

// Target names a node and the listener to reach it on.
type Target struct {
	Node int32
	Role Role
}

// Voter is voter id's controller listener.
func Voter(id int32) Target { return Target{Node: id, Role: RoleVoter} }

// Broker is broker id's inter-broker listener.
func Broker(id int32) Target { return Target{Node: id, Role: RoleBroker} }

func (t Target) String() string { return t.Role.String() + " " + strconv.Itoa(int(t.Node)) }

// Purpose names what a connection carries; a (target, purpose) pair has at most one
// connection, so traffic of one purpose never queues behind another's.
type Purpose string

// The purposes of this package's paths. Replica fetchers use FetchPurpose(i).
const (
	PurposeController Purpose = "controller" // broker → active controller: forwarded requests
	PurposeHeartbeat  Purpose = "heartbeat"  // broker → active controller: registration, heartbeats
	PurposeMetadata   Purpose = "metadata"   // broker → voter: metadata long polls
	PurposeRaft       Purpose = "raft"       // voter → voter
	PurposeISR        Purpose = "isr"        // leader → controller: AlterPartition
	PurposeTxn        Purpose = "txn"        // broker → broker: transaction markers and verification
	purposeBootstrap  Purpose = "bootstrap"  // broker → bootstrap server: the voters
)

// FetchPurpose is the purpose of replica fetcher i (num.replica.fetchers).
func FetchPurpose(i int) Purpose { return Purpose("fetch-" + strconv.Itoa(i)) }

// Config configures a Client. Zero fields take the defaults below (Kafka's names where
// Kafka has the setting).
type Config struct {
	// NodeID is this node's id; the client id is "samsa-node-<id>".
	NodeID int32
	// ClusterID, when set, is sent in ApiVersions v5 with the target's node id, so a
	// peer of another cluster, or another node at the address, is refused
	// (ErrWrongNode) instead of served.
	ClusterID string
	// Voters is controller.quorum.voters: voter id → host:port of its controller
	// listener.
	Voters map[int32]string
	// BootstrapServers is controller.quorum.bootstrap.servers (host:port of
	// controller listeners), used when Voters is empty: the voters' ids and
	// addresses are asked of them (DescribeCluster with EndpointType 2, KIP-919) at
	// the first request to the voters, from the first that answers, and kept.
	BootstrapServers []string
	// CheckVoterSet: on every new connection to a voter, ask it for its voters
	// (DescribeCluster, EndpointType 2) and refuse the connection
	// (ErrVoterSetMismatch, logged as an error) when their ids differ from this
	// client's: a node whose controller.quorum.voters differs from the quorum's
	// neither registers its broker nor exchanges raft messages with the voters that
	// disagree. Addresses may differ (names against addresses, NAT): ids may not. A
	// voter that does not serve DescribeCluster v1+ is not checked.
	CheckVoterSet bool
	// BrokerAddr returns broker id's inter-broker listener address (host:port), read
	// from the published metadata image at each dial (ImageBrokerAddrs). Nil: brokers
	// cannot be reached.
	BrokerAddr func(id int32) (string, bool)

	// DialTimeout bounds a dial plus the ApiVersions handshake
	// (socket.connection.setup.timeout.ms, 10 s).
	DialTimeout time.Duration
	// RequestTimeout bounds the wait for a response (request.timeout.ms, 30 s); a
	// Fetch waits its MaxWaitMillis more.
	RequestTimeout time.Duration
	// WriteTimeout bounds writing one request (30 s).
	WriteTimeout time.Duration
	// MaxResponseBytes bounds one response frame (100 MiB, room for a metadata entry of
	// metadata.MaxEntrySize or a full replica fetch): a larger size prefix closes
	// the connection before anything is allocated.
	MaxResponseBytes int32
	// MaxInFlight bounds the unanswered requests of one connection (64); more wait.
	MaxInFlight int
	// ReconnectBackoff and ReconnectBackoffMax: the wait after a failed dial, doubling
	// per failure (reconnect.backoff.ms 50 ms, reconnect.backoff.max.ms 1 s), ±20%.
	ReconnectBackoff, ReconnectBackoffMax time.Duration
	// RetryBackoff is the wait of a ControllerChannel between rounds over the voters
	// (retry.backoff.ms, 100 ms).
	RetryBackoff time.Duration
	// VoterTimeout bounds how long a request that may be sent again (a broker's
	// heartbeat or registration, a metadata fetch beyond its long poll) waits for one
	// voter before the next is tried (controller.quorum.request.timeout.ms and
	// controller.quorum.fetch.timeout.ms, 2 s): a voter that accepts connections but
	// answers nothing (SIGSTOP, a partition) costs at most this.
	VoterTimeout time.Duration
	// RaftQueue bounds the raft messages queued for one voter (1024); more are dropped.
	RaftQueue int
	// Dial opens a connection (nil: a net.Dialer); TLS and SASL, when the target's
	// Security asks for them, run over what it returns.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// VoterSecurity is how voters' controller listeners (and the bootstrap servers)
	// are reached, BrokerSecurity how brokers' inter-broker listeners are: TLS and
	// SASL (security.go). Zero: PLAINTEXT.
	VoterSecurity, BrokerSecurity Security
	// Logger receives connection events (nil: discard).
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultDialTimeout         = 10 * time.Second
	DefaultRequestTimeout      = 30 * time.Second
	DefaultWriteTimeout        = 30 * time.Second
	DefaultMaxResponseBytes    = 100 << 20
	DefaultMaxInFlight         = 64
	DefaultReconnectBackoff    = 50 * time.Millisecond
	DefaultReconnectBackoffMax = time.Second
	DefaultRetryBackoff        = 100 * time.Millisecond
	DefaultVoterTimeout        = 2 * time.Second
	DefaultRaftQueue           = 1024
)

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.DialTimeout, DefaultDialTimeout)
	def(&c.RequestTimeout, DefaultRequestTimeout)
	def(&c.WriteTimeout, DefaultWriteTimeout)
	def(&c.ReconnectBackoff, DefaultReconnectBackoff)
	def(&c.ReconnectBackoffMax, DefaultReconnectBackoffMax)
	def(&c.RetryBackoff, DefaultRetryBackoff)
	def(&c.VoterTimeout, DefaultVoterTimeout)
	if c.ReconnectBackoffMax < c.ReconnectBackoff {
		c.ReconnectBackoffMax = c.ReconnectBackoff
	}
	if c.MaxResponseBytes <= 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.RaftQueue <= 0 {
		c.RaftQueue = DefaultRaftQueue
	}
	if c.Dial == nil {
		d := &net.Dialer{KeepAlive: 30 * time.Second}
		c.Dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Client reaches other nodes. It is safe for concurrent use; Close ends it.
type Client struct {
	cfg      Config
	log      *slog.Logger
	clientID string
	fmt      *kmsg.RequestFormatter
	voters   atomic.Pointer[voterSet] // nil until learned from the bootstrap servers
	// dynamic: the voters come from the metadata log (SetVoters, a dynamic
	// quorum); CheckVoterSet compares static lists and is off.
	dynamic atomic.Bool
	ctx     context.Context
	cancel  context.CancelFunc

	mu struct {
		sync.Mutex
		slots  map[slotKey]*slot
		closed bool
		// mismatchLogged: when a voter-set mismatch was last logged, by voter.
		mismatchLogged map[int32]time.Time
	}
	leader leaderHint // the active controller, as last learned; suspects
	lost   lostSet    // brokers whose process this node found gone (reach.go)
	lostV  lostSet    // voters whose process this node found gone (reach.go)
	raft   raftState
	reauth atomic.Int64 // re-authentications that succeeded (security.go)
	// authFailures: dials and re-authentications that failed with ErrAuthentication.
	authFailures atomic.Int64
}

// voterSet is the voters: controller.quorum.voters, or what the bootstrap servers
// said. Never modified once stored.
type voterSet struct {
	ids   []int32 // sorted
	addrs map[int32]string
}

func newVoterSet(addrs map[int32]string) *voterSet {
	vs := &voterSet{addrs: addrs}
	for id := range addrs {
		vs.ids = append(vs.ids, id)
	}
	slices.Sort(vs.ids)
	return vs
}

// String is the set as controller.quorum.voters spells it.
func (vs *voterSet) String() string {
	parts := make([]string, len(vs.ids))
	for i, id := range vs.ids {
		parts[i] = strconv.Itoa(int(id)) + "@" + vs.addrs[id]
	}
	return strings.Join(parts, ",")
}

type slotKey struct {
	to      Target
	purpose Purpose
}

// New returns a Client for cfg.
func New(cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	for id, addr := range cfg.Voters {
		if id < 0 {
			return nil, fmt.Errorf("peer: voter id %d", id)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("peer: voter %d address %q: %w", id, addr, err)
		}
	}
	for _, addr := range cfg.BootstrapServers {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("peer: bootstrap server %q: %w", addr, err)
		}
	}
	c := &Client{cfg: cfg, log: cfg.Logger, clientID: "samsa-node-" + strconv.Itoa(int(cfg.NodeID))}
	c.fmt = kmsg.NewRequestFormatter(kmsg.FormatterClientID(c.clientID))
	if len(cfg.Voters) > 0 || len(cfg.BootstrapServers) == 0 {
		c.voters.Store(newVoterSet(maps.Clone(cfg.Voters)))
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.mu.slots = map[slotKey]*slot{}
	c.leader.id = -1
	return c, nil
}

// Voters returns the voter ids, sorted (nil while they are to be learned from the
// bootstrap servers). The slice is shared: do not modify it.
func (c *Client) Voters() []int32 {
	if vs := c.voters.Load(); vs != nil {
		return vs.ids
	}
	return nil
}

// VoterAddrs returns the voters' controller listeners by id (nil while they are to
// be learned from the bootstrap servers). The map is shared: do not modify it.
func (c *Client) VoterAddrs() map[int32]string {
	if vs := c.voters.Load(); vs != nil {
		return vs.addrs
	}
	return nil
}

// SetVoters replaces the voters' addresses with addrs (voter id → host:port of its
// controller listener): a dynamic quorum's members as the metadata log records them
// (KIP-853), learners included, since raft sends to them too. From then on the voter
// set is not checked against the voters' (CheckVoterSet): members change. A
// connection to an id whose address changed is dialed anew at its next failure.
func (c *Client) SetVoters(addrs map[int32]string) {
	c.dynamic.Store(true)
	cur := c.voters.Load()
	if cur != nil && maps.Equal(cur.addrs, addrs) {
		return
	}
	c.voters.Store(newVoterSet(maps.Clone(addrs)))
	c.log.Info("voters", "voters", newVoterSet(addrs).String())
}

// LearnVoters asks the bootstrap servers for the voters (DescribeCluster with
// EndpointType 2), once they answer or ctx ends: a controller formatted with
// --no-initial-controllers learns where the leader that adds it is, to answer its
// raft messages before its own log names any member. As with SetVoters, the voter
// set is not checked from then on. Voters already known are kept.
func (c *Client) LearnVoters(ctx context.Context) error {
	c.dynamic.Store(true)
	for c.voters.Load() == nil {
		if _, err := c.discoverVoters(ctx); err == nil || errors.Is(err, ErrClosed) {
			return err
		}
		t := time.NewTimer(c.cfg.RetryBackoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-c.ctx.Done():
			t.Stop()
			return ErrClosed
		}
	}
	return nil
}

// Close closes every connection and stops the raft senders; requests in flight and
// later ones fail with ErrClosed. Idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return nil
	}
	c.mu.closed = true
	slots := make([]*slot, 0, len(c.mu.slots))
	for _, s := range c.mu.slots {
		slots = append(slots, s)
	}
	c.mu.Unlock()
	c.cancel()
	for _, s := range slots {
		s.close()
	}
	c.raft.wait()
	return nil
}

// addr resolves a target's address.
func (c *Client) addr(to Target) (string, error) {
	switch to.Role {
	case RoleVoter:
		if vs := c.voters.Load(); vs != nil {
			if a, ok := vs.addrs[to.Node]; ok {
				return a, nil
			}
		}
	case roleBootstrap:
		if to.Node >= 0 && int(to.Node) < len(c.cfg.BootstrapServers) {
			return c.cfg.BootstrapServers[to.Node], nil
		}
	case RoleBroker:
		if c.cfg.BrokerAddr != nil {
			if a, ok := c.cfg.BrokerAddr(to.Node); ok {
				return a, nil
			}
		}
	}
	return "", fmt.Errorf("%w: %s", ErrUnknownNode, to)
}

func (c *Client) slot(to Target, purpose Purpose) (*slot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, ErrClosed
	}
	k := slotKey{to, purpose}
	s := c.mu.slots[k]
	if s == nil {
		s = &slot{c: c, key: k}
		c.mu.slots[k] = s
	}
	return s, nil
}

// Request sends req to target on the connection of purpose and returns its response.
// req is sent at the highest version both sides support (its Version field is set to
// it); the response is decoded at that version. Errors wrap ErrClosed,
// ErrUnknownNode, ErrBackoff, ErrConnection, ErrTimeout, ErrMalformedResponse,
// ErrUnsupportedVersion or ctx's error. After ErrConnection or ErrTimeout the peer may
// have processed the request.
func (c *Client) Request(ctx context.Context, to Target, purpose Purpose, req kmsg.Request) (kmsg.Response, error) {
	cn, err := c.conn(ctx, to, purpose)
	if err != nil {
		return nil, err
	}
	return cn.roundTrip(ctx, req)
}

// conn returns the connected connection of (to, purpose), dialing it if needed.
func (c *Client) conn(ctx context.Context, to Target, purpose Purpose) (*conn, error) {
	s, err := c.slot(to, purpose)
	if err != nil {
		return nil, err
	}
	return s.get(ctx)
}

// slot is the connection of one (target, purpose): connected, dialing, idle, or in
// backoff after a failed dial.
type slot struct {
	c   *Client
	key slotKey

	mu struct {
		sync.Mutex
		conn     *conn
		dialing  chan struct{} // closed when the running dial ends
		failures int           // consecutive failed dials
		retryAt  time.Time
		lastErr  error
		closed   bool
		// authLogged: when an authentication failure was last logged as an error.
		authLogged time.Time
	}
}

// authLogInterval spaces the error logs of a slot's failing authentications.
const authLogInterval = 30 * time.Second

func (s *slot) get(ctx context.Context) (*conn, error) {
	for {
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			return nil, ErrClosed
		}
		if cn := s.mu.conn; cn != nil {
			if cn.alive() {
				s.mu.Unlock()
				return cn, nil
			}
			s.mu.conn = nil
		}
		if ch := s.mu.dialing; ch != nil {
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if now := time.Now(); now.Before(s.mu.retryAt) {
			err := s.mu.lastErr
			s.mu.Unlock()
			return nil, fmt.Errorf("%w: %s (%s): %w", ErrBackoff, s.key.to, s.key.purpose, err)
		}
		ch := make(chan struct{})
		s.mu.dialing = ch
		s.mu.Unlock()

		cn, err := s.dial(ctx)
		if callerDone(ctx) == nil || err == nil {
			s.noteDial(err)
		}

		s.mu.Lock()
		s.mu.dialing = nil
		close(ch)
		switch {
		case err == nil && s.mu.closed:
			s.mu.Unlock()
			cn.fail(ErrClosed)
			return nil, ErrClosed
		case err == nil:
			s.mu.conn, s.mu.failures, s.mu.lastErr, s.mu.authLogged = cn, 0, nil, time.Time{}
			s.mu.Unlock()
			return cn, nil
		case callerDone(ctx) != nil && s.c.ctx.Err() == nil:
			// The caller gave up: that says nothing about the peer.
			s.mu.Unlock()
			return nil, callerDone(ctx)
		default:
			s.mu.failures++
			s.mu.lastErr = err
			s.mu.retryAt = time.Now().Add(s.backoffLocked())
			now := time.Now()
			authFailed := errors.Is(err, ErrAuthentication)
			if authFailed {
				s.c.authFailures.Add(1)
			}
			logAuth := authFailed && (s.mu.authLogged.IsZero() || now.Sub(s.mu.authLogged) >= authLogInterval)
			if logAuth {
				s.mu.authLogged = now
			}
			s.mu.Unlock()
			if logAuth {
				// Retrying will not help until the configuration changes: say so
				// (every authLogInterval while it lasts).
				s.c.log.Error("peer authentication failed; retrying (check the listener's ssl.* stores and the sasl.jaas.config credentials)",
					"to", s.key.to.String(), "purpose", string(s.key.purpose), "err", err)
			} else {
				s.c.log.Debug("peer dial failed", "to", s.key.to.String(), "purpose", string(s.key.purpose), "err", err)
			}
			return nil, err
		}
	}
}

// callerDone is ctx's error, or context.DeadlineExceeded once its deadline has
// passed even if ctx has not yet said so: a dial bounded by that deadline can
// report its i/o timeout before the context's own timer marks it done, and that
// timeout is the caller's, not the peer's.
func callerDone(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// backoffLocked is the wait after the current run of failures: ReconnectBackoff
// doubling per failure up to ReconnectBackoffMax, ±20% jitter.
func (s *slot) backoffLocked() time.Duration {
	cfg := &s.c.cfg
	d := cfg.ReconnectBackoff
	for i := 1; i < s.mu.failures && d < cfg.ReconnectBackoffMax; i++ {
		d *= 2
	}
	d = min(d, cfg.ReconnectBackoffMax)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// connBroke is called by a connection that failed after its handshake: the next dial
// waits the first backoff step, so a peer that accepts and drops at once is not
// redialled in a spin.
func (s *slot) connBroke(cn *conn) {
	s.mu.Lock()
	if s.mu.conn == cn {
		s.mu.conn = nil
		s.mu.retryAt = time.Now().Add(s.c.cfg.ReconnectBackoff)
		s.mu.lastErr = cn.err()
	}
	s.mu.Unlock()
}

func (s *slot) close() {
	s.mu.Lock()
	s.mu.closed = true
	cn := s.mu.conn
	s.mu.conn = nil
	s.mu.Unlock()
	if cn != nil {
		cn.fail(ErrClosed)
	}
}

func (s *slot) dial(ctx context.Context) (*conn, error) {
	addr, err := s.c.addr(s.key.to)
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, s.c.cfg.DialTimeout)
	defer cancel()
	stop := context.AfterFunc(s.c.ctx, cancel) // Close interrupts dials
	defer stop()
	nc, err := s.c.cfg.Dial(dctx, addr)
	if err != nil {
		return nil, fmt.Errorf("%w: dial %s at %s: %w", ErrConnection, s.key.to, addr, err)
	}
	sec := s.c.security(s.key.to.Role)
	if sec.TLS != nil {
		tc, err := startTLS(dctx, sec, nc, addr)
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("%s at %s: %w", s.key.to, addr, err)
		}
		nc = tc
	}
	cn := newConn(s, nc)
	if err := cn.handshake(dctx); err != nil {
		nc.Close()
		if sec.TLS != nil && tlsRefused(err) {
			// TLS 1.3: a server refuses the client's certificate after the
			// client's side of the handshake ended, at the first read.
			err = fmt.Errorf("%w: %w", ErrAuthentication, err)
		}
		return nil, fmt.Errorf("%s at %s: %w", s.key.to, addr, err)
	}
	go cn.readLoop()
	if sec.SASL != nil {
		expiry, err := cn.authenticate(dctx, sec.SASL, addr)
		if err != nil {
			err = fmt.Errorf("%s at %s: %w", s.key.to, addr, err)
			cn.fail(err)
			return nil, err
		}
		cn.scheduleReauth(sec.SASL, addr, expiry)
	}
	if s.key.to.Role == RoleVoter && s.c.cfg.CheckVoterSet {
		if err := s.checkVoterSet(dctx, cn, addr); err != nil {
			cn.fail(err)
			return nil, err
		}
	}
	return cn, nil
}

// checkVoterSet asks the voter on cn for its voters and compares their ids with
// this client's (Config.CheckVoterSet).
func (s *slot) checkVoterSet(ctx context.Context, cn *conn, addr string) error {
	if r, ok := cn.versions[60]; !ok || r.max < 1 || s.c.dynamic.Load() {
		return nil // it cannot say, or the voters change (a dynamic quorum)
	}
	req := kmsg.NewPtrDescribeClusterRequest()
	req.EndpointType = 2
	resp, err := cn.roundTrip(ctx, req)
	if err != nil {
		return fmt.Errorf("%s at %s: asking for its voters: %w", s.key.to, addr, err)
	}
	r := resp.(*kmsg.DescribeClusterResponse)
	ours := s.c.voters.Load()
	if r.ErrorCode != 0 || ours == nil {
		return nil
	}
	theirs := map[int32]string{}
	for _, b := range r.Brokers {
		theirs[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	tv := newVoterSet(theirs)
	if slices.Equal(tv.ids, ours.ids) {
		return nil
	}
	err = fmt.Errorf("%w: %s at %s has controller.quorum.voters=%s, this node has controller.quorum.voters=%s: every node must list the same voters (fix the node whose list is wrong)",
		ErrVoterSetMismatch, s.key.to, addr, tv, ours)
	if s.c.logMismatch(s.key.to.Node) {
		s.c.log.Error("the voter lists other voters than this node: connection refused", "to", s.key.to.String(), "addr", addr,
			"its_voters", tv.String(), "our_voters", ours.String())
	}
	return err
}

// mismatchLogEvery spaces the errors logged for one voter whose voter set differs.
const mismatchLogEvery = 30 * time.Second

// logMismatch reports whether a voter-set mismatch of voter id is to be logged now
// (once per mismatchLogEvery and voter, whatever the purpose of the connection).
func (c *Client) logMismatch(id int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.mismatchLogged == nil {
		c.mu.mismatchLogged = map[int32]time.Time{}
	}
	if time.Since(c.mu.mismatchLogged[id]) < mismatchLogEvery {
		return false
	}
	c.mu.mismatchLogged[id] = time.Now()
	return true
}

// leaderHint is the active controller as last learned (-1: unknown), with the
// highest quorum term learned, and the suspects: voters that left a request
// unanswered (a deadline passed, the connection failed), asked last until they
// answer or a newer term names them leader. A voter that accepts connections but
// answers nothing (SIGSTOP) therefore holds up one request, not every later one.
type leaderHint struct {
	mu       sync.Mutex
	id       int32
	term     uint64
	suspects map[int32]uint64 // voter → the term learned when it was suspected
}

func (h *leaderHint) get() int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.id
}

func (h *leaderHint) set(id int32) {
	h.mu.Lock()
	h.id = id
	h.mu.Unlock()
}

// setTerm records id as the leader of term, unless a later term is known; a
// suspect named leader of a later term than it was suspected in is cleared.
func (h *leaderHint) setTerm(id int32, term uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if term < h.term {
		return
	}
	h.id, h.term = id, term
	if t, ok := h.suspects[id]; ok && term > t {
		delete(h.suspects, id)
	}
}

// clearIf forgets the hint if it still names id.
func (h *leaderHint) clearIf(id int32) {
	h.mu.Lock()
	if h.id == id {
		h.id = -1
	}
	h.mu.Unlock()
}

// unanswered: voter id left a request unanswered: the hint forgets it and it is
// asked last.
func (h *leaderHint) unanswered(id int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.id == id {
		h.id = -1
	}
	if h.suspects == nil {
		h.suspects = map[int32]uint64{}
	}
	h.suspects[id] = h.term
}

// answered: voter id answered a request.
func (h *leaderHint) answered(id int32) {
	h.mu.Lock()
	if _, ok := h.suspects[id]; ok {
		delete(h.suspects, id)
	}
	h.mu.Unlock()
}

// order is the order of one round over ids: the hint first unless suspected, then
// the voters not suspected by id, then the suspects by id.
func (h *leaderHint) order(ids []int32) []int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]int32, 0, len(ids))
	_, hintSuspect := h.suspects[h.id]
	if h.id >= 0 && !hintSuspect && slices.Contains(ids, h.id) {
		out = append(out, h.id)
	}
	for _, v := range ids {
		if _, s := h.suspects[v]; !s && v != h.id {
			out = append(out, v)
		}
	}
	for _, v := range ids {
		if _, s := h.suspects[v]; s || (v == h.id && hintSuspect) {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	return out
}

// Leader returns the active controller as this client last learned it (from metadata
// fetches and answered controller requests), or -1.
func (c *Client) Leader() int32 { return c.leader.get() }

// NoteLeader records id as the active controller (a hint for the next request; -1
// forgets). Ids that are not voters are ignored.
func (c *Client) NoteLeader(id int32) {
	if id == -1 {
		c.leader.set(-1)
		return
	}
	if c.isVoter(id) {
		c.leader.set(id)
	}
}

// NoteLeaderTerm records id as the quorum's leader in term (what a voter or a
// metadata fetch reports): ignored when a later term is known or id is not a voter;
// -1 forgets the hint. A suspected voter named leader of a later term than it was
// suspected in is asked first again.
func (c *Client) NoteLeaderTerm(id int32, term uint64) {
	if id == -1 || c.isVoter(id) {
		c.leader.setTerm(id, term)
	}
}

func (c *Client) isVoter(id int32) bool {
	vs := c.voters.Load()
	if vs == nil {
		return false
	}
	_, ok := vs.addrs[id]
	return ok
}

// ImageBrokerAddrs returns a Config.BrokerAddr reading broker endpoints from the
// published image (image returns the current one): the endpoint of listener
// (inter.broker.listener.name) of a registered broker.
func ImageBrokerAddrs(image func() *metadata.Image, listener string) func(id int32) (string, bool) {
	return func(id int32) (string, bool) {
		im := image()
		if im == nil {
			return "", false
		}
		b, ok := im.Broker(id)
		if !ok {
			return "", false
		}
		e, ok := b.Endpoint(listener)
		if !ok {
			return "", false
		}
		return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))), true
	}
}
