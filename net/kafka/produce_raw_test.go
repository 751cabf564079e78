package kafka

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// batchSpec describes a hand-built record batch v2.
type batchSpec struct {
	pid        int64
	epoch      int16
	seq        int32
	n          int
	valueBytes int
	ts         int64
}

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// appendBatch appends an uncompressed record batch v2 of s.n records to dst.
func appendBatch(dst []byte, s batchSpec) []byte {
	if s.ts == 0 {
		s.ts = time.Now().UnixMilli()
	}
	start := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, 0)          // base offset
	dst = binary.BigEndian.AppendUint32(dst, 0)          // length, patched
	dst = binary.BigEndian.AppendUint32(dst, 0xFFFFFFFF) // partition leader epoch
	dst = append(dst, 2)                                 // magic
	dst = binary.BigEndian.AppendUint32(dst, 0)          // crc, patched
	dst = binary.BigEndian.AppendUint16(dst, 0)          // attributes
	dst = binary.BigEndian.AppendUint32(dst, uint32(s.n-1))
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.ts))
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.ts))
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.pid))
	dst = binary.BigEndian.AppendUint16(dst, uint16(s.epoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(s.seq))
	dst = binary.BigEndian.AppendUint32(dst, uint32(s.n))
	value := make([]byte, s.valueBytes)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	var rec []byte
	for i := 0; i < s.n; i++ {
		rec = rec[:0]
		rec = append(rec, 0)                     // attributes
		rec = binary.AppendVarint(rec, 0)        // timestamp delta
		rec = binary.AppendVarint(rec, int64(i)) // offset delta
		rec = binary.AppendVarint(rec, -1)       // null key
		rec = binary.AppendVarint(rec, int64(len(value)))
		rec = append(rec, value...)
		rec = binary.AppendVarint(rec, 0) // headers
		dst = binary.AppendVarint(dst, int64(len(rec)))
		dst = append(dst, rec...)
	}
	b := dst[start:]
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoliTable))
	return dst
}

func produceReq(topic string, acks int16, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, 5000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = topic
	p := kmsg.NewProduceRequestTopicPartition()
	p.Records = records
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

// produceRaw sends one partition's records and returns the partition's answer.
func produceRaw(t *testing.T, rc *rawConn, v int16, topic string, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := produceReq(topic, -1, records)
	req.SetVersion(v)
	resp := rc.roundTrip(req).(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("produce response shape: %+v", resp)
	}
	return resp.Topics[0].Partitions[0]
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	code := int16(0)
	if want != nil {
		code = want.Code
	}
	if got != code {
		t.Fatalf("%s: error %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

func TestProduceIdempotenceRaw(t *testing.T) {
	tb := startDataBroker(t)
	mustCreate(t, tb.admin(t), "idem-raw", 1, nil)
	rc := tb.raw(t)
	init := kmsg.NewPtrInitProducerIDRequest()
	init.SetVersion(4)
	ir := rc.roundTrip(init).(*kmsg.InitProducerIDResponse)
	if ir.ErrorCode != 0 || ir.ProducerID < 0 || ir.ProducerEpoch != 0 {
		t.Fatalf("init producer id: %+v", ir)
	}
	pid := ir.ProducerID
	ir2 := rc.roundTrip(init).(*kmsg.InitProducerIDResponse)
	if ir2.ProducerID == pid {
		t.Fatalf("producer id %d handed out twice", pid)
	}

	first := produceRaw(t, rc, 9, "idem-raw", appendBatch(nil, batchSpec{pid: pid, seq: 0, n: 5}))
	wantCode(t, "first", first.ErrorCode, nil)
	second := produceRaw(t, rc, 9, "idem-raw", appendBatch(nil, batchSpec{pid: pid, seq: 5, n: 3}))
	wantCode(t, "second", second.ErrorCode, nil)
	if first.BaseOffset != 0 || second.BaseOffset != 5 {
		t.Fatalf("offsets %d, %d", first.BaseOffset, second.BaseOffset)
	}
	// The same batches again: their original offsets, nothing written.
	dup := produceRaw(t, rc, 9, "idem-raw", appendBatch(nil, batchSpec{pid: pid, seq: 0, n: 5}))
	wantCode(t, "duplicate", dup.ErrorCode, nil)
	dup2 := produceRaw(t, rc, 9, "idem-raw", appendBatch(nil, batchSpec{pid: pid, seq: 5, n: 3}))
	if dup.BaseOffset != 0 || dup2.BaseOffset != 5 {
		t.Fatalf("duplicates answered %d, %d; want 0, 5", dup.BaseOffset, dup2.BaseOffset)
	}
	if leo := tb.log("idem-raw", 0).LogEndOffset(); leo != 8 {
		t.Fatalf("LEO %d after duplicates, want 8", leo)
	}
	// A gap.
	gap := produceRaw(t, rc, 9, "idem-raw", appendBatch(nil, batchSpec{pid: pid, seq: 20, n: 1}))
	wantCode(t, "gap", gap.ErrorCode, kerr.OutOfOrderSequenceNumber)
	// A new epoch restarts at 0; the old epoch is then fenced.
	bump := produceRaw(t, rc, 9, "idem-raw", appendBatch(nil, batchSpec{pid: pid, epoch: 1, seq: 0, n: 1}))
	wantCode(t, "new epoch", bump.ErrorCode, nil)
	old := produceRaw(t, rc, 9, "idem-raw", appendBatch(nil, batchSpec{pid: pid, epoch: 0, seq: 8, n: 1}))
	wantCode(t, "old epoch", old.ErrorCode, kerr.InvalidProducerEpoch)
	if leo := tb.log("idem-raw", 0).LogEndOffset(); leo != 9 {
		t.Fatalf("LEO %d, want 9", leo)
	}
}

func TestProduceBadInputRaw(t *testing.T) {
	tb := startDataBroker(t)
	adm := tb.admin(t)
	mustCreate(t, adm, "bad", 1, map[string]*string{"max.message.bytes": strPtr("2000")})
	rc := tb.raw(t)

	good := appendBatch(nil, batchSpec{pid: -1, epoch: -1, seq: -1, n: 2, valueBytes: 10})
	wantCode(t, "good", produceRaw(t, rc, 9, "bad", good).ErrorCode, nil)

	crc := appendBatch(nil, batchSpec{pid: -1, epoch: -1, seq: -1, n: 2, valueBytes: 10})
	crc[len(crc)-3] ^= 0xFF
	wantCode(t, "bad crc", produceRaw(t, rc, 9, "bad", crc).ErrorCode, kerr.CorruptMessage)

	magic1 := appendBatch(nil, batchSpec{pid: -1, epoch: -1, seq: -1, n: 2, valueBytes: 10})
	magic1[16] = 1
	wantCode(t, "magic 1", produceRaw(t, rc, 9, "bad", magic1).ErrorCode, kerr.UnsupportedVersion)
	wantCode(t, "magic 1 at v0", produceRaw(t, rc, 0, "bad", magic1).ErrorCode, kerr.UnsupportedVersion)

	big := appendBatch(nil, batchSpec{pid: -1, epoch: -1, seq: -1, n: 3, valueBytes: 1000})
	wantCode(t, "too large", produceRaw(t, rc, 9, "bad", big).ErrorCode, kerr.MessageTooLarge)

	truncated := good[:len(good)-5]
	wantCode(t, "truncated", produceRaw(t, rc, 9, "bad", truncated).ErrorCode, kerr.CorruptMessage)
	wantCode(t, "empty", produceRaw(t, rc, 9, "bad", nil).ErrorCode, kerr.CorruptMessage)
	wantCode(t, "unknown topic", produceRaw(t, rc, 9, "nope", good).ErrorCode, kerr.UnknownTopicOrPartition)

	req := produceReq("bad", 2, good)
	req.SetVersion(9)
	resp := rc.roundTrip(req).(*kmsg.ProduceResponse)
	wantCode(t, "acks=2", resp.Topics[0].Partitions[0].ErrorCode, kerr.InvalidRequiredAcks)

	// Only the good batch was written.
	if leo := tb.log("bad", 0).LogEndOffset(); leo != 2 {
		t.Fatalf("LEO %d, want 2", leo)
	}

	// acks=0: nothing comes back; the next request's answer is the next frame.
	req = produceReq("bad", 0, appendBatch(nil, batchSpec{pid: -1, epoch: -1, seq: -1, n: 1}))
	req.SetVersion(9)
	rc.send(req)
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.SetVersion(9)
	rc.roundTrip(mreq)
	if leo := tb.log("bad", 0).LogEndOffset(); leo != 3 {
		t.Fatalf("LEO %d after acks=0, want 3", leo)
	}
}

func strPtr(s string) *string { return &s }

func TestProduceLogAppendTime(t *testing.T) {
	tb := startDataBroker(t)
	mustCreate(t, tb.admin(t), "lat", 1, map[string]*string{"message.timestamp.type": strPtr("LogAppendTime")})
	rc := tb.raw(t)
	before := time.Now().UnixMilli()
	p := produceRaw(t, rc, 9, "lat", appendBatch(nil, batchSpec{pid: -1, epoch: -1, seq: -1, n: 3, ts: 1000}))
	after := time.Now().UnixMilli()
	if p.ErrorCode != 0 || p.LogAppendTime < before || p.LogAppendTime > after {
		t.Fatalf("LogAppendTime %d not in [%d, %d] (%+v)", p.LogAppendTime, before, after, p)
	}
	resp := rc.roundTrip(fetchReq(12, 0, 1, 0, -1, []fetchPartReq{{topic: "lat", curEpoch: -1, lastEpoch: -1}}, nil)).(*kmsg.FetchResponse)
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(resp.Topics[0].Partitions[0].RecordBatches); err != nil {
		t.Fatal(err)
	}
	if rb.Attributes&0x08 == 0 || rb.MaxTimestamp != p.LogAppendTime {
		t.Fatalf("stored batch: attributes %#x max timestamp %d, want LogAppendTime %d", rb.Attributes, rb.MaxTimestamp, p.LogAppendTime)
	}
	// A CreateTime topic answers -1.
	mustCreate(t, tb.admin(t), "ct", 1, nil)
	if p := produceRaw(t, rc, 9, "ct", appendBatch(nil, batchSpec{pid: -1, epoch: -1, seq: -1, n: 1})); p.LogAppendTime != -1 {
		t.Fatalf("CreateTime topic: LogAppendTime %d", p.LogAppendTime)
	}
}

// TestProducerIDsNeverRepeatAcrossRestarts: ids come from durable blocks.
func TestProducerIDsNeverRepeatAcrossRestarts(t *testing.T) {
	tb := startDataBroker(t)
	get := func() int64 {
		t.Helper()
		req := kmsg.NewPtrInitProducerIDRequest()
		req.SetVersion(4)
		r := tb.raw(t).roundTrip(req).(*kmsg.InitProducerIDResponse)
		if r.ErrorCode != 0 {
			t.Fatalf("init producer id: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		return r.ProducerID
	}
	first, second := get(), get()
	if second != first+1 {
		t.Fatalf("ids %d then %d", first, second)
	}
	tb.a.CloseDataPath()
	tb.restart()
	third := get()
	if third <= second {
		t.Fatalf("after restart: id %d, already handed out up to %d", third, second)
	}
	// A transactional id's producer id comes from the same blocks (the transaction
	// coordinator allocates through the controller too). FindCoordinator creates
	// __transaction_state; until its partition is loaded InitProducerId answers
	// NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS.
	rc := tb.raw(t)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(3)
	fc.CoordinatorType, fc.CoordinatorKey = 1, "txn"
	if r := rc.roundTrip(fc).(*kmsg.FindCoordinatorResponse); r.ErrorCode != 0 && r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("find coordinator: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	txn := kmsg.NewPtrInitProducerIDRequest()
	txn.SetVersion(4)
	txn.TransactionalID = strPtr("txn")
	txn.TransactionTimeoutMillis = 60000
	var r *kmsg.InitProducerIDResponse
	eventually(t, 10*time.Second, "the transaction coordinator", func() bool {
		r = rc.roundTrip(txn).(*kmsg.InitProducerIDResponse)
		switch r.ErrorCode {
		case kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code:
			return false
		case 0:
			return true
		}
		t.Fatalf("transactional id: %v", kerr.ErrorForCode(r.ErrorCode))
		return false
	})
	if r.ProducerID <= third {
		t.Fatalf("transactional id: producer id %d, already handed out up to %d", r.ProducerID, third)
	}
}

func TestOffsetForLeaderEpochRaw(t *testing.T) {
	tb := startDataBroker(t)
	mustCreate(t, tb.admin(t), "epochs", 1, nil)
	rc := tb.raw(t)
	produceRaw(t, rc, 9, "epochs", appendBatch(nil, batchSpec{pid: -1, epoch: -1, seq: -1, n: 4}))
	ask := func(current, epoch int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.SetVersion(4)
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "epochs"
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.LeaderEpoch = current, epoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return rc.roundTrip(req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
	}
	if p := ask(0, 0); p.ErrorCode != 0 || p.LeaderEpoch != 0 || p.EndOffset != 4 {
		t.Fatalf("epoch 0: %+v", p)
	}
	if p := ask(1, 0); p.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("current epoch 1: %v", kerr.ErrorForCode(p.ErrorCode))
	}
}
