package txn

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"
)

func TestPartitionForIsKafkas(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want int32
	}{
		{"", 0}, {"a", 47}, {"hello", 22}, {"my-transactional-id", 46}, {"txn-😀", 6},
		{"polygenelubricants", 0}, // hashCode is Integer.MIN_VALUE: Utils.abs gives 0
	} {
		if got := PartitionFor(tc.id, 50); got != tc.want {
			t.Errorf("PartitionFor(%q) = %d, want %d", tc.id, got, tc.want)
		}
	}
}

// TestValueBytes pins the encodings to Kafka's: the bytes below are the
// fields of TransactionLogValue in the order and widths of its schema.
func TestValueBytes(t *testing.T) {
	v := &Value{Version: 0, ProducerID: 7, PrevProducerID: -1, NextProducerID: -1, ProducerEpoch: 2, TimeoutMs: 60000, State: Ongoing,
		Partitions: []TopicPartition{{"b", 1}, {"a", 0}, {"a", 3}}, LastUpdateMs: 1000, StartMs: 900}
	want := "0000" + "0000000000000007" + "0002" + "0000ea60" + "01" +
		"00000002" + "0001" + "61" + "00000002" + "00000000" + "00000003" + "0001" + "62" + "00000001" + "00000001" +
		"00000000000003e8" + "0000000000000384"
	if got := hex.EncodeToString(AppendValue(nil, v)); got != want {
		t.Fatalf("v0\n got %s\nwant %s", got, want)
	}
	v.Version, v.PrevProducerID, v.ClientTxnVersion = 1, 5, 2
	want1 := "0001" + "0000000000000007" + "0002" + "0000ea60" + "01" +
		"03" + "0261" + "03" + "00000000" + "00000003" + "00" + "0262" + "02" + "00000001" + "00" +
		"00000000000003e8" + "0000000000000384" +
		"02" + "0008" + "0000000000000005" + "0202" + "0002"
	if got := hex.EncodeToString(AppendValue(nil, v)); got != want1 {
		t.Fatalf("v1\n got %s\nwant %s", got, want1)
	}
	// Empty: partitions are null.
	e := &Value{Version: 0, ProducerID: 7, PrevProducerID: -1, NextProducerID: -1, State: Empty, StartMs: -1}
	if got := hex.EncodeToString(AppendValue(nil, e)); got[34:42] != "ffffffff" {
		t.Fatalf("empty v0 partitions %s", got)
	}
	if got := hex.EncodeToString(AppendKey(nil, "tx")); got != "000000027478" {
		t.Fatalf("key %s", got)
	}
}

func TestValueRoundTrip(t *testing.T) {
	for _, v := range []Value{
		{Version: 0, ProducerID: 1, PrevProducerID: -1, NextProducerID: -1, ProducerEpoch: 0, TimeoutMs: 1, State: Empty, StartMs: -1},
		{Version: 0, ProducerID: 9, PrevProducerID: -1, NextProducerID: -1, ProducerEpoch: 3, TimeoutMs: 9, State: PrepareCommit,
			Partitions: []TopicPartition{{"a", 0}, {"a", 1}, {"b", 0}}, LastUpdateMs: 5, StartMs: 4},
		{Version: 1, ProducerID: 9, PrevProducerID: 8, NextProducerID: 10, ProducerEpoch: 3, TimeoutMs: 9, State: CompleteAbort,
			Partitions: []TopicPartition{}, LastUpdateMs: 5, StartMs: 4, ClientTxnVersion: 2},
		{Version: 1, ProducerID: 9, PrevProducerID: -1, NextProducerID: -1, State: Ongoing, Partitions: []TopicPartition{{"x", 2}}},
	} {
		got, err := DecodeValue(AppendValue(nil, &v))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Fatalf("round trip\n got %+v\nwant %+v", got, v)
		}
	}
	id, err := DecodeKey(AppendKey(nil, "my-id"))
	if err != nil || id != "my-id" {
		t.Fatalf("key %q %v", id, err)
	}
	if _, err := DecodeKey([]byte{0, 1, 0, 0}); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("group-record key: %v", err)
	}
	if _, err := DecodeValue([]byte{0, 9}); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("value v9: %v", err)
	}
	// Unknown tags are skipped.
	v := Value{Version: 1, ProducerID: 1, PrevProducerID: -1, NextProducerID: -1, State: Empty, StartMs: -1}
	b := AppendValue(nil, &v)
	b = append(b[:len(b)-1], 1, 9, 2, 0xaa, 0xbb) // one tag: 9, two bytes
	if got, err := DecodeValue(b); err != nil || got.ProducerID != 1 {
		t.Fatalf("unknown tag: %+v %v", got, err)
	}
}

func FuzzDecodeValue(f *testing.F) {
	f.Add(AppendValue(nil, &Value{Version: 1, ProducerID: 9, PrevProducerID: 8, NextProducerID: -1, State: Ongoing,
		Partitions: []TopicPartition{{"a", 0}}, ClientTxnVersion: 2}))
	f.Add(AppendValue(nil, &Value{Version: 0, ProducerID: 9, PrevProducerID: -1, NextProducerID: -1, State: CompleteCommit,
		Partitions: []TopicPartition{}}))
	f.Add([]byte{0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := DecodeValue(b)
		if err != nil {
			return
		}
		again, err := DecodeValue(AppendValue(nil, &v))
		if err != nil || !reflect.DeepEqual(again, v) {
			t.Fatalf("re-encoded value reads %+v (%v), want %+v", again, err, v)
		}
	})
}

func FuzzDecodeKey(f *testing.F) {
	f.Add(AppendKey(nil, "tx"))
	f.Add([]byte{0, 0, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := DecodeKey(b)
		if err != nil {
			return
		}
		if !bytes.Equal(AppendKey(nil, id), b) {
			t.Fatalf("key %q re-encodes to %x, read %x", id, AppendKey(nil, id), b)
		}
	})
}
