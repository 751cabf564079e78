package kafka

import (
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/metadatacache"
)

// TestMetadataHoldsLostLeader: a Metadata answer that would name as leader a broker
// this node lost (Deps.Unreachable) waits until the image fences it and names the new
// leader; an answer naming no lost leader is sent at once, and so is one past
// LeaderHold since the broker was lost.
func TestMetadataHoldsLostLeader(t *testing.T) {
	tb := startDataBroker(t)
	adm := tb.admin(t)
	mustCreate(t, adm, "moved", 1, nil)
	mustCreate(t, adm, "local", 1, nil)
	off, im := tb.meta.Load()
	ti, _ := im.Topic("moved")
	next, err := im.Apply(
		&metadata.RegisterBrokerRecord{ID: 2, Epoch: im.MaxBrokerEpoch() + 1,
			Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.2", Port: 19092, SecurityProtocol: metadata.ProtocolPlaintext}}},
		&metadata.PartitionChangeRecord{TopicID: ti.ID, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: metadata.NoLeaderChange, LeaderRecoveryState: -1},
		&metadata.PartitionChangeRecord{TopicID: ti.ID, Partition: 0, Leader: 2, LeaderRecoveryState: -1},
	)
	if err != nil {
		t.Fatal(err)
	}
	tb.a.MetadataChanged(off+1, im, next)
	off, im = off+1, next

	var mu sync.Mutex
	lostSince := time.Now()
	lost := func(id int32) (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		return lostSince, id == 2
	}
	tb.b.unreachable.Store(&lost)
	ask := func(topic string) (*kmsg.MetadataResponse, time.Duration) {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		start := time.Now()
		resp := tb.raw(t).roundTrip(req).(*kmsg.MetadataResponse)
		return resp, time.Since(start)
	}
	leader := func(resp *kmsg.MetadataResponse) int32 { return resp.Topics[0].Partitions[0].Leader }

	// Not naming the lost broker: at once.
	if resp, took := ask("local"); leader(resp) != 1 || took > metadatacache.LeaderHold/2 {
		t.Fatalf("local topic: leader %d after %v", leader(resp), took)
	}

	// Naming it: held until the controller's fence moves the leadership back to 1.
	type answer struct {
		resp *kmsg.MetadataResponse
		took time.Duration
	}
	held := make(chan answer, 1)
	go func() {
		resp, took := ask("moved")
		held <- answer{resp, took}
	}()
	const fenceAfter = 300 * time.Millisecond
	time.Sleep(fenceAfter) // the controller's fence comes later than the client's question
	select {
	case a := <-held:
		t.Fatalf("answered before the fence, after %v, naming leader %d", a.took, leader(a.resp))
	default:
	}
	b2, _ := im.Broker(2)
	fenced, err := im.Apply(
		&metadata.BrokerRegistrationChangeRecord{ID: 2, Epoch: b2.Epoch, Fenced: metadata.FenceFence},
		&metadata.PartitionChangeRecord{TopicID: ti.ID, Partition: 0, ISR: []int32{1}, Leader: 1, LeaderRecoveryState: -1},
	)
	if err != nil {
		t.Fatal(err)
	}
	tb.a.MetadataChanged(off+1, im, fenced)
	a := <-held
	if leader(a.resp) != 1 || a.took < fenceAfter || a.took > metadatacache.LeaderHold {
		t.Fatalf("held answer: leader %d after %v, want 1 after the fence (%v) and before %v", leader(a.resp), a.took, fenceAfter, metadatacache.LeaderHold)
	}
}

// TestMetadataHoldEnds: a lost broker that is never fenced holds the answers naming it
// leader only until LeaderHold after it was lost; later answers name it at once.
func TestMetadataHoldEnds(t *testing.T) {
	tb := startDataBroker(t)
	mustCreate(t, tb.admin(t), "moved", 1, nil)
	off, im := tb.meta.Load()
	ti, _ := im.Topic("moved")
	next, err := im.Apply(
		&metadata.RegisterBrokerRecord{ID: 2, Epoch: im.MaxBrokerEpoch() + 1,
			Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.2", Port: 19092, SecurityProtocol: metadata.ProtocolPlaintext}}},
		&metadata.PartitionChangeRecord{TopicID: ti.ID, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: metadata.NoLeaderChange, LeaderRecoveryState: -1},
		&metadata.PartitionChangeRecord{TopicID: ti.ID, Partition: 0, Leader: 2, LeaderRecoveryState: -1},
	)
	if err != nil {
		t.Fatal(err)
	}
	tb.a.MetadataChanged(off+1, im, next)
	since := time.Now().Add(-metadatacache.LeaderHold + 500*time.Millisecond)
	lost := func(id int32) (time.Time, bool) { return since, id == 2 }
	tb.b.unreachable.Store(&lost)
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("moved")
	req.Topics = append(req.Topics, rt)
	rc := tb.raw(t)
	start := time.Now()
	resp := rc.roundTrip(req).(*kmsg.MetadataResponse)
	took := time.Since(start)
	if l := resp.Topics[0].Partitions[0].Leader; l != 2 || took < 300*time.Millisecond || took > 2*time.Second {
		t.Fatalf("first answer: leader %d after %v, want 2 at the hold's end (about 500 ms)", l, took)
	}
	start = time.Now()
	resp = rc.roundTrip(req).(*kmsg.MetadataResponse)
	if l, took := resp.Topics[0].Partitions[0].Leader, time.Since(start); l != 2 || took > 200*time.Millisecond {
		t.Fatalf("after the hold: leader %d after %v, want 2 at once", l, took)
	}
}

// TestMetadataSettles: an answer naming as leader another broker that this node has
// not lost is sent after a second look LeaderSettle later; if this node loses that
// broker in between (a killed process's sockets close one by one, the client's
// first), the answer is held for the fence instead of naming the dead leader.
func TestMetadataSettles(t *testing.T) {
	tb := startDataBroker(t)
	mustCreate(t, tb.admin(t), "moved", 1, nil)
	off, im := tb.meta.Load()
	ti, _ := im.Topic("moved")
	next, err := im.Apply(
		&metadata.RegisterBrokerRecord{ID: 2, Epoch: im.MaxBrokerEpoch() + 1,
			Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.2", Port: 19092, SecurityProtocol: metadata.ProtocolPlaintext}}},
		&metadata.PartitionChangeRecord{TopicID: ti.ID, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: metadata.NoLeaderChange, LeaderRecoveryState: -1},
		&metadata.PartitionChangeRecord{TopicID: ti.ID, Partition: 0, Leader: 2, LeaderRecoveryState: -1},
	)
	if err != nil {
		t.Fatal(err)
	}
	tb.a.MetadataChanged(off+1, im, next)
	off, im = off+1, next

	var mu sync.Mutex
	var lostAt time.Time // zero: broker 2 is not lost
	lost := func(id int32) (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		return lostAt, id == 2 && !lostAt.IsZero()
	}
	tb.b.unreachable.Store(&lost)
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("moved")
	req.Topics = append(req.Topics, rt)
	rc := tb.raw(t)
	leader := func(resp *kmsg.MetadataResponse) int32 { return resp.Topics[0].Partitions[0].Leader }

	// Broker 2 lives: named after the second look.
	start := time.Now()
	resp := rc.roundTrip(req).(*kmsg.MetadataResponse)
	if took := time.Since(start); leader(resp) != 2 || took < metadatacache.LeaderSettle || took > metadatacache.LeaderHold/2 {
		t.Fatalf("a live leader: %d after %v, want 2 after %v", leader(resp), took, metadatacache.LeaderSettle)
	}

	// Broker 2's process dies as the question arrives; this node sees its own
	// connections close a moment later, before the second look.
	held := make(chan *kmsg.MetadataResponse, 1)
	go func() { held <- rc.roundTrip(req).(*kmsg.MetadataResponse) }()
	time.Sleep(metadatacache.LeaderSettle / 5)
	mu.Lock()
	lostAt = time.Now()
	mu.Unlock()
	const fenceAfter = 300 * time.Millisecond
	time.Sleep(fenceAfter)
	select {
	case resp := <-held:
		t.Fatalf("answered before the fence, naming leader %d", leader(resp))
	default:
	}
	b2, _ := im.Broker(2)
	fenced, err := im.Apply(
		&metadata.BrokerRegistrationChangeRecord{ID: 2, Epoch: b2.Epoch, Fenced: metadata.FenceFence},
		&metadata.PartitionChangeRecord{TopicID: ti.ID, Partition: 0, ISR: []int32{1}, Leader: 1, LeaderRecoveryState: -1},
	)
	if err != nil {
		t.Fatal(err)
	}
	tb.a.MetadataChanged(off+1, im, fenced)
	if resp := <-held; leader(resp) != 1 {
		t.Fatalf("held answer: leader %d, want 1 after the fence", leader(resp))
	}
}
