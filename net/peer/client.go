package peer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
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
)

// Role is how a node is reached: a voter on its controller listener, a broker on its
// inter-broker listener.
type Role uint8

// The roles.
const (
	RoleVoter Role = iota + 1
	RoleBroker
)

func (r Role) String() string {
	switch r {
	case RoleVoter:
		return "voter"
	case RoleBroker:
		return "broker"
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
	PurposeController Purpose = "controller" // broker → active controller
	PurposeMetadata   Purpose = "metadata"   // broker → voter: metadata long polls
	PurposeRaft       Purpose = "raft"       // voter → voter
	PurposeISR        Purpose = "isr"        // leader → controller: AlterPartition
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
	// RaftQueue bounds the raft messages queued for one voter (1024); more are dropped.
	RaftQueue int
	// Dial opens a connection (nil: a net.Dialer).
	Dial func(ctx context.Context, addr string) (net.Conn, error)
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
	voterIDs []int32 // sorted
	ctx      context.Context
	cancel   context.CancelFunc

	mu struct {
		sync.Mutex
		slots  map[slotKey]*slot
		closed bool
	}
	leader leaderHint // the active controller, as last learned
	raft   raftState
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
	c := &Client{cfg: cfg, log: cfg.Logger, clientID: "samsa-node-" + strconv.Itoa(int(cfg.NodeID))}
	c.fmt = kmsg.NewRequestFormatter(kmsg.FormatterClientID(c.clientID))
	for id := range cfg.Voters {
		c.voterIDs = append(c.voterIDs, id)
	}
	slices.Sort(c.voterIDs)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.mu.slots = map[slotKey]*slot{}
	c.leader.set(-1)
	return c, nil
}

// Voters returns the voter ids, sorted. The slice is shared: do not modify it.
func (c *Client) Voters() []int32 { return c.voterIDs }

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
		if a, ok := c.cfg.Voters[to.Node]; ok {
			return a, nil
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
	}
}

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

		s.mu.Lock()
		s.mu.dialing = nil
		close(ch)
		switch {
		case err == nil && s.mu.closed:
			s.mu.Unlock()
			cn.fail(ErrClosed)
			return nil, ErrClosed
		case err == nil:
			s.mu.conn, s.mu.failures, s.mu.lastErr = cn, 0, nil
			s.mu.Unlock()
			return cn, nil
		case ctx.Err() != nil && s.c.ctx.Err() == nil:
			// The caller gave up: that says nothing about the peer.
			s.mu.Unlock()
			return nil, ctx.Err()
		default:
			s.mu.failures++
			s.mu.lastErr = err
			s.mu.retryAt = time.Now().Add(s.backoffLocked())
			s.mu.Unlock()
			s.c.log.Debug("peer dial failed", "to", s.key.to.String(), "purpose", string(s.key.purpose), "err", err)
			return nil, err
		}
	}
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
	cn := newConn(s, nc)
	if err := cn.handshake(dctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("%s at %s: %w", s.key.to, addr, err)
	}
	go cn.readLoop()
	return cn, nil
}

// leaderHint is the active controller as last learned (-1: unknown).
type leaderHint struct {
	mu sync.Mutex
	id int32
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

// clearIf forgets the hint if it still names id.
func (h *leaderHint) clearIf(id int32) {
	h.mu.Lock()
	if h.id == id {
		h.id = -1
	}
	h.mu.Unlock()
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
	if _, ok := c.cfg.Voters[id]; ok {
		c.leader.set(id)
	}
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
