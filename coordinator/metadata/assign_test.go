package metadata

import (
	"errors"
	"reflect"
	"testing"
)

func TestAssignReplicas(t *testing.T) {
	got, err := AssignReplicas([]int32{3, 1, 2, 1}, 0, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int32{{1, 2}, {2, 3}, {3, 1}, {1, 2}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("assignment = %v, want %v", got, want)
	}
	more, _ := AssignReplicas([]int32{1, 2, 3}, 4, 2, 1)
	if !reflect.DeepEqual(more, [][]int32{{2}, {3}}) {
		t.Fatalf("added partitions = %v", more)
	}
	for _, bad := range []struct {
		first, count int32
		rf           int16
		want         error
	}{{0, 0, 1, ErrInvalidPartitions}, {-1, 1, 1, ErrInvalidPartitions}, {0, MaxPartitions + 1, 1, ErrInvalidPartitions},
		{0, 1, 0, ErrInvalidReplicationFactor}, {0, 1, 4, ErrInvalidReplicationFactor}} {
		if _, err := AssignReplicas([]int32{1, 2, 3}, bad.first, bad.count, bad.rf); !errors.Is(err, bad.want) {
			t.Errorf("AssignReplicas(%d, %d, %d) = %v, want %v", bad.first, bad.count, bad.rf, err, bad.want)
		}
	}
}

func TestCreateTopicRecordsApply(t *testing.T) {
	assign, _ := AssignReplicas([]int32{0}, 0, 3, 1)
	im := mustApply(t, &Image{}, CreateTopicRecords("events", idA, assign,
		map[string]string{"retention.ms": "5", "cleanup.policy": "compact"})...)
	tp, _ := im.Topic("events")
	if len(tp.Partitions) != 3 || tp.Partitions[2].Leader != 0 || len(im.Configs(ResourceTopic, "events")) != 2 {
		t.Fatalf("created %+v configs %v", tp, im.Configs(ResourceTopic, "events"))
	}
	add, _ := AssignReplicas([]int32{0}, 3, 2, 1)
	im = mustApply(t, im, PartitionRecords(idA, 3, add)...)
	if tp, _ := im.Topic("events"); len(tp.Partitions) != 5 {
		t.Fatalf("partitions = %d after adding 2", len(tp.Partitions))
	}
}
