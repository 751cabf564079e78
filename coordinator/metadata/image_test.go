package metadata

import (
	"errors"
	"reflect"
	"testing"
)

var (
	idA = UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	idB = UUID{1: 0xbb, 15: 2}
	idC = UUID{0: 0xcc, 15: 3}
)

func part(p int32, replicas ...int32) *PartitionRecord {
	return &PartitionRecord{TopicID: idA, Partition: p, Replicas: replicas, ISR: replicas, Leader: replicas[0]}
}

// createTopic returns the records that create a topic with n single-replica partitions.
func createTopic(name string, id UUID, n int) []Record {
	recs := []Record{&TopicRecord{Name: name, ID: id}}
	for i := 0; i < n; i++ {
		recs = append(recs, &PartitionRecord{TopicID: id, Partition: int32(i), Replicas: []int32{0}, ISR: []int32{0}, Leader: 0})
	}
	return recs
}

func mustApply(t testing.TB, im *Image, recs ...Record) *Image {
	t.Helper()
	next, err := im.Apply(recs...)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return next
}

func sameImage(a, b *Image) bool { return reflect.DeepEqual(a.Records(), b.Records()) }

func TestApplyTable(t *testing.T) {
	base := mustApply(t, &Image{}, append(createTopic("orders", idA, 2),
		&ConfigRecord{Resource: ResourceTopic, Name: "orders", Key: "retention.ms", Value: StringPtr("1000")})...)

	tests := []struct {
		name    string
		recs    []Record
		wantErr error
		check   func(t *testing.T, im *Image)
	}{
		{name: "create", recs: createTopic("payments", idB, 3), check: func(t *testing.T, im *Image) {
			tp, ok := im.Topic("payments")
			if !ok || tp.ID != idB || len(tp.Partitions) != 3 {
				t.Fatalf("payments = %+v, %v", tp, ok)
			}
			if byID, _ := im.TopicByID(idB); byID != tp {
				t.Fatal("TopicByID disagrees with Topic")
			}
			if names := []string{im.Topics()[0].Name, im.Topics()[1].Name}; names[0] != "orders" || names[1] != "payments" {
				t.Fatalf("Topics() order = %v", names)
			}
		}},
		{name: "duplicate name", recs: createTopic("orders", idB, 1), wantErr: ErrTopicExists},
		{name: "duplicate id", recs: createTopic("other", idA, 1), wantErr: ErrInvalidRecord},
		{name: "zero id", recs: []Record{&TopicRecord{Name: "z", ID: ZeroUUID}}, wantErr: ErrInvalidRecord},
		{name: "metadata topic id", recs: []Record{&TopicRecord{Name: "z", ID: MetadataTopicID}}, wantErr: ErrInvalidRecord},
		{name: "bad name", recs: []Record{&TopicRecord{Name: "a/b", ID: idB}}, wantErr: ErrInvalidRecord},
		{name: "dot name", recs: []Record{&TopicRecord{Name: "..", ID: idB}}, wantErr: ErrInvalidRecord},
		{name: "delete", recs: []Record{&RemoveTopicRecord{ID: idA}}, check: func(t *testing.T, im *Image) {
			if _, ok := im.Topic("orders"); ok {
				t.Fatal("topic still there")
			}
			if _, ok := im.TopicByID(idA); ok {
				t.Fatal("topic id still there")
			}
			if im.Configs(ResourceTopic, "orders") != nil {
				t.Fatal("configs survived the topic")
			}
		}},
		{name: "delete unknown", recs: []Record{&RemoveTopicRecord{ID: idC}}, wantErr: ErrUnknownTopic},
		{name: "re-create with new id", recs: append([]Record{&RemoveTopicRecord{ID: idA}}, createTopic("orders", idC, 1)...),
			check: func(t *testing.T, im *Image) {
				tp, _ := im.Topic("orders")
				if tp.ID != idC || len(tp.Partitions) != 1 || im.Configs(ResourceTopic, "orders") != nil {
					t.Fatalf("re-created topic = %+v configs %v", tp, im.Configs(ResourceTopic, "orders"))
				}
				if _, ok := im.TopicByID(idA); ok {
					t.Fatal("old id still resolves")
				}
			}},
		{name: "partitions added", recs: []Record{part(2, 0), part(3, 0)}, check: func(t *testing.T, im *Image) {
			if tp, _ := im.Topic("orders"); len(tp.Partitions) != 4 {
				t.Fatalf("partitions = %d", len(tp.Partitions))
			}
		}},
		{name: "partition gap", recs: []Record{part(3, 0)}, wantErr: ErrInvalidRecord},
		{name: "partition negative", recs: []Record{part(-1, 0)}, wantErr: ErrInvalidRecord},
		{name: "partition of unknown topic", recs: []Record{&PartitionRecord{TopicID: idC, Replicas: []int32{0}}}, wantErr: ErrUnknownTopic},
		{name: "leader change", recs: []Record{&PartitionRecord{TopicID: idA, Partition: 1, Replicas: []int32{0, 1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 1}},
			check: func(t *testing.T, im *Image) {
				tp, _ := im.Topic("orders")
				p := tp.Partitions[1]
				if p.Leader != 1 || p.LeaderEpoch != 1 || !reflect.DeepEqual(p.ISR, []int32{1}) {
					t.Fatalf("partition 1 = %+v", p)
				}
			}},
		{name: "leader not in isr", recs: []Record{&PartitionRecord{TopicID: idA, Partition: 2, Replicas: []int32{0, 1}, ISR: []int32{0}, Leader: 1}}, wantErr: ErrInvalidRecord},
		{name: "isr not replica", recs: []Record{&PartitionRecord{TopicID: idA, Partition: 2, Replicas: []int32{0}, ISR: []int32{0, 5}, Leader: 0}}, wantErr: ErrInvalidRecord},
		{name: "duplicate replica", recs: []Record{&PartitionRecord{TopicID: idA, Partition: 2, Replicas: []int32{0, 0}, ISR: []int32{0}, Leader: 0}}, wantErr: ErrInvalidRecord},
		{name: "no replicas", recs: []Record{&PartitionRecord{TopicID: idA, Partition: 2, Leader: -1}}, wantErr: ErrInvalidRecord},
		{name: "leaderless", recs: []Record{&PartitionRecord{TopicID: idA, Partition: 2, Replicas: []int32{3}, Leader: -1}}},
		{name: "epoch goes back", recs: []Record{
			&PartitionRecord{TopicID: idA, Partition: 0, Replicas: []int32{0}, ISR: []int32{0}, Leader: 0, LeaderEpoch: 5},
			&PartitionRecord{TopicID: idA, Partition: 0, Replicas: []int32{0}, ISR: []int32{0}, Leader: 0, LeaderEpoch: 4}}, wantErr: ErrInvalidRecord},
		{name: "config set and overwrite", recs: []Record{
			&ConfigRecord{Resource: ResourceTopic, Name: "orders", Key: "cleanup.policy", Value: StringPtr("compact")},
			&ConfigRecord{Resource: ResourceTopic, Name: "orders", Key: "retention.ms", Value: StringPtr("2000")}},
			check: func(t *testing.T, im *Image) {
				want := map[string]string{"cleanup.policy": "compact", "retention.ms": "2000"}
				if got := im.Configs(ResourceTopic, "orders"); !reflect.DeepEqual(got, want) {
					t.Fatalf("configs = %v", got)
				}
			}},
		{name: "config delete", recs: []Record{&ConfigRecord{Resource: ResourceTopic, Name: "orders", Key: "retention.ms"}},
			check: func(t *testing.T, im *Image) {
				if got := im.Configs(ResourceTopic, "orders"); got != nil {
					t.Fatalf("configs = %v, want none", got)
				}
			}},
		{name: "config delete unset", recs: []Record{&ConfigRecord{Resource: ResourceTopic, Name: "orders", Key: "nope"}}},
		{name: "config delete then set in one batch", recs: []Record{
			&ConfigRecord{Resource: ResourceTopic, Name: "orders", Key: "retention.ms"},
			&ConfigRecord{Resource: ResourceTopic, Name: "orders", Key: "segment.ms", Value: StringPtr("5")}},
			check: func(t *testing.T, im *Image) {
				if got := im.Configs(ResourceTopic, "orders"); !reflect.DeepEqual(got, map[string]string{"segment.ms": "5"}) {
					t.Fatalf("configs = %v", got)
				}
			}},
		{name: "config unknown topic", recs: []Record{&ConfigRecord{Resource: ResourceTopic, Name: "nope", Key: "k", Value: StringPtr("v")}}, wantErr: ErrUnknownTopic},
		{name: "broker config", recs: []Record{
			&ConfigRecord{Resource: ResourceBroker, Name: "", Key: "log.retention.ms", Value: StringPtr("1")},
			&ConfigRecord{Resource: ResourceBroker, Name: "3", Key: "log.retention.ms", Value: StringPtr("2")}},
			check: func(t *testing.T, im *Image) {
				if im.Configs(ResourceBroker, "")["log.retention.ms"] != "1" || im.Configs(ResourceBroker, "3")["log.retention.ms"] != "2" {
					t.Fatal("broker configs not set")
				}
			}},
		{name: "group config", recs: []Record{
			&ConfigRecord{Resource: ResourceGroup, Name: "g1", Key: "share.auto.offset.reset", Value: StringPtr("earliest")},
			&ConfigRecord{Resource: ResourceGroup, Name: "g1", Key: "share.record.lock.duration.ms", Value: StringPtr("15000")},
			&ConfigRecord{Resource: ResourceGroup, Name: "g1", Key: "share.record.lock.duration.ms"}},
			check: func(t *testing.T, im *Image) {
				if got := im.Configs(ResourceGroup, "g1"); !reflect.DeepEqual(got, map[string]string{"share.auto.offset.reset": "earliest"}) {
					t.Fatalf("group configs = %v", got)
				}
				if im.Configs(ResourceBroker, "g1") != nil || im.Configs(ResourceTopic, "g1") != nil {
					t.Fatal("group configs visible under another resource type")
				}
				// A snapshot (Records) carries them.
				if got := mustApply(t, &Image{}, im.Records()...).Configs(ResourceGroup, "g1"); got["share.auto.offset.reset"] != "earliest" {
					t.Fatalf("group configs rebuilt from Records = %v", got)
				}
			}},
		{name: "group config empty name", recs: []Record{&ConfigRecord{Resource: ResourceGroup, Name: "", Key: "k", Value: StringPtr("v")}}, wantErr: ErrInvalidRecord},
		{name: "broker config bad name", recs: []Record{&ConfigRecord{Resource: ResourceBroker, Name: "03", Key: "k", Value: StringPtr("v")}}, wantErr: ErrInvalidRecord},
		{name: "config bad resource", recs: []Record{&ConfigRecord{Resource: 7, Name: "x", Key: "k", Value: StringPtr("v")}}, wantErr: ErrInvalidRecord},
		{name: "config empty key", recs: []Record{&ConfigRecord{Resource: ResourceBroker, Key: "", Value: StringPtr("v")}}, wantErr: ErrInvalidRecord},
		{name: "producer ids", recs: []Record{&ProducerIDsRecord{BrokerID: 1, NextProducerID: 1000}, &ProducerIDsRecord{BrokerID: 1, NextProducerID: 2000}},
			check: func(t *testing.T, im *Image) {
				if im.NextProducerID() != 2000 {
					t.Fatalf("next producer id = %d", im.NextProducerID())
				}
			}},
		{name: "producer ids go back", recs: []Record{&ProducerIDsRecord{NextProducerID: 1000}, &ProducerIDsRecord{NextProducerID: 1000}}, wantErr: ErrInvalidRecord},
		{name: "register broker", recs: []Record{
			&RegisterBrokerRecord{ID: 2, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "b", Port: 9092}}},
			&RegisterBrokerRecord{ID: 1, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "a", Port: 9092}}, Rack: StringPtr("r1")},
			&RegisterBrokerRecord{ID: 2, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "b2", Port: 9093}}}},
			check: func(t *testing.T, im *Image) {
				bs := im.Brokers()
				if len(bs) != 2 || bs[0].ID != 1 || *bs[0].Rack != "r1" || bs[1].Host != "b2" || bs[1].Port != 9093 {
					t.Fatalf("brokers = %+v", bs)
				}
			}},
		{name: "register broker bad port", recs: []Record{&RegisterBrokerRecord{ID: 1, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "a", Port: 70000}}}}, wantErr: ErrInvalidRecord},
		{name: "nil record", recs: []Record{nil}, wantErr: ErrInvalidRecord},
		{name: "nil topic pointer", recs: []Record{(*TopicRecord)(nil)}, wantErr: ErrInvalidRecord},
		{name: "nil partition pointer", recs: []Record{(*PartitionRecord)(nil)}, wantErr: ErrInvalidRecord},
		{name: "nil config pointer", recs: []Record{(*ConfigRecord)(nil)}, wantErr: ErrInvalidRecord},
		{name: "error after valid records leaves nothing", recs: append(createTopic("x", idB, 1), &RemoveTopicRecord{ID: idC}), wantErr: ErrUnknownTopic},
	}
	before := base.Records()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next, err := base.Apply(tc.recs...)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || next != nil {
					t.Fatalf("Apply = %v, %v; want %v", next, err, tc.wantErr)
				}
			} else {
				if err != nil {
					t.Fatalf("Apply: %v", err)
				}
				if tc.check != nil {
					tc.check(t, next)
				}
				// Whatever Apply built, its canonical records rebuild it.
				if !sameImage(mustApply(t, &Image{}, next.Records()...), next) {
					t.Fatal("Records() does not rebuild the image")
				}
			}
			if !reflect.DeepEqual(base.Records(), before) {
				t.Fatal("Apply changed the base image")
			}
		})
	}
}

func TestApplyDoesNotAliasInput(t *testing.T) {
	im := mustApply(t, &Image{}, &TopicRecord{Name: "t", ID: idA})
	reps := []int32{1, 2}
	next := mustApply(t, im, &PartitionRecord{TopicID: idA, Replicas: reps, ISR: reps, Leader: 1})
	reps[0] = 9
	if tp, _ := next.Topic("t"); tp.Partitions[0].Replicas[0] != 1 {
		t.Fatal("image aliases the caller's slice")
	}
	if tp, _ := im.Topic("t"); len(tp.Partitions) != 0 {
		t.Fatal("earlier image changed")
	}
}

func TestUUID(t *testing.T) {
	seen := map[UUID]bool{}
	for i := 0; i < 1000; i++ {
		u := NewUUID()
		if !u.ValidTopicID() || seen[u] || u.String()[0] == '-' {
			t.Fatalf("bad or repeated uuid %s", u)
		}
		seen[u] = true
		back, err := ParseUUID(u.String())
		if err != nil || back != u {
			t.Fatalf("ParseUUID(%s) = %v, %v", u, back, err)
		}
	}
	if s := MetadataTopicID.String(); s != "AAAAAAAAAAAAAAAAAAAAAQ" {
		t.Fatalf("metadata topic id prints %s, Kafka prints AAAAAAAAAAAAAAAAAAAAAQ", s)
	}
	for _, bad := range []string{"", "short", "AAAAAAAAAAAAAAAAAAAAA=", "AAAAAAAAAAAAAAAAAAAAA/", "AAAAAAAAAAAAAAAAAAAAAR"} {
		if _, err := ParseUUID(bad); !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("ParseUUID(%q) = %v", bad, err)
		}
	}
}

func TestTopicsIsCached(t *testing.T) {
	im := mustApply(t, &Image{}, append(createTopic("b", idB, 1), createTopic("a", idA, 1)...)...)
	first := im.Topics()
	if len(first) != 2 || first[0].Name != "a" || &im.Topics()[0] != &first[0] {
		t.Fatal("Topics not sorted or not cached")
	}
	if len((&Image{}).Topics()) != 0 || (&Image{}).NumTopics() != 0 {
		t.Fatal("empty image has topics")
	}
}

func BenchmarkApplyCreateTopic(b *testing.B) {
	im := &Image{}
	for i := 0; i < 1000; i++ {
		im, _ = im.Apply(createTopic("t"+string(rune('a'+i%26))+string(rune('a'+i/26%26))+string(rune('a'+i/676)), NewUUID(), 4)...)
	}
	recs := createTopic("new-topic", idC, 12)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := im.Apply(recs...); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCollidingTopic(t *testing.T) {
	im := mustApply(t, &Image{}, append(createTopic("a.b_c", idA, 1), createTopic("plain", idB, 1)...)...)
	for name, want := range map[string]string{"a_b_c": "a.b_c", "a.b.c": "a.b_c", "a_b.c": "a.b_c", "a.b_c": "", "plain": "", "a_bc": "", "x": ""} {
		got, ok := im.CollidingTopic(name)
		if got != want || ok != (want != "") {
			t.Errorf("CollidingTopic(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}
