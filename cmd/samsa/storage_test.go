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

// `samsa storage format --add-scram` (Kafka's syntax) writes the credentials into the
// metadata directory of a controller only; a malformed one formats nothing.
func TestStorageFormatAddScram(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, fmt.Sprintf(`process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:19093,2@127.0.0.1:19193,3@127.0.0.1:19293
listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:19093
controller.listener.names=CONTROLLER
log.dirs=%s
metadata.log.dir=%s
`, filepath.Join(dir, "l1"), filepath.Join(dir, "meta")))
	id := node.RandomUUID()
	if code := runStorage([]string{"format", "--config", file, "--cluster-id", id, "--add-scram", "SCRAM-SHA-256=[name=alice]"}); code != 1 {
		t.Fatalf("a credential without a password: exit %d", code)
	}
	if _, err := node.ReadMetaProperties(filepath.Join(dir, "meta")); err == nil {
		t.Fatal("formatted despite a refused --add-scram")
	}
	var out bytes.Buffer
	if err := storageFormat(&out, file, id, false, "SCRAM-SHA-256=[name=alice,password=alice-secret]", `SCRAM-SHA-512=[name=bob,iterations=8192,password="b,ob"]`); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Writing 2 SCRAM credential(s) into "+filepath.Join(dir, "meta", node.BootstrapRecordsFile)) {
		t.Fatalf("output:\n%s", out.String())
	}
	recs, err := node.ReadBootstrap(filepath.Join(dir, "meta"))
	if err != nil || len(recs) != 2 {
		t.Fatalf("bootstrap records: %v %v", recs, err)
	}
	if recs, _ := node.ReadBootstrap(filepath.Join(dir, "l1")); len(recs) != 0 {
		t.Fatal("bootstrap records in a log directory")
	}
}
