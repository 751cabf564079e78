package controller

import (
	"fmt"
	"testing"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// testBroker describes a broker of a test image.
type testBroker struct {
	id       int32
	rack     string // "" = none
	fenced   bool
	shutdown bool
}

// imageWith returns an image with the given brokers (epochs 1, 2, ... in order).
func imageWith(t testing.TB, brokers ...testBroker) *metadata.Image {
	t.Helper()
	var recs []metadata.Record
	for i, b := range brokers {
		r := &metadata.RegisterBrokerRecord{ID: b.id, Epoch: int64(i + 1), Fenced: b.fenced, InControlledShutdown: b.shutdown,
			Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9000 + b.id}}}
		if b.rack != "" {
			r.Rack = metadata.StringPtr(b.rack)
		}
		recs = append(recs, r)
	}
	return mustApply(t, &metadata.Image{}, recs...)
}

func brokers(ids ...int32) []testBroker {
	out := make([]testBroker, len(ids))
	for i, id := range ids {
		out[i] = testBroker{id: id}
	}
	return out
}

func mustApply(t testing.TB, im *metadata.Image, recs ...metadata.Record) *metadata.Image {
	t.Helper()
	next, err := im.Apply(recs...)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return next
}

// testPartition is one partition of a test topic.
type testPartition struct {
	replicas, isr    []int32
	leader           int32
	adding, removing []int32
	elr, lastKnown   []int32 // eligible leader replicas (the image must be at ELR 1)
}

// withTopic adds a topic with the given partitions (leader epochs 0).
func withTopic(t testing.TB, im *metadata.Image, name string, parts ...testPartition) *metadata.Image {
	t.Helper()
	id := topicID(name)
	recs := []metadata.Record{&metadata.TopicRecord{Name: name, ID: id}}
	for i, p := range parts {
		recs = append(recs, &metadata.PartitionRecord{TopicID: id, Partition: int32(i), Replicas: p.replicas, ISR: p.isr,
			Leader: p.leader, Adding: p.adding, Removing: p.removing, ELR: p.elr, LastKnownELR: p.lastKnown})
	}
	return mustApply(t, im, recs...)
}

// topicID is a deterministic topic id for a name.
func topicID(name string) metadata.UUID {
	var u metadata.UUID
	copy(u[:], fmt.Sprintf("t:%-14s", name))
	u[15] |= 0x80 // never the metadata topic id
	return u
}

func part(t testing.TB, im *metadata.Image, topic string, i int) metadata.PartitionImage {
	t.Helper()
	ti, ok := im.Topic(topic)
	if !ok || i >= len(ti.Partitions) {
		t.Fatalf("no partition %s-%d", topic, i)
	}
	return ti.Partitions[i]
}

func topic(t testing.TB, im *metadata.Image, name string) *metadata.TopicImage {
	t.Helper()
	ti, ok := im.Topic(name)
	if !ok {
		t.Fatalf("no topic %q", name)
	}
	return ti
}

// never and always are topic policies: min ISR 1 and no unclean election (Balanced,
// unclean.leader.election.enable=false), or unclean elections (Aggressive).
func never(string) ElectionPolicy  { return ElectionPolicy{MinISR: 1, Recovery: RecoveryBalanced} }
func always(string) ElectionPolicy { return ElectionPolicy{MinISR: 1, Recovery: RecoveryAggressive} }

// lifecycleNode is a broker lifecycle and the metadata follower that feeds it.
type lifecycleNode struct {
	b *BrokerLifecycle
	f *MetadataFollower
}

// lifecycleNodes makes a lifecycle for each broker id, each fed by its own follower
// of h's log, and returns them with driveAll, which drives every node through h
// three rounds over.
func lifecycleNodes(h *harness, ids ...int32) (nodes []lifecycleNode, driveAll func()) {
	h.t.Helper()
	for _, id := range ids {
		b := newLifecycle(h.t, id, h.clock, nil)
		f := NewMetadataFollower(FollowerConfig{Clock: h.clock})
		f.Subscribe(func(off uint64, _, im *metadata.Image) { b.MetadataApplied(off, im) })
		nodes = append(nodes, lifecycleNode{b, f})
	}
	driveAll = func() {
		for range 3 {
			for _, n := range nodes {
				h.drive(n.b, n.f)
			}
		}
	}
	return nodes, driveAll
}
