package metadata

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
)

// TestELRRecordVersions: a record carrying no ELR field keeps the version and bytes a
// build before ELR writes (so that a cluster that has not finalized ELR stays readable
// by one); one carrying them takes the next version, with Kafka's tagged fields.
func TestELRRecordVersions(t *testing.T) {
	plain := &PartitionRecord{TopicID: idA, Partition: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 4}
	withELR := *plain
	withELR.ISR, withELR.ELR = []int32{1}, []int32{2}
	change := &PartitionChangeRecord{TopicID: idA, Partition: 1, ISR: []int32{1}, Leader: NoLeaderChange, LeaderRecoveryState: -1}
	changeELR := *change
	changeELR.ELR = []int32{2}
	for _, tc := range []struct {
		r    Record
		ver  byte
		tail []byte // the frame's last bytes
	}{
		{plain, 2, []byte{0, 0, 0, 4, 0}},
		// tagged: 1 field, tag 1, size 5 (count 1, broker 2).
		{&withELR, 3, []byte{1, 1, 5, 1, 0, 0, 0, 2}},
		{change, 1, []byte{0xff}},
		// tagged: 1 field, tag 6, size 5.
		{&changeELR, 2, []byte{0xff, 1, 6, 5, 1, 0, 0, 0, 2}},
	} {
		b := Encode(nil, tc.r)
		if b[8] != tc.ver {
			t.Errorf("%+v: version %d, want %d", tc.r, b[8], tc.ver)
		}
		if !slices.Equal(b[len(b)-len(tc.tail):], tc.tail) {
			t.Errorf("%+v: ends % x, want % x", tc.r, b[len(b)-len(tc.tail):], tc.tail)
		}
	}
	// A partition record without ELR fields is the version-2 layout, byte for byte.
	var want []byte
	want = append(want, idA[:]...)
	want = binary.BigEndian.AppendUint32(want, 1)
	want = appendInt32s(want, plain.Replicas)
	want = appendInt32s(want, plain.ISR)
	want = appendInt32s(want, nil)
	want = appendInt32s(want, nil)
	for _, v := range []int32{1, 3, 4} {
		want = binary.BigEndian.AppendUint32(want, uint32(v))
	}
	want = append(want, 0)
	if got := Encode(nil, plain)[10:]; !slices.Equal(got, want) {
		t.Fatalf("version 2 payload % x\nwant % x", got, want)
	}
}

// TestELRTaggedFieldsRejected: every record has one encoding, so a tagged section
// without fields, an unknown or repeated tag, a size that disagrees with the array,
// and an empty array in a PartitionRecord are corrupt.
func TestELRTaggedFieldsRejected(t *testing.T) {
	base := Encode(nil, &PartitionRecord{TopicID: idA, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1})
	base[8] = 3 // version 3's payload follows version 2's
	change := Encode(nil, &PartitionChangeRecord{TopicID: idA, Leader: NoLeaderChange, LeaderRecoveryState: -1})
	change[8] = 2
	for name, tc := range map[string]struct {
		frame []byte
		tail  []byte
	}{
		"no fields":         {base, []byte{0}},
		"unknown tag":       {base, []byte{1, 3, 5, 1, 0, 0, 0, 2}},
		"tags descending":   {base, []byte{2, 2, 5, 1, 0, 0, 0, 2, 1, 5, 1, 0, 0, 0, 2}},
		"tag twice":         {base, []byte{2, 1, 5, 1, 0, 0, 0, 2, 1, 5, 1, 0, 0, 0, 2}},
		"short size":        {base, []byte{1, 1, 4, 1, 0, 0, 0, 2}},
		"long size":         {base, []byte{1, 1, 6, 1, 0, 0, 0, 2, 9}},
		"empty partition":   {base, []byte{1, 1, 1, 0}},
		"change no fields":  {change, []byte{0}},
		"change other tags": {change, []byte{1, 1, 1, 0}},
	} {
		b := append(slices.Clone(tc.frame[:len(tc.frame)]), tc.tail...)
		finishFrame(b, 0)
		if _, _, err := Decode(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	// An empty ELR in a change is a present field: "clear it".
	b := append(slices.Clone(change), 1, 6, 1, 0)
	finishFrame(b, 0)
	r, _, err := Decode(b)
	if err != nil || r.(*PartitionChangeRecord).ELR == nil || len(r.(*PartitionChangeRecord).ELR) != 0 {
		t.Fatalf("empty change ELR = %#v, %v", r, err)
	}
}

// elrLevels finalizes metadata.version 4.1-IV0 and eligible.leader.replicas.version 1.
func elrLevels(level int16) []Record {
	return []Record{&FeatureLevelRecord{Name: FeatureMetadataVersion, Level: 26}, &FeatureLevelRecord{Name: FeatureELRVersion, Level: level}}
}

func TestApplyELR(t *testing.T) {
	topic := []Record{&TopicRecord{Name: "orders", ID: idA},
		&PartitionRecord{TopicID: idA, Partition: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1},
		&TopicRecord{Name: "other", ID: idB},
		&PartitionRecord{TopicID: idB, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1}}
	off := mustApply(t, &Image{}, append(elrLevels(0), topic...)...)
	on := mustApply(t, &Image{}, append(elrLevels(1), topic...)...)
	shrink := &PartitionChangeRecord{TopicID: idA, ISR: []int32{1}, Leader: NoLeaderChange, LeaderRecoveryState: -1, ELR: []int32{2}}
	empty := &PartitionChangeRecord{TopicID: idA, ISR: []int32{}, Leader: -1, LeaderRecoveryState: -1, ELR: []int32{1, 2}, LastKnownELR: []int32{1}}

	// At level 0 neither an ELR nor an empty ISR is accepted.
	for _, r := range []Record{shrink, empty,
		&PartitionChangeRecord{TopicID: idA, ISR: []int32{}, Leader: -1, LeaderRecoveryState: -1},
		&PartitionRecord{TopicID: idA, Partition: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1}, Leader: 1, ELR: []int32{2}}} {
		if _, err := off.Apply(r); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("level 0: %+v: %v", r, err)
		}
	}
	im := mustApply(t, on, shrink)
	p := partsOf(im, "orders")[0]
	if !slices.Equal(p.ISR, []int32{1}) || !slices.Equal(p.ELR, []int32{2}) || p.PartitionEpoch != 1 || p.LeaderEpoch != 0 {
		t.Fatalf("after the shrink: %+v", p)
	}
	im = mustApply(t, im, empty)
	p = partsOf(im, "orders")[0]
	if len(p.ISR) != 0 || p.Leader != -1 || !slices.Equal(p.ELR, []int32{1, 2}) || !slices.Equal(p.LastKnownELR, []int32{1}) {
		t.Fatalf("after the ISR emptied: %+v", p)
	}
	// Bad ELRs: overlapping the ISR, not replicas, listed twice.
	for _, r := range []*PartitionChangeRecord{
		{TopicID: idA, Leader: NoLeaderChange, LeaderRecoveryState: -1, ELR: []int32{1}, ISR: []int32{1}},
		{TopicID: idA, Leader: NoLeaderChange, LeaderRecoveryState: -1, ELR: []int32{4}},
		{TopicID: idA, Leader: NoLeaderChange, LeaderRecoveryState: -1, ELR: []int32{2, 2}},
		{TopicID: idA, Leader: NoLeaderChange, LeaderRecoveryState: -1, LastKnownELR: []int32{7}},
	} {
		if _, err := im.Apply(r); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("%+v: %v", r, err)
		}
	}
	// The snapshot keeps them.
	snap, err := EncodeSnapshot(nil, im)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeSnapshot(snap)
	if err != nil || !sameImage(back, im) {
		t.Fatalf("snapshot round trip: %v", err)
	}
	// Going back to level 0 is refused while a partition has ELR state or an empty ISR.
	if _, err := im.Apply(&FeatureLevelRecord{Name: FeatureELRVersion}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("level 0 with ELR state: %v", err)
	}
	// ClearElr of one topic: its partitions that had ELR state take a new epoch; the
	// others are untouched.
	withOther := mustApply(t, im, &PartitionChangeRecord{TopicID: idB, ISR: []int32{1}, Leader: NoLeaderChange, LeaderRecoveryState: -1, ELR: []int32{2}})
	cleared := mustApply(t, withOther, &ClearElrRecord{TopicName: "orders"})
	if p := partsOf(cleared, "orders")[0]; p.ELR != nil || p.LastKnownELR != nil || p.PartitionEpoch != 3 {
		t.Fatalf("orders after ClearElr: %+v", p)
	}
	if p := partsOf(cleared, "other")[0]; !slices.Equal(p.ELR, []int32{2}) || p.PartitionEpoch != 1 {
		t.Fatalf("other after ClearElr of orders: %+v", p)
	}
	all := mustApply(t, cleared, &ClearElrRecord{})
	if p := partsOf(all, "other")[0]; p.ELR != nil || p.PartitionEpoch != 2 {
		t.Fatalf("other after ClearElr of all: %+v", p)
	}
	if p := partsOf(all, "orders")[0]; p.PartitionEpoch != 3 {
		t.Fatalf("orders changed by a second ClearElr: %+v", p)
	}
	if _, err := all.Apply(&ClearElrRecord{TopicName: "nope"}); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("ClearElr of an unknown topic: %v", err)
	}
	// With the ISR refilled and no ELR state, the level may go back to 0.
	refill := &PartitionChangeRecord{TopicID: idA, ISR: []int32{2}, Leader: 2, LeaderRecoveryState: -1}
	if _, err := all.Apply(refill, &FeatureLevelRecord{Name: FeatureELRVersion}); err != nil {
		t.Fatalf("level 0 after the ELR state is gone: %v", err)
	}
	// withOther (not cleared) keeps the ELR state: the base image is unchanged.
	if p := partsOf(withOther, "other")[0]; !slices.Equal(p.ELR, []int32{2}) {
		t.Fatalf("ClearElr changed the image it applied to: %+v", p)
	}
}

func partsOf(im *Image, topic string) []PartitionImage {
	t, _ := im.Topic(topic)
	return t.Partitions
}
