package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Connection limits, Kafka's ConnectionQuotas: checked when a connection is accepted,
// before the Handler hears of it, by both transports (acceptLoop).
//
//	accept ─▶ creation rate (broker, listener): over it, the accept loop waits for a token
//	       ─▶ count (broker, listener, IP):     over it, the connection is closed at once
//	       ─▶ served; its slot is returned when the connection ends
//
// Kafka's ConnectionQuotas differ in two ways this one does not copy: over
// max.connections Kafka's acceptor blocks until a slot frees (here the connection is
// closed, as for max.connections.per.ip: a blocked acceptor also stalls clients that
// would fit), and when the inter-broker listener is over the broker-wide limit Kafka
// closes the least recently used connection of another listener (here a Protected
// listener is simply exempt from the broker-wide limit). The broker-wide
// max.connection.creation.rate and a listener's throttle the accept loop as Kafka's do;
// a per-IP creation rate (the connection_creation_rate client quota, KIP-612) closes
// the connection, as Kafka's does after its throttle delay.

// ErrTooManyConnections is wrapped by the reasons Limiter.Admit refuses a connection.
var ErrTooManyConnections = errors.New("transport: connection limit")

// Reasons a connection is refused, the values of the metrics' reason label.
const (
	RefusedBroker     = "max.connections"
	RefusedListener   = "listener.max.connections"
	RefusedPerIP      = "max.connections.per.ip"
	RefusedIPRate     = "connection_creation_rate"
	ThrottledCreation = "max.connection.creation.rate" // waited, not refused
)

// ConnLimits are the limits of a Limiter. A zero count or rate means no limit (Kafka's
// defaults, 2147483647, are no limit in effect); a count of NoConnections allows none
// (Kafka's 0).
type ConnLimits struct {
	// MaxConns is max.connections: connections of every listener together
	// (Protected listeners excepted).
	MaxConns int
	// MaxConnsPerIP is max.connections.per.ip, PerIPOverrides its
	// max.connections.per.ip.overrides (an IP address's own limit; 0 there allows none).
	MaxConnsPerIP  int
	PerIPOverrides map[string]int
	// MaxCreationRate is max.connection.creation.rate: connections accepted per second
	// over every listener; the accept loops wait when it is spent.
	MaxCreationRate float64
	// Listeners are the listener.name.<l>.max.connections and
	// listener.name.<l>.max.connection.creation.rate limits, by listener name.
	Listeners map[string]ListenerLimits
	// IPCreationRate, if set, returns an address's connection_creation_rate quota
	// (connections per second; ok false: none). Called at each accept.
	IPCreationRate func(ip string) (rate float64, ok bool)
}

// NoConnections is the count that allows no connection at all.
const NoConnections = -1

// allows reports whether a count of n stays within limit max (0: none).
func allows(max, n int) bool { return max == 0 || n < max }

// ListenerLimits are one listener's limits.
type ListenerLimits struct {
	MaxConns        int
	MaxCreationRate float64
	// Protected: the broker-wide MaxConns does not apply (the inter-broker listener).
	Protected bool
}

// ParseIPOverrides parses max.connections.per.ip.overrides: "host:count,...". A host
// that is not an IP address is resolved once, with lookup (net.DefaultResolver's
// LookupHost when nil), and every address it has gets the count.
func ParseIPOverrides(s string, lookup func(ctx context.Context, host string) ([]string, error)) (map[string]int, error) {
	if lookup == nil {
		lookup = net.DefaultResolver.LookupHost
	}
	out := map[string]int{}
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		i := strings.LastIndexByte(e, ':')
		if i <= 0 {
			return nil, fmt.Errorf("max.connections.per.ip.overrides entry %q: want host:count", e)
		}
		host, cnt := strings.Trim(strings.TrimSpace(e[:i]), "[]"), strings.TrimSpace(e[i+1:])
		n, err := strconv.Atoi(cnt)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("max.connections.per.ip.overrides entry %q: count %q is not a non-negative integer", e, cnt)
		}
		if ip := net.ParseIP(host); ip != nil {
			out[ip.String()] = n
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		addrs, err := lookup(ctx, host)
		cancel()
		if err != nil || len(addrs) == 0 {
			return nil, fmt.Errorf("max.connections.per.ip.overrides entry %q: cannot resolve %s: %v", e, host, err)
		}
		for _, a := range addrs {
			if ip := net.ParseIP(a); ip != nil {
				out[ip.String()] = n
			}
		}
	}
	return out, nil
}

// Limiter keeps the connection counts and creation rates of every listener of a node
// (one Limiter shared by all its transports: Config.Limiter). Safe for concurrent use.
type Limiter struct {
	lim     atomic.Pointer[ConnLimits] // SetLimits replaces it
	log     *slog.Logger
	refused func(listener, reason string)
	now     func() time.Time

	mu struct {
		sync.Mutex
		total      int // connections of unprotected listeners
		perIP      map[string]int
		perLn      map[string]int
		rate       bucket // broker-wide creation rate
		lnRate     map[string]*bucket
		ipRate     map[string]*bucket
		lastLog    map[string]time.Time
		sinceLog   map[string]int
		lastIPScan time.Time
	}
	open atomic.Int64 // admitted and not released, every listener
}

// NewLimiter returns a Limiter enforcing lim. refused, if set, hears of every refused
// (and rate-throttled) connection (metrics); refusals are also logged at Warn, at most
// once per reason every 10 s with the count since. log may be nil.
func NewLimiter(lim ConnLimits, refused func(listener, reason string), log *slog.Logger) *Limiter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Limiter{log: log, refused: refused, now: time.Now}
	l.lim.Store(&lim)
	l.mu.perIP = map[string]int{}
	l.mu.perLn = map[string]int{}
	l.mu.lnRate = map[string]*bucket{}
	l.mu.ipRate = map[string]*bucket{}
	l.mu.lastLog = map[string]time.Time{}
	l.mu.sinceLog = map[string]int{}
	return l
}

// Limits returns the limits in force.
func (l *Limiter) Limits() ConnLimits { return *l.lim.Load() }

// SetLimits replaces the limits (broker keys changed at run time): the connections
// open stay open and count against the new limits; the next accepts are checked
// against them.
func (l *Limiter) SetLimits(lim ConnLimits) { l.lim.Store(&lim) }

// Open is the number of admitted connections not yet released.
func (l *Limiter) Open() int { return int(l.open.Load()) }

// ipOf is the address part of a remote address ("" when it has none).
func ipOf(a net.Addr) string {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.IP.String()
	case nil:
		return ""
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.String()
	}
	return host
}

// creationWait takes a creation token of the broker and of listener, or returns how
// long to wait for one (nothing taken then).
func (l *Limiter) creationWait(listener string) time.Duration {
	lim := l.lim.Load()
	ll := lim.Listeners[listener]
	if lim.MaxCreationRate <= 0 && ll.MaxCreationRate <= 0 {
		return 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	var lb *bucket
	if ll.MaxCreationRate > 0 {
		if lb = l.mu.lnRate[listener]; lb == nil {
			lb = &bucket{}
			l.mu.lnRate[listener] = lb
		}
	}
	w := time.Duration(0)
	if lim.MaxCreationRate > 0 {
		w = l.mu.rate.wait(now, lim.MaxCreationRate)
	}
	if lb != nil {
		w = max(w, lb.wait(now, ll.MaxCreationRate))
	}
	if w > 0 {
		return w
	}
	if lim.MaxCreationRate > 0 {
		l.mu.rate.take(now, lim.MaxCreationRate)
	}
	if lb != nil {
		lb.take(now, ll.MaxCreationRate)
	}
	return 0
}

// Admit counts a new connection of listener from remote, or refuses it (an error
// wrapping ErrTooManyConnections naming the limit). release returns the slot; call
// it exactly once, when the connection has ended.
func (l *Limiter) Admit(listener string, remote net.Addr) (release func(), err error) {
	ip := ipOf(remote)
	lim := l.lim.Load()
	ll := lim.Listeners[listener]
	now := l.now()
	l.mu.Lock()
	reason := ""
	ipMax, ok := lim.PerIPOverrides[ip]
	if !ok {
		ipMax = lim.MaxConnsPerIP
	} else if ipMax == 0 {
		ipMax = NoConnections // an override of 0 allows none, as in Kafka
	}
	switch {
	case !ll.Protected && !allows(lim.MaxConns, l.mu.total):
		reason = RefusedBroker
	case !allows(ll.MaxConns, l.mu.perLn[listener]):
		reason = RefusedListener
	case !allows(ipMax, l.mu.perIP[ip]):
		reason = RefusedPerIP
	}
	if reason == "" && lim.IPCreationRate != nil {
		if rate, ok := lim.IPCreationRate(ip); ok {
			if rate <= 0 {
				reason = RefusedIPRate
			} else {
				b := l.mu.ipRate[ip]
				if b == nil {
					b = &bucket{}
					l.mu.ipRate[ip] = b
					l.scanIPRatesLocked(now)
				}
				if b.wait(now, rate) > 0 {
					reason = RefusedIPRate
				} else {
					b.take(now, rate)
				}
			}
		}
	}
	if reason != "" {
		l.mu.Unlock()
		l.refuse(listener, reason, remote)
		return nil, fmt.Errorf("%w: %s (from %s on %s)", ErrTooManyConnections, reason, ip, listener)
	}
	if !ll.Protected {
		l.mu.total++
	}
	l.mu.perLn[listener]++
	l.mu.perIP[ip]++
	l.mu.Unlock()
	l.open.Add(1)
	var once atomic.Bool
	return func() {
		if once.Swap(true) {
			return
		}
		l.open.Add(-1)
		l.mu.Lock()
		if !ll.Protected {
			l.mu.total--
		}
		if l.mu.perLn[listener]--; l.mu.perLn[listener] <= 0 {
			delete(l.mu.perLn, listener)
		}
		if l.mu.perIP[ip]--; l.mu.perIP[ip] <= 0 {
			delete(l.mu.perIP, ip)
		}
		l.mu.Unlock()
	}, nil
}

// scanIPRatesLocked drops per-IP buckets that are full again (idle addresses), at most
// once a second, so a scan of many source addresses does not grow the map for ever.
func (l *Limiter) scanIPRatesLocked(now time.Time) {
	if now.Sub(l.mu.lastIPScan) < time.Second {
		return
	}
	l.mu.lastIPScan = now
	for ip, b := range l.mu.ipRate {
		if now.Sub(b.last) > 10*time.Second {
			delete(l.mu.ipRate, ip)
		}
	}
}

// refuse counts and logs (rate-limited) a refused or throttled connection.
func (l *Limiter) refuse(listener, reason string, remote net.Addr) {
	if l.refused != nil {
		l.refused(listener, reason)
	}
	now := l.now()
	l.mu.Lock()
	l.mu.sinceLog[reason]++
	last, logged := l.mu.lastLog[reason]
	n := l.mu.sinceLog[reason]
	doLog := !logged || now.Sub(last) >= 10*time.Second
	if doLog {
		l.mu.lastLog[reason] = now
		l.mu.sinceLog[reason] = 0
	}
	l.mu.Unlock()
	if doLog {
		l.log.Warn("connection limit reached", "limit", reason, "listener", listener, "remote", remote, "count_since_last_log", n)
	}
}

// bucket is a token bucket holding at most one second's worth of tokens.
type bucket struct {
	tokens float64
	last   time.Time
	init   bool
}

func (b *bucket) refill(now time.Time, rate float64) {
	if !b.init {
		b.tokens, b.last, b.init = rate, now, true
		return
	}
	if d := now.Sub(b.last); d > 0 {
		b.tokens = math.Min(rate, b.tokens+d.Seconds()*rate)
		b.last = now
	}
}

// wait is how long until a token is there (0: now).
func (b *bucket) wait(now time.Time, rate float64) time.Duration {
	b.refill(now, rate)
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) / rate * float64(time.Second))
}

func (b *bucket) take(now time.Time, rate float64) {
	b.refill(now, rate)
	b.tokens--
}

// namedListener carries a listener's name (NamedListener).
type namedListener struct {
	net.Listener
	name string
}

// NamedListener returns ln under name: the name Config.Limiter's per-listener limits
// and the refusal metrics use for its connections. Accept is ln's.
func NamedListener(ln net.Listener, name string) net.Listener { return namedListener{ln, name} }

// ListenerOf is the name of the listener that accepted c (NamedListener), "" when it
// was not named.
func ListenerOf(c Conn) string {
	if n, ok := c.(interface{ listenerName() string }); ok {
		return n.listenerName()
	}
	return ""
}

func (c *stdConn) listenerName() string { return c.listener }

func listenerName(ln net.Listener) string {
	if n, ok := ln.(namedListener); ok {
		return n.name
	}
	return ""
}

// admit applies the limiter (nil: none) to an accepted connection: it waits for a
// creation token (false if closing ended the wait: nc is closed) and counts the
// connection, closing it when a limit refuses it.
func admit(lim *Limiter, listener string, nc net.Conn, closing <-chan struct{}) (release func(), ok bool) {
	if lim == nil {
		return func() {}, true
	}
	throttled := false
	for {
		w := lim.creationWait(listener)
		if w <= 0 {
			break
		}
		if !throttled {
			throttled = true
			lim.refuse(listener, ThrottledCreation, nc.RemoteAddr())
		}
		t := time.NewTimer(w)
		select {
		case <-t.C:
		case <-closing:
			t.Stop()
			nc.Close()
			return nil, false
		}
	}
	release, err := lim.Admit(listener, nc.RemoteAddr())
	if err != nil {
		nc.Close()
		return nil, false
	}
	return release, true
}

// Mute delays reading c's next request until d from now (Kafka's KIP-219 throttling:
// the answer leaves at once with its throttle time, then the connection is muted).
// A later Mute extends, never shortens, the time. Answers are still written while a
// connection is muted; the idle timeout does not count the muted time against it. It
// reports false for connections of other Conn implementations.
func Mute(c Conn, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	if m, ok := c.(interface{ mute(until int64) }); ok {
		m.mute(time.Now().Add(min(d, maxMute)).UnixNano())
		return true
	}
	return false
}

// maxMute bounds one Mute (Kafka bounds a throttle by its quota window).
const maxMute = 5 * time.Minute

// extendMute stores until in m unless m is later already.
func extendMute(m *atomic.Int64, until int64) {
	for {
		cur := m.Load()
		if cur >= until || m.CompareAndSwap(cur, until) {
			return
		}
	}
}
