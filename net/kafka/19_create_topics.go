// CreateTopics (key 19), versions 0-7.
//
// Forwarded to the active controller (docs/CLUSTER.md) and answered with its result
// once this broker's image shows the new topics: a client that created a topic finds
// it in this broker's Metadata at once. The controller validates each topic alone:
// name (INVALID_TOPIC_EXCEPTION), partitions and replication factor (-1 takes
// num.partitions and default.replication.factor; v4+; INVALID_REPLICATION_FACTOR above
// the number of unfenced brokers), explicit replica assignments (INVALID_REQUEST when
// combined with counts; partitions numbered 0..n-1; INVALID_REPLICA_ASSIGNMENT for an
// unknown broker), configs by name and value (INVALID_CONFIG), existence
// (TOPIC_ALREADY_EXISTS); a name given twice in one request fails with INVALID_REQUEST
// for each occurrence. ValidateOnly (v1+) stops after validation. v5+ answers with the
// partition count, replication factor and the topic's full configuration; v7+ with the
// topic id. TimeoutMillis bounds the wait for the controller (REQUEST_TIMED_OUT past
// it); a controller that cannot be reached answers NOT_CONTROLLER.
//
// A request whose new partitions this broker could not open under its open file limit
// fails whole with POLICY_VIOLATION and a message naming the limit (file_headroom.go).
//
// The partitions created or deleted are charged to the client's
// controller_mutation_rate (KIP-599; net/quota): over it a topic is answered
// THROTTLING_QUOTA_EXCEEDED (newer versions) or the answer throttled (older ones).
//
// Differences from Apache Kafka: the open-file check above (Kafka has none).

package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 19, MinVersion: 0, MaxVersion: 7, Handle: handleCreateTopics, Authz: authz.CreateTopics})
}

func handleCreateTopics(b *Broker, r *Request) {
	req := r.Body.(*kmsg.CreateTopicsRequest)
	if b.refuseForFiles(r) {
		return
	}
	im := b.meta.Image()
	refused, t, charged := b.quotas.CreateTopics(im, quotaClientOf(r), r.Header.Version, req,
		func() int { return int(b.keys.groupInt(im, "num.partitions", 1)) })
	if charged && !answerMutations(r, t, len(req.Topics), len(refused), func(resp kmsg.Response) {
		cr := resp.(*kmsg.CreateTopicsResponse)
		cr.Topics = append(cr.Topics, refused...)
	}) {
		return
	}
	b.forward(r, forwarded{timeout: time.Duration(req.TimeoutMillis) * time.Millisecond, write: !req.ValidateOnly})
}
