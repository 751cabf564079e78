package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/quota"
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
// and a throttle time goes into the answer's throttle_time_ms (Request.Mute, or with
// Request.MuteFor the handler's own field) while the connection is muted for that
// long, so a client that ignores the throttle time is held back anyway.

// quotaClientOf is r's client: its principal's user name (ANONYMOUS without
// authentication) and client id. Read on the request's read path.
func quotaClientOf(r *Request) quota.Client {
	var principal string
	if cs := secOf(r); cs != nil {
		principal = cs.Principal().Principal
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
		r.Mute(rq.Throttle())
	}
	start := time.Now()
	api.Handle(b, r)
	if !r.QuotaExempt() {
		rq.Record(time.Since(start))
	}
}

// fetchKey is Fetch's api key.
const fetchKey = 1

// answerMutations finishes r after its controller mutations were charged
// (quota.Manager's CreateTopics, CreatePartitions, DeleteTopics): it sets the answer's
// throttle time t (muting the connection) and has add put the refused topics in the
// answer (after any authorisation amendment). It reports whether anything is left to
// forward (left topics); when nothing is, the answer has been sent.
func answerMutations(r *Request, t time.Duration, left, refused int, add func(kmsg.Response)) bool {
	r.Mute(t)
	if refused > 0 {
		r.AmendWith(add)
	}
	if left == 0 && refused > 0 {
		r.Respond(r.ResponseKind())
		return false
	}
	return true
}
