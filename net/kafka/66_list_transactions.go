// ListTransactions (key 66), versions 0-2.
//
// The transactional ids of the __transaction_state partitions this broker leads (an
// admin client asks every broker and merges), filtered by state names (unknown ones
// echoed in UnknownStateFilters), producer ids, v1+ a minimum running time
// (DurationFilterMillis) and v2+ an id pattern; COORDINATOR_LOAD_IN_PROGRESS while a
// partition loads, INVALID_REGULAR_EXPRESSION for a pattern that does not compile.
//
// Differences from Apache Kafka: the pattern is an RE2 expression matched against the
// whole id (Kafka: a Java regular expression); no authorization (DESCRIBE on each id)
// filters the list.

package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 66, MinVersion: 0, MaxVersion: 2, Handle: handleListTransactions, Authz: authz.ListTransactions})
}

func handleListTransactions(b *Broker, r *Request) {
	req := r.Body.(*kmsg.ListTransactionsRequest)
	c := b.coord.Txn()
	if c == nil {
		resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		r.Respond(resp)
		return
	}
	r.Respond(c.ListTransactions(req))
}
