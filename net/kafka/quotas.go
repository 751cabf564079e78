package kafka

import (
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/transport"
)

// Client quotas, enforced as Kafka's ClientQuotaManager does (KIP-13, KIP-55, KIP-219):
//
//	Produce (v0+): the request's size is recorded against producer_byte_rate
//	Fetch (consumers, not followers): the response's size against consumer_byte_rate
//	    ─▶ rate over the window (quota.window.num samples of quota.window.size.seconds)
//	    ─▶ over the quota: throttle = (rate − quota) / quota × window, at most one sample
//	       window; the answer leaves at once with throttle_time_ms set, and the
//	       connection is muted (transport.Mute: its next request is not read) for that
//	       long, so a client that ignores the throttle time is held back anyway
//
// The quota of a request is the first entity, in Kafka's precedence, that sets the key:
//
//	user=U,client-id=C  user=U,client-id=<default>  user=U
//	user=<default>,client-id=C  user=<default>,client-id=<default>  user=<default>
//	client-id=C  client-id=<default>
//
// and its rate is shared by every connection the entity covers: a quota on user=U
// counts all of U's clients together, a default quota counts each user (or client id)
// on its own. U is the authenticated user (the name of the User: principal), or
// ANONYMOUS on a listener without authentication. The ip entity's
// connection_creation_rate is the transport's (transport.ConnLimits.IPCreationRate),
// enforced at accept.
//
// request_percentage (KIP-124) is the share of one handler thread a client may use:
// the time each request spends in its handler on the read path (handle) is recorded
// in units of 1% of a second; a request whose client is over its quota when it
// arrives gets that throttle time in its answer (any API with a throttle_time_ms) and
// mutes the connection. Exempt, as in Kafka: ApiVersions, the SASL APIs, follower
// fetches and the inter-broker WriteTxnMarkers.
//
// A throttled Fetch is answered as KafkaApis does: no partitions (an incremental
// session's id, else none: a new session is not kept) and throttle_time_ms, its
// bytes taken back out of the rate; and a consumer's fetch is capped at quota ×
// (samples − 1) × sample window bytes (fetchQuotaBytes).
//
// Differences from Kafka: requests of versions before KIP-219 are not delayed by the
// broker (the connection is muted all the same, which bounds the rate). The request
// time counts the handler's synchronous part only (not a forwarded request's wait for
// the controller, nor the network threads' time, which Kafka adds).
// controller_mutation_rate is mutation_quota.go's.

// quotaManager measures and throttles the byte rates of produce and fetch clients.
// Safe for concurrent use.
type quotaManager struct {
	samples int
	window  time.Duration // one sample
	now     func() time.Time

	mu struct {
		sync.Mutex
		sensors  map[quotaSensorKey]*rateSensor
		buckets  map[quotaSensorKey]*tokenBucket // controller_mutation_rate (mutation_quota.go)
		lastScan time.Time
	}
	throttleMs *prometheus.CounterVec // key
	throttled  *prometheus.CounterVec // key
}

// quotaSensorKey is one rate: a quota key, and the user and client id the matched
// entity counts by ("" where it has no such part).
type quotaSensorKey struct {
	key          string
	user, client string
}

func newQuotaManager(static map[string]string, reg prometheus.Registerer) *quotaManager {
	get := func(key string) int {
		v, ok := static[key]
		if !ok {
			v, _ = configs.BrokerDefault(key)
		}
		n, _ := strconv.Atoi(v)
		return max(n, 1)
	}
	q := &quotaManager{samples: get("quota.window.num"), window: time.Duration(get("quota.window.size.seconds")) * time.Second, now: time.Now}
	q.mu.sensors = map[quotaSensorKey]*rateSensor{}
	q.throttleMs = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "samsa", Subsystem: "quota", Name: "throttle_time_ms_total",
		Help: "Throttle time given to clients over their byte-rate quota, per quota key [kafka.server:type=Produce|Fetch throttle-time]."}, []string{"key"})
	q.throttled = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "samsa", Subsystem: "quota", Name: "throttled_responses_total",
		Help: "Responses sent with a throttle time (and their connection muted), per quota key."}, []string{"key"})
	if reg != nil {
		reg.MustRegister(q.throttleMs, q.throttled)
	}
	return q
}

// quotaClient identifies the client of a request for quotas.
type quotaClient struct {
	user, clientID string
}

// quotaClientOf is r's client: its principal's user name (ANONYMOUS without
// authentication) and client id. Read on the request's read path.
func quotaClientOf(r *Request) quotaClient {
	user := "ANONYMOUS"
	if r.sec != nil && r.sec.ctx.Principal != "" {
		p := r.sec.ctx.Principal
		if name, ok := strings.CutPrefix(p, "User:"); ok {
			p = name
		}
		user = p
	}
	return quotaClient{user: user, clientID: r.Header.ClientID}
}

// quotaOf resolves key for c in q: the limit and the sensor it counts in.
func quotaOf(q *metadata.ClientQuotas, key string, c quotaClient) (float64, quotaSensorKey, bool) {
	u, cl := metadata.QuotaName(c.user), metadata.QuotaName(c.clientID)
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
		sk := quotaSensorKey{key: key}
		if e.User != none {
			sk.user = c.user
		}
		if e.ClientID != none {
			sk.client = c.clientID
		}
		return v, sk, true
	}
	return 0, quotaSensorKey{}, false
}

// record counts v against c's quota key in q and returns the throttle time (0: within
// the quota, or no quota).
func (m *quotaManager) record(q *metadata.ClientQuotas, key string, c quotaClient, v float64) time.Duration {
	if q.Len() == 0 {
		return 0
	}
	limit, sk, ok := quotaOf(q, key, c)
	if !ok {
		return 0
	}
	now := m.now()
	m.mu.Lock()
	s := m.mu.sensors[sk]
	if s == nil {
		s = newRateSensor(m.samples, m.window, now)
		m.mu.sensors[sk] = s
		m.scanLocked(now)
	}
	s.record(now, v)
	t := s.throttle(now, limit)
	m.mu.Unlock()
	m.count(key, t)
	return t
}

func (m *quotaManager) count(key string, t time.Duration) {
	if t > 0 {
		m.throttleMs.WithLabelValues(key).Add(float64(t.Milliseconds()))
		m.throttled.WithLabelValues(key).Inc()
	}
}

// peek is the throttle time c is owed for key in q now, without recording anything.
func (m *quotaManager) peek(q *metadata.ClientQuotas, key string, c quotaClient) time.Duration {
	if q.Len() == 0 {
		return 0
	}
	limit, sk, ok := quotaOf(q, key, c)
	if !ok {
		return 0
	}
	now := m.now()
	m.mu.Lock()
	var t time.Duration
	if s := m.mu.sensors[sk]; s != nil {
		t = s.throttle(now, limit)
	}
	m.mu.Unlock()
	m.count(key, t)
	return t
}

// add records v in the sensor sk (created if need be) without computing a throttle.
func (m *quotaManager) add(sk quotaSensorKey, v float64) {
	now := m.now()
	m.mu.Lock()
	s := m.mu.sensors[sk]
	if s == nil {
		s = newRateSensor(m.samples, m.window, now)
		m.mu.sensors[sk] = s
		m.scanLocked(now)
	}
	s.record(now, v)
	m.mu.Unlock()
}

// requestQuotaExempt: APIs outside the request quota (authentication, the
// inter-broker WriteTxnMarkers, private APIs).
func requestQuotaExempt(key int16) bool {
	switch key {
	case 17, 18, 27, 36:
		return true
	}
	return key > maxAPIKey
}

// handle runs api's handler on r under the request quota: a client over its
// request_percentage gets the throttle time in the answer and its connection muted
// (Fetch decides when it answers: a follower's fetch is exempt), and the handler's
// time is recorded.
func (b *Broker) handle(api *API, r *Request) {
	if requestQuotaExempt(r.Header.Key) {
		api.Handle(b, r)
		return
	}
	_, im := b.Image()
	q := im.ClientQuotas()
	if q.Len() == 0 {
		api.Handle(b, r)
		return
	}
	c := quotaClientOf(r)
	_, sk, ok := quotaOf(q, metadata.QuotaRequestPercentage, c)
	if !ok {
		api.Handle(b, r)
		return
	}
	if r.Header.Key != fetchKey {
		r.throttle = b.throttle(r, b.quotas.peek(q, metadata.QuotaRequestPercentage, c))
	}
	start := time.Now()
	api.Handle(b, r)
	if !r.quotaExempt {
		b.quotas.add(sk, float64(time.Since(start))/float64(10*time.Millisecond)) // 1% of a second
	}
}

// fetchKey is Fetch's api key.
const fetchKey = 1

// raiseThrottle sets resp's throttle time to t unless it is higher already.
func raiseThrottle(resp kmsg.Response, t int32) {
	tr, ok := resp.(interface {
		kmsg.ThrottleResponse
		SetThrottle(int32)
	})
	if ok {
		if cur, _ := tr.Throttle(); cur < t {
			tr.SetThrottle(t)
		}
	}
}

// scanLocked drops sensors unused for an hour (Kafka's inactive sensor expiry), at
// most once a minute, so clients that come and go do not grow the map for ever.
func (m *quotaManager) scanLocked(now time.Time) {
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

// throttleProduce records a produce request of n bytes from r's client and mutes
// the connection when it is over producer_byte_rate; it returns the throttle time
// in ms for the answer.
func (b *Broker) throttleProduce(r *Request, n int) int32 {
	_, im := b.Image()
	t := b.quotas.record(im.ClientQuotas(), metadata.QuotaProducerByteRate, quotaClientOf(r), float64(n))
	return b.throttle(r, t)
}

// throttleFetch records a fetch response of n bytes to c and, when c is over
// consumer_byte_rate or its request_percentage, mutes r's connection and takes the n
// bytes back out of the rate (KafkaApis.handleFetchRequest: the throttled answer
// carries no records, so they were not sent); it returns the throttle time in ms
// (0: answer with the records).
func (b *Broker) throttleFetch(r *Request, c quotaClient, n int64) int32 {
	_, im := b.Image()
	q := im.ClientQuotas()
	t := b.quotas.record(q, metadata.QuotaConsumerByteRate, c, float64(n))
	t = max(t, b.quotas.peek(q, metadata.QuotaRequestPercentage, c))
	if t > 0 {
		if _, sk, ok := quotaOf(q, metadata.QuotaConsumerByteRate, c); ok {
			b.quotas.add(sk, -float64(n))
		}
	}
	return b.throttle(r, t)
}

// fetchQuotaBytes is Kafka's ClientQuotaManager.getMaxValueInQuotaWindow for c's
// consumer_byte_rate: the most one fetch answer may carry, quota × (samples − 1) ×
// sample window (math.MaxInt32 without a quota). A fetch up to it leaves the rate
// within the quota, so a consumer is not answered empty for ever because each of
// its fetches alone exceeds what the window allows.
func (b *Broker) fetchQuotaBytes(c quotaClient) int32 {
	_, im := b.Image()
	q := im.ClientQuotas()
	if q.Len() == 0 {
		return math.MaxInt32
	}
	limit, _, ok := quotaOf(q, metadata.QuotaConsumerByteRate, c)
	if !ok {
		return math.MaxInt32
	}
	v := limit * float64(b.quotas.samples-1) * b.quotas.window.Seconds()
	if v >= math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(max(v, 0))
}

func (b *Broker) throttle(r *Request, t time.Duration) int32 {
	if t <= 0 {
		return 0
	}
	transport.Mute(r.Conn, t)
	return int32(min(t.Milliseconds(), math.MaxInt32))
}

// IPConnectionRate is the connection_creation_rate quota of address ip in the
// broker's image (ok false: none): transport.ConnLimits.IPCreationRate.
func (b *Broker) IPConnectionRate(ip string) (float64, bool) {
	_, im := b.Image()
	q := im.ClientQuotas()
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

// rateSensor is Kafka's Rate over a SampledStat: samples of one window each, the
// oldest reused when the newest is complete; samples older than the whole window are
// reset before measuring.
type rateSensor struct {
	window  time.Duration
	samples []rateSample
	cur     int
	last    time.Time // last record
}

type rateSample struct {
	start time.Time
	v     float64
}

func newRateSensor(n int, window time.Duration, now time.Time) *rateSensor {
	s := &rateSensor{window: window, samples: make([]rateSample, n), last: now}
	for i := range s.samples {
		s.samples[i].start = now
	}
	return s
}

func (s *rateSensor) record(now time.Time, v float64) {
	s.last = now
	c := &s.samples[s.cur]
	if now.Sub(c.start) >= s.window {
		s.cur = (s.cur + 1) % len(s.samples)
		c = &s.samples[s.cur]
		c.start, c.v = now, 0
	}
	c.v += v
}

// windowSize is Kafka's Rate.windowSize: the time since the oldest sample began, at
// least len(samples)-1 whole windows (so a new sensor does not see a burst as a huge
// rate).
func (s *rateSensor) windowSize(now time.Time) time.Duration {
	expire := time.Duration(len(s.samples)) * s.window
	oldest := now
	for i := range s.samples {
		p := &s.samples[i]
		if now.Sub(p.start) >= expire {
			p.start, p.v = now, 0
		}
		if p.start.Before(oldest) {
			oldest = p.start
		}
	}
	elapsed := now.Sub(oldest)
	if full, minFull := int(elapsed/s.window), len(s.samples)-1; full < minFull {
		elapsed += time.Duration(minFull-full) * s.window
	}
	return elapsed
}

// rate is the measured rate per second.
func (s *rateSensor) rate(now time.Time) float64 {
	w := s.windowSize(now)
	total := 0.0
	for _, p := range s.samples {
		total += p.v
	}
	return total / w.Seconds()
}

// throttle is Kafka's QuotaUtils.boundedThrottleTime: how long the client must wait
// for its rate to fall back to limit, at most one sample window.
func (s *rateSensor) throttle(now time.Time, limit float64) time.Duration {
	r := s.rate(now)
	if r <= limit || limit <= 0 {
		return 0
	}
	w := s.windowSize(now)
	t := time.Duration((r - limit) / limit * float64(w))
	return min(t, s.window)
}
