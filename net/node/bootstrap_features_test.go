package node

import (
	"maps"
	"testing"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// TestSelfFormatWritesFeatureLevels: a single combined node that formats itself
// starts its metadata log at the default feature levels, with
// samsa.transaction.version as transaction.version where the configuration sets it;
// Format of a controller writes them too, of a broker-only node not.
func TestSelfFormatWritesFeatureLevels(t *testing.T) {
	levelsIn := func(dir string) map[string]int16 {
		t.Helper()
		recs, err := ReadBootstrap(dir)
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
	dir := t.TempDir()
	cfg, err := FromKeys(map[string]string{"data.dir": dir, "samsa.transaction.version": "1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkStorage(cfg, discard); err != nil {
		t.Fatal(err)
	}
	want := map[string]int16{"metadata.version": 33, "transaction.version": 1, "group.version": 1, "share.version": 1, "streams.version": 1,
		"eligible.leader.replicas.version": 1}
	if got := levelsIn(cfg.MetadataDir); !maps.Equal(got, want) {
		t.Fatalf("self-formatted levels %v, want %v", got, want)
	}
	// The records apply to the empty image (the voter's first snapshot); with ELR on
	// they set the cluster-level min.insync.replicas, from the node's keys.
	cfg.Keys["min.insync.replicas"] = "2"
	im, err := (&metadata.Image{}).Apply(FeatureRecords(cfg, want)...)
	if err != nil || !maps.Equal(im.FinalizedFeatures(), want) {
		t.Fatalf("applied: %v %v", im.FinalizedFeatures(), err)
	}
	if v := im.Configs(metadata.ResourceBroker, "")["min.insync.replicas"]; v != "2" {
		t.Fatalf("cluster-level min.insync.replicas %q", v)
	}
	broker, err := FromKeys(map[string]string{"process.roles": "broker", "node.id": "4", "controller.quorum.voters": "1@127.0.0.1:19093",
		"listeners": "PLAINTEXT://127.0.0.1:0", "controller.listener.names": "CONTROLLER", "data.dir": t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Format(broker, RandomUUID(), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Bootstrap {
			t.Fatalf("a broker-only node wrote bootstrap records into %s", r.Dir)
		}
	}
}
