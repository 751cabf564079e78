package metadata

import "testing"

// TestSnapshotBrokerEpochOrder: a broker that re-registered (a higher epoch) before
// a broker with a lower id still rebuilds from the image's records: registrations
// are emitted in epoch order, as Apply requires.
func TestSnapshotBrokerEpochOrder(t *testing.T) {
	im := mustApply(t, &Image{}, reg(1, 5), reg(2, 6), reg(1, 7), reg(3, 8))
	snap, err := EncodeSnapshot(nil, im)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeSnapshot(snap)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if !sameImage(back, im) {
		t.Fatal("snapshot round trip changed the image")
	}
}
