package controller

import (
	"maps"
	"slices"
	"strconv"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/replication"
)

// ReplicaDelta returns what the change from image old to image new asks of broker
// nodeID's replicas (static: the node's static config keys, below the metadata's
// dynamic ones):
//
//   - Leaders: partitions with a replica here that this broker leads in new, whose
//     state (replicas, ISR, adding, removing, leader, epochs, recovery state) or
//     settings (min.insync.replicas, the log configuration, by configs.ForImage;
//     whether eligible.leader.replicas.version is 1) changed, or that are new here;
//   - Followers: the same for partitions it does not lead (including leaderless
//     ones, Leader -1);
//   - Stopped with Delete: replicas here whose topic is gone from new (by topic id),
//     and replicas a reassignment (or a partition change) removed from this broker.
//
// A topic deleted and re-created under the same name between old and new appears
// twice for one partition: in Stopped (the old topic id's log, deleted) and in Leaders
// or Followers (the new topic id's, created): the replica manager applies Stopped
// first. Otherwise a partition appears at most once. Offset is left zero for the
// caller (the metadata offset of new). old nil is the empty image. Pure: no I/O.
func ReplicaDelta(nodeID int32, old, new *metadata.Image, static map[string]string) replication.Delta {
	if old == nil {
		old = &metadata.Image{}
	}
	var d replication.Delta
	node := strconv.Itoa(int(nodeID))
	brokerCfgChanged := !maps.Equal(old.Configs(metadata.ResourceBroker, node), new.Configs(metadata.ResourceBroker, node)) ||
		!maps.Equal(old.Configs(metadata.ResourceBroker, ""), new.Configs(metadata.ResourceBroker, "")) ||
		old.ELREnabled() != new.ELREnabled()
	for _, t := range new.Topics() {
		ot, had := old.TopicByID(t.ID)
		cfgChanged := brokerCfgChanged || (had && !maps.Equal(old.Configs(metadata.ResourceTopic, ot.Name), new.Configs(metadata.ResourceTopic, t.Name)))
		if had && ot == t && !cfgChanged {
			continue // the same topic image: nothing of it changed
		}
		var st *topicSettings
		settingsChanged := false
		if cfgChanged && had {
			st = settingsOf(new, nodeID, static, t.Name)
			settingsChanged = *st != *settingsOf(old, nodeID, static, ot.Name)
		}
		for i, p := range t.Partitions {
			if !slices.Contains(p.Replicas, nodeID) {
				continue
			}
			if had && i < len(ot.Partitions) && slices.Contains(ot.Partitions[i].Replicas, nodeID) &&
				samePartition(&ot.Partitions[i], &p) && !settingsChanged {
				continue
			}
			if st == nil {
				st = settingsOf(new, nodeID, static, t.Name)
			}
			ps := partitionState(t, int32(i), &p, st)
			if p.Leader == nodeID {
				d.Leaders = append(d.Leaders, ps)
			} else {
				d.Followers = append(d.Followers, ps)
			}
		}
	}
	for _, ot := range old.Topics() {
		t, ok := new.TopicByID(ot.ID)
		if ok && t == ot {
			continue
		}
		for i, p := range ot.Partitions {
			if !slices.Contains(p.Replicas, nodeID) {
				continue
			}
			if ok && i < len(t.Partitions) && slices.Contains(t.Partitions[i].Replicas, nodeID) {
				continue
			}
			d.Stopped = append(d.Stopped, replication.Stop{TP: engine.TopicPartition{Topic: ot.Name, Partition: int32(i)}, Delete: true})
		}
	}
	return d
}

// topicSettings are the settings of a topic a replica needs.
type topicSettings struct {
	minISR int
	strict bool // eligible.leader.replicas.version 1: the HW waits for min.insync.replicas
	log    engine.LogConfig
}

func settingsOf(im *metadata.Image, nodeID int32, static map[string]string, topic string) *topicSettings {
	l := configs.ForImage(im, nodeID, static, topic)
	minISR, err := strconv.Atoi(l.TopicValue("min.insync.replicas"))
	if err != nil || minISR < 1 {
		minISR = 1
	}
	return &topicSettings{minISR: minISR, strict: im.ELREnabled(), log: l.LogConfig()}
}

func samePartition(a, b *metadata.PartitionImage) bool {
	return a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch && a.PartitionEpoch == b.PartitionEpoch &&
		a.LeaderRecoveryState == b.LeaderRecoveryState && slices.Equal(a.Replicas, b.Replicas) && slices.Equal(a.ISR, b.ISR) &&
		slices.Equal(a.Adding, b.Adding) && slices.Equal(a.Removing, b.Removing)
}

func partitionState(t *metadata.TopicImage, index int32, p *metadata.PartitionImage, st *topicSettings) replication.PartitionState {
	return replication.PartitionState{
		Topic: t.Name, TopicID: t.ID, Partition: index,
		Replicas: slices.Clone(p.Replicas), ISR: slices.Clone(p.ISR),
		Adding: cloneOrNil(p.Adding), Removing: cloneOrNil(p.Removing),
		Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
		LeaderRecovering: p.LeaderRecoveryState == metadata.LeaderRecovering,
		MinISR:           st.minISR, LogConfig: st.log, StrictMinISR: st.strict,
	}
}

func cloneOrNil(v []int32) []int32 {
	if len(v) == 0 {
		return nil
	}
	return slices.Clone(v)
}
