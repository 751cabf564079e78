package controller

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// Eligible leader replicas (KIP-966) at eligible.leader.replicas.version 1: the
// election rules are partitionChange's; here is what the level and the configs ask
// around them, as Kafka's ConfigurationControlManager and ReplicationControlManager
// do:
//
//   - enabling ELR first sets a cluster-level min.insync.replicas (the controller's
//     static value) where none is set and removes every broker-level one, so that
//     the controller and every leader read one min.insync.replicas per topic (the
//     ELR is chosen against it, the high watermark waits for it);
//   - while ELR is on a broker-level min.insync.replicas is refused, and so is the
//     removal of the cluster-level one; a change of min.insync.replicas clears the
//     ELRs it concerns (ClearElrRecord: the topic's, or all on the cluster level);
//   - disabling ELR first takes every partition back to the classic rule (Samsa's
//     rule, where Kafka clears ELR state at the partitions' next changes): the ELR
//     and last known ELR are cleared, and a partition whose ISR is empty gets back
//     the replicas the classic rule would have kept there (its ELR, else its last
//     known leader), one of them leading where one may. A build before ELR then reads
//     every partition after the level record.

const minISRKey = "min.insync.replicas"

// ELRSafetyRecords returns the config records enabling ELR needs first (Kafka's
// maybeGenerateElrSafetyRecords): the cluster-level min.insync.replicas set to
// staticMinISR when none is set, and every broker-level one removed.
func ELRSafetyRecords(im *metadata.Image, staticMinISR string) []metadata.Record {
	var out []metadata.Record
	if _, ok := im.Configs(metadata.ResourceBroker, "")[minISRKey]; !ok {
		out = append(out, &metadata.ConfigRecord{Resource: metadata.ResourceBroker, Key: minISRKey, Value: metadata.StringPtr(staticMinISR)})
	}
	for _, name := range im.BrokerConfigNames() {
		if _, ok := im.Configs(metadata.ResourceBroker, name)[minISRKey]; ok && name != "" {
			out = append(out, &metadata.ConfigRecord{Resource: metadata.ResourceBroker, Name: name, Key: minISRKey})
		}
	}
	return out
}

// ELRDowngradeRecords returns the partition changes disabling ELR needs first (see
// above), or why it cannot be disabled: a partition with an empty ISR and neither an
// ELR nor a last known leader (elect one uncleanly first).
func ELRDowngradeRecords(im *metadata.Image) ([]metadata.Record, string) {
	var out []metadata.Record
	for _, t := range im.Topics() {
		for i, p := range t.Partitions {
			if len(p.ELR) == 0 && len(p.LastKnownELR) == 0 && len(p.ISR) > 0 {
				continue
			}
			rec := &metadata.PartitionChangeRecord{TopicID: t.ID, Partition: int32(i), Leader: metadata.NoLeaderChange, LeaderRecoveryState: -1}
			if len(p.ELR) > 0 {
				rec.ELR = []int32{}
			}
			if len(p.LastKnownELR) > 0 {
				rec.LastKnownELR = []int32{}
			}
			if len(p.ISR) == 0 {
				isr := slices.Clone(p.ELR)
				if len(isr) == 0 {
					isr = slices.Clone(p.LastKnownELR)
				}
				if len(isr) == 0 {
					return nil, fmt.Sprintf("partition %d of %s has no in-sync replica, eligible leader replica or last known leader: elect a leader first", i, t.Name)
				}
				rec.ISR = isr
				for _, id := range p.Replicas {
					if slices.Contains(isr, id) && acceptableLeader(im, id) {
						rec.Leader = id
						break
					}
				}
			}
			out = append(out, rec)
		}
	}
	return out, ""
}

// elrConfigCheck refuses, while ELR is on, a broker-level min.insync.replicas and the
// removal of the cluster-level one (Kafka's INVALID_CONFIG messages).
func (t *alterTarget) elrConfigCheck(recs []metadata.Record) error {
	if !t.elr || t.rt != metadata.ResourceBroker {
		return nil
	}
	for _, r := range recs {
		cr := r.(*metadata.ConfigRecord)
		switch {
		case cr.Key != minISRKey:
		case t.name != "":
			return errf(kerr.InvalidConfig, "Broker-level %s cannot be altered while ELR is enabled.", minISRKey)
		case cr.Value == nil:
			return errf(kerr.InvalidConfig, "Cluster-level %s cannot be removed while ELR is enabled.", minISRKey)
		}
	}
	return nil
}

// clearELRRecords returns, while ELR is on, the ClearElrRecord a change of
// min.insync.replicas among recs asks for (Kafka's createClearElrRecordsAsNeeded):
// the topic's ELRs, or every ELR for the cluster level.
func (t *alterTarget) clearELRRecords(recs []metadata.Record) []metadata.Record {
	if !t.elr {
		return nil
	}
	for _, r := range recs {
		if cr := r.(*metadata.ConfigRecord); cr.Key == minISRKey {
			if t.rt == metadata.ResourceTopic {
				return []metadata.Record{&metadata.ClearElrRecord{TopicName: t.name}}
			}
			return []metadata.Record{&metadata.ClearElrRecord{}}
		}
	}
	return nil
}
