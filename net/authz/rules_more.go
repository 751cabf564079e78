package authz

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// More per-API rules: deletes, configs, partitions, transactions, descriptions.

// DeleteRecords: DELETE on each topic (split).
func DeleteRecords(az *Check) Decision {
	d := az.req.Body.(*kmsg.DeleteRecordsRequest)
	var allowed []kmsg.DeleteRecordsRequestTopic
	var refused []kmsg.DeleteRecordsResponseTopic
	for _, t := range d.Topics {
		if az.topic(opDelete, t.Topic) {
			allowed = append(allowed, t)
			continue
		}
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.DeleteRecordsResponseTopicPartition{Partition: p.Partition, LowWatermark: -1, ErrorCode: codeTopic})
		}
		refused = append(refused, rt)
	}
	return az.split(len(allowed), len(refused), func() { d.Topics = allowed }, func(resp kmsg.Response) {
		r := resp.(*kmsg.DeleteRecordsResponse)
		r.Topics = append(r.Topics, refused...)
	})
}

// OffsetForLeaderEpoch: CLUSTER_ACTION (followers) or DESCRIBE on each topic
// (amended).
func OffsetForLeaderEpoch(az *Check) Decision {
	if az.cluster(opClusterAction) {
		return Decision{}
	}
	return amended(func(resp kmsg.Response) {
		r := resp.(*kmsg.OffsetForLeaderEpochResponse)
		for i := range r.Topics {
			t := &r.Topics[i]
			if az.topic(opDescribe, t.Topic) {
				continue
			}
			for j := range t.Partitions {
				p := &t.Partitions[j]
				*p = kmsg.OffsetForLeaderEpochResponseTopicPartition{Partition: p.Partition, ErrorCode: codeTopic, LeaderEpoch: -1, EndOffset: -1}
			}
		}
	})
}

// AddPartitionsToTxn: v0-3 (clients): WRITE on the transactional id, then on each
// topic; a refusal answers every partition (refused ones with their code, the others
// OPERATION_NOT_ATTEMPTED), as Kafka does. v4+ (brokers' batches): CLUSTER_ACTION.
func AddPartitionsToTxn(az *Check) Decision {
	a := az.req.Body.(*kmsg.AddPartitionsToTxnRequest)
	if a.Version >= 4 {
		if az.cluster(opClusterAction) {
			return Decision{}
		}
		return az.refuseAll(codeCluster)
	}
	txnOK := az.txnID(opWrite, a.TransactionalID)
	refused := !txnOK
	codes := make([]int16, len(a.Topics))
	for i, t := range a.Topics {
		switch {
		case !txnOK:
			codes[i] = codeTxn
		case !az.topic(opWrite, t.Topic):
			codes[i], refused = codeTopic, true
		}
	}
	if !refused {
		return Decision{}
	}
	resp := az.responseKind().(*kmsg.AddPartitionsToTxnResponse)
	for i, t := range a.Topics {
		code := codes[i]
		if code == 0 {
			code = kerr.OperationNotAttempted.Code
		}
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.AddPartitionsToTxnResponseTopicPartition{Partition: p, ErrorCode: code})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return answer(resp)
}

// configAllowed decides op on one config resource: the cluster for broker resources,
// the topic or the group otherwise; with its refusal code.
func (az *Check) configAllowed(op clusterOrResourceOp, rt kmsg.ConfigResourceType, name string) (bool, int16) {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		return az.topic(op.topic, name), codeTopic
	case kmsg.ConfigResourceTypeGroupConfig:
		return az.group(op.topic, name), codeGroup
	}
	return az.cluster(op.cluster), codeCluster
}

// clusterOrResourceOp is the operation checked on the cluster (broker resources) and
// on topics and groups.
type clusterOrResourceOp struct{ cluster, topic metadata.ACLOperation }

// AlterConfigs: ALTER_CONFIGS per resource (split).
func AlterConfigs(az *Check) Decision {
	a := az.req.Body.(*kmsg.AlterConfigsRequest)
	op := clusterOrResourceOp{opAlterConfigs, opAlterConfigs}
	var allowed []kmsg.AlterConfigsRequestResource
	var refused []kmsg.AlterConfigsResponseResource
	for _, res := range a.Resources {
		if ok, code := az.configAllowed(op, res.ResourceType, res.ResourceName); !ok {
			rr := kmsg.NewAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = res.ResourceType, res.ResourceName, code
			refused = append(refused, rr)
			continue
		}
		allowed = append(allowed, res)
	}
	return az.split(len(allowed), len(refused), func() { a.Resources = allowed }, func(resp kmsg.Response) {
		r := resp.(*kmsg.AlterConfigsResponse)
		r.Resources = append(r.Resources, refused...)
	})
}

// IncrementalAlterConfigs: ALTER_CONFIGS per resource (split).
func IncrementalAlterConfigs(az *Check) Decision {
	a := az.req.Body.(*kmsg.IncrementalAlterConfigsRequest)
	op := clusterOrResourceOp{opAlterConfigs, opAlterConfigs}
	var allowed []kmsg.IncrementalAlterConfigsRequestResource
	var refused []kmsg.IncrementalAlterConfigsResponseResource
	for _, res := range a.Resources {
		if ok, code := az.configAllowed(op, res.ResourceType, res.ResourceName); !ok {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = res.ResourceType, res.ResourceName, code
			refused = append(refused, rr)
			continue
		}
		allowed = append(allowed, res)
	}
	return az.split(len(allowed), len(refused), func() { a.Resources = allowed }, func(resp kmsg.Response) {
		r := resp.(*kmsg.IncrementalAlterConfigsResponse)
		r.Resources = append(r.Resources, refused...)
	})
}

// CreatePartitions: ALTER on each topic (split).
func CreatePartitions(az *Check) Decision {
	c := az.req.Body.(*kmsg.CreatePartitionsRequest)
	var allowed []kmsg.CreatePartitionsRequestTopic
	var refused []kmsg.CreatePartitionsResponseTopic
	for _, t := range c.Topics {
		if az.topic(opAlter, t.Topic) {
			allowed = append(allowed, t)
			continue
		}
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic, rt.ErrorCode = t.Topic, codeTopic
		refused = append(refused, rt)
	}
	return az.split(len(allowed), len(refused), func() { c.Topics = allowed }, func(resp kmsg.Response) {
		r := resp.(*kmsg.CreatePartitionsResponse)
		r.Topics = append(r.Topics, refused...)
	})
}

// OffsetDelete: DELETE on the group (refused whole), READ on each topic (split).
func OffsetDelete(az *Check) Decision {
	d := az.req.Body.(*kmsg.OffsetDeleteRequest)
	if !az.group(opDelete, d.Group) {
		return az.refuseAll(codeGroup)
	}
	var allowed []kmsg.OffsetDeleteRequestTopic
	var refused []kmsg.OffsetDeleteResponseTopic
	for _, t := range d.Topics {
		if az.topic(opRead, t.Topic) {
			allowed = append(allowed, t)
			continue
		}
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetDeleteResponseTopicPartition{Partition: p.Partition, ErrorCode: codeTopic})
		}
		refused = append(refused, rt)
	}
	return az.split(len(allowed), len(refused), func() { d.Topics = allowed }, func(resp kmsg.Response) {
		r := resp.(*kmsg.OffsetDeleteResponse)
		r.Topics = append(r.Topics, refused...)
	})
}

// DescribeProducers: READ on each topic (amended).
func DescribeProducers(az *Check) Decision {
	return amended(func(resp kmsg.Response) {
		r := resp.(*kmsg.DescribeProducersResponse)
		for i := range r.Topics {
			t := &r.Topics[i]
			if az.topic(opRead, t.Topic) {
				continue
			}
			for j := range t.Partitions {
				p := &t.Partitions[j]
				p.ErrorCode, p.ErrorMessage, p.ActiveProducers = codeTopic, nil, nil
			}
		}
	})
}

// DescribeTransactions: DESCRIBE on each transactional id (amended); partitions
// of topics the principal may not describe are left out.
func DescribeTransactions(az *Check) Decision {
	return amended(func(resp kmsg.Response) {
		r := resp.(*kmsg.DescribeTransactionsResponse)
		for i := range r.TransactionStates {
			s := &r.TransactionStates[i]
			if !az.txnID(opDescribe, s.TransactionalID) {
				ns := kmsg.NewDescribeTransactionsResponseTransactionState()
				ns.TransactionalID, ns.ErrorCode = s.TransactionalID, codeTxn
				*s = ns
				continue
			}
			kept := s.Topics[:0]
			for _, t := range s.Topics {
				if az.topic(opDescribe, t.Topic) {
					kept = append(kept, t)
				}
			}
			s.Topics = kept
		}
	})
}

// ListTransactions: only the transactional ids the principal may DESCRIBE.
func ListTransactions(az *Check) Decision {
	return amended(func(resp kmsg.Response) {
		r := resp.(*kmsg.ListTransactionsResponse)
		kept := r.TransactionStates[:0]
		for _, s := range r.TransactionStates {
			if az.txnID(opDescribe, s.TransactionalID) {
				kept = append(kept, s)
			}
		}
		r.TransactionStates = kept
	})
}

// ConsumerGroupDescribe: DESCRIBE on each group (amended).
func ConsumerGroupDescribe(az *Check) Decision {
	return amended(func(resp kmsg.Response) {
		r := resp.(*kmsg.ConsumerGroupDescribeResponse)
		for i := range r.Groups {
			g := &r.Groups[i]
			if !az.group(opDescribe, g.Group) {
				ng := kmsg.NewConsumerGroupDescribeResponseGroup()
				ng.Group, ng.ErrorCode = g.Group, codeGroup
				*g = ng
			}
		}
	})
}

// WriteTxnMarkers: ALTER or CLUSTER_ACTION on the cluster (KIP-664: ALTER lets an
// operator's admin client abort a hanging transaction), refused whole with
// CLUSTER_AUTHORIZATION_FAILED on every partition of every marker, as Kafka's
// WriteTxnMarkersRequest.getErrorResponse answers.
func WriteTxnMarkers(az *Check) Decision {
	if az.cluster(opAlter) || az.cluster(opClusterAction) {
		return Decision{}
	}
	req := az.req.Body.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition, rp.ErrorCode = p, codeCluster
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return answer(resp)
}

// DescribeTopicPartitions: DESCRIBE on each topic. Named topics the principal may not
// describe are answered TOPIC_AUTHORIZATION_FAILED; of all topics, those are left out.
func DescribeTopicPartitions(az *Check) Decision {
	req := az.req.Body.(*kmsg.DescribeTopicPartitionsRequest)
	if len(req.Topics) == 0 {
		return amended(func(resp kmsg.Response) {
			r := resp.(*kmsg.DescribeTopicPartitionsResponse)
			kept := r.Topics[:0]
			for _, t := range r.Topics {
				if t.Topic != nil && az.topic(opDescribe, *t.Topic) {
					kept = append(kept, t)
				}
			}
			r.Topics = kept
		})
	}
	var refused []string
	for _, t := range req.Topics {
		if !az.topic(opDescribe, t.Topic) {
			refused = append(refused, t.Topic)
		}
	}
	if len(refused) == 0 {
		return Decision{}
	}
	return amended(func(resp kmsg.Response) {
		r := resp.(*kmsg.DescribeTopicPartitionsResponse)
		for i := range r.Topics {
			t := &r.Topics[i]
			if t.Topic != nil && slices.Contains(refused, *t.Topic) {
				*t = kmsg.DescribeTopicPartitionsResponseTopic{Topic: t.Topic, ErrorCode: codeTopic, AuthorizedOperations: OperationsUnknown}
			}
		}
	})
}
