// DescribeProducers (key 61), version 0.
//
// Per partition this broker leads: the producers its log knows (engine's Producers:
// producer id and epoch, last sequence, last timestamp, the coordinator epoch of the
// last marker, the first offset of the open transaction, -1 when none). A partition
// led elsewhere is NOT_LEADER_OR_FOLLOWER, one the image does not have
// UNKNOWN_TOPIC_OR_PARTITION.
//
// Differences from Apache Kafka: no authorization (READ on the topic) is checked.

package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 61, MinVersion: 0, MaxVersion: 0, Handle: handleDescribeProducers, Authz: authz.DescribeProducers})
}

func handleDescribeProducers(b *Broker, r *Request) {
	req := r.Body.(*kmsg.DescribeProducersRequest)
	resp := r.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		for _, i := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = i
			p, err := b.parts.Lookup(t.Topic, i)
			if err == nil {
				_, ke := p.Leader()
				if ke != nil {
					err = ke
				}
			}
			if err != nil {
				rp.ErrorCode = engineErr(err).Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			for _, pi := range p.Log.Producers() {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = pi.ProducerID, int32(pi.ProducerEpoch), pi.LastSequence
				ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pi.LastTimestamp, pi.CoordinatorEpoch, pi.TxnStartOffset
				rp.ActiveProducers = append(rp.ActiveProducers, ap)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	r.Respond(resp)
}
