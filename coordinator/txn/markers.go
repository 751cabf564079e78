package txn

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MarkerChannel delivers transaction markers to the leaders of the data
// partitions (WriteTxnMarkers, key 27, between brokers; a direct call when
// this broker leads the partition).
type MarkerChannel interface {
	// Leader returns the broker leading tp now. exists is false when the
	// partition does not exist (its topic was deleted): its marker is
	// dropped, as Kafka does; ok is false while it has no leader (the
	// coordinator tries again after Config.RetryBackoff). It is called
	// with the coordinator's lock held: it must not block nor call the
	// coordinator.
	Leader(tp TopicPartition) (broker int32, ok, exists bool)
	// Send delivers req to broker and calls done exactly once with the
	// answer or an error (a broken connection, a timeout: every partition
	// of req is tried again). done may run before Send returns, on any
	// goroutine. req holds one marker whose partitions all lie on broker;
	// the channel picks the request version.
	Send(broker int32, req *kmsg.WriteTxnMarkersRequest, done func(*kmsg.WriteTxnMarkersResponse, error))
}

// markerRun is the marker phase of one transaction: the markers of its
// remaining partitions (m.partitions) being written, then the completion
// logged (Kafka's PendingCompleteTxn in the TransactionMarkerChannelManager).
type markerRun struct {
	m           *txnMeta
	part, epoch int32 // the state partition and the coordinator epoch it runs under
	commit      bool
	pid         int64
	pepoch      int16
	tv          int16
	complete    transit // CompleteCommit or CompleteAbort, pending on m
	inflight    map[TopicPartition]bool
	retry       Timer
	completing  bool
	stopped     bool
}

// startMarkersLocked starts writing the markers of m, in PrepareCommit or
// PrepareAbort, whose completion t is pending.
func (c *Coordinator) startMarkersLocked(fx *effects, part *partition, m *txnMeta, commit bool, t transit) {
	run := &markerRun{m: m, part: part.id, epoch: part.epoch, commit: commit, pid: m.producerID, pepoch: m.epoch, tv: m.tv,
		complete: t, inflight: map[TopicPartition]bool{}}
	m.markers = run
	c.sendMarkersLocked(fx, run)
}

// runningLocked reports whether run is still the marker phase of a
// current metadata.
func (c *Coordinator) runningLocked(run *markerRun) (*partition, bool) {
	part, cur := c.currentLocked(run.part, run.epoch, run.m)
	return part, cur && run.m.markers == run && !run.stopped
}

// sendMarkersLocked sends the markers of the partitions neither written
// nor in flight, one request per leader.
func (c *Coordinator) sendMarkersLocked(fx *effects, run *markerRun) {
	if run.completing {
		return
	}
	m := run.m
	byBroker := map[int32][]TopicPartition{}
	retry := false
	for _, tp := range m.sortedPartitions() {
		if run.inflight[tp] {
			continue
		}
		broker, ok, exists := c.markers.Leader(tp)
		switch {
		case !exists:
			c.logger.Info("transaction marker dropped: the partition is gone", "transactional_id", m.id, "topic", tp.Topic, "partition", tp.Partition)
			delete(m.partitions, tp)
		case !ok:
			retry = true
		default:
			byBroker[broker] = append(byBroker[broker], tp)
		}
	}
	for broker, tps := range byBroker {
		for _, tp := range tps {
			run.inflight[tp] = true
		}
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		mk := kmsg.NewWriteTxnMarkersRequestMarker()
		mk.ProducerID, mk.ProducerEpoch, mk.Committed, mk.CoordinatorEpoch = run.pid, run.pepoch, run.commit, run.epoch
		if run.tv >= 2 {
			mk.TransactionVersion = 2
		}
		for _, g := range groupByTopic(tps) {
			t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			t.Topic, t.Partitions = g.topic, g.parts
			mk.Topics = append(mk.Topics, t)
		}
		req.Markers = append(req.Markers, mk)
		broker, tps := broker, tps
		fx.add(func() {
			c.markers.Send(broker, req, func(resp *kmsg.WriteTxnMarkersResponse, err error) {
				c.withLock(func(fx *effects) { c.markersAnsweredLocked(fx, run, tps, resp, err) })
			})
		})
	}
	if retry {
		c.retryMarkersLocked(run)
	}
	c.maybeCompleteLocked(fx, run)
}

// markersAnsweredLocked handles a WriteTxnMarkers answer for tps (Kafka's
// TransactionMarkerRequestCompletionHandler).
func (c *Coordinator) markersAnsweredLocked(fx *effects, run *markerRun, tps []TopicPartition, resp *kmsg.WriteTxnMarkersResponse, err error) {
	for _, tp := range tps {
		delete(run.inflight, tp)
	}
	if _, ok := c.runningLocked(run); !ok {
		return
	}
	m := run.m
	codes := map[TopicPartition]int16{}
	if err == nil && resp != nil {
		for _, mk := range resp.Markers {
			if mk.ProducerID != run.pid {
				continue
			}
			for _, t := range mk.Topics {
				for _, p := range t.Partitions {
					codes[TopicPartition{t.Topic, p.Partition}] = p.ErrorCode
				}
			}
		}
	} else {
		c.logger.Info("transaction markers not delivered; retrying", "transactional_id", m.id, "err", err)
	}
	retry := false
	for _, tp := range tps {
		code, answered := codes[tp]
		if !answered {
			retry = true
			continue
		}
		switch code {
		case 0, kerr.UnsupportedForMessageFormat.Code, kerr.UnsupportedVersion.Code:
			delete(m.partitions, tp)
		case kerr.CorruptMessage.Code, kerr.MessageTooLarge.Code, kerr.RecordListTooLarge.Code, kerr.InvalidRequiredAcks.Code:
			// Kafka takes these for a bug and stops; the marker cannot be
			// written, so the partition is given up.
			c.logger.Error("transaction marker refused", "transactional_id", m.id, "topic", tp.Topic, "partition", tp.Partition,
				"error", kerr.ErrorForCode(code))
			delete(m.partitions, tp)
		case kerr.InvalidProducerEpoch.Code, kerr.TransactionCoordinatorFenced.Code:
			// A newer producer epoch or coordinator has written to the
			// partition: this coordinator's view is stale. As Kafka, stop
			// sending (the transaction completes when the partition is
			// loaded again, by whoever leads it then).
			c.logger.Warn("transaction markers cancelled", "transactional_id", m.id, "topic", tp.Topic, "partition", tp.Partition,
				"error", kerr.ErrorForCode(code))
			run.stopped = true
			if run.retry != nil {
				run.retry.Stop()
			}
			m.markers = nil
			m.wakeLocked(fx)
			return
		default:
			retry = true
		}
	}
	if retry {
		c.retryMarkersLocked(run)
	}
	c.maybeCompleteLocked(fx, run)
}

// retryMarkersLocked sends the markers not yet written again after the
// backoff.
func (c *Coordinator) retryMarkersLocked(run *markerRun) {
	if run.retry != nil {
		return
	}
	run.retry = c.clock.AfterFunc(c.cfg.RetryBackoff, func() {
		c.withLock(func(fx *effects) {
			run.retry = nil
			if _, ok := c.runningLocked(run); ok {
				c.sendMarkersLocked(fx, run)
			}
		})
	})
}

// maybeCompleteLocked logs the completion once every marker is written.
func (c *Coordinator) maybeCompleteLocked(fx *effects, run *markerRun) {
	if run.completing || len(run.m.partitions) > 0 || len(run.inflight) > 0 {
		return
	}
	part, ok := c.runningLocked(run)
	if !ok {
		return
	}
	run.completing = true
	c.writeCompletionLocked(fx, part, run)
}

// writeCompletionLocked logs CompleteCommit or CompleteAbort, trying again
// after the backoff until it is logged or the coordinator moves (Kafka's
// tryAppendToLog).
func (c *Coordinator) writeCompletionLocked(fx *effects, part *partition, run *markerRun) {
	m := run.m
	notCoordinator := func(code int16) bool { return code == kerr.NotCoordinator.Code }
	c.appendLocked(fx, part, m, run.complete, func(code int16) bool { return !notCoordinator(code) }, func(fx *effects, code int16) {
		switch {
		case code == 0:
			if m.markers == run {
				m.markers = nil
			}
		case notCoordinator(code):
		default:
			c.logger.Info("transaction completion not logged; retrying", "transactional_id", m.id, "error", kerr.ErrorForCode(code))
			c.clock.AfterFunc(c.cfg.RetryBackoff, func() {
				c.withLock(func(fx *effects) {
					if part, ok := c.runningLocked(run); ok {
						c.writeCompletionLocked(fx, part, run)
					}
				})
			})
		}
	})
}
