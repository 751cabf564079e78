package node

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/net/transport"
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("config")

// Roles are the roles of a node (process.roles).
type Roles struct {
	Broker     bool
	Controller bool
}

func (r Roles) String() string {
	switch {
	case r.Broker && r.Controller:
		return "broker,controller"
	case r.Controller:
		return "controller"
	case r.Broker:
		return "broker"
	}
	return ""
}

// Listener is one named listener: listeners' NAME://host:port with its security
// protocol (listener.security.protocol.map). An empty Host binds every interface.
type Listener struct {
	Name     string
	Host     string
	Port     int
	Protocol string
}

// Addr is host:port.
func (l Listener) Addr() string { return net.JoinHostPort(l.Host, strconv.Itoa(l.Port)) }

func (l Listener) String() string { return l.Name + "://" + l.Addr() }

// Voter is one controller of controller.quorum.voters: its node id and the address
// of its controller listener. ID is -1 for an address that came from
// controller.quorum.bootstrap.servers (which carries no ids).
type Voter struct {
	ID   int32
	Host string
	Port int
}

// Addr is host:port.
func (v Voter) Addr() string { return net.JoinHostPort(v.Host, strconv.Itoa(v.Port)) }

// Sync is the durability policy of the `sync` key.
type Sync struct {
	// Name is the key's value: fsync, replicated, interval or none.
	Name string
	// Engine is the engine's policy: fsync for fsync; interval (a background
	// flush) for replicated and interval; none for none.
	Engine engine.SyncPolicy
	// DurableEnd: a replica's offset counts toward the high watermark only once it
	// is fdatasynced (fsync); otherwise its appended end counts (replicated: rely
	// on the ISR, Kafka's default).
	DurableEnd bool
}

// Replication holds the replica manager's keys (Kafka's names), parsed and checked
// against each other at start-up. The broker builds its replica manager from the
// same keys (Config.Keys, through coordinator/configs' layers, so that dynamic
// overrides apply); these typed values are the node's static view, for logs and
// tests.
type Replication struct {
	LagTimeMax            time.Duration // replica.lag.time.max.ms
	NumFetchers           int           // num.replica.fetchers
	FetchMaxBytes         int32         // replica.fetch.max.bytes
	FetchResponseMaxBytes int32         // replica.fetch.response.max.bytes
	FetchWaitMax          time.Duration // replica.fetch.wait.max.ms
	FetchMinBytes         int32         // replica.fetch.min.bytes
	FetchBackoff          time.Duration // replica.fetch.backoff.ms
	SocketTimeout         time.Duration // replica.socket.timeout.ms
	FollowerThrottle      int64         // follower.replication.throttled.rate, bytes/s
	LeaderThrottle        int64         // leader.replication.throttled.rate, bytes/s
}

// Config is the resolved configuration of one node: Kafka's keys (KRaft names) parsed
// and checked against each other. Build it with FromKeys; it is read-only afterwards.
type Config struct {
	// Keys holds every explicitly set key with its canonical value (server.properties,
	// environment, flags): the broker's static configuration as DescribeConfigs
	// reports it.
	Keys map[string]string

	// Roles are process.roles; RolesSet is false when the key is unset, which makes a
	// combined single node (broker and controller, the only voter) that formats its
	// directories itself: `make run`.
	Roles    Roles
	RolesSet bool
	NodeID   int32
	// Voters are controller.quorum.voters, sorted by id. A node given
	// controller.quorum.bootstrap.servers instead has voters with ID -1 (a
	// controller's too, unless they name it alone: a quorum of one).
	Voters []Voter
	// QuorumBootstrap: a controller given controller.quorum.bootstrap.servers
	// instead of controller.quorum.voters. Its quorum is dynamic (KIP-853) when
	// `samsa storage format` made it so (--standalone, --initial-controllers,
	// --no-initial-controllers: DynamicQuorum); otherwise the servers must name it
	// alone, a static quorum of one.
	QuorumBootstrap bool
	// DynamicQuorum: the node runs a controller of a dynamic quorum (set by
	// Dynamic, at start, from the format): Voters are the bootstrap servers.
	DynamicQuorum bool

	// Listeners are the listeners to bind, in the order given.
	Listeners []Listener
	// Advertised are the advertised addresses of the broker listeners given in
	// advertised.listeners (the rest advertise their bound address). Controller
	// listeners are never advertised to clients.
	Advertised map[string]Listener
	// ControllerListenerNames are controller.listener.names; the first is the one
	// controllers bind and brokers use to reach voters.
	ControllerListenerNames []string
	// InterBrokerListener is inter.broker.listener.name (default PLAINTEXT, or the
	// first broker listener when there is no PLAINTEXT one).
	InterBrokerListener string

	DataDir     string
	LogDirs     []string
	MetadataDir string // metadata.log.dir

	HeartbeatInterval time.Duration // broker.heartbeat.interval.ms
	SessionTimeout    time.Duration // broker.session.timeout.ms
	ElectionTimeout   time.Duration // controller.quorum.election.timeout.ms
	Rack              *string       // broker.rack
	Replication       Replication
	Sync              Sync

	AdminListen            string // empty: no admin listener
	Transport              string // std or reactor
	InlineWrites           bool   // samsa.transport.inline.writes.enable
	NetLoops               int    // transport=reactor: event loops (0: one per CPU)
	IOThreads              int    // transport=reactor: handler goroutines
	FlushInterval          time.Duration
	RetentionCheckInterval time.Duration
	MaxRequestBytes        int32
	IdleTimeout            time.Duration
	ConnLimits             transport.ConnLimits // max.connections* (limits.go)
	AutoCreateTopics       bool
	NumPartitions          int32
	ReplicationFactor      int16
	// PowerLossJournal (samsa.test.power.loss.journal, tests only): the file journaling
	// synced sizes so that a killed process restarts as after a power loss.
	PowerLossJournal string
}

// Get returns the effective value of key: set, else Kafka's default, else "".
func (c *Config) Get(key string) string {
	if v, ok := c.Keys[key]; ok {
		return v
	}
	v, _ := configs.BrokerDefault(key)
	return v
}

func (c *Config) getInt(key string) int64 {
	n, _ := strconv.ParseInt(c.Get(key), 10, 64) // validated by configs
	return n
}

func (c *Config) getMs(key string) time.Duration {
	return time.Duration(c.getInt(key)) * time.Millisecond
}

// Listener returns the listener named name.
func (c *Config) Listener(name string) (Listener, bool) {
	for _, l := range c.Listeners {
		if l.Name == name {
			return l, true
		}
	}
	return Listener{}, false
}

// ControllerListener is the listener this controller binds for the quorum and the
// brokers (false on a broker-only node, and on a single combined node without one).
func (c *Config) ControllerListener() (Listener, bool) {
	if !c.Roles.Controller || len(c.ControllerListenerNames) == 0 {
		return Listener{}, false
	}
	return c.Listener(c.ControllerListenerNames[0])
}

// BrokerListeners are the listeners clients and followers connect to (every listener
// that is not a controller listener), on a broker; none on a controller-only node.
func (c *Config) BrokerListeners() []Listener {
	if !c.Roles.Broker {
		return nil
	}
	var out []Listener
	for _, l := range c.Listeners {
		if !slices.Contains(c.ControllerListenerNames, l.Name) {
			out = append(out, l)
		}
	}
	return out
}

// ClientListener is the broker listener the broker registers first and advertises in
// Metadata: the inter-broker listener.
func (c *Config) ClientListener() (Listener, bool) {
	if !c.Roles.Broker {
		return Listener{}, false
	}
	return c.Listener(c.InterBrokerListener)
}

// Combined reports whether this node is a broker and a controller.
func (c *Config) Combined() bool { return c.Roles.Broker && c.Roles.Controller }

// SoleVoter reports whether this node is a controller and the only voter: a quorum of
// one, which formats its directories itself and needs no network for raft.
func (c *Config) SoleVoter() bool {
	return c.Roles.Controller && len(c.Voters) == 1 && c.Voters[0].ID == c.NodeID
}

// Dynamic returns cfg as a controller of a dynamic quorum runs it: the voters are
// the bootstrap servers (ID -1; the members come from the metadata log), so that it
// is never a SoleVoter, whose raft needs no network. cfg is not modified.
func (c *Config) Dynamic() *Config {
	d := *c
	d.Voters, d.DynamicQuorum = nil, true
	if bs, err := parseBootstrapServers(c.Keys["controller.quorum.bootstrap.servers"]); err == nil {
		d.Voters = bs
	}
	return &d
}

// VoterIDs are the voters' node ids, sorted.
func (c *Config) VoterIDs() []int32 {
	out := make([]int32, 0, len(c.Voters))
	for _, v := range c.Voters {
		out = append(out, v.ID)
	}
	return out
}

// Dirs are the directories a formatted node holds meta.properties in: every log dir
// (on a controller-only node too, as Kafka formats them) and the metadata dir.
func (c *Config) Dirs() []string {
	out := slices.Clone(c.LogDirs)
	if !slices.Contains(out, c.MetadataDir) {
		out = append(out, c.MetadataDir)
	}
	return out
}

// FromKeys resolves a node's configuration from its explicitly set keys (canonical
// values, as configs.ValidateBroker returns them; unknown keys are the caller's to
// warn about). keys is kept, not copied. Every error wraps ErrConfig and names the
// key(s) to fix.
func FromKeys(keys map[string]string) (*Config, error) {
	if keys == nil {
		keys = map[string]string{}
	}
	c := &Config{Keys: keys}
	for _, step := range []func() error{c.deriveIdentity, c.deriveListeners, c.deriveVoters, c.deriveDirs, c.deriveRest} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func errorf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
}

func (c *Config) deriveIdentity() error {
	id := c.Get("node.id")
	if _, ok := c.Keys["node.id"]; !ok {
		if v, ok := c.Keys["broker.id"]; ok {
			id = v
		}
	}
	n, err := strconv.ParseInt(id, 10, 32)
	if err != nil || n < 0 {
		return errorf("node.id %q: want a non-negative 32-bit integer", id)
	}
	c.NodeID = int32(n)
	if v, ok := c.Keys["process.roles"]; ok {
		c.RolesSet = true
		for _, r := range strings.Split(v, ",") {
			switch strings.ToLower(strings.TrimSpace(r)) {
			case "broker":
				c.Roles.Broker = true
			case "controller":
				c.Roles.Controller = true
			}
		}
		if !c.Roles.Broker && !c.Roles.Controller {
			return errorf("process.roles %q: want broker, controller or broker,controller", v)
		}
	} else {
		c.Roles = Roles{Broker: true, Controller: true}
	}
	if r, ok := c.Keys["broker.rack"]; ok && r != "" {
		c.Rack = &r
	}
	return nil
}

// protocolMap parses listener.security.protocol.map.
func protocolMap(s string) (map[string]string, error) {
	m := map[string]string{}
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		name, proto, ok := strings.Cut(e, ":")
		name, proto = strings.TrimSpace(name), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || name == "" || proto == "" {
			return nil, errorf("listener.security.protocol.map entry %q: want NAME:PROTOCOL", e)
		}
		switch proto {
		case "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
		default:
			return nil, errorf("listener.security.protocol.map entry %q: unknown security protocol %s (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)", e, proto)
		}
		m[strings.ToUpper(name)] = proto
	}
	return m, nil
}

// ParseListeners parses "NAME://host:port,..." (Kafka's listeners and
// advertised.listeners). An entry without a scheme is PLAINTEXT (the form of
// `samsa serve --listen host:port`). Names are upper-cased and must be unique.
func ParseListeners(key, s string) ([]Listener, error) {
	var out []Listener
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, hp := "PLAINTEXT", entry
		if n, rest, ok := strings.Cut(entry, "://"); ok {
			name, hp = strings.ToUpper(strings.TrimSpace(n)), rest
		}
		if name == "" {
			return nil, errorf("%s: listener %q has no name", key, entry)
		}
		host, port, err := net.SplitHostPort(hp)
		if err != nil {
			return nil, errorf("%s: listener %q: %v", key, entry, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 0 || p > 65535 {
			return nil, errorf("%s: listener %q: bad port %q", key, entry, port)
		}
		for _, o := range out {
			if o.Name == name {
				return nil, errorf("%s: listener name %s given twice", key, name)
			}
		}
		out = append(out, Listener{Name: name, Host: host, Port: p})
	}
	return out, nil
}

// deriveListeners derives the listeners from listeners, their protocols, the
// controller listeners, the inter-broker listener and the advertised addresses.
func (c *Config) deriveListeners() error {
	if err := c.deriveProtocols(); err != nil {
		return err
	}
	if err := c.deriveControllerListeners(); err != nil {
		return err
	}
	if c.Roles.Broker {
		if err := c.deriveInterBrokerListener(); err != nil {
			return err
		}
	}
	return c.deriveAdvertised()
}

// deriveProtocols parses listeners and gives each its security protocol (from
// listener.security.protocol.map, or its name when that is a protocol); no two
// bind one port.
func (c *Config) deriveProtocols() error {
	pm, err := protocolMap(c.Get("listener.security.protocol.map"))
	if err != nil {
		return err
	}
	if c.Listeners, err = ParseListeners("listeners", c.Get("listeners")); err != nil {
		return err
	}
	if len(c.Listeners) == 0 {
		return errorf("listeners is empty: give at least PLAINTEXT://host:port")
	}
	ports := map[int]string{}
	for i := range c.Listeners {
		l := &c.Listeners[i]
		proto, ok := pm[l.Name]
		if !ok {
			switch l.Name {
			case "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
				proto = l.Name
			default:
				return errorf("listener %s has no security protocol: add %s:PLAINTEXT to listener.security.protocol.map", l.Name, l.Name)
			}
		}
		l.Protocol = proto
		if other, dup := ports[l.Port]; dup && l.Port != 0 {
			return errorf("listeners %s and %s bind the same port %d", other, l.Name, l.Port)
		}
		ports[l.Port] = l.Name
	}
	return nil
}

// deriveControllerListeners sets the controller listener names and checks them
// against process.roles: a controller binds one, a broker alone none.
func (c *Config) deriveControllerListeners() error {
	if v, ok := c.Keys["controller.listener.names"]; ok {
		for _, n := range strings.Split(v, ",") {
			if n = strings.ToUpper(strings.TrimSpace(n)); n != "" {
				c.ControllerListenerNames = append(c.ControllerListenerNames, n)
			}
		}
	} else if !c.RolesSet {
		// A single combined node: a listener named CONTROLLER, if any, is its
		// controller listener (so a Kafka sample file reads the same).
		c.ControllerListenerNames = []string{"CONTROLLER"}
	}
	if c.RolesSet && len(c.ControllerListenerNames) == 0 {
		return errorf("controller.listener.names is required with process.roles (e.g. controller.listener.names=CONTROLLER)")
	}
	_, hasCtl := c.ControllerListener()
	switch {
	case c.Roles.Controller && c.RolesSet && !hasCtl:
		return errorf("process.roles=%s includes controller but listeners has no %s listener (controller.listener.names=%s): add %s://host:port to listeners",
			c.Roles, c.ControllerListenerNames[0], strings.Join(c.ControllerListenerNames, ","), c.ControllerListenerNames[0])
	case !c.Roles.Controller:
		for _, l := range c.Listeners {
			if slices.Contains(c.ControllerListenerNames, l.Name) {
				return errorf("process.roles=broker: listeners must not include the controller listener %s (only controllers bind it)", l.Name)
			}
		}
	}
	return nil
}

// deriveInterBrokerListener sets the listener brokers talk to each other on:
// inter.broker.listener.name, else PLAINTEXT if it is a broker listener, else the
// first broker listener.
func (c *Config) deriveInterBrokerListener() error {
	brokers := c.BrokerListeners()
	if len(brokers) == 0 {
		return errorf("process.roles=%s includes broker but every listener is a controller listener: add PLAINTEXT://host:port to listeners", c.Roles)
	}
	ib, set := c.Keys["inter.broker.listener.name"]
	ib = strings.ToUpper(strings.TrimSpace(ib))
	if !set || ib == "" {
		ib = brokers[0].Name
		for _, l := range brokers {
			if l.Name == "PLAINTEXT" {
				ib = l.Name
			}
		}
	}
	if slices.Contains(c.ControllerListenerNames, ib) {
		return errorf("inter.broker.listener.name=%s is a controller listener: name a broker listener", ib)
	}
	if _, ok := c.Listener(ib); !ok {
		return errorf("inter.broker.listener.name=%s is not among listeners (%s)", ib, listenerNames(c.Listeners))
	}
	c.InterBrokerListener = ib
	return nil
}

// deriveAdvertised sets the address each broker listener advertises, from
// advertised.listeners (a bare host:port is the client listener's).
func (c *Config) deriveAdvertised() error {
	c.Advertised = map[string]Listener{}
	if v := c.Get("advertised.listeners"); v != "" {
		adv, err := ParseListeners("advertised.listeners", v)
		if err != nil {
			return err
		}
		for _, a := range adv {
			if _, ok := c.Listener(a.Name); !ok {
				if len(adv) == 1 && a.Name == "PLAINTEXT" && !strings.Contains(v, "://") {
					// `--advertised-listener host:port`: the client listener's address.
					if cl, ok := c.ClientListener(); ok {
						a.Name = cl.Name
					}
				}
				if _, ok := c.Listener(a.Name); !ok {
					return errorf("advertised.listeners names %s, which is not among listeners (%s)", a.Name, listenerNames(c.Listeners))
				}
			}
			if slices.Contains(c.ControllerListenerNames, a.Name) {
				continue // controllers are found through controller.quorum.voters
			}
			if a.Host == "" || a.Port == 0 {
				return errorf("advertised.listeners: %s needs a host and a port", a)
			}
			l, _ := c.Listener(a.Name)
			a.Protocol = l.Protocol
			c.Advertised[a.Name] = a
		}
	}
	return nil
}

func listenerNames(ls []Listener) string {
	names := make([]string, len(ls))
	for i, l := range ls {
		names[i] = l.Name
	}
	return strings.Join(names, ", ")
}

// ParseVoters parses controller.quorum.voters: "id@host:port,...". Ids must be unique.
// The result is sorted by id.
func ParseVoters(s string) ([]Voter, error) {
	var out []Voter
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		ids, hp, ok := strings.Cut(e, "@")
		if !ok {
			return nil, errorf("controller.quorum.voters entry %q: want id@host:port", e)
		}
		id, err := strconv.ParseInt(strings.TrimSpace(ids), 10, 32)
		if err != nil || id < 0 {
			return nil, errorf("controller.quorum.voters entry %q: bad node id %q", e, ids)
		}
		host, port, err := net.SplitHostPort(hp)
		if err != nil {
			return nil, errorf("controller.quorum.voters entry %q: %v", e, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p <= 0 || p > 65535 || host == "" {
			return nil, errorf("controller.quorum.voters entry %q: want a host and a port in 1..65535", e)
		}
		for _, o := range out {
			if o.ID == int32(id) {
				return nil, errorf("controller.quorum.voters lists node %d twice (%s and %s): node ids must be unique", id, o.Addr(), hp)
			}
		}
		out = append(out, Voter{ID: int32(id), Host: host, Port: p})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func parseBootstrapServers(s string) ([]Voter, error) {
	var out []Voter
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		host, port, err := net.SplitHostPort(e)
		p, perr := strconv.Atoi(port)
		if err != nil || perr != nil || p <= 0 || p > 65535 || host == "" {
			return nil, errorf("controller.quorum.bootstrap.servers entry %q: want host:port", e)
		}
		out = append(out, Voter{ID: -1, Host: host, Port: p})
	}
	return out, nil
}

// sameAddress reports whether a voter's advertised host:port can be the bound
// listener l: the ports agree, and the hosts agree unless the listener binds every
// interface or one of them is a name other than localhost (names are not resolved).
func sameAddress(l Listener, host string, port int) bool {
	if l.Port != port {
		return false
	}
	bound := net.ParseIP(l.Host)
	if l.Host == "" || (bound != nil && bound.IsUnspecified()) {
		return true
	}
	norm := func(h string) net.IP {
		if strings.EqualFold(h, "localhost") {
			return net.IPv4(127, 0, 0, 1)
		}
		return net.ParseIP(h)
	}
	a, b := norm(l.Host), norm(host)
	switch {
	case a == nil && b == nil:
		return strings.EqualFold(l.Host, host)
	case a == nil || b == nil:
		return true // a name against an address: not resolved, so not refused
	}
	return a.Equal(b)
}

func (c *Config) deriveVoters() error {
	var err error
	voters, hasVoters := c.Keys["controller.quorum.voters"]
	bootstrap, hasBootstrap := c.Keys["controller.quorum.bootstrap.servers"]
	if hasVoters && voters != "" {
		if c.Voters, err = ParseVoters(voters); err != nil {
			return err
		}
	}
	ctl, hasCtl := c.ControllerListener()
	switch {
	case len(c.Voters) > 0:
	case !c.RolesSet:
		// A single combined node: the only voter, at its controller listener if it
		// binds one.
		v := Voter{ID: c.NodeID}
		if hasCtl {
			v.Host, v.Port = ctl.Host, ctl.Port
		}
		c.Voters = []Voter{v}
	case !c.Roles.Controller && hasBootstrap && bootstrap != "":
		if c.Voters, err = parseBootstrapServers(bootstrap); err != nil {
			return err
		}
		if len(c.Voters) == 0 {
			return errorf("controller.quorum.bootstrap.servers is empty")
		}
		return nil
	case c.Roles.Controller && hasBootstrap && bootstrap != "":
		// Kafka's sample files (dynamic quorums, KIP-853) give a controller only the
		// bootstrap servers. Naming this controller alone they make a quorum of one
		// (static unless formatted dynamic); otherwise the quorum is dynamic, which
		// the node checks at start against its format (DynamicQuorum).
		bs, err := parseBootstrapServers(bootstrap)
		if err != nil {
			return err
		}
		if len(bs) == 0 {
			return errorf("controller.quorum.bootstrap.servers is empty")
		}
		c.QuorumBootstrap = true
		if len(bs) == 1 && sameAddress(ctl, bs[0].Host, bs[0].Port) {
			c.Voters = []Voter{{ID: c.NodeID, Host: bs[0].Host, Port: bs[0].Port}}
			break
		}
		if !hasCtl || ctl.Port == 0 {
			return errorf("listeners: a controller of a dynamic quorum (controller.quorum.bootstrap.servers) needs a controller listener with a fixed port")
		}
		c.Voters = bs
		return nil
	default:
		return errorf("controller.quorum.voters is required with process.roles=%s (e.g. controller.quorum.voters=1@127.0.0.1:9093)", c.Roles)
	}

	var self *Voter
	for i := range c.Voters {
		if c.Voters[i].ID == c.NodeID {
			self = &c.Voters[i]
		}
	}
	switch {
	case !c.RolesSet && len(c.Voters) > 1:
		return errorf("controller.quorum.voters names %d voters but process.roles is unset (a single combined node): set process.roles=broker,controller", len(c.Voters))
	case !c.RolesSet && self == nil:
		return errorf("controller.quorum.voters must name node.id %d on a single combined node (process.roles unset)", c.NodeID)
	case c.Roles.Controller && self == nil:
		return errorf("node.id %d is not in controller.quorum.voters (%s): a controller must be one of the voters", c.NodeID, voterIDs(c.Voters))
	case !c.Roles.Controller && self != nil:
		return errorf("process.roles=broker: node.id %d must not be in controller.quorum.voters (%s); a broker-only node needs an id of its own", c.NodeID, voterIDs(c.Voters))
	}
	if self != nil && hasCtl && self.Port != 0 && !sameAddress(ctl, self.Host, self.Port) {
		return errorf("controller.quorum.voters names node %d at %s, but its controller listener %s binds %s: the two must agree",
			c.NodeID, self.Addr(), ctl.Name, ctl.Addr())
	}
	if c.RolesSet && len(c.Voters) > 1 && c.Roles.Controller && ctl.Port == 0 {
		return errorf("listeners: the controller listener %s needs a fixed port in a quorum of %d voters", ctl.Name, len(c.Voters))
	}
	return nil
}

func voterIDs(vs []Voter) string {
	ids := make([]string, len(vs))
	for i, v := range vs {
		ids[i] = strconv.Itoa(int(v.ID))
	}
	return strings.Join(ids, ", ")
}

func (c *Config) deriveDirs() error {
	c.DataDir = c.Get("data.dir")
	switch {
	case c.Get("log.dirs") != "":
		for _, d := range strings.Split(c.Get("log.dirs"), ",") {
			if d = strings.TrimSpace(d); d != "" {
				c.LogDirs = append(c.LogDirs, filepath.Clean(d))
			}
		}
	case c.Get("log.dir") != "":
		c.LogDirs = []string{filepath.Clean(c.Get("log.dir"))}
	default:
		c.LogDirs = []string{filepath.Join(c.DataDir, "logs")}
	}
	for i, d := range c.LogDirs {
		if slices.Contains(c.LogDirs[:i], d) {
			return errorf("log.dirs lists %s twice", d)
		}
	}
	_, dataDirSet := c.Keys["data.dir"]
	switch {
	case c.Get("metadata.log.dir") != "":
		c.MetadataDir = filepath.Clean(c.Get("metadata.log.dir"))
	case dataDirSet || (c.Get("log.dirs") == "" && c.Get("log.dir") == ""):
		c.MetadataDir = filepath.Join(c.DataDir, "meta")
	default:
		// The first log dir's parent: <data.dir>/logs → <data.dir>/meta.
		c.MetadataDir = filepath.Join(filepath.Dir(c.LogDirs[0]), "meta")
	}
	return nil
}

func (c *Config) deriveRest() error {
	name := c.Get("sync")
	switch name {
	case "fsync":
		c.Sync = Sync{Name: name, Engine: engine.SyncFsync, DurableEnd: true}
	case "replicated", "interval":
		c.Sync = Sync{Name: name, Engine: engine.SyncInterval}
	case "none":
		c.Sync = Sync{Name: name, Engine: engine.SyncNone}
	default:
		return errorf("sync %q: want fsync, replicated, interval or none", name)
	}
	c.HeartbeatInterval = c.getMs("broker.heartbeat.interval.ms")
	c.SessionTimeout = c.getMs("broker.session.timeout.ms")
	if c.HeartbeatInterval >= c.SessionTimeout {
		return errorf("broker.heartbeat.interval.ms (%d) must be less than broker.session.timeout.ms (%d)",
			c.HeartbeatInterval.Milliseconds(), c.SessionTimeout.Milliseconds())
	}
	c.ElectionTimeout = c.getMs("controller.quorum.election.timeout.ms")
	c.Replication = Replication{
		LagTimeMax:            c.getMs("replica.lag.time.max.ms"),
		NumFetchers:           int(c.getInt("num.replica.fetchers")),
		FetchMaxBytes:         int32(c.getInt("replica.fetch.max.bytes")),
		FetchResponseMaxBytes: int32(c.getInt("replica.fetch.response.max.bytes")),
		FetchWaitMax:          c.getMs("replica.fetch.wait.max.ms"),
		FetchMinBytes:         int32(c.getInt("replica.fetch.min.bytes")),
		FetchBackoff:          c.getMs("replica.fetch.backoff.ms"),
		SocketTimeout:         c.getMs("replica.socket.timeout.ms"),
		FollowerThrottle:      c.getInt("follower.replication.throttled.rate"),
		LeaderThrottle:        c.getInt("leader.replication.throttled.rate"),
	}
	if c.Replication.FetchWaitMax >= c.Replication.SocketTimeout {
		return errorf("replica.fetch.wait.max.ms (%d) must be less than replica.socket.timeout.ms (%d)",
			c.Replication.FetchWaitMax.Milliseconds(), c.Replication.SocketTimeout.Milliseconds())
	}
	c.AdminListen = c.Get("admin.listen")
	c.Transport = c.Get("transport")
	c.InlineWrites = c.Get("samsa.transport.inline.writes.enable") == "true"
	if _, ok := c.Keys["num.network.threads"]; ok {
		c.NetLoops = int(c.getInt("num.network.threads"))
	}
	c.IOThreads = int(c.getInt("num.io.threads"))
	if c.Get("log.flush.interval.ms") != "" {
		c.FlushInterval = c.getMs("log.flush.interval.ms")
	}
	c.RetentionCheckInterval = c.getMs("log.retention.check.interval.ms")
	c.MaxRequestBytes = int32(c.getInt("socket.request.max.bytes"))
	c.IdleTimeout = c.getMs("connections.max.idle.ms")
	c.AutoCreateTopics = c.Get("auto.create.topics.enable") == "true"
	c.NumPartitions = int32(c.getInt("num.partitions"))
	c.ReplicationFactor = int16(c.getInt("default.replication.factor"))
	c.PowerLossJournal = c.Get("samsa.test.power.loss.journal")
	return c.deriveConnLimits()
}
