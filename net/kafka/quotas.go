package kafka

import (
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/quota"
	"github.com/samsa-broker/samsa/net/transport"
)

// Client quotas are net/quota's (Kafka's ClientQuotaManager,
// ClientRequestQuotaManager and ControllerMutationQuotaManager): it measures and says
// how long a client must wait. What stays here is the protocol's side:
//
//	Produce (00_produce.go)     Broker.quotas.Produce: the request's size
//	Fetch (01_fetch.go)         Broker.quotas.FetchMaxBytes caps a consumer's fetch,
//	                            Broker.quotas.Fetch records the answer's size
//	every API (handle)          Broker.quotas.Request: the handler's time
//	CreateTopics, CreatePartitions, DeleteTopics
//	                            Broker.quotas.CreateTopics, ...: controller mutations
//	                            (refused topics added to the answer: answerMutations)
//
// and a throttle time goes into the answer's throttle_time_ms (raiseThrottle, or the
// handler's own field) while the connection is muted for that long (Request.mute),
// so a client that ignores the throttle time is held back anyway.

// quotaClientOf is r's client: its principal's user name (ANONYMOUS without
// authentication) and client id. Read on the request's read path.
func quotaClientOf(r *Request) quota.Client {
	var principal string
	if r.sec != nil {
		principal = r.sec.ctx.Principal
	}
	return quota.ClientOf(principal, r.Header.ClientID)
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
	rq, ok := b.quotas.Request(im.ClientQuotas(), quotaClientOf(r))
	if !ok {
		api.Handle(b, r)
		return
	}
	if r.Header.Key != fetchKey {
		r.throttle = r.mute(rq.Throttle())
	}
	start := time.Now()
	api.Handle(b, r)
	if !r.quotaExempt {
		rq.Record(time.Since(start))
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

// mute holds back r's connection for a throttle time t (nothing when t is 0) and
// returns t in ms, for the answer's throttle_time_ms.
func (r *Request) mute(t time.Duration) int32 {
	if t <= 0 {
		return 0
	}
	transport.Mute(r.Conn, t)
	return int32(min(t.Milliseconds(), math.MaxInt32))
}

// answerMutations finishes r after its controller mutations were charged
// (quota.Manager's CreateTopics, CreatePartitions, DeleteTopics): it sets the answer's
// throttle time t (muting the connection) and has add put the refused topics in the
// answer (after any authorisation amendment). It reports whether anything is left to
// forward (left topics); when nothing is, the answer has been sent.
func (r *Request) answerMutations(t time.Duration, left, refused int, add func(kmsg.Response)) bool {
	r.throttle = max(r.throttle, r.mute(t))
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
