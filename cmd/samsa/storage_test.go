package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/samsa-broker/samsa/coordinator/metadata"
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
	scram := 0
	for _, r := range recs {
		if _, ok := r.(*metadata.UserScramCredentialRecord); ok {
			scram++
		}
	}
	// The feature levels come first (TestStorageFormatFeatures), then the credentials.
	if err != nil || scram != 2 || len(recs) < 3 {
		t.Fatalf("bootstrap records: %v %v", recs, err)
	}
	if recs, _ := node.ReadBootstrap(filepath.Join(dir, "l1")); len(recs) != 0 {
		t.Fatal("bootstrap records in a log directory")
	}
}

// TestStorageFormatFeatures: `samsa storage format --release-version V --feature
// name=level` writes the feature levels the metadata log starts with (Kafka's
// kafka-storage.sh format): the release's defaults, a --feature over them, the node
// key samsa.transaction.version where no --feature names transaction.version; levels
// Samsa does not support, or that break a dependency, format nothing.
func TestStorageFormatFeatures(t *testing.T) {
	conf := func(dir, extra string) string {
		return writeFile(t, fmt.Sprintf(`process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:19093
listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:19093
controller.listener.names=CONTROLLER
log.dirs=%s
metadata.log.dir=%s
%s
`, filepath.Join(dir, "l1"), filepath.Join(dir, "meta"), extra))
	}
	levels := func(dir string) map[string]int16 {
		t.Helper()
		recs, err := node.ReadBootstrap(filepath.Join(dir, "meta"))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int16{}
		for _, r := range recs {
			if fl, ok := r.(*metadata.FeatureLevelRecord); ok {
				out[fl.Name] = fl.Level
			}
		}
		return out
	}
	for _, tc := range []struct {
		name, extra string
		flags       formatFlags
		want        map[string]int16 // nil: refused
	}{
		{name: "default", want: map[string]int16{"metadata.version": 33, "transaction.version": 2, "group.version": 1, "share.version": 1, "streams.version": 1,
			"eligible.leader.replicas.version": 1}},
		{name: "release 4.0", flags: formatFlags{release: "4.0"}, want: map[string]int16{"metadata.version": 25, "transaction.version": 2, "group.version": 1}},
		{name: "release 3.9 with streams", flags: formatFlags{release: "3.9", features: multiFlag{"streams.version=1"}},
			want: map[string]int16{"metadata.version": 21, "streams.version": 1}},
		{name: "the old key", extra: "samsa.transaction.version=1", want: map[string]int16{"metadata.version": 33, "transaction.version": 1, "group.version": 1, "share.version": 1, "streams.version": 1,
			"eligible.leader.replicas.version": 1}},
		{name: "a --feature over the old key", extra: "samsa.transaction.version=1", flags: formatFlags{features: multiFlag{"transaction.version=0"}},
			want: map[string]int16{"metadata.version": 33, "group.version": 1, "share.version": 1, "streams.version": 1, "eligible.leader.replicas.version": 1}},
		{name: "metadata.version as a feature", flags: formatFlags{features: multiFlag{"metadata.version=27"}},
			want: map[string]int16{"metadata.version": 27, "transaction.version": 2, "group.version": 1, "eligible.leader.replicas.version": 1}},
		{name: "release 4.0 with eligible leader replicas", flags: formatFlags{release: "4.0", features: multiFlag{"eligible.leader.replicas.version=1"}},
			want: map[string]int16{"metadata.version": 25, "transaction.version": 2, "group.version": 1, "eligible.leader.replicas.version": 1}},
		{name: "eligible leader replicas need 4.0-IV1", flags: formatFlags{release: "4.0-IV0", features: multiFlag{"eligible.leader.replicas.version=1"}}},
		{name: "both", flags: formatFlags{release: "4.0", features: multiFlag{"metadata.version=25"}}},
		{name: "a dependency", flags: formatFlags{release: "4.0", features: multiFlag{"share.version=1"}}},
		{name: "not supported", flags: formatFlags{features: multiFlag{"eligible.leader.replicas.version=2"}}},
		{name: "unknown feature", flags: formatFlags{features: multiFlag{"colour.version=1"}}},
		{name: "unknown release", flags: formatFlags{release: "3.7"}},
		{name: "not a level", flags: formatFlags{features: multiFlag{"group.version"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var out bytes.Buffer
			err := storageFormatWith(&out, conf(dir, tc.extra), node.RandomUUID(), tc.flags)
			if tc.want == nil {
				if err == nil {
					t.Fatalf("formatted:\n%s", out.String())
				}
				if _, err := node.ReadMetaProperties(filepath.Join(dir, "meta")); err == nil {
					t.Fatal("a refused format wrote meta.properties")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := levels(dir); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("levels %v, want %v", got, tc.want)
			}
			mv, _ := metadata.MetadataVersionOf(tc.want["metadata.version"])
			if !strings.Contains(out.String(), "Writing metadata.version "+mv.String()+" and the feature levels ") {
				t.Fatalf("output:\n%s", out.String())
			}
		})
	}
	// Through the command line.
	dir := t.TempDir()
	if code := runStorage([]string{"format", "-c", conf(dir, ""), "-t", node.RandomUUID(), "-r", "4.2", "-f", "streams.version=0"}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if got := levels(dir); got["metadata.version"] != 29 || got["streams.version"] != 0 || got["share.version"] != 1 {
		t.Fatalf("levels %v", got)
	}
}
