package remotelog

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"testing"

	"github.com/samsa-broker/samsa/engine/remote"
)

var testTP = remote.TopicIDPartition{TopicID: remote.Uuid{0: 0x11, 15: 0x22}, Topic: "orders", Partition: 3}

func testSegment() *remote.SegmentMetadata {
	return &remote.SegmentMetadata{
		ID: remote.SegmentID{TopicIDPartition: testTP, ID: remote.Uuid{0: 0xaa, 15: 0xbb}}, StartOffset: 100, EndOffset: 199,
		MaxTimestamp: 1_700_000_000_123, BrokerID: 2, EventTimestamp: 1_700_000_000_456, SegmentSize: 4096,
		LeaderEpochs: []remote.EpochEntry{{Epoch: 3, StartOffset: 100}, {Epoch: 5, StartOffset: 150}}, State: remote.CopySegmentStarted,
	}
}

// The bytes of a RemoteLogSegmentMetadataRecord, field by field as Kafka's
// generated writer lays them out.
func TestEncodeSegmentLayout(t *testing.T) {
	md := testSegment()
	var want []byte
	add := func(h string) {
		b, err := hex.DecodeString(h)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, b...)
	}
	add("010000")                                    // frame version 1, api key 0, version 0
	add("07" + hex.EncodeToString([]byte("orders"))) // compact string: length+1
	add("11000000000000000000000000000022")          // topic id
	add("00000003" + "00")                           // partition, no tagged fields
	add("aa0000000000000000000000000000bb" + "00")
	add("0000000000000064" + "00000000000000c7") // start 100, end 199
	add("00000002")                              // broker 2
	add("0000018bcfe5687b" + "0000018bcfe569c8") // max timestamp, event timestamp
	add("03" + "00000003" + "0000000000000064" + "00" + "00000005" + "0000000000000096" + "00")
	add("00001000") // size 4096
	add("00")       // custom metadata: null
	add("00")       // state COPY_SEGMENT_STARTED
	add("00")       // no tagged fields
	got := EncodeSegment(md)
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded\n%x\nwant\n%x", got, want)
	}
	back, err := Decode(got)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, md) {
		t.Fatalf("decoded %+v, want %+v", back, md)
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	u := &Update{ID: testSegment().ID, BrokerID: 4, EventTimestamp: 77, CustomMetadata: []byte("cm"), State: remote.CopySegmentFinished}
	d := &PartitionDelete{Partition: testTP, BrokerID: 1, EventTimestamp: 9, State: DeletePartitionStarted}
	for _, rec := range []struct {
		v any
		b []byte
	}{{u, EncodeUpdate(u)}, {d, EncodePartitionDelete(d)}} {
		back, err := Decode(rec.b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, rec.v) {
			t.Fatalf("decoded %+v, want %+v", back, rec.v)
		}
	}
	// An update's layout: after the segment id, broker, event time, the
	// custom metadata (compact bytes) and the state.
	b := EncodeUpdate(u)
	if !bytes.Equal(b[:3], []byte{1, 1, 0}) || !bytes.HasSuffix(b, []byte{0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 77, 3, 'c', 'm', 1, 0}) {
		t.Fatalf("update encoded as %x", b)
	}
	// A truncated record of any kind is refused, never a panic.
	for _, full := range [][]byte{EncodeSegment(testSegment()), EncodeUpdate(u), EncodePartitionDelete(d)} {
		for n := range len(full) {
			if _, err := Decode(full[:n]); err == nil {
				t.Fatalf("%x (cut at %d) decoded", full[:n], n)
			}
		}
	}
	// Unknown tagged fields are skipped: a segment record with one after
	// its state (Kafka 4's TxnIndexEmpty is tag 0).
	seg := EncodeSegment(testSegment())
	tagged := append(append([]byte{}, seg[:len(seg)-1]...), 1, 0, 1, 1)
	if back, err := Decode(tagged); err != nil || back.(*remote.SegmentMetadata).EndOffset != 199 {
		t.Fatalf("a record with a tagged field: %v %v", back, err)
	}
}

// Kafka's Utils.murmur2 on the inputs of its UtilsTest.
func TestMurmur2(t *testing.T) {
	for s, want := range map[string]int32{
		"21": -973932308, "foobar": -790332482, "a-little-bit-long-string": -985981536,
		"a-little-bit-longer-string": -1486304829, "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971, "abc": 479470107,
	} {
		if got := int32(murmur2([]byte(s))); got != want {
			t.Errorf("murmur2(%q) = %d, want %d", s, got, want)
		}
	}
	seen := map[int32]bool{}
	for p := range int32(200) {
		tp := testTP
		tp.Partition = p
		mp := MetadataPartition(tp, 50)
		if mp < 0 || mp >= 50 {
			t.Fatalf("metadata partition %d", mp)
		}
		seen[mp] = true
	}
	if len(seen) < 30 {
		t.Fatalf("200 partitions land on %d metadata partitions of 50", len(seen))
	}
}
