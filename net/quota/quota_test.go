package quota

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// clock is a manual clock for a Manager.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

// newTest is a Manager of 11 samples of 1 s (Kafka's defaults) on a manual clock.
func newTest(t *testing.T, reg prometheus.Registerer) (*Manager, *clock) {
	t.Helper()
	m := New(map[string]string{}, reg)
	if m.samples != 11 || m.window != time.Second {
		t.Fatalf("defaults: %d samples of %v, want 11 of 1s", m.samples, m.window)
	}
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	m.now = c.now
	return m, c
}

func image(t *testing.T, recs ...metadata.Record) *metadata.Image {
	t.Helper()
	im, err := (&metadata.Image{}).Apply(recs...)
	if err != nil {
		t.Fatal(err)
	}
	return im
}

// counter is v's value for label value key.
func counter(t *testing.T, v *prometheus.CounterVec, key string) float64 {
	t.Helper()
	var d dto.Metric
	if err := v.WithLabelValues(key).Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetCounter().GetValue()
}

func quotaRec(e metadata.QuotaEntity, key string, v float64) metadata.Record {
	return &metadata.ClientQuotaRecord{Entity: e, Key: key, Value: v}
}

func TestQuotaClientOf(t *testing.T) {
	for _, c := range []struct {
		principal, want string
	}{{"", "ANONYMOUS"}, {"User:alice", "alice"}, {"User:", ""}, {"Group:ops", "Group:ops"}} {
		if got := ClientOf(c.principal, "app"); got != (Client{User: c.want, ClientID: "app"}) {
			t.Errorf("ClientOf(%q) = %+v, want user %q", c.principal, got, c.want)
		}
	}
}

// TestQuotaPrecedence: the first entity in Kafka's order that sets the key decides, and
// the sensor is shared by what that entity covers.
func TestQuotaPrecedence(t *testing.T) {
	n, d := metadata.QuotaName, metadata.QuotaDefault
	const key = metadata.QuotaProducerByteRate
	all := []metadata.Record{
		quotaRec(metadata.QuotaEntity{User: n("u"), ClientID: n("c")}, key, 1),
		quotaRec(metadata.QuotaEntity{User: n("u"), ClientID: d}, key, 2),
		quotaRec(metadata.QuotaEntity{User: n("u")}, key, 3),
		quotaRec(metadata.QuotaEntity{User: d, ClientID: n("c")}, key, 4),
		quotaRec(metadata.QuotaEntity{User: d, ClientID: d}, key, 5),
		quotaRec(metadata.QuotaEntity{User: d}, key, 6),
		quotaRec(metadata.QuotaEntity{ClientID: n("c")}, key, 7),
		quotaRec(metadata.QuotaEntity{ClientID: d}, key, 8),
	}
	wantKeys := []sensorKey{
		{key, "u", "c"}, {key, "u", "c"}, {key, "u", ""},
		{key, "u", "c"}, {key, "u", "c"}, {key, "u", ""},
		{key, "", "c"}, {key, "", "c"},
	}
	// Drop the entities one by one from the front: the next one decides.
	for i := range all {
		q := image(t, all[i:]...).ClientQuotas()
		limit, sk, ok := quotaOf(q, key, Client{User: "u", ClientID: "c"})
		if !ok || limit != float64(i+1) || sk != wantKeys[i] {
			t.Errorf("from entity %d: limit %v, sensor %+v, %v; want %d, %+v", i, limit, sk, ok, i+1, wantKeys[i])
		}
	}
	q := image(t, all[0]).ClientQuotas()
	if _, _, ok := quotaOf(q, key, Client{User: "v", ClientID: "c"}); ok {
		t.Error("user=u,client-id=c covers user v")
	}
	if _, _, ok := quotaOf(q, metadata.QuotaConsumerByteRate, Client{User: "u", ClientID: "c"}); ok {
		t.Error("a producer quota covers consumer bytes")
	}
}

// TestQuotaProduceThrottle: Kafka's throttle time, (rate − quota) / quota × window, at
// most one sample window, the window at least samples − 1 windows long.
func TestQuotaProduceThrottle(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, c := newTest(t, reg)
	q := image(t, quotaRec(metadata.QuotaEntity{User: metadata.QuotaName("u")}, metadata.QuotaProducerByteRate, 1000)).ClientQuotas()
	u := Client{User: "u", ClientID: "a"}
	// 10,000 bytes over a 10 s window: 1,000/s, at the quota.
	if th := m.Produce(q, u, 10_000); th != 0 {
		t.Fatalf("at the quota: throttled %v", th)
	}
	// 500 more: 1,050/s, 5% over: 0.05 × 10 s = 500 ms.
	if th := m.Produce(q, u, 500); th != 500*time.Millisecond {
		t.Fatalf("5%% over: throttle %v, want 500ms", th)
	}
	// Far over: bounded by one sample window.
	if th := m.Produce(q, u, 1_000_000); th != time.Second {
		t.Fatalf("far over: throttle %v, want 1s", th)
	}
	// Another client id of the same user shares the rate (the quota is on user=u).
	if th := m.Produce(q, Client{User: "u", ClientID: "b"}, 1); th != time.Second {
		t.Fatalf("u's other client: throttle %v, want 1s", th)
	}
	// Another user is not covered.
	if th := m.Produce(q, Client{User: "v"}, 1_000_000); th != 0 {
		t.Fatalf("user v: throttle %v", th)
	}
	// Once the samples have expired the rate is back to nothing.
	c.advance(12 * time.Second)
	if th := m.Produce(q, u, 1); th != 0 {
		t.Fatalf("after the window: throttle %v", th)
	}
	if got := counter(t, m.throttled, metadata.QuotaProducerByteRate); got != 3 {
		t.Errorf("throttled_responses_total %v, want 3", got)
	}
	if got := counter(t, m.throttleMs, metadata.QuotaProducerByteRate); got != 2500 {
		t.Errorf("throttle_time_ms_total %v, want 2500", got)
	}
}

// TestQuotaFetch: a throttled fetch takes its bytes back out of the rate; the request
// quota throttles a fetch too; the most one fetch may carry.
func TestQuotaFetch(t *testing.T) {
	m, c := newTest(t, nil)
	e := metadata.QuotaEntity{ClientID: metadata.QuotaDefault}
	q := image(t, quotaRec(e, metadata.QuotaConsumerByteRate, 1000), quotaRec(e, metadata.QuotaRequestPercentage, 50)).ClientQuotas()
	a := Client{User: "ANONYMOUS", ClientID: "a"}
	if got, want := m.FetchMaxBytes(q, a), int32(1000*10); got != want {
		t.Fatalf("FetchMaxBytes %d, want %d", got, want)
	}
	if got := m.FetchMaxBytes(image(t).ClientQuotas(), a); got != math.MaxInt32 {
		t.Fatalf("FetchMaxBytes without quotas %d", got)
	}
	if th := m.Fetch(q, a, 10_000); th != 0 {
		t.Fatalf("at the quota: throttle %v", th)
	}
	// 5% over: throttled, and the 500 bytes were not sent, so the rate stays at the
	// quota and the same fetch is throttled again, not more.
	for range 3 {
		if th := m.Fetch(q, a, 500); th != 500*time.Millisecond {
			t.Fatalf("over: throttle %v, want 500ms", th)
		}
	}
	if th := m.Fetch(q, a, 0); th != 0 {
		t.Fatalf("the throttled bytes were counted: throttle %v", th)
	}
	// The request quota: 50% of a second over the window is 0.5 s of handler time a
	// second; 6 s of it in a 10 s window is 0.6/s, 20% over: 2 s, bounded to 1 s.
	rq, ok := m.Request(q, a)
	if !ok {
		t.Fatal("no request quota")
	}
	if th := rq.Throttle(); th != 0 {
		t.Fatalf("request quota before any time: %v", th)
	}
	rq.Record(6 * time.Second)
	if th := rq.Throttle(); th != time.Second {
		t.Fatalf("request quota: throttle %v, want 1s", th)
	}
	if th := m.Fetch(q, a, 0); th != time.Second {
		t.Fatalf("a fetch over the request quota: throttle %v, want 1s", th)
	}
	if _, ok := m.Request(image(t).ClientQuotas(), a); ok {
		t.Error("a request quota without quotas")
	}
	c.advance(time.Hour + 2*time.Minute)
	m.Produce(image(t, quotaRec(e, metadata.QuotaProducerByteRate, 1)).ClientQuotas(), a, 1) // a new sensor scans
	m.mu.Lock()
	n := len(m.mu.sensors)
	m.mu.Unlock()
	if n != 1 {
		t.Errorf("%d sensors after an hour unused, want the new one only", n)
	}
}

// TestQuotaMutations: the token bucket of controller_mutation_rate, strict and permissive.
func TestQuotaMutations(t *testing.T) {
	m, c := newTest(t, nil)
	u := Client{User: "u", ClientID: "a"}
	recs := []metadata.Record{quotaRec(metadata.QuotaEntity{User: metadata.QuotaName("u")}, metadata.QuotaControllerMutationRate, 2),
		&metadata.TopicRecord{Name: "exists", ID: metadata.UUID{1}},
		&metadata.PartitionRecord{TopicID: metadata.UUID{1}, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}}
	im := image(t, recs...)
	create := func(v int16, names ...string) *kmsg.CreateTopicsRequest {
		req := kmsg.NewPtrCreateTopicsRequest()
		for _, n := range names {
			ct := kmsg.NewCreateTopicsRequestTopic()
			ct.Topic, ct.NumPartitions = n, 10
			req.Topics = append(req.Topics, ct)
		}
		return req
	}
	// The bucket holds 2 × 11 × 1 s = 22 tokens. Strict (v6): 20 partitions leave 2;
	// 10 more take it to -8, accepted; the next topic is refused, and the answer
	// carries the 4 s until the debt is repaid.
	req := create(6, "a", "b", "c", "exists", "d")
	refused, th, charged := m.CreateTopics(im, u, 6, req, nil)
	if !charged || len(refused) != 1 || *refused[0].ErrorMessage != kerr.ThrottlingQuotaExceeded.Description ||
		refused[0].Topic != "d" || refused[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code || len(req.Topics) != 4 || th != 4*time.Second {
		t.Fatalf("strict: charged %v, refused %+v, kept %d, throttle %v", charged, refused, len(req.Topics), th)
	}
	// Permissive (v5): everything passes, the answer carries the debt: -8 - 10 = -18, 9 s.
	req = create(5, "e")
	if refused, th, _ = m.CreateTopics(im, u, 5, req, nil); len(refused) != 0 || len(req.Topics) != 1 || th != 9*time.Second {
		t.Fatalf("permissive: refused %d, kept %d, throttle %v", len(refused), len(req.Topics), th)
	}
	// Refilled at 2 a second: after 9 s the debt is repaid; strict accepts again
	// and, refusing nothing, does not throttle.
	c.advance(9 * time.Second)
	req = create(6, "f")
	if refused, th, _ = m.CreateTopics(im, u, 6, req, nil); len(refused) != 0 || th != 0 {
		t.Fatalf("after the refill: refused %d, throttle %v", len(refused), th)
	}
	// Not charged: ValidateOnly, a client without the quota.
	req = create(6, "g")
	req.ValidateOnly = true
	if _, _, charged := m.CreateTopics(im, u, 6, req, nil); charged {
		t.Error("ValidateOnly was charged")
	}
	if _, _, charged := m.CreateTopics(im, Client{User: "v"}, 6, create(6, "g"), nil); charged {
		t.Error("a client without the quota was charged")
	}
	// The default partition count is asked for only when a topic needs it.
	req = create(6, "h")
	req.Topics[0].NumPartitions = -1
	asked := 0
	m.CreateTopics(im, Client{User: "u", ClientID: "b"}, 6, req, func() int { asked++; return 3 })
	if asked != 1 {
		t.Errorf("num.partitions asked %d times", asked)
	}

	// CreatePartitions charges what is added; DeleteTopics what is deleted.
	c.advance(time.Minute)
	cp := kmsg.NewPtrCreatePartitionsRequest()
	for _, n := range []string{"exists", "unknown"} {
		pt := kmsg.NewCreatePartitionsRequestTopic()
		pt.Topic, pt.Count = n, 30
		cp.Topics = append(cp.Topics, pt)
	}
	if refused, th, _ := m.CreatePartitions(im, u, 3, cp); len(refused) != 0 || len(cp.Topics) != 2 || th != 0 {
		t.Fatalf("CreatePartitions: refused %d, kept %d, throttle %v", len(refused), len(cp.Topics), th)
	}
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.TopicNames = []string{"exists", "unknown"}
	if refused, th, _ := m.DeleteTopics(im, u, 4, dt); len(refused) != 0 || len(dt.TopicNames) != 2 || th != 4*time.Second {
		// 22 - 29 (CreatePartitions) - 1 = -8: 4 s, permissive at v4.
		t.Fatalf("DeleteTopics: refused %d, kept %d, throttle %v", len(refused), len(dt.TopicNames), th)
	}
	dt = kmsg.NewPtrDeleteTopicsRequest()
	dt.TopicNames = []string{"exists"}
	if refused, th, _ := m.DeleteTopics(im, u, 5, dt); len(refused) != 1 || len(dt.TopicNames) != 0 || th != 4*time.Second {
		t.Fatalf("DeleteTopics strict: refused %d, kept %d, throttle %v", len(refused), len(dt.TopicNames), th)
	}
}

func TestQuotaIPConnectionRate(t *testing.T) {
	q := image(t, quotaRec(metadata.QuotaEntity{IP: metadata.QuotaName("10.1.2.3")}, metadata.QuotaConnectionCreationRate, 7),
		quotaRec(metadata.QuotaEntity{IP: metadata.QuotaDefault}, metadata.QuotaConnectionCreationRate, 50)).ClientQuotas()
	for ip, want := range map[string]float64{"10.1.2.3": 7, "10.1.2.4": 50, "::ffff:10.1.2.3": 7} {
		if r, ok := IPConnectionRate(q, ip); !ok || r != want {
			t.Errorf("%s: %v %v, want %v", ip, r, ok, want)
		}
	}
	if _, ok := IPConnectionRate(image(t).ClientQuotas(), "10.1.2.3"); ok {
		t.Error("a rate without quotas")
	}
}
