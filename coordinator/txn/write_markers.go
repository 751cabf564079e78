package txn

import (
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/replication"
)

// MarkerWriter is the partition leader's side of WriteTxnMarkers (key
// 27): each marker is appended, as a control batch, to this node's leader
// replica of each of its partitions, with acks=all (Kafka's
// ReplicaManager.appendRecords with origin coordinator). The engine checks
// the marker against the producer state (epoch, coordinator epoch) and
// closes the producer's transaction in the partition (the last stable
// offset moves once the marker is below the high watermark).
//
// Per partition: NONE, UNKNOWN_TOPIC_OR_PARTITION (no replica here),
// NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
// REQUEST_TIMED_OUT, INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED,
// CORRUPT_MESSAGE, KAFKA_STORAGE_ERROR (what the coordinator's retry rules
// expect).
type MarkerWriter struct {
	m       *replication.Manager
	timeout time.Duration
	now     func() time.Time
	// OnOffsetsMarker, when set, runs for each marker made durable in a
	// __consumer_offsets partition (the group coordinator then commits or
	// drops the producer's pending transactional offsets there: Kafka's
	// onTransactionCompleted). It runs on the goroutine that completed the
	// append and must not block.
	OnOffsetsMarker func(partition int32, producerID int64, commit bool)
}

// NewMarkerWriter returns the WriteTxnMarkers side over m's leader
// replicas; timeout bounds the wait for the in-sync replicas (0: 30 s,
// Kafka's request.timeout.ms for the marker requests); now stamps the
// markers (nil: time.Now).
func NewMarkerWriter(m *replication.Manager, timeout time.Duration, now func() time.Time) *MarkerWriter {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	if now == nil {
		now = time.Now
	}
	return &MarkerWriter{m: m, timeout: timeout, now: now}
}

// WriteTxnMarkers appends req's markers and calls done once with the
// answer, on whichever goroutine completes the last append. The handler
// checks CLUSTER_ACTION first.
func (w *MarkerWriter) WriteTxnMarkers(req *kmsg.WriteTxnMarkersRequest, done func(*kmsg.WriteTxnMarkersResponse)) {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	resp.Markers = make([]kmsg.WriteTxnMarkersResponseMarker, len(req.Markers))
	var mu sync.Mutex
	left := len(req.Markers) + 1
	finish := func() {
		mu.Lock()
		left--
		last := left == 0
		mu.Unlock()
		if last {
			done(resp)
		}
	}
	now := w.now().UnixMilli()
	for i := range req.Markers {
		mk := &req.Markers[i]
		rm := &resp.Markers[i]
		rm.ProducerID = mk.ProducerID
		type slot struct {
			topic, part int
			idx         int // the Produce part, -1 if none
			tp          engine.TopicPartition
		}
		var slots []slot
		for ti, t := range mk.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = p
				rt.Partitions = append(rt.Partitions, rp)
				slots = append(slots, slot{topic: ti, part: len(rt.Partitions) - 1, idx: -1, tp: engine.TopicPartition{Topic: t.Topic, Partition: p}})
			}
			rm.Topics = append(rm.Topics, rt)
		}
		pr := new(replication.Produce)
		pr.Begin(w.m, -1, w.timeout, func() {
			mu.Lock()
			var offsets []int32
			for _, s := range slots {
				if s.idx < 0 {
					continue
				}
				err := pr.Part(s.idx).Err
				rm.Topics[s.topic].Partitions[s.part].ErrorCode = markerErrCode(err)
				if err == nil && s.tp.Topic == OffsetsTopic {
					offsets = append(offsets, s.tp.Partition)
				}
			}
			mu.Unlock()
			if w.OnOffsetsMarker != nil {
				for _, p := range offsets {
					w.OnOffsetsMarker(p, mk.ProducerID, mk.Committed)
				}
			}
			finish()
		})
		marker := engine.Marker{ProducerID: mk.ProducerID, ProducerEpoch: mk.ProducerEpoch, CoordinatorEpoch: mk.CoordinatorEpoch,
			Commit: mk.Committed, Timestamp: now}
		for i := range slots {
			s := &slots[i]
			r := w.m.Partition(s.tp)
			if r == nil {
				rm.Topics[s.topic].Partitions[s.part].ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			idx, err := pr.Append(r, engine.AppendMarkerBatch(nil, marker))
			if err != nil {
				rm.Topics[s.topic].Partitions[s.part].ErrorCode = markerErrCode(err)
				continue
			}
			s.idx = idx
		}
		pr.Seal()
	}
	finish()
}

// markerErrCode maps a marker append's outcome to its Kafka code.
func markerErrCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, replication.ErrNotLeader):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, replication.ErrUnknownPartition):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, replication.ErrNotEnoughReplicas):
		return kerr.NotEnoughReplicas.Code
	case errors.Is(err, replication.ErrNotEnoughReplicasAfterAppend):
		return kerr.NotEnoughReplicasAfterAppend.Code
	case errors.Is(err, replication.ErrTimeout):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, engine.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, engine.ErrTransactionCoordinatorFenced):
		return kerr.TransactionCoordinatorFenced.Code
	case errors.Is(err, engine.ErrBatchTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, engine.ErrCorrupt), errors.Is(err, engine.ErrInvalidRecord):
		return kerr.CorruptMessage.Code
	case errors.Is(err, engine.ErrIO), errors.Is(err, engine.ErrClosed):
		return kerr.KafkaStorageError.Code
	}
	return kerr.UnknownServerError.Code
}

// Markers is the MarkerChannel of a broker: leaders from its published
// metadata image, markers for partitions it leads written by its own
// MarkerWriter, the others sent to their leaders by Remote (net/peer's
// WriteTxnMarkers to the leader's inter-broker listener).
type Markers struct {
	Self   int32
	Image  func() *metadata.Image
	Local  *MarkerWriter
	Remote func(broker int32, req *kmsg.WriteTxnMarkersRequest, done func(*kmsg.WriteTxnMarkersResponse, error))
}

// Leader implements MarkerChannel from the image: the partition's leader
// when it has one and that broker is registered and unfenced.
func (mc *Markers) Leader(tp TopicPartition) (broker int32, ok, exists bool) {
	im := mc.Image()
	if im == nil {
		return -1, false, true
	}
	t, found := im.Topic(tp.Topic)
	if !found || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
		return -1, false, false
	}
	l := t.Partitions[tp.Partition].Leader
	if l < 0 {
		return -1, false, true
	}
	if b, ok := im.Broker(l); !ok || b.Fenced {
		return -1, false, true
	}
	return l, true, true
}

// Send implements MarkerChannel.
func (mc *Markers) Send(broker int32, req *kmsg.WriteTxnMarkersRequest, done func(*kmsg.WriteTxnMarkersResponse, error)) {
	if broker == mc.Self && mc.Local != nil {
		mc.Local.WriteTxnMarkers(req, func(resp *kmsg.WriteTxnMarkersResponse) { done(resp, nil) })
		return
	}
	if mc.Remote == nil {
		done(nil, errors.New("txn: no channel to the other brokers"))
		return
	}
	mc.Remote(broker, req, done)
}
