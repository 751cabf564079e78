package txn

import (
	"regexp"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeTransactions serves DescribeTransactions (key 65) for the ids
// this coordinator owns: state, producer id and epoch, timeout, start time
// and partitions. Per id: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// INVALID_REQUEST (empty), TRANSACTIONAL_ID_NOT_FOUND (unknown or being
// expired). The handler checks DESCRIBE on each transactional id first
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
func (c *Coordinator) DescribeTransactions(req *kmsg.DescribeTransactionsRequest) *kmsg.DescribeTransactionsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
		_, m, code := c.lookupLocked(id)
		switch {
		case id == "":
			st.ErrorCode = kerr.InvalidRequest.Code
		case code != 0:
			st.ErrorCode = code
		case m == nil, m.state == Dead, m.pending == Dead:
			st.ErrorCode = kerr.TransactionalIDNotFound.Code
		default:
			st.State = m.state.String()
			st.TimeoutMillis = m.timeoutMs
			st.StartTimestamp = m.startMs
			st.ProducerID, st.ProducerEpoch = m.producerID, m.epoch
			for _, g := range groupByTopic(m.sortedPartitions()) {
				t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				t.Topic, t.Partitions = g.topic, g.parts
				st.Topics = append(st.Topics, t)
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp
}

// ListTransactions serves ListTransactions (key 66) over the ids of this
// coordinator's partitions (an admin client asks every broker), filtered
// by state names (unknown ones listed in UnknownStateFilters), producer
// ids, a minimum running time (v1: DurationFilterMillis, transactions
// started longer ago) and an id pattern (v2, a regular expression the
// whole id must match: RE2's syntax, close to Java's;
// INVALID_REGULAR_EXPRESSION when it does not compile). COORDINATOR_LOAD_IN_PROGRESS while a partition loads. The
// handler filters out the ids the principal may not DESCRIBE.
func (c *Coordinator) ListTransactions(req *kmsg.ListTransactionsRequest) *kmsg.ListTransactionsResponse {
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	var pattern *regexp.Regexp
	if req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		re, err := regexp.Compile("^(?:" + *req.TransactionalIDPattern + ")$")
		if err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return resp
		}
		pattern = re
	}
	states := map[State]bool{}
	for _, name := range req.StateFilters {
		if st, ok := ParseState(name); ok {
			states[st] = true
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	pids := map[int64]bool{}
	for _, p := range req.ProducerIDFilters {
		pids[p] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	for _, part := range c.mu.parts {
		if part.loading {
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
			return resp
		}
	}
	now := c.nowMs()
	for _, part := range c.sortedPartsLocked() {
		for _, m := range sortedTxns(part) {
			switch {
			case m.state == Dead, m.pending == Dead:
			case len(pids) > 0 && !pids[m.producerID]:
			case len(req.StateFilters) > 0 && !states[m.state]:
			case req.DurationFilterMillis >= 0 && req.Version >= 1 && now-m.startMs <= req.DurationFilterMillis:
			case pattern != nil && !pattern.MatchString(m.id):
			default:
				st := kmsg.NewListTransactionsResponseTransactionState()
				st.TransactionalID, st.ProducerID, st.TransactionState = m.id, m.producerID, m.state.String()
				resp.TransactionStates = append(resp.TransactionStates, st)
			}
		}
	}
	sort.Slice(resp.TransactionStates, func(i, j int) bool {
		return resp.TransactionStates[i].TransactionalID < resp.TransactionStates[j].TransactionalID
	})
	return resp
}
