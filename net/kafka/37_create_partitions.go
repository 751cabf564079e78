// CreatePartitions (key 37), versions 0-3.
//
// Forwarded to the active controller and answered with its result once this broker's
// image has the new partitions. Grows a topic to Count partitions: Count must exceed
// the current count (INVALID_PARTITIONS otherwise); an explicit Assignment must list
// exactly the new partitions, on registered brokers (INVALID_REPLICA_ASSIGNMENT
// otherwise); without one the controller places them. Unknown topics:
// UNKNOWN_TOPIC_OR_PARTITION; a topic named twice: INVALID_REQUEST. ValidateOnly stops
// after validation. New partitions get leader epoch 0. TimeoutMillis bounds the wait
// for the controller.
//
// New partitions this broker could not open under its open file limit fail the whole
// request with POLICY_VIOLATION (file_headroom.go).
//
// The partitions created or deleted are charged to the client's
// controller_mutation_rate (KIP-599; net/quota): over it a topic is answered
// THROTTLING_QUOTA_EXCEEDED (newer versions) or the answer throttled (older ones).
//
// Differences from Apache Kafka: that open-file check (Kafka has none).

package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 37, MinVersion: 0, MaxVersion: 3, Handle: handleCreatePartitions, Authz: authz.CreatePartitions})
}

func handleCreatePartitions(b *Broker, r *Request) {
	req := r.Body.(*kmsg.CreatePartitionsRequest)
	if b.refuseForFiles(r) {
		return
	}
	refused, t, charged := b.quotas.CreatePartitions(b.meta.Image(), quotaClientOf(r), r.Header.Version, req)
	if charged && !answerMutations(r, t, len(req.Topics), len(refused), func(resp kmsg.Response) {
		cr := resp.(*kmsg.CreatePartitionsResponse)
		cr.Topics = append(cr.Topics, refused...)
	}) {
		return
	}
	b.forward(r, forwarded{timeout: time.Duration(req.TimeoutMillis) * time.Millisecond, write: !req.ValidateOnly})
}
