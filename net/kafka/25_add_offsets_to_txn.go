// AddOffsetsToTxn (key 25), versions 0-4.
//
// The group's __consumer_offsets partition (abs(javaHash(group)) mod the partition
// count) joins the producer's ongoing transaction at the transaction coordinator, so
// that the group's TxnOffsetCommits are committed or aborted with it by the markers
// that partition receives. Errors as AddPartitionsToTxn's: NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, INVALID_PRODUCER_ID_MAPPING,
// PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2), CONCURRENT_TRANSACTIONS.
//
// Differences from Apache Kafka: no authorization (WRITE on the transactional id,
// READ on the group) is checked.

package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 25, MinVersion: 0, MaxVersion: 4, Handle: handleAddOffsetsToTxn, Authz: authz.AddOffsetsToTxn})
}

func handleAddOffsetsToTxn(b *Broker, r *Request) {
	req := r.Body.(*kmsg.AddOffsetsToTxnRequest)
	c := b.txnCoordinatorOr(func(code int16) {
		resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
		resp.ErrorCode = code
		r.Respond(resp)
	})
	if c != nil {
		c.AddOffsetsToTxn(req, func(resp *kmsg.AddOffsetsToTxnResponse) { r.Respond(resp) })
	}
}
