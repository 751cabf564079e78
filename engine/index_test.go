package engine

import (
	"math/rand"
	"path/filepath"
	"sort"
	"testing"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// TestIndexLookupMatchesNaive checks the summary + warm-tail searches of both
// indexes against sort.Search, across appends, truncation and reopening.
func TestIndexLookupMatchesNaive(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(3))
	oi, _, err := openIndex(vfs.Default, filepath.Join(dir, "x.index"), offsetEntrySize, 1<<16, true)
	if err != nil {
		t.Fatal(err)
	}
	ti, _, err := openIndex(vfs.Default, filepath.Join(dir, "x.timeindex"), timeEntrySize, 1<<16, true)
	if err != nil {
		t.Fatal(err)
	}
	o := &offsetIndex{mmapIndex: *oi, base: 500}
	tx := &timeIndex{mmapIndex: *ti, base: 500}
	o.rebuildSumLocked()
	tx.rebuildSumLocked()
	var offs, poss, tss []int64
	off, pos, ts := int64(500), int64(0), int64(1000)
	for i := 0; i < 5000; i++ {
		off += 1 + rng.Int63n(20)
		pos += 1 + rng.Int63n(5000)
		ts += 1 + rng.Int63n(50)
		if o.fullFor(1) || tx.fullFor(1) {
			break
		}
		o.appendEntryLocked(off, pos)
		tx.maybeAppendLocked(ts, off)
		offs, poss, tss = append(offs, off), append(poss, pos), append(tss, ts)
	}
	check := func(stage string) {
		t.Helper()
		n := o.entries
		for k := 0; k < 3000; k++ {
			target := 400 + rng.Int63n(off+50-400)
			i := sort.Search(n, func(i int) bool { return offs[i] > target }) - 1
			gotOff, gotPos, ok := o.lookup(target)
			if (i >= 0) != ok || ok && (gotOff != offs[i] || gotPos != poss[i]) {
				t.Fatalf("%s: lookup(%d) = %d,%d,%v; want index %d", stage, target, gotOff, gotPos, ok, i)
			}
			tt := 900 + rng.Int63n(ts+50-900)
			j := sort.Search(n, func(i int) bool { return tss[i] >= tt }) - 1
			gotT, okT := tx.lookupBelow(tt)
			if (j >= 0) != okT || okT && gotT != offs[j] {
				t.Fatalf("%s: lookupBelow(%d) = %d,%v; want index %d", stage, tt, gotT, okT, j)
			}
		}
	}
	if !o.sumOK || len(o.sum) != (o.entries+sumEvery-1)/sumEvery || len(tx.sum) != (tx.entries+sumEvery-1)/sumEvery {
		t.Fatalf("summary out of step: %d keys for %d entries", len(o.sum), o.entries)
	}
	check("appended")
	cut := offs[len(offs)/3]
	o.truncateToLocked(cut)
	tx.truncateToLocked(cut)
	n := sort.Search(len(offs), func(i int) bool { return offs[i] >= cut })
	offs, poss, tss = offs[:n], poss[:n], tss[:n]
	if o.entries != n || tx.entries != n {
		t.Fatalf("truncated to %d/%d entries, want %d", o.entries, tx.entries, n)
	}
	check("truncated")
	if err := o.mapReadOnlyLocked(); err != nil {
		t.Fatal(err)
	}
	if err := tx.mapReadOnlyLocked(); err != nil {
		t.Fatal(err)
	}
	check("read-only")
	o.closeLocked()
	tx.closeLocked()
	oi, _, _ = openIndex(vfs.Default, filepath.Join(dir, "x.index"), offsetEntrySize, 1<<16, false)
	ti, _, _ = openIndex(vfs.Default, filepath.Join(dir, "x.timeindex"), timeEntrySize, 1<<16, false)
	o = &offsetIndex{mmapIndex: *oi, base: 500}
	tx = &timeIndex{mmapIndex: *ti, base: 500}
	defer o.closeLocked()
	defer tx.closeLocked()
	check("reopened, no summary")
	o.rebuildSumLocked()
	tx.rebuildSumLocked()
	if !o.sumOK || len(o.sum) != (o.entries+sumEvery-1)/sumEvery {
		t.Fatalf("summary of %d entries has %d keys", o.entries, len(o.sum))
	}
	check("reopened")
}
