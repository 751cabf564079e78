package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// controller_mutation_rate (KIP-599), as Kafka's ControllerMutationQuotaManager:
// CreateTopics, CreatePartitions and DeleteTopics charge the partitions they create or
// delete, topic by topic in request order, to a token bucket per quota entity (the
// same entity precedence as the byte rates, quotas.go):
//
//	the bucket holds up to quota × quota.window.num × quota.window.size.seconds tokens
//	(it starts full) and refills at quota tokens a second
//	strict (CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+): a topic is
//	    accepted while the bucket is not in debt (so one large request passes and
//	    takes it below zero, unthrottled), else answered THROTTLING_QUOTA_EXCEEDED,
//	    and the answer carries the time until the debt is repaid as throttle_time_ms
//	permissive (older versions): every topic is accepted and charged; an answer that
//	    leaves the bucket in debt carries that time as throttle_time_ms
//
// and a throttled answer mutes the connection for its throttle time, as the byte
// rates do. ValidateOnly requests mutate nothing and are not charged; neither are
// topics this broker's image already shows will fail (a topic that exists, for
// CreateTopics; an unknown topic or a count not above the current one, for
// DeleteTopics and CreatePartitions), which Kafka's controller refuses before it
// charges the quota.
//
// Difference from Kafka: the buckets are each broker's, charged before the request
// is forwarded, where Kafka's KRaft controller keeps one per entity for the cluster;
// a client spreading its requests over n brokers gets n times its rate.

// tokenBucket is Kafka's TokenBucket stat.
type tokenBucket struct {
	tokens float64
	last   time.Time
}

// refill adds the tokens earned since the last use, up to burst.
func (tb *tokenBucket) refill(now time.Time, rate, burst float64) {
	tb.tokens = min(burst, tb.tokens+rate*now.Sub(tb.last).Seconds())
	tb.last = now
}

// mutationCharge charges one request's topics to its client's bucket.
type mutationCharge struct {
	m      *quotaManager
	bucket *tokenBucket
	rate   float64
	burst  float64
	strict bool
	now    time.Time
}

// mutationCharge is nil when r's client has no controller_mutation_rate.
func (b *Broker) mutationCharge(r *Request, strict bool) *mutationCharge {
	_, im := b.Image()
	q := im.ClientQuotas()
	if q.Len() == 0 {
		return nil
	}
	limit, sk, ok := quotaOf(q, metadata.QuotaControllerMutationRate, quotaClientOf(r))
	if !ok || limit <= 0 {
		return nil
	}
	m := b.quotas
	burst := limit * float64(m.samples) * m.window.Seconds()
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.buckets == nil {
		m.mu.buckets = map[quotaSensorKey]*tokenBucket{}
	}
	tb := m.mu.buckets[sk]
	if tb == nil {
		tb = &tokenBucket{tokens: burst, last: now}
		m.mu.buckets[sk] = tb
		m.scanLocked(now)
	}
	return &mutationCharge{m: m, bucket: tb, rate: limit, burst: burst, strict: strict, now: now}
}

// charge records n partitions; false: the topic is refused (strict, in debt).
func (c *mutationCharge) charge(n int) bool {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	c.bucket.refill(c.now, c.rate, c.burst)
	if c.strict && c.bucket.tokens < 0 {
		return false
	}
	c.bucket.tokens = min(c.burst, c.bucket.tokens-float64(n))
	return true
}

// throttle is the time until the bucket is out of debt.
func (c *mutationCharge) throttle() time.Duration {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	if c.bucket.tokens >= 0 {
		return 0
	}
	return time.Duration(-c.bucket.tokens / c.rate * float64(time.Second))
}

// finish sets the request's throttle time (muting its connection) and adds the
// refused topics to its answer (after any authorisation amendment). It reports
// whether anything is left to forward; when nothing is, the answer has been sent.
func (c *mutationCharge) finish(b *Broker, r *Request, left, refused int, add func(kmsg.Response)) bool {
	m := b.quotas
	var t time.Duration
	if !c.strict || refused > 0 {
		t = c.throttle() // a strict quota throttles only a refusal, as Kafka's
	}
	m.count(metadata.QuotaControllerMutationRate, t)
	r.throttle = max(r.throttle, b.throttle(r, t))
	if refused > 0 {
		prev := r.amend
		r.amend = func(resp kmsg.Response) {
			if prev != nil {
				prev(resp)
			}
			add(resp)
		}
	}
	if left == 0 && refused > 0 {
		r.Respond(r.ResponseKind())
		return false
	}
	return true
}

var throttledMsg = kerr.ThrottlingQuotaExceeded.Description

// chargeCreateTopics charges req's topics (CreateTopics, strict from v6); it reports
// whether the request is to be forwarded.
func (b *Broker) chargeCreateTopics(r *Request, req *kmsg.CreateTopicsRequest) bool {
	if req.ValidateOnly {
		return true
	}
	c := b.mutationCharge(r, r.Header.Version >= 6)
	if c == nil {
		return true
	}
	im := b.meta.Image()
	var refused []kmsg.CreateTopicsResponseTopic
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
				n = int(b.groupInt(im, "num.partitions", 1))
			}
		}
		if c.charge(n) {
			kept = append(kept, t)
			continue
		}
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.ErrorCode, rt.ErrorMessage, rt.NumPartitions, rt.ReplicationFactor = t.Topic, kerr.ThrottlingQuotaExceeded.Code, &throttledMsg, -1, -1
		refused = append(refused, rt)
	}
	req.Topics = kept
	return c.finish(b, r, len(kept), len(refused), func(resp kmsg.Response) {
		cr := resp.(*kmsg.CreateTopicsResponse)
		cr.Topics = append(cr.Topics, refused...)
	})
}

// chargeCreatePartitions charges the partitions req adds (strict from v3).
func (b *Broker) chargeCreatePartitions(r *Request, req *kmsg.CreatePartitionsRequest) bool {
	if req.ValidateOnly {
		return true
	}
	c := b.mutationCharge(r, r.Header.Version >= 3)
	if c == nil {
		return true
	}
	im := b.meta.Image()
	var refused []kmsg.CreatePartitionsResponseTopic
	kept := req.Topics[:0:0]
	for _, t := range req.Topics {
		ti, ok := im.Topic(t.Topic)
		if !ok || int(t.Count) <= len(ti.Partitions) || c.charge(int(t.Count)-len(ti.Partitions)) {
			kept = append(kept, t)
			continue
		}
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, kerr.ThrottlingQuotaExceeded.Code, &throttledMsg
		refused = append(refused, rt)
	}
	req.Topics = kept
	return c.finish(b, r, len(kept), len(refused), func(resp kmsg.Response) {
		cr := resp.(*kmsg.CreatePartitionsResponse)
		cr.Topics = append(cr.Topics, refused...)
	})
}

// chargeDeleteTopics charges the partitions of the topics req deletes (strict from
// v5).
func (b *Broker) chargeDeleteTopics(r *Request, req *kmsg.DeleteTopicsRequest) bool {
	c := b.mutationCharge(r, r.Header.Version >= 5)
	if c == nil {
		return true
	}
	im := b.meta.Image()
	var refused []kmsg.DeleteTopicsResponseTopic
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
		if p := partitions(im.Topic(n)); p == 0 || c.charge(p) {
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
		if p == 0 || c.charge(p) {
			topics = append(topics, t)
		} else {
			refuse(t.Topic, t.TopicID)
		}
	}
	req.TopicNames, req.Topics = names, topics
	return c.finish(b, r, len(names)+len(topics), len(refused), func(resp kmsg.Response) {
		dr := resp.(*kmsg.DeleteTopicsResponse)
		dr.Topics = append(dr.Topics, refused...)
	})
}
