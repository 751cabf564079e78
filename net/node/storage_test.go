package node

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func clusterCfg(t *testing.T, dir string, id string) *Config {
	t.Helper()
	voters := "1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293"
	port := map[string]string{"1": "9093", "2": "9193", "3": "9293"}[id]
	c, err := FromKeys(map[string]string{"process.roles": "broker,controller", "node.id": id, "controller.quorum.voters": voters,
		"controller.listener.names": "CONTROLLER", "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:" + port,
		"log.dirs": filepath.Join(dir, "a") + "," + filepath.Join(dir, "b"), "metadata.log.dir": filepath.Join(dir, "meta")})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var discard = slog.New(slog.DiscardHandler)

func TestFormat(t *testing.T) {
	dir := t.TempDir()
	cfg := clusterCfg(t, dir, "1")
	if _, err := checkStorage(cfg, discard); err == nil || !strings.Contains(err.Error(), "samsa storage format") {
		t.Fatalf("unformatted node started: %v", err)
	}
	if _, err := Format(cfg, "not-a-uuid", false); err == nil || !strings.Contains(err.Error(), "random-uuid") {
		t.Fatalf("bad cluster id: %v", err)
	}
	id := RandomUUID()
	res, err := Format(cfg, id, false)
	if err != nil || len(res) != 3 {
		t.Fatal(res, err)
	}
	dirIDs := map[string]bool{}
	for _, r := range res {
		mp, err := ReadMetaProperties(r.Dir)
		if err != nil || mp.ClusterID != id || mp.NodeID != 1 || mp.Version != 1 || mp.DirectoryID == "" || dirIDs[mp.DirectoryID] {
			t.Fatalf("%s: %+v %v", r.Dir, mp, err)
		}
		dirIDs[mp.DirectoryID] = true
	}
	body, _ := os.ReadFile(filepath.Join(dir, "a", MetaPropertiesFile))
	if !strings.HasPrefix(string(body), "#\n#") || !strings.Contains(string(body), "\nversion=1\n") {
		t.Errorf("meta.properties:\n%s", body)
	}
	if got, err := checkStorage(cfg, discard); err != nil || got != id {
		t.Fatalf("formatted node: %q %v", got, err)
	}
	if _, err := Format(cfg, id, false); err == nil || !strings.Contains(err.Error(), "--ignore-formatted") {
		t.Fatalf("formatted twice: %v", err)
	}
	if res, err := Format(cfg, id, true); err != nil || !res[0].Skipped {
		t.Fatalf("--ignore-formatted: %+v %v", res, err)
	}
	if _, err := Format(cfg, RandomUUID(), true); err == nil || !strings.Contains(err.Error(), "another cluster") {
		t.Fatalf("--ignore-formatted over another cluster: %v", err)
	}

	// Another node's configuration on these directories.
	if _, err := checkStorage(clusterCfg(t, dir, "2"), discard); err == nil || !strings.Contains(err.Error(), "belongs to node.id 1") {
		t.Fatalf("another node: %v", err)
	}
	// One directory of another cluster.
	if err := WriteMetaProperties(filepath.Join(dir, "b"), MetaProperties{Version: 1, ClusterID: RandomUUID(), NodeID: 1, DirectoryID: RandomUUID()}); err != nil {
		t.Fatal(err)
	}
	if _, err := checkStorage(cfg, discard); err == nil || !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "different clusters") {
		t.Fatalf("mixed clusters: %v", err)
	}
	// A controller whose metadata dir lost its meta.properties.
	if err := WriteMetaProperties(filepath.Join(dir, "b"), MetaProperties{Version: 1, ClusterID: id, NodeID: 1, DirectoryID: RandomUUID()}); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "meta", MetaPropertiesFile))
	if _, err := checkStorage(cfg, discard); err == nil || !strings.Contains(err.Error(), "raft log is missing") {
		t.Fatalf("lost metadata dir: %v", err)
	}
}

func TestFormatRefusesDataWithoutMetaProperties(t *testing.T) {
	dir := t.TempDir()
	cfg := clusterCfg(t, dir, "1")
	if err := os.MkdirAll(filepath.Join(dir, "a", "t-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Format(cfg, RandomUUID(), false); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("formatted over data: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "b", MetaPropertiesFile)); err == nil {
		t.Fatal("a refused format wrote some directories")
	}
}

func TestCheckStorageSingleNode(t *testing.T) {
	dir := t.TempDir()
	cfg, err := FromKeys(map[string]string{"data.dir": dir})
	if err != nil {
		t.Fatal(err)
	}
	id, err := checkStorage(cfg, discard)
	if err != nil || ValidClusterID(id) != nil {
		t.Fatalf("self-format: %q %v", id, err)
	}
	if again, err := checkStorage(cfg, discard); err != nil || again != id {
		t.Fatalf("restart: %q %v", again, err)
	}
	// A log dir added empty is formatted with the node's ids.
	cfg2, _ := FromKeys(map[string]string{"data.dir": dir, "log.dirs": filepath.Join(dir, "logs") + "," + filepath.Join(dir, "more")})
	if again, err := checkStorage(cfg2, discard); err != nil || again != id {
		t.Fatalf("added log dir: %q %v", again, err)
	}
	if mp, err := ReadMetaProperties(filepath.Join(dir, "more")); err != nil || mp.ClusterID != id {
		t.Fatalf("added log dir: %+v %v", mp, err)
	}
}

// TestCheckStorageAdoptsEarlierLayout: a data directory of an earlier single-node
// version (<data.dir>/meta.properties without directory.id) keeps its cluster id.
func TestCheckStorageAdoptsEarlierLayout(t *testing.T) {
	dir := t.TempDir()
	old := "#\n#Mon Nov 30 10:00:00 UTC 2026\nversion=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAQ\nnode.id=1\n"
	if err := os.WriteFile(filepath.Join(dir, MetaPropertiesFile), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _ := FromKeys(map[string]string{"data.dir": dir, "node.id": "2"})
	if _, err := checkStorage(cfg, discard); err == nil || !strings.Contains(err.Error(), "belongs to node.id 1, configured node.id is 2") {
		t.Fatalf("earlier layout, other node: %v", err)
	}
	cfg, _ = FromKeys(map[string]string{"data.dir": dir})
	id, err := checkStorage(cfg, discard)
	if err != nil || id != "AAAAAAAAAAAAAAAAAAAAAQ" {
		t.Fatalf("adopt: %q %v", id, err)
	}
	for _, d := range cfg.Dirs() {
		if mp, err := ReadMetaProperties(d); err != nil || mp.ClusterID != id || mp.DirectoryID == "" {
			t.Errorf("%s: %+v %v", d, mp, err)
		}
	}
	// A cluster node is never formatted by itself.
	if _, err := checkStorage(clusterCfg(t, t.TempDir(), "1"), discard); err == nil {
		t.Fatal("a node of a three-voter quorum formatted itself")
	}
}

func TestReadMetaPropertiesBad(t *testing.T) {
	for _, body := range []string{"version=2\ncluster.id=x\nnode.id=1\n", "version=1\nnode.id=1\n", "version=1\ncluster.id=x\nnode.id=-3\n", "garbage\n", strings.Repeat("#", 70<<10)} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, MetaPropertiesFile), []byte(body), 0o644)
		if _, err := ReadMetaProperties(dir); err == nil || !errors.Is(err, ErrStorage) {
			t.Errorf("%.40q: %v", body, err)
		}
	}
}
