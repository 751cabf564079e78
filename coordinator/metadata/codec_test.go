package metadata

import (
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

// sampleRecords has one record of every type, with and without optional fields.
func sampleRecords() []Record {
	return []Record{
		&TopicRecord{Name: "orders", ID: idA},
		&TopicRecord{Name: strings.Repeat("x", 249), ID: idB},
		&PartitionRecord{TopicID: idA, Partition: 7, Replicas: []int32{1, 2, 3}, ISR: []int32{3, 1}, Leader: 3, LeaderEpoch: 42},
		&PartitionRecord{TopicID: idA, Partition: 0, Replicas: []int32{-5}, Leader: -1, LeaderEpoch: 0},
		&RemoveTopicRecord{ID: idC},
		&ConfigRecord{Resource: ResourceTopic, Name: "orders", Key: "retention.ms", Value: StringPtr("604800000")},
		&ConfigRecord{Resource: ResourceBroker, Name: "", Key: "k", Value: StringPtr("")},
		&ConfigRecord{Resource: ResourceBroker, Name: "1", Key: "k"},
		&ConfigRecord{Resource: ResourceGroup, Name: "share-group", Key: "share.auto.offset.reset", Value: StringPtr("earliest")},
		&ProducerIDsRecord{BrokerID: 1, BrokerEpoch: -1, NextProducerID: 1 << 40},
		&RegisterBrokerRecord{ID: 1, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092}}},
		&RegisterBrokerRecord{ID: 2, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 1}}, Rack: StringPtr("rack-a")},
		&RegisterBrokerRecord{ID: 3, IncarnationID: idB, Epoch: 77, Endpoints: []Endpoint{
			{Name: "PLAINTEXT", Host: "10.0.0.3", Port: 9092}, {Name: "INTERNAL", Host: "h3", Port: 19092, SecurityProtocol: ProtocolSSL}},
			Rack: StringPtr("r"), Fenced: true, InControlledShutdown: true},
		&PartitionRecord{TopicID: idB, Partition: 1, Replicas: []int32{1, 2, 3, 4}, ISR: []int32{1}, Removing: []int32{2},
			Adding: []int32{4}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 9, LeaderRecoveryState: LeaderRecovering},
		&PartitionChangeRecord{TopicID: idA, Partition: 2, Leader: NoLeaderChange, LeaderRecoveryState: -1},
		&PartitionChangeRecord{TopicID: idA, Partition: 2, ISR: []int32{1, 2}, Leader: -1, Replicas: []int32{1, 2, 3},
			Removing: []int32{}, Adding: []int32{3}, LeaderRecoveryState: LeaderRecovered},
		&UnregisterBrokerRecord{ID: 4, Epoch: 12},
		&BrokerRegistrationChangeRecord{ID: 4, Epoch: 12, Fenced: FenceUnfence, InControlledShutdown: 1},
		&FeatureLevelRecord{Name: FeatureMetadataVersion, Level: 33},
		&FeatureLevelRecord{Name: FeatureShareVersion},
		&RegisterBrokerRecord{ID: 5, Epoch: 80, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "h5", Port: 9092}},
			Features: []BrokerFeature{{Name: FeatureMetadataVersion, Min: 21, Max: 33}, {Name: FeatureKRaftVersion}}},
		&VotersRecord{Voters: []QuorumVoter{
			{ID: 1, DirectoryID: idA, RaftID: 0xabcd00000002, Endpoints: []VoterEndpoint{{Name: "CONTROLLER", Host: "127.0.0.1", Port: 9093}},
				KRaftVersion: VersionRange{Min: 0, Max: 1}},
			{ID: 2, RaftID: 3, Learner: true, Endpoints: []VoterEndpoint{{Name: "CONTROLLER", Host: "::1", Port: 9193}, {Name: "CONTROLLER_TLS", Host: "h", Port: 9194}}}}},
		&PartitionRecord{TopicID: idA, Partition: 3, Replicas: []int32{1, 2, 3}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 4,
			PartitionEpoch: 6, ELR: []int32{2}},
		&PartitionRecord{TopicID: idA, Partition: 4, Replicas: []int32{1, 2, 3}, Leader: -1, LeaderEpoch: 4,
			PartitionEpoch: 6, ELR: []int32{2, 3}, LastKnownELR: []int32{1}},
		&PartitionChangeRecord{TopicID: idA, Partition: 2, ISR: []int32{}, Leader: -1, LeaderRecoveryState: -1,
			ELR: []int32{1, 2}, LastKnownELR: []int32{3}},
		&PartitionChangeRecord{TopicID: idA, Partition: 2, Leader: NoLeaderChange, LeaderRecoveryState: -1, ELR: []int32{}},
		&ClearElrRecord{TopicName: "orders"},
		&ClearElrRecord{},
	}
}

// TestDecodeVersion1 reads the layouts of RegisterBroker and Partition written before
// the cluster existed (record version 1), as data directories of that time hold them.
func TestDecodeVersion1(t *testing.T) {
	frame := func(typ byte, payload []byte) []byte {
		b := append([]byte{0, 0, 0, 0, 0, 0, 0, 0, 1, typ}, payload...)
		return finishFrame(b, 0)
	}
	var rb []byte
	rb = binary.BigEndian.AppendUint32(rb, 7)
	rb = appendString(rb, "host")
	rb = binary.BigEndian.AppendUint32(rb, 9092)
	rb = appendNullableString(rb, StringPtr("rack"))
	got, _, err := Decode(frame(byte(typeRegisterBroker), rb))
	want := &RegisterBrokerRecord{ID: 7, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "host", Port: 9092}}, Rack: StringPtr("rack")}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("v1 RegisterBroker = %#v, %v", got, err)
	}
	var p []byte
	p = append(p, idA[:]...)
	p = binary.BigEndian.AppendUint32(p, 3)
	p = appendInt32s(p, []int32{1})
	p = appendInt32s(p, []int32{1})
	p = binary.BigEndian.AppendUint32(p, 1)
	p = binary.BigEndian.AppendUint32(p, 5)
	got, _, err = Decode(frame(byte(typePartition), p))
	wantP := &PartitionRecord{TopicID: idA, Partition: 3, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 5}
	if err != nil || !reflect.DeepEqual(got, wantP) {
		t.Fatalf("v1 Partition = %#v, %v", got, err)
	}
	// Version 1 of a record type that only has version 1 is the current one; version 2
	// of it is refused.
	if _, _, err := Decode(finishFrame(append([]byte{0, 0, 0, 0, 0, 0, 0, 0, 2, byte(typeTopic)}, 1, 't'), 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("unknown version: %v", err)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	var buf []byte
	for _, r := range sampleRecords() {
		buf = Encode(buf[:0], r)
		got, n, err := Decode(buf)
		if err != nil || n != len(buf) {
			t.Fatalf("Decode(%T) = %v, %d, %v", r, got, n, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", got, r)
		}
		// Re-encoding is byte-identical.
		if again := Encode(nil, got); string(again) != string(buf) {
			t.Fatalf("%T re-encodes differently", r)
		}
	}
}

func TestRecordGolden(t *testing.T) {
	got := Encode(nil, &TopicRecord{Name: "t", ID: MetadataTopicID})
	want := []byte{
		0, 0, 0, 20, // length: ver + typ + 1 + 1 + 16
		0, 0, 0, 0, // crc, filled below
		1, 2, // version 1, Topic
		1, 't',
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
	}
	binary.BigEndian.PutUint32(want[4:], 0)
	copy(want[4:8], got[4:8])
	if string(got) != string(want) {
		t.Fatalf("frame = % x\nwant    % x", got, want)
	}
}

func TestEntryRoundTrip(t *testing.T) {
	recs := sampleRecords()
	b := EncodeEntry([]byte("prefix"), recs...)
	got, n, err := DecodeEntry(b[len("prefix"):])
	if err != nil || n != len(b)-len("prefix") {
		t.Fatalf("DecodeEntry = %d, %v", n, err)
	}
	if !reflect.DeepEqual(got, recs) {
		t.Fatal("entry round trip differs")
	}
	empty := EncodeEntry(nil)
	if got, _, err := DecodeEntry(empty); err != nil || len(got) != 0 {
		t.Fatalf("empty entry: %v %v", got, err)
	}
}

// TestDecodeTruncatedAndFlipped cuts every frame at every byte and flips every bit:
// decoding must fail with ErrCorrupt, never panic.
func TestDecodeTruncatedAndFlipped(t *testing.T) {
	for _, r := range sampleRecords() {
		full := Encode(nil, r)
		for i := 0; i < len(full); i++ {
			_, _, err := Decode(full[:i])
			if !errors.Is(err, ErrCorrupt) || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("%T cut at %d: %v", r, i, err)
			}
		}
		for i := 0; i < len(full)*8; i++ {
			b := append([]byte(nil), full...)
			b[i/8] ^= 1 << (i % 8)
			if _, _, err := Decode(b); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%T bit %d flipped: %v", r, i, err)
			}
		}
	}
	entry := EncodeEntry(nil, sampleRecords()...)
	for i := 0; i < len(entry); i++ {
		if _, _, err := DecodeEntry(entry[:i]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("entry cut at %d: %v", i, err)
		}
	}
}

// TestDecodeHostileLengths builds frames with valid checksums whose inner lengths lie.
func TestDecodeHostileLengths(t *testing.T) {
	frame := func(body ...byte) []byte {
		b := make([]byte, frameHeaderSize, frameHeaderSize+len(body))
		b = append(b, body...)
		return finishFrame(b, 0)
	}
	huge := binary.AppendUvarint(nil, 1<<62)
	cases := map[string][]byte{
		"string length":  frame(append([]byte{1, byte(typeTopic)}, huge...)...),
		"array length":   frame(append(append([]byte{1, byte(typePartition)}, make([]byte, 20)...), huge...)...),
		"nullable len":   frame(append([]byte{1, byte(typeConfig), 4, 0, 0}, huge...)...),
		"bad varint":     frame(1, byte(typeTopic), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
		"unknown type":   frame(1, 99),
		"version":        frame(2, byte(typeTopic)),
		"trailing bytes": frame(append(append([]byte{1, byte(typeRemoveTopic)}, make([]byte, 16)...), 0)...),
		"empty body":     frame(),
		"entry count":    frame(append([]byte{entryMagic}, huge...)...),
		"entry magic":    frame(0x00, 0),
	}
	for name, b := range cases {
		if _, _, err := Decode(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Decode = %v", name, err)
		}
		if _, _, err := DecodeEntry(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: DecodeEntry = %v", name, err)
		}
	}
	big := make([]byte, 8)
	binary.BigEndian.PutUint32(big, MaxEntrySize+1)
	if _, _, err := DecodeEntry(big); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("oversized entry: %v", err)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	for _, r := range sampleRecords() {
		f.Add(Encode(nil, r))
	}
	f.Add(EncodeEntry(nil, sampleRecords()...))
	f.Add([]byte{})
	base := mustApply(f, &Image{}, append(createTopic("orders", idA, 3),
		&ConfigRecord{Resource: ResourceTopic, Name: "orders", Key: "k", Value: StringPtr("v")},
		&RegisterBrokerRecord{ID: 1, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 1}}}, &ProducerIDsRecord{NextProducerID: 5})...)
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, n, err := Decode(b); err == nil {
			if next, err := base.Apply(r); err == nil {
				// Whatever Apply accepts, the canonical records rebuild.
				if !sameImage(mustApply(t, &Image{}, next.Records()...), next) {
					t.Fatal("Records() does not rebuild an applied image")
				}
			}
			if n < frameHeaderSize || n > len(b) {
				t.Fatalf("Decode consumed %d of %d", n, len(b))
			}
			if again := Encode(nil, r); string(again) != string(b[:n]) {
				t.Fatalf("decoded frame does not re-encode to itself")
			}
			_, _ = (&Image{}).Apply(r)
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error not ErrCorrupt: %v", err)
		}
		if recs, n, err := DecodeEntry(b); err == nil {
			if again := EncodeEntry(nil, recs...); string(again) != string(b[:n]) {
				t.Fatalf("decoded entry does not re-encode to itself")
			}
			_, _ = (&Image{}).Apply(recs...)
			_, _ = base.Apply(recs...)
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("entry error not ErrCorrupt: %v", err)
		}
	})
}

func BenchmarkEncodeDecode(b *testing.B) {
	r := &PartitionRecord{TopicID: idA, Partition: 7, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 3}
	buf := Encode(nil, r)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		buf = Encode(buf[:0], r)
		if _, _, err := Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
}
