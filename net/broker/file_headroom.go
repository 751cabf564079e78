package broker

// The descriptor check of CreateTopics and CreatePartitions: every partition this
// broker hosts holds a descriptor per segment (engine.FilesPerNewLog for a new one),
// opened when the broker applies the committed topic, after the controller has
// answered. A topic the broker cannot open would fail there, partition by partition,
// and a broker at its limit stops accepting connections. So a request whose new
// replicas on this broker would leave fewer than engine.FileReserve descriptors under
// the open file limit (ulimit -n) fails whole, before it reaches the controller, with
// POLICY_VIOLATION and a message naming the limit (Apache Kafka has no such check:
// its operators learn the limit from "Too many open files" in the log).
//
// The count is this broker's only: its replicas of an explicit assignment, otherwise
// its share of an even placement (partitions × replication factor / brokers, rounded
// up). Other brokers check nothing for a request sent here.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
)

// headroom is kafka.Deps.FileHeadroom: why this broker cannot host the partitions req
// (a CreateTopics or CreatePartitions) would add here ("" when it can, when the limit
// is unknown, or for another request).
func (b *Broker) headroom(req kmsg.Request) string {
	switch req := req.(type) {
	case *kmsg.CreateTopicsRequest:
		return b.fileHeadroom(b.createTopicsReplicas(req))
	case *kmsg.CreatePartitionsRequest:
		return b.fileHeadroom(b.createPartitionsReplicas(req))
	}
	return ""
}

// fileHeadroom says why this broker cannot host newReplicas more partitions
// ("" when it can, or when the limit is unknown).
func (b *Broker) fileHeadroom(newReplicas int) string {
	limit := engine.FileLimit()
	if limit == 0 || newReplicas <= 0 {
		return ""
	}
	open := engine.OpenFiles()
	if open < 0 {
		open = b.eng.LogFiles()
	}
	need := open + newReplicas*engine.FilesPerNewLog + engine.FileReserve
	if uint64(need) <= limit {
		return ""
	}
	return fmt.Sprintf("broker %d cannot open the logs of %d more partitions: its open file limit (ulimit -n) is %d, "+
		"%d descriptors are open and %d are kept for connections; raise the limit (LimitNOFILE= in a systemd unit) to at least %d",
		b.cfg.NodeID, newReplicas, limit, open, engine.FileReserve, need)
}

// hostedShare is this broker's share of partitions × rf replicas placed evenly.
func hostedShare(im *metadata.Image, partitions, rf int) int {
	brokers := max(len(im.UnfencedBrokers()), 1)
	rf = min(max(rf, 1), brokers)
	return (partitions*rf + brokers - 1) / brokers
}

// createTopicsReplicas counts the replicas req would add on this broker.
func (b *Broker) createTopicsReplicas(req *kmsg.CreateTopicsRequest) int {
	im := b.meta.Image()
	n := 0
	for _, t := range req.Topics {
		if len(t.ReplicaAssignment) > 0 {
			for _, a := range t.ReplicaAssignment {
				for _, id := range a.Replicas {
					if id == b.cfg.NodeID {
						n++
					}
				}
			}
			continue
		}
		p, rf := int(t.NumPartitions), int(t.ReplicationFactor)
		if p < 0 {
			p = int(b.groupInt(im, "num.partitions", 1))
		}
		if rf < 0 {
			rf = int(b.groupInt(im, "default.replication.factor", 1))
		}
		n += hostedShare(im, p, rf)
	}
	return n
}

// createPartitionsReplicas counts the replicas req would add on this broker.
func (b *Broker) createPartitionsReplicas(req *kmsg.CreatePartitionsRequest) int {
	im := b.meta.Image()
	n := 0
	for _, t := range req.Topics {
		ti, ok := im.Topic(t.Topic)
		if !ok || int(t.Count) <= len(ti.Partitions) {
			continue // the controller answers these
		}
		if len(t.Assignment) > 0 {
			for _, a := range t.Assignment {
				for _, id := range a.Replicas {
					if id == b.cfg.NodeID {
						n++
					}
				}
			}
			continue
		}
		rf := 1
		if len(ti.Partitions) > 0 {
			rf = len(ti.Partitions[0].Replicas)
		}
		n += hostedShare(im, int(t.Count)-len(ti.Partitions), rf)
	}
	return n
}
