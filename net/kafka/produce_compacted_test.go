package kafka

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

// A record without a key on a compacted topic is refused with INVALID_RECORD and its
// record error (KIP-467), compressed or not; keyed records and keyless ones on a
// topic that is not compacted are taken.
func TestProduceKeylessToCompacted(t *testing.T) {
	tb := startTestBroker(t)
	adm := tb.admin(t)
	mustCreate(t, adm, "compacted", 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
	mustCreate(t, adm, "plain", 1, nil)
	rc := tb.raw(t)
	batch, err := engine.AppendRecords(nil, []engine.Record{{Key: []byte("a"), Value: []byte("1")}, {Value: []byte("2")}, {Key: []byte("b"), Value: []byte("3")}})
	if err != nil {
		t.Fatal(err)
	}
	req := produceReq("compacted", -1, batch)
	req.SetVersion(9)
	p := rc.roundTrip(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if p.ErrorCode != kerr.InvalidRecord.Code || len(p.ErrorRecords) != 1 || p.ErrorRecords[0].RelativeOffset != 1 ||
		!strings.Contains(*p.ErrorRecords[0].ErrorMessage, "without key") || p.ErrorMessage == nil {
		t.Fatalf("keyless record on a compacted topic: %+v", p)
	}
	if end := tb.log("compacted", 0).LogEndOffset(); end != 0 {
		t.Fatalf("%d records appended", end)
	}
	req = produceReq("plain", -1, batch)
	req.SetVersion(9)
	if p := rc.roundTrip(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 {
		t.Fatalf("plain topic: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	// Through kgo, zstd-compressed: the error reaches the producer.
	cl := tb.client(t, kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.RecordRetries(1))
	ctx := testCtx(t)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "compacted", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("kgo keyless: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "compacted", Key: []byte("k"), Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("kgo keyed: %v", err)
	}
}
