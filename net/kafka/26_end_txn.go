// EndTxn (key 26), versions 0-5.
//
// The producer commits or aborts its transaction at the transaction coordinator
// (coordinator/txn's EndTxn, from a goroutine of its own: an exhausted epoch may wait
// for a producer-id block): PrepareCommit or PrepareAbort is made durable in
// __transaction_state and the producer answered; the markers then go to every
// partition of the transaction (WriteTxnMarkers, to this node's MarkerWriter or the
// partitions' leaders) and CompleteCommit or CompleteAbort is logged once they all
// have theirs. Meanwhile the id's next requests get CONCURRENT_TRANSACTIONS.
//
// Errors: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
// INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2),
// CONCURRENT_TRANSACTIONS, INVALID_TXN_STATE; a retry of a completed end answers NONE.
//
// At transaction.version 2 (the finalized level, features.go) v5+ bumps the epoch at
// every transaction (KIP-890 part 2, coordinator/txn).

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 26, MinVersion: 0, MaxVersion: 5, Handle: handleEndTxn, Authz: authz.EndTxn})
}

func handleEndTxn(b *Broker, r *Request) {
	req := r.Body.(*kmsg.EndTxnRequest)
	b.async(func(context.Context) {
		c := b.txnCoordinatorOr(func(code int16) {
			resp := req.ResponseKind().(*kmsg.EndTxnResponse)
			resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
			r.Respond(resp)
		})
		if c != nil {
			c.EndTxn(req, func(resp *kmsg.EndTxnResponse) { r.Respond(resp) })
		}
	})
}
