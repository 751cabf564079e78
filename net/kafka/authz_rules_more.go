package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// More per-API rules of authz.go: deletes, configs, partitions, transactions.

func init() {
	authzRules[21] = authzDeleteRecords
	authzRules[23] = authzOffsetForLeaderEpoch
	authzRules[24] = authzAddPartitionsToTxn
	authzRules[27] = authzWriteTxnMarkers
	authzRules[33] = authzAlterConfigs
	authzRules[37] = authzCreatePartitions
	authzRules[44] = authzIncrementalAlterConfigs
	authzRules[47] = authzOffsetDelete
	authzRules[61] = authzDescribeProducers
	authzRules[65] = authzDescribeTransactions
	authzRules[66] = authzListTransactions
	authzRules[69] = authzConsumerGroupDescribe
}

// authzDeleteRecords: DELETE on each topic (split).
func authzDeleteRecords(az *authz) bool {
	d := az.r.Body.(*kmsg.DeleteRecordsRequest)
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

// authzOffsetForLeaderEpoch: CLUSTER_ACTION (followers) or DESCRIBE on each topic
// (amended).
func authzOffsetForLeaderEpoch(az *authz) bool {
	if az.cluster(opClusterAction) {
		return true
	}
	az.r.amend = func(resp kmsg.Response) {
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
	}
	return true
}

// authzAddPartitionsToTxn: v0-3 (clients): WRITE on the transactional id, then on each
// topic; a refusal answers every partition (refused ones with their code, the others
// OPERATION_NOT_ATTEMPTED), as Kafka does. v4+ (brokers' batches): CLUSTER_ACTION.
func authzAddPartitionsToTxn(az *authz) bool {
	a := az.r.Body.(*kmsg.AddPartitionsToTxnRequest)
	if a.Version >= 4 {
		if az.cluster(opClusterAction) {
			return true
		}
		az.refuseAll(codeCluster)
		return false
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
		return true
	}
	resp := az.r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
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
	az.r.Respond(resp)
	return false
}

// configAllowed decides op on one config resource: the cluster for broker resources,
// the topic or the group otherwise; with its refusal code.
func (az *authz) configAllowed(op clusterOrResourceOp, rt kmsg.ConfigResourceType, name string) (bool, int16) {
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

// authzAlterConfigs: ALTER_CONFIGS per resource (split).
func authzAlterConfigs(az *authz) bool {
	a := az.r.Body.(*kmsg.AlterConfigsRequest)
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

// authzIncrementalAlterConfigs: ALTER_CONFIGS per resource (split).
func authzIncrementalAlterConfigs(az *authz) bool {
	a := az.r.Body.(*kmsg.IncrementalAlterConfigsRequest)
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

// authzCreatePartitions: ALTER on each topic (split).
func authzCreatePartitions(az *authz) bool {
	c := az.r.Body.(*kmsg.CreatePartitionsRequest)
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

// authzOffsetDelete: DELETE on the group (refused whole), READ on each topic (split).
func authzOffsetDelete(az *authz) bool {
	d := az.r.Body.(*kmsg.OffsetDeleteRequest)
	if !az.group(opDelete, d.Group) {
		az.refuseAll(codeGroup)
		return false
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

// authzDescribeProducers: READ on each topic (amended).
func authzDescribeProducers(az *authz) bool {
	az.r.amend = func(resp kmsg.Response) {
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
	}
	return true
}

// authzDescribeTransactions: DESCRIBE on each transactional id (amended); partitions
// of topics the principal may not describe are left out.
func authzDescribeTransactions(az *authz) bool {
	az.r.amend = func(resp kmsg.Response) {
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
	}
	return true
}

// authzListTransactions: only the transactional ids the principal may DESCRIBE.
func authzListTransactions(az *authz) bool {
	az.r.amend = func(resp kmsg.Response) {
		r := resp.(*kmsg.ListTransactionsResponse)
		kept := r.TransactionStates[:0]
		for _, s := range r.TransactionStates {
			if az.txnID(opDescribe, s.TransactionalID) {
				kept = append(kept, s)
			}
		}
		r.TransactionStates = kept
	}
	return true
}

// authzConsumerGroupDescribe: DESCRIBE on each group (amended).
func authzConsumerGroupDescribe(az *authz) bool {
	az.r.amend = func(resp kmsg.Response) {
		r := resp.(*kmsg.ConsumerGroupDescribeResponse)
		for i := range r.Groups {
			g := &r.Groups[i]
			if !az.group(opDescribe, g.Group) {
				ng := kmsg.NewConsumerGroupDescribeResponseGroup()
				ng.Group, ng.ErrorCode = g.Group, codeGroup
				*g = ng
			}
		}
	}
	return true
}

// authzWriteTxnMarkers: ALTER or CLUSTER_ACTION on the cluster (KIP-664: ALTER lets an
// operator's admin client abort a hanging transaction), refused whole with
// CLUSTER_AUTHORIZATION_FAILED on every partition of every marker, as Kafka's
// WriteTxnMarkersRequest.getErrorResponse answers.
func authzWriteTxnMarkers(az *authz) bool {
	if az.cluster(opAlter) || az.cluster(opClusterAction) {
		return true
	}
	req := az.r.Body.(*kmsg.WriteTxnMarkersRequest)
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
	az.r.Respond(resp)
	return false
}
