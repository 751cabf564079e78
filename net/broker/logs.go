package broker

import (
	"errors"
	"fmt"
	"slices"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
)

// removeStrayLogs deletes, at start-up, the logs of partitions the image does not place
// on this node: topics deleted while the broker was down (or deleted and re-created
// under the same name: the replica manager then starts the new topic's log empty),
// partitions it no longer has, replicas moved away. Everything after start-up follows
// the image through the replica manager (MetadataChanged).
//
// The image must be at least as new as every image this node applied before it
// stopped (New's contract): over an older one it would delete live logs.
func (b *Broker) removeStrayLogs(im *metadata.Image) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	var errs []error
	for _, l := range b.eng.Logs() {
		tp := l.TopicPartition()
		t, ok := im.Topic(tp.Topic)
		if ok && int(tp.Partition) < len(t.Partitions) && slices.Contains(t.Partitions[tp.Partition].Replicas, b.cfg.NodeID) {
			continue
		}
		b.log.Warn("deleting log of a partition the metadata does not place here", "partition", tp.String())
		errs = append(errs, b.deleteLogLocked(tp))
	}
	return errors.Join(errs...)
}

// deleteLogLocked deletes tp's log, if any. Caller holds adminMu.
func (b *Broker) deleteLogLocked(tp engine.TopicPartition) error {
	if err := b.eng.DeleteLog(tp); err != nil && !errors.Is(err, engine.ErrNoLog) {
		return fmt.Errorf("broker: deleting log %s: %w", tp, err)
	}
	return nil
}
