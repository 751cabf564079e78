package remote

import (
	"errors"
	"testing"
)

// testTP is the partition the tests copy segments of.
var testTP = TopicIDPartition{TopicID: RandomUuid(), Topic: "orders", Partition: 7}

func TestUuid(t *testing.T) {
	seen := map[Uuid]bool{}
	for i := 0; i < 1000; i++ {
		u := RandomUuid()
		s := u.String()
		if len(s) != 22 || s[0] == '-' || u.IsZero() || seen[u] {
			t.Fatalf("RandomUuid gave %q", s)
		}
		seen[u] = true
		back, err := ParseUuid(s)
		if err != nil || back != u {
			t.Fatalf("ParseUuid(%q) = %v, %v", s, back, err)
		}
	}
	// Kafka's own form of a topic id (from kafka-topics.sh --describe).
	if u, err := ParseUuid("MWJ6FHTfRYy67jzwZdeqSQ"); err != nil || u.String() != "MWJ6FHTfRYy67jzwZdeqSQ" {
		t.Fatalf("ParseUuid: %v, %v", u, err)
	}
	if _, err := ParseUuid("not-a-uuid"); err == nil {
		t.Fatal("ParseUuid accepted a short string")
	}
}

func TestSegmentMetadataValidate(t *testing.T) {
	good := SegmentMetadata{ID: NewSegmentID(testTP), StartOffset: 100, EndOffset: 199, SegmentSize: 4096,
		LeaderEpochs: []EpochEntry{{3, 100}, {5, 150}}}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(*SegmentMetadata){
		"no segment id":        func(m *SegmentMetadata) { m.ID.ID = Uuid{} },
		"no topic id":          func(m *SegmentMetadata) { m.ID.TopicID = Uuid{} },
		"end before start":     func(m *SegmentMetadata) { m.EndOffset = 99 },
		"negative start":       func(m *SegmentMetadata) { m.StartOffset = -1 },
		"no epochs":            func(m *SegmentMetadata) { m.LeaderEpochs = nil },
		"epochs out of order":  func(m *SegmentMetadata) { m.LeaderEpochs = []EpochEntry{{5, 100}, {3, 150}} },
		"epoch past the end":   func(m *SegmentMetadata) { m.LeaderEpochs = []EpochEntry{{3, 100}, {5, 200}} },
		"epoch offsets shrink": func(m *SegmentMetadata) { m.LeaderEpochs = []EpochEntry{{3, 150}, {5, 120}} },
		"negative size":        func(m *SegmentMetadata) { m.SegmentSize = -1 },
	} {
		m := good
		m.LeaderEpochs = append([]EpochEntry(nil), good.LeaderEpochs...)
		change(&m)
		if err := m.Validate(); !errors.Is(err, ErrInvalidMetadata) {
			t.Errorf("%s: Validate = %v", name, err)
		}
	}
}

// TestStateTransitions is Kafka's RemoteLogSegmentState.isValidTransition.
func TestStateTransitions(t *testing.T) {
	states := []SegmentState{CopySegmentStarted, CopySegmentFinished, DeleteSegmentStarted, DeleteSegmentFinished}
	valid := map[[2]SegmentState]bool{
		{CopySegmentStarted, CopySegmentFinished}:     true,
		{CopySegmentStarted, DeleteSegmentStarted}:    true,
		{CopySegmentFinished, DeleteSegmentStarted}:   true,
		{DeleteSegmentStarted, DeleteSegmentStarted}:  true,
		{DeleteSegmentStarted, DeleteSegmentFinished}: true,
	}
	for _, from := range states {
		for _, to := range states {
			if got := ValidTransition(from, to); got != valid[[2]SegmentState{from, to}] {
				t.Errorf("%v -> %v: %v", from, to, got)
			}
		}
	}
}
