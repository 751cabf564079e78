// DeleteTopics (key 20), versions 0-6.
//
// Forwarded to the active controller and answered with its result once this broker's
// image no longer has the topics (their logs are then deleted here: renamed to
// "<dir>.<uuid>-delete" and removed in the background). Topics by name (v0-5:
// TopicNames; v6: Topics with a name) or by topic id (v6: Topics with a null name).
// Unknown names answer UNKNOWN_TOPIC_OR_PARTITION, unknown ids UNKNOWN_TOPIC_ID; an
// entry with both a name and an id, or neither, INVALID_REQUEST. TimeoutMillis bounds
// the wait for the controller.
//
// The partitions created or deleted are charged to the client's
// controller_mutation_rate (KIP-599; net/quota): over it a topic is answered
// THROTTLING_QUOTA_EXCEEDED (newer versions) or the answer throttled (older ones).
//
// Differences from Apache Kafka: internal topics may be deleted (no authorizer to
// refuse it).

package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 20, MinVersion: 0, MaxVersion: 6, Handle: handleDeleteTopics, Authz: authz.DeleteTopics})
}

func handleDeleteTopics(b *Broker, r *Request) {
	req := r.Body.(*kmsg.DeleteTopicsRequest)
	refused, t, charged := b.quotas.DeleteTopics(b.meta.Image(), quotaClientOf(r), r.Header.Version, req)
	if charged && !answerMutations(r, t, len(req.TopicNames)+len(req.Topics), len(refused), func(resp kmsg.Response) {
		dr := resp.(*kmsg.DeleteTopicsResponse)
		dr.Topics = append(dr.Topics, refused...)
	}) {
		return
	}
	b.forward(r, forwarded{timeout: time.Duration(req.TimeoutMillis) * time.Millisecond, write: true})
}
