package quorum

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

func writeLegacyStore(t *testing.T, dir string, topics ...string) {
	t.Helper()
	st, err := metadata.OpenStore(dir, metadata.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range topics {
		if err := st.Append(topic(name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Append(&metadata.ConfigRecord{Resource: metadata.ResourceTopic, Name: topics[0], Key: "retention.ms", Value: metadata.StringPtr("1000")}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestImportLegacyStoreSameDir: the single-node store in <data.dir>/meta becomes
// the raft log's offset 1 in the same directory; its files move aside; a second
// start imports nothing.
func TestImportLegacyStoreSameDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "meta")
	writeLegacyStore(t, dir, "orders", "payments")
	want := encodeImage(mustApply(t, topic("orders"), topic("payments"),
		&metadata.ConfigRecord{Resource: metadata.ResourceTopic, Name: "orders", Key: "retention.ms", Value: metadata.StringPtr("1000")}))

	start := func() (*Quorum, *DiskStorage, *LegacyImport) {
		imp, err := ImportLegacyStore(dir, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		st, err := OpenDiskStorage(dir, DiskOptions{LegacyImported: imp.Found()})
		if err != nil {
			t.Fatal(err)
		}
		q, err := New(Config{NodeID: 0, Voters: []int32{0}, BootstrapRecords: imp.Records}, st, dropTransport{})
		if err != nil {
			t.Fatal(err)
		}
		if err := q.HandleReady(); err != nil {
			t.Fatal(err)
		}
		return q, st, imp
	}
	q, st, imp := start()
	if len(imp.Records) != 3 {
		t.Fatalf("imported %d records, want 3", len(imp.Records))
	}
	if _, im := q.Committed(); string(encodeImage(im)) != string(want) {
		t.Fatal("the raft image is not the legacy store's")
	}
	if off, _, data, _ := q.Snapshot(); off != 1 || string(data) != string(want) {
		t.Fatalf("bootstrap snapshot at %d does not hold the imported image", off)
	}
	if err := imp.Done(); err != nil {
		t.Fatal(err)
	}
	if files, _ := legacyFiles(dir); len(files) != 0 {
		t.Fatalf("legacy files left in the raft directory: %v", files)
	}
	if files, _ := legacyFiles(dir + LegacyAsideSuffix); len(files) == 0 {
		t.Fatal("legacy files not moved aside")
	}
	// The legacy store still opens where it was moved (nothing was deleted).
	old, err := metadata.OpenStore(dir+LegacyAsideSuffix, metadata.StoreOptions{})
	if err != nil || old.Image().NumTopics() != 2 {
		t.Fatalf("moved store: %v", err)
	}
	old.Close()
	st.Close()

	q, st, imp = start()
	defer st.Close()
	if imp.Records != nil {
		t.Fatal("a second start imported again")
	}
	if _, im := q.Committed(); string(encodeImage(im)) != string(want) {
		t.Fatal("the image did not survive the restart")
	}
}

// TestLegacyStoreNotImportedIsRefused: opening the raft storage on a directory that
// holds a single-node store, without importing it, fails instead of starting an
// empty log beside it.
func TestLegacyStoreNotImportedIsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "meta")
	writeLegacyStore(t, dir, "a")
	if _, err := OpenDiskStorage(dir, DiskOptions{}); !errors.Is(err, ErrLegacyStore) {
		t.Fatalf("open beside a single-node store: %v", err)
	}
}

// TestImportLegacyStoreInterrupted: a crash after the bootstrap but before Done
// leaves both; the next start imports nothing and Done finishes the move.
func TestImportLegacyStoreInterrupted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "meta")
	writeLegacyStore(t, dir, "a")
	imp, err := ImportLegacyStore(dir, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := OpenDiskStorage(dir, DiskOptions{LegacyImported: imp.Found()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{NodeID: 0, Voters: []int32{0}, BootstrapRecords: imp.Records}, st, dropTransport{}); err != nil {
		t.Fatal(err)
	}
	st.Close() // crash before Done

	imp, err = ImportLegacyStore(dir, dir, nil)
	if err != nil || imp.Records != nil {
		t.Fatalf("after the bootstrap: records %v, %v", imp.Records, err)
	}
	if err := imp.Done(); err != nil {
		t.Fatal(err)
	}
	if files, _ := legacyFiles(dir); len(files) != 0 {
		t.Fatalf("legacy files left: %v", files)
	}
}

// TestImportLegacyStoreOtherDir: a legacy directory apart from the raft directory
// is renamed aside whole.
func TestImportLegacyStoreOtherDir(t *testing.T) {
	root := t.TempDir()
	legacy, raftDir := filepath.Join(root, "meta"), filepath.Join(root, "raft")
	writeLegacyStore(t, legacy, "a", "b")
	imp, err := ImportLegacyStore(legacy, raftDir, nil)
	if err != nil || len(imp.Records) != 3 {
		t.Fatalf("import: %d records, %v", len(imp.Records), err)
	}
	st := openDisk(t, nil, raftDir)
	defer st.Close()
	if _, err := New(Config{NodeID: 0, Voters: []int32{0}, BootstrapRecords: imp.Records}, st, dropTransport{}); err != nil {
		t.Fatal(err)
	}
	if err := imp.Done(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(legacy); !os.IsNotExist(err) {
		t.Fatalf("legacy directory still there: %v", err)
	}
	if files, _ := legacyFiles(legacy + LegacyAsideSuffix); len(files) == 0 {
		t.Fatal("legacy directory not renamed aside")
	}
}

// TestImportNeedsOneVoter: bootstrap records with several voters are refused.
func TestImportNeedsOneVoter(t *testing.T) {
	_, err := New(Config{NodeID: 1, Voters: []int32{1, 2, 3}, BootstrapRecords: []metadata.Record{topic("a")}}, NewMemStorage(), dropTransport{})
	if err == nil {
		t.Fatal("bootstrap records with three voters were accepted")
	}
}

func mustApply(t *testing.T, recs ...metadata.Record) *metadata.Image {
	t.Helper()
	im, err := (&metadata.Image{}).Apply(recs...)
	if err != nil {
		t.Fatal(err)
	}
	return im
}
