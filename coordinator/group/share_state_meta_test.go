package group

import (
	"reflect"
	"testing"
)

// The ShareGroupStatePartitionMetadataValue round-trips in Kafka's layout, merges
// partitions by topic id, and drops topics by id.
func TestShareStateMetadata(t *testing.T) {
	a, b := [16]byte{1}, [16]byte{2}
	v := ShareStateMetadata{}.withInitialized([]ShareStateTopic{{TopicID: a, TopicName: "a", Partitions: []int32{2, 0}}}, 100)
	v = v.withInitialized([]ShareStateTopic{{TopicID: a, TopicName: "a", Partitions: []int32{1, 2}}, {TopicID: b, TopicName: "b", Partitions: []int32{0}}}, 200)
	want := ShareStateMetadata{Initialized: []ShareStateTopic{
		{TopicID: a, TopicName: "a", Partitions: []int32{0, 1, 2}, CreateTimestamp: 100},
		{TopicID: b, TopicName: "b", Partitions: []int32{0}, CreateTimestamp: 200},
	}}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("merged %+v, want %+v", v, want)
	}
	v.Deleting = []ShareStateTopic{{TopicID: [16]byte{3}, TopicName: "c"}}
	got, err := DecodeShareStateValue(appendShareStateValue(nil, &v))
	if err != nil || !reflect.DeepEqual(got.Initialized, v.Initialized) || len(got.Deleting) != 1 || got.Deleting[0].TopicName != "c" || len(got.Initializing) != 0 {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if w := v.without(map[[16]byte]bool{a: true, {3}: true}); len(w.Initialized) != 1 || w.Initialized[0].TopicID != b || len(w.Deleting) != 0 {
		t.Fatalf("without a and c: %+v", w)
	}
	for n := 0; n < len(appendShareStateValue(nil, &v)); n++ {
		if _, err := DecodeShareStateValue(appendShareStateValue(nil, &v)[:n]); err == nil {
			t.Fatalf("a value cut at %d bytes decoded", n)
		}
	}
}
