// DeleteRecords (key 21), versions 0-2.
//
// Per partition: Offset -1 means the high watermark; an offset above the HW (or below
// 0) is OFFSET_OUT_OF_RANGE. The log start offset rises to Offset (never falls), the
// segments wholly below it are deleted, and LowWatermark answers the new log start
// offset. Fetches waiting on the partition are retried (their offset may now be out
// of range).
//
// Only the leader answers. Followers raise their log start when their fetches bring
// the leader's. On a tiered partition the whole log's start rises, below the local
// log start too: reads below it are out of range, and the remote log manager's next
// task deletes the copies wholly below it (replication.Partition.DeleteRecordsBefore).
//
// Differences from Apache Kafka: the answer does not wait for the followers' log starts
// (Kafka's low watermark across replicas): TimeoutMillis is not used and the answer is
// immediate, once the leader's log start has moved.
package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 21, MinVersion: 0, MaxVersion: 2, Handle: handleDeleteRecords, Authz: authz.DeleteRecords})
}

func handleDeleteRecords(b *Broker, r *Request) {
	req := r.Body.(*kmsg.DeleteRecordsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteRecordsResponse)
	dp := b.data()
	resp.Topics = make([]kmsg.DeleteRecordsResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.DeleteRecordsResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			sp.Partition, sp.LowWatermark = rp.Partition, -1
			p, err := b.parts.Lookup(rt.Topic, rp.Partition)
			if err != nil {
				sp.ErrorCode = engineErr(err).Code
				continue
			}
			rep, ke := p.Leader()
			if ke != nil {
				sp.ErrorCode = ke.Code
				continue
			} else if err := rep.CheckLeader(-1); err != nil {
				sp.ErrorCode = engineErr(err).Code
				continue
			}
			hw := p.Log.HighWatermark()
			off := rp.Offset
			if off == -1 {
				off = hw
			}
			if off < 0 || off > hw {
				sp.ErrorCode = kerr.OffsetOutOfRange.Code
				continue
			}
			low, err := rep.DeleteRecordsBefore(off) // the whole log's, remote copies included
			if err != nil {
				sp.ErrorCode = engineErr(err).Code
				continue
			}
			sp.LowWatermark = low
			dp.waits.CheckAndComplete(p.Log)
		}
	}
	r.Respond(resp)
}
