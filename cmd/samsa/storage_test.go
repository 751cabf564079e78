package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/samsa-broker/samsa/net/node"
)

// TestStorageFormat: `samsa storage format` writes every directory of the node; a
// node of a cluster refuses to start before it, with the command to run.
func TestStorageFormat(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, fmt.Sprintf(`process.roles=broker,controller
node.id=2
controller.quorum.voters=1@127.0.0.1:19093,2@127.0.0.1:19193,3@127.0.0.1:19293
listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:19193
controller.listener.names=CONTROLLER
log.dirs=%s,%s
metadata.log.dir=%s
`, filepath.Join(dir, "l1"), filepath.Join(dir, "l2"), filepath.Join(dir, "meta")))
	cfg, err := loadConfig([]string{"--config", file, "--admin-listen", ""}, nil, slog.New(slog.DiscardHandler), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := startNode(cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "samsa storage format --config") {
		t.Fatalf("unformatted cluster node: %v", err)
	}
	if err := storageFormat(io.Discard, file, "", false); err == nil || !strings.Contains(err.Error(), "random-uuid") {
		t.Fatalf("no cluster id: %v", err)
	}
	id := node.RandomUUID()
	var out bytes.Buffer
	if err := storageFormat(&out, file, id, false); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "Formatting "); n != 3 || !strings.Contains(out.String(), "metadata directory "+filepath.Join(dir, "meta")) {
		t.Errorf("output:\n%s", out.String())
	}
	for _, d := range []string{"l1", "l2", "meta"} {
		mp, err := node.ReadMetaProperties(filepath.Join(dir, d))
		if err != nil || mp.ClusterID != id || mp.NodeID != 2 {
			t.Errorf("%s: %+v %v", d, mp, err)
		}
	}
	if err := storageFormat(io.Discard, file, id, false); err == nil || !strings.Contains(err.Error(), "--ignore-formatted") {
		t.Fatalf("second format: %v", err)
	}
	out.Reset()
	if err := storageFormat(&out, file, id, true); err != nil || !strings.Contains(out.String(), "already formatted") {
		t.Fatalf("--ignore-formatted: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := storageInfo(&out, file); err != nil || strings.Count(out.String(), id) != 3 {
		t.Fatalf("info: %v\n%s", err, out.String())
	}
	// Formatted: the storage check passes and the node starts (its broker serves
	// once a quorum forms, which this test does not run).
	n, err := startNode(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("formatted cluster node: %v", err)
	}
	stopTestServer(t, n)
}
