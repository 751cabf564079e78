package group

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func TestPartitionForMatchesKafka(t *testing.T) {
	// Hashes as java.lang.String.hashCode computes them.
	cases := []struct {
		group string
		hash  int32
		part  int32
	}{
		{"", 0, 0},
		{"hello", 99162322, 22},
		{"polygenelubricants", -2147483648, 0}, // Utils.abs(MIN_VALUE) == 0
		{"Aa", 2112, 12},
		{"😀", 1772899, 49}, // a surrogate pair in UTF-16
		{"my-consumer-group", 1513705513, 13},
		{"groupé", -1237460406, 6},
	}
	for _, c := range cases {
		if h := JavaStringHash(c.group); h != c.hash {
			t.Errorf("hash(%q) = %d, want %d", c.group, h, c.hash)
		}
		if p := PartitionFor(c.group, 50); p != c.part {
			t.Errorf("partition(%q) = %d, want %d", c.group, p, c.part)
		}
	}
}

func TestKeyRoundTrip(t *testing.T) {
	k, err := DecodeKey(AppendOffsetKey(nil, "g", "topic", 7))
	if err != nil || k != (Key{Kind: KeyOffset, Version: 1, Group: "g", Topic: "topic", Partition: 7}) {
		t.Fatalf("offset key: %+v %v", k, err)
	}
	k, err = DecodeKey(AppendGroupKey(nil, "grp"))
	if err != nil || k != (Key{Kind: KeyGroup, Version: 2, Group: "grp"}) {
		t.Fatalf("group key: %+v %v", k, err)
	}
	k, err = DecodeKey([]byte{0, 3, 0, 1, 'x'})
	if err != nil || k != (Key{Kind: KeyConsumerGroup, Version: 3, Group: "x"}) {
		t.Fatalf("key v3: %+v %v", k, err)
	}
	if k, err := DecodeKey([]byte{0, 17, 0, 1, 'x'}); err != nil || k != (Key{Kind: KeyStreamsGroup, Version: 17, Group: "x"}) {
		t.Fatalf("key v17 (streams): %+v %v", k, err)
	}
	if _, err := DecodeKey([]byte{0, 24, 0, 1, 'x'}); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("key v24 (a Kafka after 4.2): %v", err)
	}
	if _, err := DecodeKey([]byte{0, 1, 0, 9, 'x'}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short key: %v", err)
	}
}

// Kafka's exact bytes for an OffsetCommitValue v3 (offset 100, epoch 5, metadata
// "m", commit timestamp 1000) and a v1 with an expire timestamp.
func TestOffsetValueGolden(t *testing.T) {
	v3 := []byte{0, 3, 0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 5, 0, 1, 'm', 0, 0, 0, 0, 0, 0, 3, 0xe8}
	got := AppendOffsetValue(nil, OffsetValue{Version: 3, Offset: 100, LeaderEpoch: 5, Metadata: "m", CommitTimestamp: 1000, ExpireTimestamp: -1})
	if !bytes.Equal(got, v3) {
		t.Fatalf("v3 bytes\n got %x\nwant %x", got, v3)
	}
	v1 := []byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0xe8, 0, 0, 0, 0, 0, 0, 7, 0xd0}
	got = AppendOffsetValue(nil, OffsetValue{Version: 1, Offset: 100, LeaderEpoch: -1, CommitTimestamp: 1000, ExpireTimestamp: 2000})
	if !bytes.Equal(got, v1) {
		t.Fatalf("v1 bytes\n got %x\nwant %x", got, v1)
	}
}

func TestOffsetValueRoundTrip(t *testing.T) {
	for _, v := range []OffsetValue{
		{Version: 0, Offset: 1, LeaderEpoch: -1, Metadata: "a", CommitTimestamp: 5, ExpireTimestamp: -1},
		{Version: 1, Offset: 2, LeaderEpoch: -1, Metadata: "", CommitTimestamp: 5, ExpireTimestamp: 99},
		{Version: 2, Offset: 3, LeaderEpoch: -1, Metadata: "meta", CommitTimestamp: 6, ExpireTimestamp: -1},
		{Version: 3, Offset: 1 << 40, LeaderEpoch: 12, Metadata: "x", CommitTimestamp: 7, ExpireTimestamp: -1},
		{Version: 4, Offset: 4, LeaderEpoch: 3, Metadata: "flexible", CommitTimestamp: 8, ExpireTimestamp: -1},
	} {
		got, err := DecodeOffsetValue(AppendOffsetValue(nil, v))
		if err != nil || got != v {
			t.Errorf("v%d: got %+v %v, want %+v", v.Version, got, err, v)
		}
	}
}

func TestGroupValueRoundTrip(t *testing.T) {
	proto, leader, inst := "range", "m-1", "i-1"
	for ver := int16(0); ver <= 4; ver++ {
		v := GroupValue{
			Version: ver, ProtocolType: "consumer", Generation: 9, Protocol: &proto, Leader: &leader,
			CurrentStateTimestamp: 1234,
			Members: []MemberValue{
				{MemberID: "m-1", InstanceID: &inst, ClientID: "c", ClientHost: "/h", RebalanceTimeout: 30000, SessionTimeout: 10000, Subscription: []byte{1, 2}, Assignment: []byte{3}},
				{MemberID: "m-2", ClientID: "c2", ClientHost: "/h2", RebalanceTimeout: 45000, SessionTimeout: 45000, Subscription: []byte{}, Assignment: nil},
			},
		}
		want := v
		want.Members = append([]MemberValue(nil), v.Members...)
		if ver < 2 {
			want.CurrentStateTimestamp = -1
		}
		for i := range want.Members {
			if ver < 3 {
				want.Members[i].InstanceID = nil
			}
			if ver == 0 {
				want.Members[i].RebalanceTimeout = want.Members[i].SessionTimeout
			}
		}
		got, err := DecodeGroupValue(AppendGroupValue(nil, v))
		if err != nil {
			t.Fatalf("v%d: %v", ver, err)
		}
		// nil and empty byte slices are the same on the wire for non-null bytes
		for i := range got.Members {
			if len(got.Members[i].Assignment) == 0 {
				got.Members[i].Assignment = want.Members[i].Assignment
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("v%d:\n got %+v\nwant %+v", ver, got, want)
		}
	}
	empty := GroupValue{Version: 3, ProtocolType: "consumer", Generation: 2, CurrentStateTimestamp: 5}
	got, err := DecodeGroupValue(AppendGroupValue(nil, empty))
	if err != nil || got.Protocol != nil || got.Leader != nil || len(got.Members) != 0 {
		t.Fatalf("empty group: %+v %v", got, err)
	}
}

func TestDecodersRejectGarbage(t *testing.T) {
	bad := [][]byte{
		nil,
		{0},
		{0, 9},
		{0, 3, 0, 0},
	}
	for _, b := range bad {
		if _, err := DecodeGroupValue(b); err == nil {
			t.Errorf("group value %x decoded", b)
		}
		if _, err := DecodeOffsetValue(b); err == nil {
			t.Errorf("offset value %x decoded", b)
		}
	}
	// a member count far beyond the bytes left must fail before allocating
	huge := []byte{0, 3, 0, 8, 'c', 'o', 'n', 's', 'u', 'm', 'e', 'r', 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff}
	if _, err := DecodeGroupValue(huge); !errors.Is(err, ErrCorrupt) {
		t.Errorf("huge member count: %v", err)
	}
	if allocs := testing.AllocsPerRun(10, func() { _, _ = DecodeGroupValue(huge) }); allocs > 8 { // a few small ones (strings, the error), never the claimed count
		t.Errorf("huge member count allocates %.0f times", allocs)
	}
}

func FuzzOffsetValue(f *testing.F) {
	f.Add(AppendOffsetValue(nil, OffsetValue{Version: 3, Offset: 1, LeaderEpoch: 2, Metadata: "m", CommitTimestamp: 3}))
	f.Add(AppendOffsetValue(nil, OffsetValue{Version: 4, Offset: 1, LeaderEpoch: 2, Metadata: "m", CommitTimestamp: 3}))
	f.Add(AppendOffsetValue(nil, OffsetValue{Version: 1, Offset: 1, CommitTimestamp: 3, ExpireTimestamp: 4}))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := DecodeOffsetValue(b)
		if err != nil {
			return
		}
		again, err := DecodeOffsetValue(AppendOffsetValue(nil, v))
		if err != nil || again != v {
			t.Fatalf("re-encode: %+v vs %+v (%v)", again, v, err)
		}
	})
}

func FuzzGroupValue(f *testing.F) {
	p := "range"
	for ver := int16(0); ver <= 4; ver++ {
		f.Add(AppendGroupValue(nil, GroupValue{Version: ver, ProtocolType: "consumer", Generation: 1, Protocol: &p, Leader: &p,
			Members: []MemberValue{{MemberID: "a", ClientID: "c", Subscription: []byte{1}, Assignment: []byte{2}}}}))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := DecodeGroupValue(b)
		if err != nil {
			return
		}
		if _, err := DecodeGroupValue(AppendGroupValue(nil, v)); err != nil {
			t.Fatalf("re-encode of a decoded value fails: %v", err)
		}
	})
}

func FuzzKey(f *testing.F) {
	f.Add(AppendOffsetKey(nil, "g", "t", 1))
	f.Add(AppendGroupKey(nil, "g"))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := DecodeKey(b)
		if err != nil {
			return
		}
		var enc []byte
		if k.Kind == KeyOffset {
			enc = AppendOffsetKey(nil, k.Group, k.Topic, k.Partition)
		} else {
			enc = AppendGroupKey(nil, k.Group)
		}
		k2, err := DecodeKey(enc)
		if err != nil || k2.Group != k.Group || k2.Topic != k.Topic || k2.Partition != k.Partition {
			t.Fatalf("re-encode: %+v vs %+v (%v)", k2, k, err)
		}
	})
}
