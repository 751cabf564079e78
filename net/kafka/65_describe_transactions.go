// DescribeTransactions (key 65), version 0.
//
// For each transactional id this broker coordinates: its state (Kafka's names:
// Empty, Ongoing, PrepareCommit, ...), producer id and epoch, timeout, start time and
// partitions. Per id: NOT_COORDINATOR (another broker leads its __transaction_state
// partition: admin clients ask that one), COORDINATOR_LOAD_IN_PROGRESS,
// TRANSACTIONAL_ID_NOT_FOUND, INVALID_REQUEST (empty id).
//
// Differences from Apache Kafka: no authorization (DESCRIBE on each id) is checked.

package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 65, MinVersion: 0, MaxVersion: 0, Handle: handleDescribeTransactions, Authz: authz.DescribeTransactions})
}

func handleDescribeTransactions(b *Broker, r *Request) {
	req := r.Body.(*kmsg.DescribeTransactionsRequest)
	c := b.coord.Txn()
	if c == nil {
		resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		for _, id := range req.TransactionalIDs {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.ErrorCode = id, kerr.NotCoordinator.Code
			st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
		r.Respond(resp)
		return
	}
	r.Respond(c.DescribeTransactions(req))
}
