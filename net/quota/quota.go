package quota

import (
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// Manager measures and throttles the clients of one broker (see the package doc).
// Safe for concurrent use.
type Manager struct {
	samples int
	window  time.Duration // one sample
	now     func() time.Time

	mu struct {
		sync.Mutex
		sensors  map[sensorKey]*rateSensor
		buckets  map[sensorKey]*tokenBucket // controller_mutation_rate (mutation.go)
		lastScan time.Time
	}
	throttleMs *prometheus.CounterVec // key
	throttled  *prometheus.CounterVec // key
}

// sensorKey is one rate: a quota key, and the user and client id the matched entity
// counts by ("" where it has no such part).
type sensorKey struct {
	key          string
	user, client string
}

// New returns a Manager whose windows are the broker keys quota.window.num and
// quota.window.size.seconds of static (Kafka's defaults where absent); its metrics
// are registered with reg (nil: not registered).
func New(static map[string]string, reg prometheus.Registerer) *Manager {
	get := func(key string) int {
		v, ok := static[key]
		if !ok {
			v, _ = configs.BrokerDefault(key)
		}
		n, _ := strconv.Atoi(v)
		return max(n, 1)
	}
	m := &Manager{samples: get("quota.window.num"), window: time.Duration(get("quota.window.size.seconds")) * time.Second, now: time.Now}
	m.mu.sensors = map[sensorKey]*rateSensor{}
	m.throttleMs = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "samsa", Subsystem: "quota", Name: "throttle_time_ms_total",
		Help: "Throttle time given to clients over their byte-rate quota, per quota key [kafka.server:type=Produce|Fetch throttle-time]."}, []string{"key"})
	m.throttled = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "samsa", Subsystem: "quota", Name: "throttled_responses_total",
		Help: "Responses sent with a throttle time (and their connection muted), per quota key."}, []string{"key"})
	if reg != nil {
		reg.MustRegister(m.throttleMs, m.throttled)
	}
	return m
}

// Client identifies the client of a request for its quotas.
type Client struct {
	User, ClientID string
}

// ClientOf is the client of a request from principal (its authenticated principal,
// "User:name"; "" without authentication: ANONYMOUS) with client id clientID.
func ClientOf(principal, clientID string) Client {
	user := "ANONYMOUS"
	if principal != "" {
		if name, ok := strings.CutPrefix(principal, "User:"); ok {
			principal = name
		}
		user = principal
	}
	return Client{User: user, ClientID: clientID}
}

// quotaOf resolves key for c in q: the limit and the sensor it counts in.
func quotaOf(q *metadata.ClientQuotas, key string, c Client) (float64, sensorKey, bool) {
	u, cl := metadata.QuotaName(c.User), metadata.QuotaName(c.ClientID)
	d := metadata.QuotaDefault
	none := metadata.QuotaPart{}
	for _, e := range [...]metadata.QuotaEntity{
		{User: u, ClientID: cl}, {User: u, ClientID: d}, {User: u},
		{User: d, ClientID: cl}, {User: d, ClientID: d}, {User: d},
		{ClientID: cl}, {ClientID: d},
	} {
		v, ok := q.Of(e)[key]
		if !ok {
			continue
		}
		sk := sensorKey{key: key}
		if e.User != none {
			sk.user = c.User
		}
		if e.ClientID != none {
			sk.client = c.ClientID
		}
		return v, sk, true
	}
	return 0, sensorKey{}, false
}

// record counts v against c's quota key in q and returns the throttle time (0: within
// the quota, or no quota).
func (m *Manager) record(q *metadata.ClientQuotas, key string, c Client, v float64) time.Duration {
	if q.Len() == 0 {
		return 0
	}
	limit, sk, ok := quotaOf(q, key, c)
	if !ok {
		return 0
	}
	now := m.now()
	m.mu.Lock()
	s := m.sensorLocked(sk, now)
	s.record(now, v)
	t := s.throttle(now, limit)
	m.mu.Unlock()
	m.count(key, t)
	return t
}

// sensorLocked is sk's sensor, created if need be. Caller holds m.mu.
func (m *Manager) sensorLocked(sk sensorKey, now time.Time) *rateSensor {
	s := m.mu.sensors[sk]
	if s == nil {
		s = newRateSensor(m.samples, m.window, now)
		m.mu.sensors[sk] = s
		m.scanLocked(now)
	}
	return s
}

// count adds a throttle time t given for key to the metrics.
func (m *Manager) count(key string, t time.Duration) {
	if t > 0 {
		m.throttleMs.WithLabelValues(key).Add(float64(t.Milliseconds()))
		m.throttled.WithLabelValues(key).Inc()
	}
}

// peek is the throttle time of the sensor sk against limit now, without recording
// anything; it is counted under sk's key.
func (m *Manager) peek(sk sensorKey, limit float64) time.Duration {
	now := m.now()
	m.mu.Lock()
	var t time.Duration
	if s := m.mu.sensors[sk]; s != nil {
		t = s.throttle(now, limit)
	}
	m.mu.Unlock()
	m.count(sk.key, t)
	return t
}

// peekKey is the throttle time c is owed for key in q now, without recording anything.
func (m *Manager) peekKey(q *metadata.ClientQuotas, key string, c Client) time.Duration {
	if q.Len() == 0 {
		return 0
	}
	limit, sk, ok := quotaOf(q, key, c)
	if !ok {
		return 0
	}
	return m.peek(sk, limit)
}

// add records v in the sensor sk (created if need be) without computing a throttle.
func (m *Manager) add(sk sensorKey, v float64) {
	now := m.now()
	m.mu.Lock()
	m.sensorLocked(sk, now).record(now, v)
	m.mu.Unlock()
}

// scanLocked drops sensors and buckets unused for an hour, at most once a minute.
// Caller holds m.mu.
func (m *Manager) scanLocked(now time.Time) {
	if now.Sub(m.mu.lastScan) < time.Minute {
		return
	}
	m.mu.lastScan = now
	for k, s := range m.mu.sensors {
		if now.Sub(s.last) > time.Hour {
			delete(m.mu.sensors, k)
		}
	}
	for k, tb := range m.mu.buckets {
		if now.Sub(tb.last) > time.Hour {
			delete(m.mu.buckets, k)
		}
	}
}

// Produce records a produce request of n bytes from c against its
// producer_byte_rate in q and returns the throttle time (0: within the quota, or
// none).
func (m *Manager) Produce(q *metadata.ClientQuotas, c Client, n int) time.Duration {
	return m.record(q, metadata.QuotaProducerByteRate, c, float64(n))
}

// Fetch records a fetch answer of n bytes to consumer c against its
// consumer_byte_rate in q and returns the throttle time: the larger of that rate's
// and of c's request_percentage. When it is not 0 the n bytes are taken back out of
// the rate (KafkaApis.handleFetchRequest: the throttled answer carries no records, so
// they were not sent).
func (m *Manager) Fetch(q *metadata.ClientQuotas, c Client, n int64) time.Duration {
	t := m.record(q, metadata.QuotaConsumerByteRate, c, float64(n))
	t = max(t, m.peekKey(q, metadata.QuotaRequestPercentage, c))
	if t > 0 {
		if _, sk, ok := quotaOf(q, metadata.QuotaConsumerByteRate, c); ok {
			m.add(sk, -float64(n))
		}
	}
	return t
}

// FetchMaxBytes is Kafka's ClientQuotaManager.getMaxValueInQuotaWindow for c's
// consumer_byte_rate in q: the most one fetch answer may carry, quota × (samples − 1)
// × sample window (math.MaxInt32 without a quota). A fetch up to it leaves the rate
// within the quota, so a consumer is not answered empty for ever because each of its
// fetches alone exceeds what the window allows.
func (m *Manager) FetchMaxBytes(q *metadata.ClientQuotas, c Client) int32 {
	if q.Len() == 0 {
		return math.MaxInt32
	}
	limit, _, ok := quotaOf(q, metadata.QuotaConsumerByteRate, c)
	if !ok {
		return math.MaxInt32
	}
	v := limit * float64(m.samples-1) * m.window.Seconds()
	if v >= math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(max(v, 0))
}

// RequestQuota is one client's request_percentage, resolved for one request.
type RequestQuota struct {
	m     *Manager
	sk    sensorKey
	limit float64
}

// Request resolves c's request_percentage in q; ok is false when no quota covers c
// (nothing is to be measured).
func (m *Manager) Request(q *metadata.ClientQuotas, c Client) (rq RequestQuota, ok bool) {
	if q.Len() == 0 {
		return RequestQuota{}, false
	}
	limit, sk, ok := quotaOf(q, metadata.QuotaRequestPercentage, c)
	if !ok {
		return RequestQuota{}, false
	}
	return RequestQuota{m: m, sk: sk, limit: limit}, true
}

// Throttle is the time the client is owed now, before its request is handled.
func (rq RequestQuota) Throttle() time.Duration { return rq.m.peek(rq.sk, rq.limit) }

// Record counts d, the time a handler ran, in units of 1% of a second.
func (rq RequestQuota) Record(d time.Duration) {
	rq.m.add(rq.sk, float64(d)/float64(10*time.Millisecond))
}

// IPConnectionRate is the connection_creation_rate quota of address ip in q (ok
// false: none): its own entity's, else the default ip's. It is what
// transport.ConnLimits.IPCreationRate asks.
func IPConnectionRate(q *metadata.ClientQuotas, ip string) (float64, bool) {
	if q.Len() == 0 {
		return 0, false
	}
	if parsed := net.ParseIP(ip); parsed != nil {
		ip = parsed.String()
	}
	for _, e := range [...]metadata.QuotaEntity{{IP: metadata.QuotaName(ip)}, {IP: metadata.QuotaDefault}} {
		if v, ok := q.Of(e)[metadata.QuotaConnectionCreationRate]; ok {
			return v, true
		}
	}
	return 0, false
}
