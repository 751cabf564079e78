package engine

import (
	"errors"
	"os"
	"slices"
	"sync"
	"testing"
	"time"
)

// deletedSegment is a segment of size bytes in dir, marked deleted and held
// by its owner's reference only.
func deletedSegment(t *testing.T, m *Manager, dir string, base int64, size int) *segment {
	t.Helper()
	cfg := DefaultLogConfig()
	s, err := createSegment(m, dir, base, &cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.log.WriteAt(make([]byte, size), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.markDeleted(); err != nil {
		t.Fatal(err)
	}
	return s
}

func segmentFilesLeft(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestDeletedSegmentsRemovedInSteps: a released deleted segment larger than
// a step is cut down a step at a time in the background, one segment after
// another, then removed; a small one goes at once; Close finishes what is
// left without its pauses.
func TestDeletedSegmentsRemovedInSteps(t *testing.T) {
	m := openTest(t, []string{t.TempDir()}, SyncNone, nil)
	defer m.Close()
	var mu sync.Mutex
	var cuts []int64
	m.rm.step, m.rm.pause = 64<<10, 20*time.Millisecond
	m.rm.onCut = func(size int64) {
		mu.Lock()
		cuts = append(cuts, size)
		mu.Unlock()
	}
	dir := t.TempDir()
	small := deletedSegment(t, m, dir, 0, 10<<10)
	small.release()
	if left := segmentFilesLeft(t, dir); len(left) != 0 {
		t.Fatalf("a small deleted segment's files left after its release: %v", left)
	}

	big := []*segment{deletedSegment(t, m, dir, 100, 256<<10), deletedSegment(t, m, dir, 200, 200<<10)}
	// The releases return while the remover is held: its cuts are not the caller's.
	m.rm.mu.Lock()
	released := make(chan struct{})
	go func() {
		for _, s := range big {
			s.release()
		}
		close(released)
	}()
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("a release waited for the remover: the cuts ran on the caller")
	}
	m.rm.mu.Unlock()
	m.bg.Wait()
	if left := segmentFilesLeft(t, dir); len(left) != 0 {
		t.Fatalf("files left once the removals finished: %v", left)
	}
	mu.Lock()
	got := slices.Clone(cuts)
	mu.Unlock()
	// One segment after the other: 256 KiB to 192, 128, 64; 200 KiB to 136, 72, 8
	// (in either order of the two).
	a, b := []int64{192 << 10, 128 << 10, 64 << 10}, []int64{136 << 10, 72 << 10, 8 << 10}
	if !slices.Equal(got, append(slices.Clone(a), b...)) && !slices.Equal(got, append(slices.Clone(b), a...)) {
		t.Fatalf("cuts %v, want each segment cut down by a step at a time, one segment after the other", got)
	}

	// Close: a removal under way finishes without pauses, later ones inline.
	m.rm.pause = time.Hour
	s := deletedSegment(t, m, dir, 300, 1<<20)
	s.release()
	done := make(chan error, 1)
	go func() { done <- m.Close() }()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, ErrClosed) {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for a removal's pauses")
	}
	late := deletedSegment(t, m, dir, 400, 1<<20)
	late.release()
	if left := segmentFilesLeft(t, dir); len(left) != 0 {
		t.Fatalf("files left after Close: %v", left)
	}
}
