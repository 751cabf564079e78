package metadata

import (
	"errors"
	"reflect"
	"testing"
)

func ep(host string, port int32) []Endpoint {
	return []Endpoint{{Name: "PLAINTEXT", Host: host, Port: port}}
}

func reg(id int32, epoch int64) *RegisterBrokerRecord {
	return &RegisterBrokerRecord{ID: id, Epoch: epoch, Endpoints: ep("h", 9000+id), Fenced: true}
}

// threeReplicas is a topic (idA, "orders") with one partition on brokers 1, 2, 3.
func threeReplicas() []Record {
	return []Record{&TopicRecord{Name: "orders", ID: idA},
		&PartitionRecord{TopicID: idA, Partition: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1}}
}

func TestBrokerLifecycleRecords(t *testing.T) {
	im := mustApply(t, &Image{}, reg(1, 5), reg(2, 6))
	if im.MaxBrokerEpoch() != 6 || len(im.UnfencedBrokers()) != 0 {
		t.Fatalf("max epoch %d, unfenced %v", im.MaxBrokerEpoch(), im.UnfencedBrokers())
	}
	im = mustApply(t, im, &BrokerRegistrationChangeRecord{ID: 1, Epoch: 5, Fenced: FenceUnfence})
	if got := im.UnfencedBrokers(); !reflect.DeepEqual(got, []int32{1}) {
		t.Fatalf("unfenced = %v", got)
	}
	im = mustApply(t, im, &BrokerRegistrationChangeRecord{ID: 1, Epoch: 5, InControlledShutdown: 1})
	if b, _ := im.Broker(1); !b.InControlledShutdown || b.Fenced {
		t.Fatalf("broker 1 = %+v", b)
	}
	// A re-registration replaces the broker (fenced again, shutdown flag cleared).
	im = mustApply(t, im, reg(1, 7))
	if b, _ := im.Broker(1); b.Epoch != 7 || !b.Fenced || b.InControlledShutdown {
		t.Fatalf("re-registered broker 1 = %+v", b)
	}
	im = mustApply(t, im, &UnregisterBrokerRecord{ID: 2, Epoch: 6})
	if _, ok := im.Broker(2); ok {
		t.Fatal("broker 2 still registered")
	}
	// The canonical records rebuild the image, snapshot included.
	snap, err := EncodeSnapshot(nil, im)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeSnapshot(snap)
	if err != nil || !sameImage(back, im) {
		t.Fatalf("snapshot round trip: %v", err)
	}

	for _, tc := range []struct {
		name string
		recs []Record
	}{
		{"epoch not above the max", []Record{reg(3, 7)}},
		{"epoch below own", []Record{reg(1, 6)}},
		{"negative epoch", []Record{reg(3, -1)}},
		{"no endpoint", []Record{&RegisterBrokerRecord{ID: 3, Epoch: 9}}},
		{"duplicate endpoint", []Record{&RegisterBrokerRecord{ID: 3, Epoch: 9, Endpoints: append(ep("a", 1), ep("b", 2)...)}}},
		{"change with stale epoch", []Record{&BrokerRegistrationChangeRecord{ID: 1, Epoch: 5, Fenced: FenceUnfence}}},
		{"change of unknown broker", []Record{&BrokerRegistrationChangeRecord{ID: 9, Epoch: 7, Fenced: FenceUnfence}}},
		{"bad fence value", []Record{&BrokerRegistrationChangeRecord{ID: 1, Epoch: 7, Fenced: 3}}},
		{"bad shutdown value", []Record{&BrokerRegistrationChangeRecord{ID: 1, Epoch: 7, InControlledShutdown: -1}}},
		{"unregister stale epoch", []Record{&UnregisterBrokerRecord{ID: 1, Epoch: 5}}},
	} {
		if _, err := im.Apply(tc.recs...); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("%s: Apply = %v, want ErrInvalidRecord", tc.name, err)
		}
	}
	// Version-1 registrations (epoch 0) may repeat: data directories of one node hold them.
	legacy := mustApply(t, &Image{}, &RegisterBrokerRecord{ID: 1, Endpoints: ep("a", 1)}, &RegisterBrokerRecord{ID: 1, Endpoints: ep("b", 2)})
	if b, _ := legacy.Broker(1); b.Host != "b" || b.Fenced {
		t.Fatalf("legacy broker = %+v", b)
	}
}

func TestPartitionChange(t *testing.T) {
	im := mustApply(t, &Image{}, threeReplicas()...)
	p := func(im *Image) PartitionImage { t.Helper(); tp, _ := im.TopicByID(idA); return tp.Partitions[0] }

	// ISR shrink, same leader: partition epoch +1, leader epoch kept.
	im = mustApply(t, im, &PartitionChangeRecord{TopicID: idA, ISR: []int32{1, 2}, Leader: NoLeaderChange, LeaderRecoveryState: -1})
	if got := p(im); !reflect.DeepEqual(got.ISR, []int32{1, 2}) || got.LeaderEpoch != 0 || got.PartitionEpoch != 1 {
		t.Fatalf("after shrink: %+v", got)
	}
	// New leader: both epochs +1.
	im = mustApply(t, im, &PartitionChangeRecord{TopicID: idA, ISR: []int32{2}, Leader: 2, LeaderRecoveryState: -1})
	if got := p(im); got.Leader != 2 || got.LeaderEpoch != 1 || got.PartitionEpoch != 2 {
		t.Fatalf("after election: %+v", got)
	}
	// Naming the same leader again starts a new leader epoch, as in Kafka (the
	// controller does it when replicas leave, to fence their old fetches).
	im = mustApply(t, im, &PartitionChangeRecord{TopicID: idA, Leader: 2, LeaderRecoveryState: -1})
	if got := p(im); got.Leader != 2 || got.LeaderEpoch != 2 || got.PartitionEpoch != 3 {
		t.Fatalf("same leader: %+v", got)
	}
	// No leader (the last ISR member fenced): the ISR keeps it.
	im = mustApply(t, im, &PartitionChangeRecord{TopicID: idA, Leader: -1, LeaderRecoveryState: -1})
	if got := p(im); got.Leader != -1 || got.LeaderEpoch != 3 || !reflect.DeepEqual(got.ISR, []int32{2}) {
		t.Fatalf("leaderless: %+v", got)
	}
	// Reassignment: add 4, then clear.
	im = mustApply(t, im, &PartitionChangeRecord{TopicID: idA, Replicas: []int32{1, 2, 3, 4}, Adding: []int32{4}, Removing: []int32{1},
		Leader: 2, ISR: []int32{2}, LeaderRecoveryState: LeaderRecovering})
	if got := p(im); !reflect.DeepEqual(got.Adding, []int32{4}) || got.LeaderRecoveryState != LeaderRecovering || got.Leader != 2 {
		t.Fatalf("reassigning: %+v", got)
	}
	im = mustApply(t, im, &PartitionChangeRecord{TopicID: idA, Replicas: []int32{2, 3, 4}, Adding: []int32{}, Removing: []int32{},
		Leader: NoLeaderChange, LeaderRecoveryState: LeaderRecovered})
	if got := p(im); got.Adding != nil || got.Removing != nil || len(got.Replicas) != 3 {
		t.Fatalf("reassigned: %+v", got)
	}
	if !sameImage(mustApply(t, &Image{}, im.Records()...), im) {
		t.Fatal("Records() does not rebuild the image")
	}

	for _, tc := range []struct {
		name string
		rec  *PartitionChangeRecord
		want error
	}{
		{"empty ISR", &PartitionChangeRecord{TopicID: idA, ISR: []int32{}, Leader: NoLeaderChange, LeaderRecoveryState: -1}, ErrInvalidRecord},
		{"leader outside ISR", &PartitionChangeRecord{TopicID: idA, Leader: 3, LeaderRecoveryState: -1}, ErrInvalidRecord},
		{"ISR outside replicas", &PartitionChangeRecord{TopicID: idA, ISR: []int32{2, 9}, Leader: NoLeaderChange, LeaderRecoveryState: -1}, ErrInvalidRecord},
		{"leader -3", &PartitionChangeRecord{TopicID: idA, Leader: -3, LeaderRecoveryState: -1}, ErrInvalidRecord},
		{"adding not a replica", &PartitionChangeRecord{TopicID: idA, Adding: []int32{7}, Leader: NoLeaderChange, LeaderRecoveryState: -1}, ErrInvalidRecord},
		{"bad recovery state", &PartitionChangeRecord{TopicID: idA, Leader: NoLeaderChange, LeaderRecoveryState: 5}, ErrInvalidRecord},
		{"unknown partition", &PartitionChangeRecord{TopicID: idA, Partition: 1, Leader: NoLeaderChange, LeaderRecoveryState: -1}, ErrInvalidRecord},
		{"unknown topic", &PartitionChangeRecord{TopicID: idC, Leader: NoLeaderChange, LeaderRecoveryState: -1}, ErrUnknownTopic},
	} {
		if _, err := im.Apply(tc.rec); !errors.Is(err, tc.want) {
			t.Errorf("%s: Apply = %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestSnapshotDecodeErrors(t *testing.T) {
	if im, err := DecodeSnapshot(nil); err != nil || im.NumTopics() != 0 {
		t.Fatalf("empty snapshot: %v", err)
	}
	// Records that do not apply in order are corrupt.
	bad := EncodeEntry(nil, &PartitionRecord{TopicID: idA, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1})
	if _, err := DecodeSnapshot(bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("inapplicable snapshot: %v", err)
	}
	good, _ := EncodeSnapshot(nil, mustApply(t, &Image{}, threeReplicas()...))
	if _, err := DecodeSnapshot(good[:len(good)-1]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated snapshot: %v", err)
	}
}
