package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/samsa-broker/samsa/engine"
)

func newManager(t *testing.T, cfg Config) *StorageManager {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// reads reads a fetched object whole: reads{t: t}.all(m.FetchIndex(...)).
type reads struct{ t *testing.T }

func (r reads) all(rc io.ReadCloser, err error) []byte {
	t := r.t
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCopyFetch copies a segment the engine wrote, with its indexes, and
// reads everything back byte for byte: the whole segment, ranges of it
// (one starting at each batch, as a fetch from an offset does) and each
// index type. The objects lie under Aiven's keys.
func TestCopyFetch(t *testing.T) {
	g := startGateway(t)
	g.makeBucket(t, "tiered")
	cfg := g.config("tiered")
	cfg.KeyPrefix = "cluster-a/"
	m := newManager(t, cfg)
	s := writeSegment(t, testTP)
	ctx := context.Background()
	if err := m.CopyLogSegmentData(ctx, &s.md, &s.data); err != nil {
		t.Fatal(err)
	}

	// The keys, as files of the gateway's posix backend.
	dir := filepath.Join(g.root, "tiered", "cluster-a", "orders-"+testTP.TopicID.String(), "7")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	stem := "00000000000000000000-" + s.md.ID.ID.String() + "."
	want := []string{stem + "index", stem + "leader-epoch-checkpoint", stem + "log", stem + "rsm-manifest", stem + "snapshot", stem + "timeindex", stem + "txnindex"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("objects:\n got %v\nwant %v", got, want)
	}

	log := s.files[suffixLog]
	if b := (reads{t: t}).all(m.FetchLogSegment(ctx, &s.md, 0)); !bytes.Equal(b, log) {
		t.Fatalf("segment read back: %d bytes, want %d, equal %v", len(b), len(log), bytes.Equal(b, log))
	}
	// From the position of each batch to the end, and each batch alone.
	batches := 0
	pos := int64(0)
	if err := engine.ForEachBatch(log, func(h engine.BatchHeader, raw []byte) error {
		if batches%7 == 0 {
			if b := (reads{t: t}).all(m.FetchLogSegment(ctx, &s.md, pos)); !bytes.Equal(b, log[pos:]) {
				t.Fatalf("from %d: %d bytes, want %d", pos, len(b), len(log)-int(pos))
			}
		}
		if b := (reads{t: t}).all(m.FetchLogSegmentRange(ctx, &s.md, pos, pos+int64(len(raw))-1)); !bytes.Equal(b, raw) {
			t.Fatalf("batch at offset %d (position %d): read %d bytes, want %d", h.BaseOffset, pos, len(b), len(raw))
		}
		pos += int64(len(raw))
		batches++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// An end past the segment is cut to its last byte; a start past it is refused.
	if b := (reads{t: t}).all(m.FetchLogSegmentRange(ctx, &s.md, pos-10, pos+1000)); !bytes.Equal(b, log[pos-10:]) {
		t.Fatalf("last 10 bytes: got %d bytes", len(b))
	}
	if _, err := m.FetchLogSegment(ctx, &s.md, s.md.SegmentSize); err == nil {
		t.Fatal("a fetch from past the segment's end succeeded")
	}

	for _, it := range IndexTypes {
		sfx, _ := indexSuffix(it)
		if b := (reads{t: t}).all(m.FetchIndex(ctx, &s.md, it)); !bytes.Equal(b, s.files[sfx]) {
			t.Errorf("index %v: %d bytes, want %d", it, len(b), len(s.files[sfx]))
		}
	}
	t.Logf("segment of %d bytes, %d batches, offsets [%d, %d]", len(log), batches, s.md.StartOffset, s.md.EndOffset)
}

// TestTwoLeadersNeverCollide: two leaders copy the same offsets (a copy cut
// by a failover, then the new leader's); each copy has its own segment id
// and its own objects, and deleting one leaves the other whole.
func TestTwoLeadersNeverCollide(t *testing.T) {
	g := startGateway(t)
	g.makeBucket(t, "tiered")
	m := newManager(t, g.config("tiered"))
	ctx := context.Background()
	a := writeSegment(t, testTP)
	b := *a
	b.md.ID = NewSegmentID(testTP)
	b.md.BrokerID = 2
	// The new leader's checkpoint: its own epoch after the two of the first.
	b.data.LeaderEpochIndex = append(bytes.Replace(a.data.LeaderEpochIndex, []byte("0\n2\n"), []byte("0\n3\n"), 1), "6 402\n"...)
	if bytes.Equal(a.data.LeaderEpochIndex, b.data.LeaderEpochIndex[:len(a.data.LeaderEpochIndex)]) {
		t.Fatalf("the first leader's checkpoint is not of two entries: %q", a.data.LeaderEpochIndex)
	}
	if a.md.ID == b.md.ID || m.ObjectKey(&a.md, suffixLog) == m.ObjectKey(&b.md, suffixLog) {
		t.Fatalf("two copies share a key: %s", m.ObjectKey(&a.md, suffixLog))
	}
	for _, s := range []*sealedSegment{a, &b} {
		if err := m.CopyLogSegmentData(ctx, &s.md, &s.data); err != nil {
			t.Fatal(err)
		}
	}
	if got := (reads{t: t}).all(m.FetchIndex(ctx, &b.md, IndexLeaderEpoch)); !bytes.Equal(got, b.data.LeaderEpochIndex) {
		t.Fatalf("second copy's epochs: %q", got)
	}
	if err := m.DeleteLogSegmentData(ctx, &a.md); err != nil {
		t.Fatal(err)
	}
	if got := (reads{t: t}).all(m.FetchLogSegment(ctx, &b.md, 0)); !bytes.Equal(got, b.files[suffixLog]) {
		t.Fatal("the second copy changed when the first was deleted")
	}
	if got := (reads{t: t}).all(m.FetchIndex(ctx, &b.md, IndexLeaderEpoch)); !bytes.Equal(got, b.data.LeaderEpochIndex) {
		t.Fatalf("second copy's epochs after the delete: %q", got)
	}
	if _, err := m.FetchLogSegment(ctx, &a.md, 0); !errors.Is(err, ErrRemoteResourceNotFound) {
		t.Fatalf("the deleted copy: %v", err)
	}
}

// TestDelete: after DeleteLogSegmentData no object of the copy is left and
// every fetch says the resource is not found; deleting again succeeds.
// A segment copied without a transaction index has none to fetch.
func TestDelete(t *testing.T) {
	g := startGateway(t)
	g.makeBucket(t, "tiered")
	m := newManager(t, g.config("tiered"))
	ctx := context.Background()
	s := writeSegment(t, testTP)
	s.data.TransactionIndex = ""
	if err := m.CopyLogSegmentData(ctx, &s.md, &s.data); err != nil {
		t.Fatal(err)
	}
	if _, err := m.FetchIndex(ctx, &s.md, IndexTransaction); !errors.Is(err, ErrRemoteResourceNotFound) {
		t.Fatalf("transaction index of a copy without one: %v", err)
	}
	for i := 0; i < 2; i++ {
		if err := m.DeleteLogSegmentData(ctx, &s.md); err != nil {
			t.Fatalf("delete %d: %v", i+1, err)
		}
	}
	if _, err := m.FetchLogSegment(ctx, &s.md, 0); !errors.Is(err, ErrRemoteResourceNotFound) || !errors.Is(err, ErrRemoteStorage) {
		t.Fatalf("fetch of a deleted segment: %v", err)
	}
	for _, it := range IndexTypes {
		if _, err := m.FetchIndex(ctx, &s.md, it); !errors.Is(err, ErrRemoteResourceNotFound) {
			t.Fatalf("index %v of a deleted segment: %v", it, err)
		}
	}
	var left []string
	filepath.WalkDir(filepath.Join(g.root, "tiered"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, p)
		}
		return nil
	})
	if len(left) > 0 {
		t.Fatalf("objects left after the delete: %v", left)
	}
}

// TestErrors: a missing bucket, wrong credentials and a missing object each
// come back as their own error, naming the bucket and key.
func TestErrors(t *testing.T) {
	g := startGateway(t)
	g.makeBucket(t, "tiered")
	ctx := context.Background()
	s := writeSegment(t, testTP)

	noBucket := newManager(t, g.config("no-such-bucket"))
	err := noBucket.CopyLogSegmentData(ctx, &s.md, &s.data)
	if !errors.Is(err, ErrBucketNotFound) || !strings.Contains(err.Error(), "s3://no-such-bucket/") {
		t.Fatalf("copy to a missing bucket: %v", err)
	}
	t.Logf("missing bucket: %v", err)
	if _, err := noBucket.FetchLogSegment(ctx, &s.md, 0); !errors.Is(err, ErrBucketNotFound) {
		t.Fatalf("fetch from a missing bucket: %v", err)
	}

	cfg := g.config("tiered")
	cfg.SecretAccessKey = "wrong" + cfg.SecretAccessKey
	err = newManager(t, cfg).CopyLogSegmentData(ctx, &s.md, &s.data)
	if !errors.Is(err, ErrAccessDenied) {
		t.Fatalf("copy with a wrong secret key: %v", err)
	}
	t.Logf("wrong secret key: %v", err)
	cfg = g.config("tiered")
	cfg.AccessKeyID = "nobody"
	if _, err := newManager(t, cfg).FetchIndex(ctx, &s.md, IndexOffset); !errors.Is(err, ErrAccessDenied) {
		t.Fatalf("fetch with an unknown access key: %v", err)
	}

	m := newManager(t, g.config("tiered"))
	wrongSize := s.md
	wrongSize.SegmentSize++
	if err := m.CopyLogSegmentData(ctx, &wrongSize, &s.data); !errors.Is(err, ErrInvalidMetadata) || errors.Is(err, ErrRemoteStorage) {
		t.Fatalf("copy with a size that is not the file's: %v", err)
	}
	_, err = m.FetchLogSegment(ctx, &s.md, 0)
	if !errors.Is(err, ErrRemoteResourceNotFound) || !strings.Contains(err.Error(), m.ObjectKey(&s.md, suffixLog)) {
		t.Fatalf("fetch of a segment never copied: %v", err)
	}
	t.Logf("missing object: %v", err)
}

// TestStoreGoneMidRead: a read whose server is killed, or stops answering,
// fails within the attempt timeout rather than hanging; a copy to a server
// that is gone fails at once.
func TestStoreGoneMidRead(t *testing.T) {
	ctx := context.Background()
	for _, how := range []string{"killed", "stopped"} {
		t.Run(how, func(t *testing.T) {
			g := startGateway(t)
			g.makeBucket(t, "tiered")
			cfg := g.config("tiered")
			cfg.AttemptTimeout = 500 * time.Millisecond
			m := newManager(t, cfg)
			// A segment large enough that its body outlasts the socket buffers.
			big := filepath.Join(t.TempDir(), "big.log")
			if err := os.WriteFile(big, bytes.Repeat([]byte("0123456789abcdef"), 2<<20), 0o644); err != nil {
				t.Fatal(err)
			}
			s := writeSegment(t, testTP)
			s.data.LogSegment, s.md.SegmentSize = big, 32<<20
			if err := m.CopyLogSegmentData(ctx, &s.md, &s.data); err != nil {
				t.Fatal(err)
			}
			rc, err := m.FetchLogSegment(ctx, &s.md, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			if _, err := io.ReadFull(rc, make([]byte, 4096)); err != nil {
				t.Fatal(err)
			}
			if how == "killed" {
				g.kill()
			} else {
				g.pause(t)
			}
			start := time.Now()
			done := make(chan error, 1)
			go func() { _, err := io.Copy(io.Discard, rc); done <- err }()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the read still hangs 10 s after the server went")
			}
			if !errors.Is(err, ErrRemoteStorage) {
				t.Fatalf("read after the server %s: %v", how, err)
			}
			if how == "stopped" && !errors.Is(err, ErrTimeout) {
				t.Fatalf("read from a stopped server: %v, want a timeout", err)
			}
			t.Logf("%s: error after %v: %v", how, time.Since(start).Round(time.Millisecond), err)
			if how == "killed" {
				s.md.ID = NewSegmentID(testTP)
				if err := m.CopyLogSegmentData(ctx, &s.md, &s.data); !errors.Is(err, ErrRemoteStorage) {
					t.Fatalf("copy to a killed server: %v", err)
				}
			}
		})
	}
}

// TestCopyVisibleAtOnce: a copy whose multipart upload outlasts the attempt
// timeout is readable as soon as CopyLogSegmentData returns. (With the
// attempt timeout on an upload's answer, a CompleteMultipartUpload cut and
// retried was answered 200 by versitygw before the object was readable: a
// fetch right after the copy found no key in about 1 copy of 8.)
func TestCopyVisibleAtOnce(t *testing.T) {
	g := startGateway(t)
	g.makeBucket(t, "tiered")
	cfg := g.config("tiered")
	cfg.AttemptTimeout = 150 * time.Millisecond
	m := newManager(t, cfg)
	reader := newManager(t, g.config("tiered")) // reads with the usual timeouts: a loaded machine may be slow to answer
	ctx := context.Background()
	big := filepath.Join(t.TempDir(), "big.log")
	if err := os.WriteFile(big, bytes.Repeat([]byte("0123456789abcdef"), 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	s := writeSegment(t, testTP)
	s.data.LogSegment, s.md.SegmentSize = big, 32<<20
	for i := 0; i < 4; i++ {
		s.md.ID = NewSegmentID(testTP)
		if err := m.CopyLogSegmentData(ctx, &s.md, &s.data); err != nil {
			t.Fatal(err)
		}
		rc, err := reader.FetchLogSegmentRange(ctx, &s.md, s.md.SegmentSize-16, s.md.SegmentSize-1)
		if err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
		if b := (reads{t: t}).all(rc, nil); string(b) != "0123456789abcdef" {
			t.Fatalf("copy %d: last 16 bytes %q", i, b)
		}
	}
}
