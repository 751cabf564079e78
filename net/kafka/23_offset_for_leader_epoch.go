// OffsetForLeaderEpoch (key 23), versions 0-4.
//
// Per partition: the largest leader epoch <= LeaderEpoch that the log's epoch cache
// knows and the offset where the next epoch starts (the log end offset for the latest
// epoch); -1/-1 when none is known. Consumers use it to detect log truncation after a
// leader change (KIP-320); followers to find where to truncate (the leader answers for
// its own log, its log end for its latest epoch). Only the leader answers.
// CurrentLeaderEpoch (v2+) is checked against replication's epoch: newer than the
// partition's is UNKNOWN_LEADER_EPOCH, older is FENCED_LEADER_EPOCH.
package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 23, MinVersion: 0, MaxVersion: 4, Handle: handleOffsetForLeaderEpoch, Authz: authz.OffsetForLeaderEpoch})
}

func handleOffsetForLeaderEpoch(b *Broker, r *Request) {
	req := r.Body.(*kmsg.OffsetForLeaderEpochRequest)
	resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	resp.Topics = make([]kmsg.OffsetForLeaderEpochResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.OffsetForLeaderEpochResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			sp.Partition, sp.LeaderEpoch, sp.EndOffset = rp.Partition, -1, -1
			p, err := b.parts.Lookup(rt.Topic, rp.Partition)
			if err != nil {
				sp.ErrorCode = engineErr(err).Code
				continue
			}
			rep, ke := p.Leader()
			if ke != nil {
				sp.ErrorCode = ke.Code
				continue
			}
			if err := rep.CheckLeader(rp.CurrentLeaderEpoch); err != nil {
				sp.ErrorCode = engineErr(err).Code
				continue
			}
			sp.LeaderEpoch, sp.EndOffset = rep.EndOffsetForEpoch(rp.LeaderEpoch)
		}
	}
	r.Respond(resp)
}
