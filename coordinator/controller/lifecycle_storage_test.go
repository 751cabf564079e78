package controller

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// TestLifecycleFencesWhileStorageFails: a running broker whose storage cannot take
// writes asks to be fenced; the controller moves its leaderships and takes it out of
// the ISRs, and the broker keeps its registration (no new epoch: it was not a lost
// session). Once its storage takes writes again it asks to be unfenced and is, at the
// same epoch.
func TestLifecycleFencesWhileStorageFails(t *testing.T) {
	h := newHarness(t, nil)
	nodes, driveAll := lifecycleNodes(h, 1, 2, 3)
	driveAll()
	if ct := h.createTopic("t", 6, 3); ct.ErrorCode != 0 {
		t.Fatal(code(ct.ErrorCode))
	}
	driveAll()
	b1 := nodes[0].b
	epoch := b1.Epoch()
	if !LeadsAny(h.image(), 1) {
		t.Fatal("broker 1 leads nothing before the failure")
	}
	inISR := func() bool {
		tp, _ := h.image().Topic("t")
		for _, p := range tp.Partitions {
			if slices.Contains(p.ISR, 1) {
				return true
			}
		}
		return false
	}

	b1.setStorage(h.clock.Now(), true)
	driveAll()
	br, _ := h.image().Broker(1)
	if !br.Fenced || LeadsAny(h.image(), 1) || inISR() {
		t.Fatalf("storage failed: fenced %v, leads %v, in an ISR %v; want fenced, leading nothing, in no ISR",
			br.Fenced, LeadsAny(h.image(), 1), inISR())
	}
	// Heartbeats go on; it stays fenced and registered at its epoch.
	for range 5 {
		h.clock.Advance(2 * time.Second)
		driveAll()
		h.settle()
	}
	if b1.State() != StateRunning || b1.Epoch() != epoch {
		t.Fatalf("while fenced on request: state %v epoch %d, want RUNNING at %d", b1.State(), b1.Epoch(), epoch)
	}
	if br, _ := h.image().Broker(1); !br.Fenced {
		t.Fatal("unfenced while the storage still fails")
	}

	b1.setStorage(h.clock.Now(), false)
	driveAll()
	if br, _ := h.image().Broker(1); br.Fenced || b1.Epoch() != epoch || b1.State() != StateRunning {
		t.Fatalf("storage back: fenced %v, epoch %d (was %d), state %v", br.Fenced, b1.Epoch(), epoch, b1.State())
	}
}

// A broker alone does not ask to be fenced for its storage: no other broker could
// take its leaderships, and fenced it would serve nothing, reads included.
func TestLifecycleAloneStaysUnfenced(t *testing.T) {
	clock := NewManualClock(t0)
	b := newLifecycle(t, 1, clock, nil)
	_, seq, _ := b.Next(clock.Now())
	reg := kmsg.NewPtrBrokerRegistrationResponse()
	reg.BrokerEpoch = 6
	b.OnResponse(clock.Now(), seq, reg, nil)
	self := &metadata.RegisterBrokerRecord{ID: 1, Epoch: 6, Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9001}}}
	b.MetadataApplied(10, mustApply(t, &metadata.Image{}, self))
	b.setStorage(clock.Now(), true)
	req, _, _ := b.Next(clock.Now())
	if hb, ok := req.(*kmsg.BrokerHeartbeatRequest); !ok || hb.WantFence {
		t.Fatalf("alone with failed storage: %+v, want a heartbeat without WantFence", req)
	}
	// With another broker unfenced, the next heartbeat asks.
	b.OnResponse(clock.Now(), b.seq, heartbeatAnswer(false), nil)
	other := &metadata.RegisterBrokerRecord{ID: 2, Epoch: 7, Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9002}}}
	b.MetadataApplied(11, mustApply(t, &metadata.Image{}, self, other))
	clock.Advance(2 * time.Second)
	req, _, _ = b.Next(clock.Now())
	if hb, ok := req.(*kmsg.BrokerHeartbeatRequest); !ok || !hb.WantFence {
		t.Fatalf("with another broker: %+v, want a heartbeat with WantFence", req)
	}
}

func heartbeatAnswer(fenced bool) *kmsg.BrokerHeartbeatResponse {
	hb := kmsg.NewPtrBrokerHeartbeatResponse()
	hb.IsCaughtUp, hb.IsFenced = true, fenced
	return hb
}
