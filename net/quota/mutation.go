package quota

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// tokenBucket is Kafka's TokenBucket stat. Guarded by Manager.mu.
type tokenBucket struct {
	tokens float64
	last   time.Time
}

// refill adds the tokens earned since the last use, up to burst.
func (tb *tokenBucket) refill(now time.Time, rate, burst float64) {
	tb.tokens = min(burst, tb.tokens+rate*now.Sub(tb.last).Seconds())
	tb.last = now
}

// mutations charges one request's topics to its client's bucket.
type mutations struct {
	m      *Manager
	bucket *tokenBucket
	rate   float64
	burst  float64
	strict bool
	now    time.Time
}

// mutationsOf is nil when c has no controller_mutation_rate in q.
func (m *Manager) mutationsOf(q *metadata.ClientQuotas, c Client, strict bool) *mutations {
	if q.Len() == 0 {
		return nil
	}
	limit, sk, ok := quotaOf(q, metadata.QuotaControllerMutationRate, c)
	if !ok || limit <= 0 {
		return nil
	}
	burst := limit * float64(m.samples) * m.window.Seconds()
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.buckets == nil {
		m.mu.buckets = map[sensorKey]*tokenBucket{}
	}
	tb := m.mu.buckets[sk]
	if tb == nil {
		tb = &tokenBucket{tokens: burst, last: now}
		m.mu.buckets[sk] = tb
		m.scanLocked(now)
	}
	return &mutations{m: m, bucket: tb, rate: limit, burst: burst, strict: strict, now: now}
}

// charge records n partitions; false: the topic is refused (strict, in debt).
func (c *mutations) charge(n int) bool {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	c.bucket.refill(c.now, c.rate, c.burst)
	if c.strict && c.bucket.tokens < 0 {
		return false
	}
	c.bucket.tokens = min(c.burst, c.bucket.tokens-float64(n))
	return true
}

// throttle is the answer's throttle time once every topic was charged, refused of
// them refused: the time until the bucket is out of debt (a strict quota throttles
// only a refusal, as Kafka's); it is counted in the metrics.
func (c *mutations) throttle(refused int) time.Duration {
	var t time.Duration
	if !c.strict || refused > 0 {
		c.m.mu.Lock()
		if c.bucket.tokens < 0 {
			t = time.Duration(-c.bucket.tokens / c.rate * float64(time.Second))
		}
		c.m.mu.Unlock()
	}
	c.m.count(metadata.QuotaControllerMutationRate, t)
	return t
}

var throttledMsg = kerr.ThrottlingQuotaExceeded.Description

// CreateTopics charges the partitions of the topics req (CreateTopics at version v,
// strict from v6) creates to c's controller_mutation_rate in im's quotas. The topics
// refused are taken out of req.Topics and returned as their answers
// (THROTTLING_QUOTA_EXCEEDED); t is the answer's throttle time. charged is false,
// and req untouched, when nothing is charged: no quota covers c, or the request is
// ValidateOnly. numPartitions is the partition count of a topic that asks for the
// default (num.partitions), read only when one does.
func (m *Manager) CreateTopics(im *metadata.Image, c Client, v int16, req *kmsg.CreateTopicsRequest, numPartitions func() int) (refused []kmsg.CreateTopicsResponseTopic, t time.Duration, charged bool) {
	if req.ValidateOnly {
		return nil, 0, false
	}
	mu := m.mutationsOf(im.ClientQuotas(), c, v >= 6)
	if mu == nil {
		return nil, 0, false
	}
	kept := req.Topics[:0:0]
	for _, t := range req.Topics {
		if _, exists := im.Topic(t.Topic); exists {
			kept = append(kept, t) // TOPIC_ALREADY_EXISTS: no mutation
			continue
		}
		n := len(t.ReplicaAssignment)
		if n == 0 {
			n = int(t.NumPartitions)
			if n < 0 {
				n = numPartitions()
			}
		}
		if mu.charge(n) {
			kept = append(kept, t)
			continue
		}
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.ErrorCode, rt.ErrorMessage, rt.NumPartitions, rt.ReplicationFactor = t.Topic, kerr.ThrottlingQuotaExceeded.Code, &throttledMsg, -1, -1
		refused = append(refused, rt)
	}
	req.Topics = kept
	return refused, mu.throttle(len(refused)), true
}

// CreatePartitions charges the partitions req (CreatePartitions at version v, strict
// from v3) adds, as CreateTopics does.
func (m *Manager) CreatePartitions(im *metadata.Image, c Client, v int16, req *kmsg.CreatePartitionsRequest) (refused []kmsg.CreatePartitionsResponseTopic, t time.Duration, charged bool) {
	if req.ValidateOnly {
		return nil, 0, false
	}
	mu := m.mutationsOf(im.ClientQuotas(), c, v >= 3)
	if mu == nil {
		return nil, 0, false
	}
	kept := req.Topics[:0:0]
	for _, t := range req.Topics {
		ti, ok := im.Topic(t.Topic)
		if !ok || int(t.Count) <= len(ti.Partitions) || mu.charge(int(t.Count)-len(ti.Partitions)) {
			kept = append(kept, t)
			continue
		}
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, kerr.ThrottlingQuotaExceeded.Code, &throttledMsg
		refused = append(refused, rt)
	}
	req.Topics = kept
	return refused, mu.throttle(len(refused)), true
}

// DeleteTopics charges the partitions of the topics req (DeleteTopics at version v,
// strict from v5) deletes, named or by id, as CreateTopics does.
func (m *Manager) DeleteTopics(im *metadata.Image, c Client, v int16, req *kmsg.DeleteTopicsRequest) (refused []kmsg.DeleteTopicsResponseTopic, t time.Duration, charged bool) {
	mu := m.mutationsOf(im.ClientQuotas(), c, v >= 5)
	if mu == nil {
		return nil, 0, false
	}
	refuse := func(name *string, id [16]byte) {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID, rt.ErrorCode, rt.ErrorMessage = name, id, kerr.ThrottlingQuotaExceeded.Code, &throttledMsg
		refused = append(refused, rt)
	}
	partitions := func(ti *metadata.TopicImage, ok bool) int {
		if !ok {
			return 0
		}
		return len(ti.Partitions)
	}
	names := req.TopicNames[:0:0]
	for _, n := range req.TopicNames {
		if p := partitions(im.Topic(n)); p == 0 || mu.charge(p) {
			names = append(names, n)
		} else {
			refuse(&n, [16]byte{})
		}
	}
	topics := req.Topics[:0:0]
	for _, t := range req.Topics {
		var p int
		switch {
		case t.Topic != nil && t.TopicID == [16]byte{}:
			p = partitions(im.Topic(*t.Topic))
		case t.Topic == nil:
			p = partitions(im.TopicByID(t.TopicID))
		}
		if p == 0 || mu.charge(p) {
			topics = append(topics, t)
		} else {
			refuse(t.Topic, t.TopicID)
		}
	}
	req.TopicNames, req.Topics = names, topics
	return refused, mu.throttle(len(refused)), true
}
