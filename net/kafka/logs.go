package kafka

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
)

// reconcileLogs makes the engine's logs follow a change of the image from old to im
// (old nil: the broker is starting, and every log is checked):
//
//   - a partition with a replica on this node gets its log, with its topic's
//     configuration;
//   - the logs of topics im no longer has (deleted, or deleted and re-created under a
//     new id), and of partitions whose replicas no longer include this node, are
//     deleted;
//   - when a topic's overrides or this node's broker-level keys change, the live logs
//     get their new configuration.
//
// Unchanged topics cost a pointer comparison: images share what a change did not
// touch. Creating a log that exists only reconfigures it and deleting a missing one is
// not an error, so the replica manager may manage the same logs.
func (b *Broker) reconcileLogs(old, im *metadata.Image) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	self := b.cfg.NodeID
	brokerChanged := old == nil || !sameConfigs(old, im, metadata.ResourceBroker, "") ||
		!sameConfigs(old, im, metadata.ResourceBroker, b.nodeName())
	var errs []error
	for _, t := range im.Topics() {
		var before *metadata.TopicImage
		if old != nil {
			if ot, ok := old.Topic(t.Name); ok && ot.ID == t.ID {
				before = ot
			}
		}
		configChanged := brokerChanged || before == nil || !sameConfigs(old, im, metadata.ResourceTopic, t.Name)
		if before == t && !configChanged {
			continue
		}
		cfg := b.topicLogConfig(im, t.Name)
		for p := range t.Partitions {
			tp := engine.TopicPartition{Topic: t.Name, Partition: int32(p)}
			hosted := slices.Contains(t.Partitions[p].Replicas, self)
			l := b.eng.Log(tp)
			switch {
			case hosted && l == nil:
				if _, err := b.eng.CreateLog(tp, cfg); err != nil {
					// LookupPartition retries when a client asks for the partition.
					b.log.Error("creating log", "partition", tp.String(), "err", err)
				}
			case hosted && configChanged:
				l.SetConfig(cfg)
			case !hosted && l != nil && before != nil && p < len(before.Partitions) && slices.Contains(before.Partitions[p].Replicas, self):
				// The replica moved away.
				errs = append(errs, b.deleteLogLocked(tp))
			}
		}
	}
	// Logs of topics gone from the image, or of a topic re-created under a new id.
	if old == nil {
		for _, l := range b.eng.Logs() {
			tp := l.TopicPartition()
			if t, ok := im.Topic(tp.Topic); !ok || int(tp.Partition) >= len(t.Partitions) {
				b.log.Warn("deleting log of a partition the metadata does not have", "partition", tp.String())
				errs = append(errs, b.deleteLogLocked(tp))
			}
		}
		return errors.Join(errs...)
	}
	if old.NumTopics() > 0 {
		for _, ot := range old.Topics() {
			if t, ok := im.Topic(ot.Name); ok && t.ID == ot.ID {
				continue
			}
			for p := range ot.Partitions {
				tp := engine.TopicPartition{Topic: ot.Name, Partition: int32(p)}
				if nt, ok := im.Topic(ot.Name); ok && p < len(nt.Partitions) && slices.Contains(nt.Partitions[p].Replicas, self) {
					// Re-created under the same name: the new topic's log starts empty.
					errs = append(errs, b.deleteLogLocked(tp))
					if _, err := b.eng.CreateLog(tp, b.topicLogConfig(im, ot.Name)); err != nil {
						b.log.Error("creating log", "partition", tp.String(), "err", err)
					}
					continue
				}
				errs = append(errs, b.deleteLogLocked(tp))
			}
		}
	}
	return errors.Join(errs...)
}

// deleteLogLocked deletes tp's log, if any. Caller holds adminMu.
func (b *Broker) deleteLogLocked(tp engine.TopicPartition) error {
	if err := b.eng.DeleteLog(tp); err != nil && !errors.Is(err, engine.ErrNoLog) {
		return fmt.Errorf("kafka: deleting log %s: %w", tp, err)
	}
	return nil
}

// sameConfigs reports whether a config resource's keys are the same in both images
// (shared maps compare by identity first).
func sameConfigs(a, b *metadata.Image, rt metadata.ResourceType, name string) bool {
	ma, mb := a.Configs(rt, name), b.Configs(rt, name)
	if len(ma) == 0 && len(mb) == 0 {
		return true
	}
	return maps.Equal(ma, mb)
}

// nodeName is this node's broker config resource name.
func (b *Broker) nodeName() string { return fmt.Sprint(b.cfg.NodeID) }
