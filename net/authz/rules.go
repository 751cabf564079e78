package authz

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// The per-API rules, in key order (the share and streams groups' are in rules_share.go
// and rules_streams.go).

// Produce: WRITE on the transactional id of a transactional request (refused
// whole), WRITE on each topic (split).
func Produce(az *Check) Decision {
	p, ok := az.decode().(*kmsg.ProduceRequest)
	if !ok {
		return Decision{}
	}
	errTopic := func(t *kmsg.ProduceRequestTopic, code int16) kmsg.ProduceResponseTopic {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, pp := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.BaseOffset, rp.LogStartOffset = pp.Partition, code, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	}
	txnDenied := p.TransactionID != nil && !az.txnID(opWrite, *p.TransactionID)
	var allowed []kmsg.ProduceRequestTopic
	var refused []kmsg.ProduceResponseTopic
	for i := range p.Topics {
		t := &p.Topics[i]
		switch {
		case txnDenied:
			refused = append(refused, errTopic(t, codeTxn))
		case !az.topicOK(opWrite, t.Topic, t.TopicID):
			refused = append(refused, errTopic(t, codeTopic))
		default:
			allowed = append(allowed, *t)
		}
	}
	if len(refused) == 0 {
		return Decision{}
	}
	if len(allowed) == 0 {
		if p.Acks == 0 {
			return Decision{Outcome: Unanswered}
		}
		resp := az.responseKind().(*kmsg.ProduceResponse)
		resp.Topics = refused
		return answer(resp)
	}
	p.Topics = allowed
	return Decision{Raw: p.AppendTo(nil), Amend: func(resp kmsg.Response) {
		r := resp.(*kmsg.ProduceResponse)
		r.Topics = append(r.Topics, refused...)
	}}
}

// Fetch: CLUSTER_ACTION for a follower's fetch (every partition refused), READ on
// each topic for a consumer's (split).
func Fetch(az *Check) Decision {
	f, ok := az.decode().(*kmsg.FetchRequest)
	if !ok {
		return Decision{}
	}
	replica := f.ReplicaID >= 0 || (f.Version >= 15 && f.ReplicaState.ID >= 0)
	clusterDenied := replica && !az.cluster(opClusterAction)
	var allowed []kmsg.FetchRequestTopic
	var refused []kmsg.FetchResponseTopic
	for i := range f.Topics {
		t := &f.Topics[i]
		if !clusterDenied && (replica || az.topicOK(opRead, t.Topic, t.TopicID)) {
			allowed = append(allowed, *t)
			continue
		}
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, pp := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition, rp.ErrorCode = pp.Partition, codeTopic
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		refused = append(refused, rt)
	}
	if len(refused) == 0 {
		return Decision{}
	}
	if len(allowed) == 0 {
		resp := az.responseKind().(*kmsg.FetchResponse)
		resp.Topics = refused
		return answer(resp)
	}
	f.Topics = allowed
	return Decision{Raw: f.AppendTo(nil), Amend: func(resp kmsg.Response) {
		r := resp.(*kmsg.FetchResponse)
		r.Topics = append(r.Topics, refused...)
	}}
}

// ListOffsets: DESCRIBE on each topic (amended).
func ListOffsets(az *Check) Decision {
	return amended(func(resp kmsg.Response) {
		r := resp.(*kmsg.ListOffsetsResponse)
		for i := range r.Topics {
			t := &r.Topics[i]
			if az.topic(opDescribe, t.Topic) {
				continue
			}
			for j := range t.Partitions {
				p := &t.Partitions[j]
				*p = kmsg.ListOffsetsResponseTopicPartition{Partition: p.Partition, ErrorCode: codeTopic, Timestamp: -1, Offset: -1, LeaderEpoch: -1}
			}
		}
	})
}

// Metadata: all topics: those the principal may not DESCRIBE are left out; named
// topics: TOPIC_AUTHORIZATION_FAILED for those it may not DESCRIBE, and for missing
// ones it would auto-create without CREATE on the cluster or the topic (split, so
// nothing refused is created).
func Metadata(az *Check) Decision {
	m := az.req.Body.(*kmsg.MetadataRequest)
	all := m.Topics == nil || (m.Version == 0 && len(m.Topics) == 0)
	if all {
		return amended(func(resp kmsg.Response) {
			r := resp.(*kmsg.MetadataResponse)
			kept := r.Topics[:0]
			for _, t := range r.Topics {
				if t.Topic != nil && az.topic(opDescribe, *t.Topic) {
					kept = append(kept, t)
				}
			}
			r.Topics = kept
		})
	}
	autoCreate := m.Version < 4 || m.AllowAutoTopicCreation
	clusterCreate := autoCreate && az.cluster(opCreate)
	var allowed []kmsg.MetadataRequestTopic
	var refused []kmsg.MetadataResponseTopic
	for _, t := range m.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		name = az.topicName(name, t.TopicID)
		ok := name == "" || az.topic(opDescribe, name)
		if ok && autoCreate && name != "" && !clusterCreate {
			if _, exists := az.im.Topic(name); !exists && !az.topic(opCreate, name) {
				ok = false
			}
		}
		if ok {
			allowed = append(allowed, t)
			continue
		}
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, codeTopic
		refused = append(refused, rt)
	}
	if len(refused) == 0 {
		return Decision{}
	}
	m.Topics = allowed
	if m.Version == 0 && len(allowed) == 0 {
		m.Topics = nil // v0: an empty list is every topic; answer none of them
		return amended(func(resp kmsg.Response) { resp.(*kmsg.MetadataResponse).Topics = refused })
	}
	if m.Topics == nil {
		m.Topics = []kmsg.MetadataRequestTopic{}
	}
	return amended(func(resp kmsg.Response) {
		r := resp.(*kmsg.MetadataResponse)
		r.Topics = append(r.Topics, refused...)
	})
}

// offsetTopicOK reports whether op is allowed on a topic of an offset request
// (OffsetCommit, TxnOffsetCommit): by id when byID (the zero id too), else by name. An
// id the image does not know passes: the handler answers UNKNOWN_TOPIC_ID, which
// KafkaApis decides before the topic's authorisation.
func (az *Check) offsetTopicOK(op metadata.ACLOperation, byID bool, name string, id [16]byte) bool {
	if !byID {
		return az.topic(op, name)
	}
	n := az.topicName("", id)
	return n == "" || az.topic(op, n)
}

// OffsetCommit: READ on the group (refused whole), READ on each topic (split;
// v10: by id, refused topics answered with their id).
func OffsetCommit(az *Check) Decision {
	c := az.req.Body.(*kmsg.OffsetCommitRequest)
	groupDenied := !az.group(opRead, c.Group)
	var allowed []kmsg.OffsetCommitRequestTopic
	var refused []kmsg.OffsetCommitResponseTopic
	for _, t := range c.Topics {
		code := codeGroup
		if !groupDenied {
			if az.offsetTopicOK(opRead, c.Version >= 10, t.Topic, t.TopicID) {
				allowed = append(allowed, t)
				continue
			}
			code = codeTopic
		}
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
		}
		refused = append(refused, rt)
	}
	if len(refused) == 0 && !groupDenied {
		return Decision{}
	}
	if len(allowed) == 0 {
		resp := az.responseKind().(*kmsg.OffsetCommitResponse)
		resp.Topics = refused
		return answer(resp)
	}
	c.Topics = allowed
	return amended(func(resp kmsg.Response) {
		r := resp.(*kmsg.OffsetCommitResponse)
		r.Topics = append(r.Topics, refused...)
	})
}

// TxnOffsetCommit: WRITE on the transactional id, then READ on the group (either
// refused: every partition gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED or
// GROUP_AUTHORIZATION_FAILED), then READ on each topic (split; v6: by id, refused
// topics answered with their id), in KafkaApis' order.
func TxnOffsetCommit(az *Check) Decision {
	c := az.req.Body.(*kmsg.TxnOffsetCommitRequest)
	whole := int16(0)
	switch {
	case !az.txnID(opWrite, c.TransactionalID):
		whole = codeTxn
	case !az.group(opRead, c.Group):
		whole = codeGroup
	}
	var allowed []kmsg.TxnOffsetCommitRequestTopic
	var refused []kmsg.TxnOffsetCommitResponseTopic
	for _, t := range c.Topics {
		code := whole
		if code == 0 {
			if az.offsetTopicOK(opRead, c.Version >= 6, t.Topic, t.TopicID) {
				allowed = append(allowed, t)
				continue
			}
			code = codeTopic
		}
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.TxnOffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
		}
		refused = append(refused, rt)
	}
	switch {
	case len(refused) == 0:
		return Decision{}
	case len(allowed) == 0:
		resp := az.responseKind().(*kmsg.TxnOffsetCommitResponse)
		resp.Topics = refused
		return answer(resp)
	}
	c.Topics = allowed
	return amended(func(resp kmsg.Response) {
		r := resp.(*kmsg.TxnOffsetCommitResponse)
		r.Topics = append(r.Topics, refused...)
	})
}

// OffsetFetch: DESCRIBE on each group (v8+: per group; before: the whole
// request), DESCRIBE on each topic (named: its partitions refused; all: left out).
func OffsetFetch(az *Check) Decision {
	f := az.req.Body.(*kmsg.OffsetFetchRequest)
	if f.Version < 8 && !az.group(opDescribe, f.Group) {
		resp := az.responseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = codeGroup
		for _, t := range f.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, codeGroup
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return answer(resp)
	}
	named := map[string]bool{} // groups (v8+) whose request named topics; "" before v8
	if f.Version < 8 {
		named[""] = f.Topics != nil
	}
	for _, g := range f.Groups {
		named[g.Group] = g.Topics != nil
	}
	return amended(func(resp kmsg.Response) {
		r := resp.(*kmsg.OffsetFetchResponse)
		kept := r.Topics[:0]
		for _, t := range r.Topics {
			if az.topic(opDescribe, t.Topic) {
				kept = append(kept, t)
				continue
			}
			if named[""] {
				for j := range t.Partitions {
					p := &t.Partitions[j]
					p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, nil, codeTopic
				}
				kept = append(kept, t)
			}
		}
		r.Topics = kept
		for i := range r.Groups {
			g := &r.Groups[i]
			if !az.group(opDescribe, g.Group) {
				g.Topics, g.ErrorCode = nil, codeGroup
				continue
			}
			kt := g.Topics[:0]
			for _, t := range g.Topics {
				name := az.topicName(t.Topic, t.TopicID)
				if name == "" || az.topic(opDescribe, name) {
					kt = append(kt, t)
					continue
				}
				if named[g.Group] {
					for j := range t.Partitions {
						p := &t.Partitions[j]
						p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, nil, codeTopic
					}
					kt = append(kt, t)
				}
			}
			g.Topics = kt
		}
	})
}

// FindCoordinator: DESCRIBE on the group or transactional id of each key
// (amended: a refused key gets its error and no coordinator).
func FindCoordinator(az *Check) Decision {
	f := az.req.Body.(*kmsg.FindCoordinatorRequest)
	ok := func(key string) (bool, int16) {
		switch f.CoordinatorType {
		case 0:
			return az.group(opDescribe, key), codeGroup
		case 1:
			return az.txnID(opDescribe, key), codeTxn
		case 2:
			return az.group(opRead, key), codeGroup
		}
		return true, 0
	}
	if f.Version < 4 {
		if allowed, code := ok(f.CoordinatorKey); !allowed {
			resp := az.responseKind().(*kmsg.FindCoordinatorResponse)
			resp.ErrorCode, resp.NodeID, resp.Port = code, -1, -1
			return answer(resp)
		}
		return Decision{}
	}
	return amended(func(resp kmsg.Response) {
		r := resp.(*kmsg.FindCoordinatorResponse)
		for i := range r.Coordinators {
			c := &r.Coordinators[i]
			if allowed, code := ok(c.Key); !allowed {
				*c = kmsg.FindCoordinatorResponseCoordinator{Key: c.Key, NodeID: -1, Port: -1, ErrorCode: code}
			}
		}
	})
}

// JoinGroup: READ on the group (refused whole).
func JoinGroup(az *Check) Decision {
	return az.oneGroup(opRead, az.req.Body.(*kmsg.JoinGroupRequest).Group)
}

// Heartbeat: READ on the group (refused whole).
func Heartbeat(az *Check) Decision {
	return az.oneGroup(opRead, az.req.Body.(*kmsg.HeartbeatRequest).Group)
}

// LeaveGroup: READ on the group (refused whole).
func LeaveGroup(az *Check) Decision {
	return az.oneGroup(opRead, az.req.Body.(*kmsg.LeaveGroupRequest).Group)
}

// SyncGroup: READ on the group (refused whole).
func SyncGroup(az *Check) Decision {
	return az.oneGroup(opRead, az.req.Body.(*kmsg.SyncGroupRequest).Group)
}

// DescribeGroups: DESCRIBE on each group (amended).
func DescribeGroups(az *Check) Decision {
	return amended(func(resp kmsg.Response) {
		r := resp.(*kmsg.DescribeGroupsResponse)
		for i := range r.Groups {
			g := &r.Groups[i]
			if !az.group(opDescribe, g.Group) {
				ng := kmsg.NewDescribeGroupsResponseGroup()
				ng.Group, ng.ErrorCode = g.Group, codeGroup
				*g = ng
			}
		}
	})
}

// ListGroups: DESCRIBE on the cluster lists every group; otherwise only the
// groups the principal may DESCRIBE.
func ListGroups(az *Check) Decision {
	if az.cluster(opDescribe) {
		return Decision{}
	}
	return amended(func(resp kmsg.Response) {
		r := resp.(*kmsg.ListGroupsResponse)
		kept := r.Groups[:0]
		for _, g := range r.Groups {
			if az.group(opDescribe, g.Group) {
				kept = append(kept, g)
			}
		}
		r.Groups = kept
	})
}

// CreateTopics: CREATE on the cluster, else on each topic (split).
func CreateTopics(az *Check) Decision {
	if az.cluster(opCreate) {
		return Decision{}
	}
	c := az.req.Body.(*kmsg.CreateTopicsRequest)
	var allowed []kmsg.CreateTopicsRequestTopic
	var refused []kmsg.CreateTopicsResponseTopic
	for _, t := range c.Topics {
		if az.topic(opCreate, t.Topic) {
			allowed = append(allowed, t)
			continue
		}
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.ErrorCode, rt.NumPartitions, rt.ReplicationFactor = t.Topic, codeTopic, -1, -1
		refused = append(refused, rt)
	}
	return az.split(len(allowed), len(refused), func() { c.Topics = allowed }, func(resp kmsg.Response) {
		r := resp.(*kmsg.CreateTopicsResponse)
		r.Topics = append(r.Topics, refused...)
	})
}

// DeleteTopics: DELETE on each topic (split); a topic the principal may not
// delete is TOPIC_AUTHORIZATION_FAILED whether or not it exists.
func DeleteTopics(az *Check) Decision {
	d := az.req.Body.(*kmsg.DeleteTopicsRequest)
	var refused []kmsg.DeleteTopicsResponseTopic
	refuse := func(name *string, id [16]byte) {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID, rt.ErrorCode = name, id, codeTopic
		refused = append(refused, rt)
	}
	var names []string
	for _, n := range d.TopicNames {
		if az.topic(opDelete, n) {
			names = append(names, n)
		} else {
			refuse(&n, [16]byte{})
		}
	}
	var topics []kmsg.DeleteTopicsRequestTopic
	for _, t := range d.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		if az.topicOK(opDelete, name, t.TopicID) {
			topics = append(topics, t)
		} else {
			refuse(t.Topic, t.TopicID)
		}
	}
	return az.split(len(names)+len(topics), len(refused), func() { d.TopicNames, d.Topics = names, topics }, func(resp kmsg.Response) {
		r := resp.(*kmsg.DeleteTopicsResponse)
		r.Topics = append(r.Topics, refused...)
	})
}

// InitProducerID: WRITE on the transactional id; without one (idempotence),
// IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679).
func InitProducerID(az *Check) Decision {
	p := az.req.Body.(*kmsg.InitProducerIDRequest)
	var code int16
	switch {
	case p.TransactionalID != nil:
		if !az.txnID(opWrite, *p.TransactionalID) {
			code = codeTxn
		}
	case !az.cluster(opIdempotentWrite) && !az.a.AuthorizeByResourceType(az.ctx, opWrite, metadata.ACLResourceTopic):
		code = codeCluster
	}
	if code == 0 {
		return Decision{}
	}
	resp := az.responseKind().(*kmsg.InitProducerIDResponse)
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
	return answer(resp)
}

// AddOffsetsToTxn: WRITE on the transactional id, READ on the group.
func AddOffsetsToTxn(az *Check) Decision {
	a := az.req.Body.(*kmsg.AddOffsetsToTxnRequest)
	switch {
	case !az.txnID(opWrite, a.TransactionalID):
		return az.refuseAll(codeTxn)
	case !az.group(opRead, a.Group):
		return az.refuseAll(codeGroup)
	}
	return Decision{}
}

// EndTxn: WRITE on the transactional id (refused whole).
func EndTxn(az *Check) Decision {
	if az.txnID(opWrite, az.req.Body.(*kmsg.EndTxnRequest).TransactionalID) {
		return Decision{}
	}
	return az.refuseAll(codeTxn)
}

// DescribeConfigs: DESCRIBE_CONFIGS on the cluster (broker resources), the topic
// or the group of each resource (amended: a refused resource has no configs).
func DescribeConfigs(az *Check) Decision {
	return amended(func(resp kmsg.Response) {
		r := resp.(*kmsg.DescribeConfigsResponse)
		for i := range r.Resources {
			res := &r.Resources[i]
			var ok bool
			var code int16
			switch res.ResourceType {
			case kmsg.ConfigResourceTypeTopic:
				ok, code = az.topic(opDescribeConfigs, res.ResourceName), codeTopic
			case kmsg.ConfigResourceTypeGroupConfig:
				ok, code = az.group(opDescribeConfigs, res.ResourceName), codeGroup
			default:
				ok, code = az.cluster(opDescribeConfigs), codeCluster
			}
			if !ok {
				res.ErrorCode, res.ErrorMessage, res.Configs = code, nil, nil
			}
		}
	})
}

// DeleteGroups: DELETE on each group (split; v3: the refusal with Kafka's message).
func DeleteGroups(az *Check) Decision {
	d := az.req.Body.(*kmsg.DeleteGroupsRequest)
	var allowed []string
	var refused []kmsg.DeleteGroupsResponseGroup
	for _, g := range d.Groups {
		if az.group(opDelete, g) {
			allowed = append(allowed, g)
			continue
		}
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, codeGroup
		if d.Version >= 3 {
			rg.ErrorMessage = kmsg.StringPtr(groupAuthorizationMessage)
		}
		refused = append(refused, rg)
	}
	return az.split(len(allowed), len(refused), func() { d.Groups = allowed }, func(resp kmsg.Response) {
		r := resp.(*kmsg.DeleteGroupsResponse)
		r.Groups = append(r.Groups, refused...)
	})
}

// groupAuthorizationMessage is Kafka's message (Errors.java) for
// GROUP_AUTHORIZATION_FAILED, which DeleteGroups v3 carries per group.
const groupAuthorizationMessage = "Group authorization failed."

// ConsumerGroupHeartbeat: READ on the group (refused whole). Not done: Kafka also asks
// DESCRIBE on the subscribed topic names.
func ConsumerGroupHeartbeat(az *Check) Decision {
	return az.oneGroup(opRead, az.req.Body.(*kmsg.ConsumerGroupHeartbeatRequest).Group)
}
