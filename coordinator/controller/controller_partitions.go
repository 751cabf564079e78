package controller

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// alterPartitionLocked is AlterPartition (56): a leader's ISR changes (topics by
// name before v2, by id from v2; broker epochs per member from v3), validated as
// alterPartitionChange says; an unknown broker or epoch is STALE_BROKER_EPOCH for the
// whole request. Each partition is answered with its state after the change
// (leader, epochs, ISR, recovery state) once committed.
func (c *Controller) alterPartitionLocked(r *kmsg.AlterPartitionRequest) *op {
	resp := r.ResponseKind().(*kmsg.AlterPartitionResponse)
	resp.SetVersion(r.GetVersion())
	im := c.mu.pending
	if b, ok := im.Broker(r.BrokerID); !ok || b.Epoch != r.BrokerEpoch {
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		return &op{resp: resp}
	}
	v := r.GetVersion()
	var recs []metadata.Record
	type answer struct {
		rt    int
		rp    int
		topic metadata.UUID
		index int32
	}
	var answers []answer
	for _, t := range r.Topics {
		rt := kmsg.NewAlterPartitionResponseTopic()
		rt.Topic, rt.TopidID = t.Topic, t.TopicID
		var ti *metadata.TopicImage
		var ok bool
		unknown := kerr.UnknownTopicOrPartition
		if v >= 2 {
			ti, ok = im.TopicByID(metadata.UUID(t.TopicID))
			unknown = kerr.UnknownTopicID
		} else {
			ti, ok = im.Topic(t.Topic)
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionResponseTopicPartition()
			rp.Partition = p.Partition
			if !ok {
				rp.ErrorCode = unknown.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			in := alterPartitionInput{brokerID: r.BrokerID, leaderEpoch: p.LeaderEpoch, partitionEpoch: p.PartitionEpoch,
				recovery: p.LeaderRecoveryState, version: v}
			if v >= 3 {
				for _, m := range p.NewEpochISR {
					in.isr = append(in.isr, isrMember{id: m.BrokerID, epoch: m.BrokerEpoch})
				}
			} else {
				for _, id := range p.NewISR {
					in.isr = append(in.isr, isrMember{id: id, epoch: -1})
				}
			}
			cur, _ := im.TopicByID(ti.ID)
			rec, code := alterPartitionChange(im, cur, p.Partition, in, c.policyFunc(im))
			if code != nil {
				rp.ErrorCode = code.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			if rec != nil {
				next, err := im.Apply(rec)
				if err != nil {
					c.log.Error("controller: AlterPartition change does not apply", "topic", ti.Name, "partition", p.Partition, "err", err)
					rp.ErrorCode = kerr.UnknownServerError.Code
					rt.Partitions = append(rt.Partitions, rp)
					continue
				}
				im = next
				recs = append(recs, rec)
			}
			answers = append(answers, answer{rt: len(resp.Topics), rp: len(rt.Partitions), topic: ti.ID, index: p.Partition})
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	// Every answered partition reports its state in the image after the request.
	for _, a := range answers {
		t, _ := im.TopicByID(a.topic)
		p := t.Partitions[a.index]
		rp := &resp.Topics[a.rt].Partitions[a.rp]
		rp.LeaderID, rp.LeaderEpoch, rp.ISR = p.Leader, p.LeaderEpoch, slices.Clone(p.ISR)
		rp.LeaderRecoveryState, rp.PartitionEpoch = p.LeaderRecoveryState, p.PartitionEpoch
	}
	if len(recs) == 0 {
		return &op{resp: resp}
	}
	return &op{recs: recs, finish: func(uint64) kmsg.Response { return resp }}
}

// electLeadersLocked is ElectLeaders (43): preferred (v0, or ElectionType 0) or
// unclean (1) elections of the partitions named, or of every partition when Topics
// is null (then partitions that need no election are left out of the answer, as
// Kafka does). Per-partition errors as electLeaderChange says; unknown topics
// UNKNOWN_TOPIC_OR_PARTITION.
func (c *Controller) electLeadersLocked(r *kmsg.ElectLeadersRequest) *op {
	resp := r.ResponseKind().(*kmsg.ElectLeadersResponse)
	resp.SetVersion(r.GetVersion())
	typ := r.ElectionType
	if r.GetVersion() < 1 {
		typ = electionPreferred
	}
	im := c.mu.pending
	var recs []metadata.Record
	elect := func(ti *metadata.TopicImage, index int32) error {
		cur, _ := im.TopicByID(ti.ID)
		rec, err := electLeaderChange(im, cur, index, typ, c.policyFunc(im))
		if err != nil || rec == nil {
			return err
		}
		next, aerr := im.Apply(rec)
		if aerr != nil {
			return errf(kerr.UnknownServerError, "recording election: %v", aerr)
		}
		im = next
		recs = append(recs, rec)
		return nil
	}
	result := func(index int32, err error) kmsg.ElectLeadersResponseTopicPartition {
		rp := kmsg.NewElectLeadersResponseTopicPartition()
		rp.Partition, rp.ErrorCode, rp.ErrorMessage = index, errCode(err), errMsg(err)
		return rp
	}
	if r.Topics == nil {
		for _, ti := range im.Topics() {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = ti.Name
			for i := range ti.Partitions {
				err := elect(ti, int32(i))
				if errCode(err) == kerr.ElectionNotNeeded.Code {
					continue
				}
				rt.Partitions = append(rt.Partitions, result(int32(i), err))
			}
			if len(rt.Partitions) > 0 {
				resp.Topics = append(resp.Topics, rt)
			}
		}
	} else {
		for _, t := range r.Topics {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Topic
			ti, ok := im.Topic(t.Topic)
			for _, p := range t.Partitions {
				var err error
				if !ok {
					err = errf(kerr.UnknownTopicOrPartition, "topic %q does not exist", t.Topic)
				} else {
					err = elect(ti, p)
				}
				rt.Partitions = append(rt.Partitions, result(p, err))
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if len(recs) == 0 {
		return &op{resp: resp}
	}
	return &op{recs: recs, finish: func(uint64) kmsg.Response { return resp }}
}

// alterReassignmentsLocked is AlterPartitionReassignments (45): per partition, a
// target replica list starts (or replaces) a reassignment, a null one cancels it, as
// reassignChange and cancelReassignChange say. The new replicas catch up as
// followers; their leader's AlterPartition, adding them to the ISR, completes the
// reassignment.
func (c *Controller) alterReassignmentsLocked(r *kmsg.AlterPartitionAssignmentsRequest) *op {
	resp := r.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.SetVersion(r.GetVersion())
	allowRF := r.GetVersion() < 1 || r.AllowReplicationFactorChange
	resp.AllowReplicationFactorChange = r.AllowReplicationFactorChange
	im := c.mu.pending
	var recs []metadata.Record
	for _, t := range r.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			var err error
			var rec *metadata.PartitionChangeRecord
			ti, ok := im.Topic(t.Topic)
			switch {
			case !ok:
				err = errf(kerr.UnknownTopicOrPartition, "topic %q does not exist", t.Topic)
			case p.Replicas == nil:
				rec, err = cancelReassignChange(im, ti, p.Partition, c.policyFunc(im))
			default:
				rec, err = reassignChange(im, ti, p.Partition, p.Replicas, allowRF, c.policyFunc(im))
			}
			if err == nil && rec != nil {
				next, aerr := im.Apply(rec)
				if aerr != nil {
					err = errf(kerr.UnknownServerError, "recording reassignment: %v", aerr)
				} else {
					im = next
					recs = append(recs, rec)
				}
			}
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.ErrorMessage = p.Partition, errCode(err), errMsg(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(recs) == 0 {
		return &op{resp: resp}
	}
	return &op{recs: recs, finish: func(uint64) kmsg.Response { return resp }}
}

// listReassignmentsLocked is ListPartitionReassignments (46): the reassignments in
// progress (replicas, adding, removing), of the partitions named or of every
// partition when Topics is null. Partitions without one, and unknown topics, are
// left out.
func (c *Controller) listReassignmentsLocked(r *kmsg.ListPartitionReassignmentsRequest) *op {
	resp := r.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	resp.SetVersion(r.GetVersion())
	im := c.mu.pending
	add := func(ti *metadata.TopicImage, indexes []int32) {
		rt := kmsg.NewListPartitionReassignmentsResponseTopic()
		rt.Topic = ti.Name
		for _, i := range indexes {
			if i < 0 || int(i) >= len(ti.Partitions) {
				continue
			}
			p := ti.Partitions[i]
			if len(p.Adding) == 0 && len(p.Removing) == 0 {
				continue
			}
			rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			rp.Partition, rp.Replicas = i, slices.Clone(p.Replicas)
			rp.AddingReplicas, rp.RemovingReplicas = orEmpty(slices.Clone(p.Adding)), orEmpty(slices.Clone(p.Removing))
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(rt.Partitions) > 0 {
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if r.Topics == nil {
		for _, ti := range im.Topics() {
			all := make([]int32, len(ti.Partitions))
			for i := range all {
				all[i] = int32(i)
			}
			add(ti, all)
		}
	} else {
		for _, t := range r.Topics {
			if ti, ok := im.Topic(t.Topic); ok {
				add(ti, t.Partitions)
			}
		}
	}
	return &op{resp: resp}
}
