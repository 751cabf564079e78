package controller

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// ElectLeaders' election types.
const (
	electionPreferred int8 = 0
	electionUnclean   int8 = 1
)

// isrMember is one member of an AlterPartition's proposed ISR; epoch -1 when the
// request's version carries no broker epochs (v0-v2).
type isrMember struct {
	id    int32
	epoch int64
}

// AlterPartitionRequest is one partition of an AlterPartition (API 56) as the pure
// validation sees it.
type alterPartitionInput struct {
	brokerID       int32
	leaderEpoch    int32
	partitionEpoch int32
	isr            []isrMember
	recovery       int8
	version        int16
}

// alterPartitionChange validates a leader's ISR change of partition index of t
// against im, as Kafka's controller does, and returns the change (nil when nothing
// changes) or the Kafka error:
//
//   - leader epoch above the partition's: NOT_CONTROLLER (this controller is behind);
//     below: FENCED_LEADER_EPOCH; the sender not the leader: INVALID_REQUEST;
//   - partition epoch above: NOT_CONTROLLER; any other mismatch:
//     INVALID_UPDATE_VERSION;
//   - RECOVERING asked of a recovered partition, or an ISR of more than one member
//     while recovering: INVALID_REQUEST;
//   - an ISR that is empty, lists a member twice, names a non-replica or leaves out
//     the leader: INVALID_REQUEST;
//   - a member unregistered, fenced, in controlled shutdown or (v3+) of another
//     broker epoch: INELIGIBLE_REPLICA (OPERATION_NOT_ATTEMPTED before v2).
//
// A reassignment whose adding replicas are all in the new ISR completes with it; with
// ELR on, the members that leave an ISR below the topic's min.insync.replicas
// (policy) become eligible leader replicas.
func alterPartitionChange(im *metadata.Image, t *metadata.TopicImage, index int32, in alterPartitionInput, policy PolicyFunc) (*metadata.PartitionChangeRecord, *kerr.Error) {
	if index < 0 || int(index) >= len(t.Partitions) {
		return nil, kerr.UnknownTopicOrPartition
	}
	p := t.Partitions[index]
	switch {
	case in.leaderEpoch > p.LeaderEpoch:
		return nil, kerr.NotController
	case in.leaderEpoch < p.LeaderEpoch:
		return nil, kerr.FencedLeaderEpoch
	case in.brokerID != p.Leader:
		return nil, kerr.InvalidRequest
	case in.partitionEpoch > p.PartitionEpoch:
		return nil, kerr.NotController
	case in.partitionEpoch != p.PartitionEpoch:
		return nil, kerr.InvalidUpdateVersion
	}
	if in.recovery == metadata.LeaderRecovering && p.LeaderRecoveryState == metadata.LeaderRecovered {
		return nil, kerr.InvalidRequest
	}
	if in.recovery != metadata.LeaderRecovered && in.recovery != metadata.LeaderRecovering {
		return nil, kerr.InvalidRequest
	}
	ids := make([]int32, len(in.isr))
	for i, m := range in.isr {
		ids[i] = m.id
	}
	if in.recovery == metadata.LeaderRecovering && len(ids) > 1 {
		return nil, kerr.InvalidRequest
	}
	if len(ids) == 0 || hasDuplicates(ids) || !subset(ids, p.Replicas) || !slices.Contains(ids, p.Leader) {
		return nil, kerr.InvalidRequest
	}
	for _, m := range in.isr {
		b, ok := im.Broker(m.id)
		if !ok || b.Fenced || b.InControlledShutdown || (m.epoch != -1 && m.epoch != b.Epoch) {
			if in.version < 2 {
				return nil, kerr.OperationNotAttempted
			}
			return nil, kerr.IneligibleReplica
		}
	}
	c := newChange(im, t, index, electKeep, policy)
	c.isr = ids
	c.recovery = in.recovery
	return c.build(), nil
}

// electLeaderChange is one partition of ElectLeaders (API 43): a preferred election
// (PREFERRED_LEADER_NOT_AVAILABLE when the preferred replica may not lead,
// ELECTION_NOT_NEEDED when it leads) or an unclean one (ELECTION_NOT_NEEDED when the
// partition has a leader, ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica may lead;
// with ELR on an ELR member, then the last known leader, come before any replica).
func electLeaderChange(im *metadata.Image, t *metadata.TopicImage, index int32, typ int8, policy PolicyFunc) (*metadata.PartitionChangeRecord, error) {
	if index < 0 || int(index) >= len(t.Partitions) {
		return nil, errf(kerr.UnknownTopicOrPartition, "partition %d of %q does not exist", index, t.Name)
	}
	p := t.Partitions[index]
	switch typ {
	case electionPreferred:
		if len(p.Replicas) > 0 && p.Leader == p.Replicas[0] {
			return nil, errf(kerr.ElectionNotNeeded, "the preferred replica %d leads", p.Leader)
		}
		c := newChange(im, t, index, electPreferred, policy)
		if r := c.compute(); len(p.Replicas) == 0 || r.leader != p.Replicas[0] {
			return nil, errf(kerr.PreferredLeaderNotAvailable, "the preferred replica is not in the ISR or not alive")
		}
		return c.build(), nil
	case electionUnclean:
		if p.Leader != -1 {
			return nil, errf(kerr.ElectionNotNeeded, "partition has leader %d", p.Leader)
		}
		c := newChange(im, t, index, electUnclean, policy)
		if r := c.compute(); r.leader == -1 {
			return nil, errf(kerr.EligibleLeadersNotAvailable, "no replica of %v is alive", p.Replicas)
		}
		return c.build(), nil
	}
	return nil, errf(kerr.InvalidRequest, "election type %d", typ)
}

// reassignChange starts (or replaces) a reassignment of partition index of t to
// target (AlterPartitionReassignments, API 45), as Kafka's controller: the replicas
// become target then the ones being removed; the new ones are adding, the old ones
// not in target removing; the ISR keeps its members that stay replicas. When every
// adding replica is already in the ISR (none are added, or they already are) the
// reassignment completes at once; otherwise AlterPartition completes it when they
// have joined. An earlier reassignment's adding replicas that target drops leave at
// once. allowRFChange false (v1+) refuses a target of another size
// (INVALID_REPLICATION_FACTOR). The ELR and last known ELR keep only replicas that
// stay.
func reassignChange(im *metadata.Image, t *metadata.TopicImage, index int32, target []int32, allowRFChange bool, policy PolicyFunc) (*metadata.PartitionChangeRecord, error) {
	if index < 0 || int(index) >= len(t.Partitions) {
		return nil, errf(kerr.UnknownTopicOrPartition, "partition %d of %q does not exist", index, t.Name)
	}
	p := t.Partitions[index]
	if err := ValidateAssignment(im, [][]int32{target}, index, 0); err != nil {
		return nil, err
	}
	original := minus(p.Replicas, p.Adding)
	if !allowRFChange && len(target) != len(original) {
		return nil, errf(kerr.InvalidReplicationFactor, "the target replication factor %d differs from the partition's %d", len(target), len(original))
	}
	removing := minus(original, target)
	adding := minus(target, original)
	replicas := append(slices.Clone(target), removing...)
	isr := make([]int32, 0, len(p.ISR))
	for _, id := range p.ISR {
		if slices.Contains(replicas, id) {
			isr = append(isr, id)
		}
	}
	if len(isr) == 0 {
		return nil, errf(kerr.InvalidReplicaAssignment, "partition %d: the reassignment would leave the ISR %v empty", index, p.ISR)
	}
	c := newChange(im, t, index, electKeep, policy)
	c.replicas, c.isr, c.removing, c.adding = replicas, isr, orEmpty(removing), orEmpty(adding)
	return c.build(), nil
}

// cancelReassignChange reverts partition index's reassignment (a null target in
// AlterPartitionReassignments): the adding replicas leave the replicas and the ISR.
// NO_REASSIGNMENT_IN_PROGRESS when there is none; INVALID_REPLICA_ASSIGNMENT when
// only adding replicas are in the ISR and the topic does not allow an unclean
// election (its recovery strategy is not Aggressive).
func cancelReassignChange(im *metadata.Image, t *metadata.TopicImage, index int32, policy PolicyFunc) (*metadata.PartitionChangeRecord, error) {
	if index < 0 || int(index) >= len(t.Partitions) {
		return nil, errf(kerr.UnknownTopicOrPartition, "partition %d of %q does not exist", index, t.Name)
	}
	p := t.Partitions[index]
	if len(p.Adding) == 0 && len(p.Removing) == 0 {
		return nil, errf(kerr.NoReassignmentInProgress, "no reassignment of %s-%d is in progress", t.Name, index)
	}
	replicas := minus(p.Replicas, p.Adding)
	isr := minus(p.ISR, p.Adding)
	c := newChange(im, t, index, electKeep, policy)
	if len(isr) == 0 {
		if c.mode != electUnclean {
			return nil, errf(kerr.InvalidReplicaAssignment, "unable to revert the assignment of %s-%d: it would require an unclean leader election", t.Name, index)
		}
		c.mode = electUnclean
		isr = nil
		for _, id := range replicas {
			if acceptableLeader(im, id) {
				isr = []int32{id}
				c.recovery = metadata.LeaderRecovering
				break
			}
		}
		if isr == nil {
			return nil, errf(kerr.InvalidReplicaAssignment, "unable to revert the assignment of %s-%d: no original replica is alive", t.Name, index)
		}
	}
	c.replicas, c.isr, c.removing, c.adding = replicas, isr, []int32{}, []int32{}
	return c.build(), nil
}
