package node

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/samsa-broker/samsa/coordinator/controller/quorum"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// dynamicCfg is controller id of a dynamic quorum of three (bootstrap servers, no
// controller.quorum.voters), its directories under dir.
func dynamicCfg(t *testing.T, dir string, id int) *Config {
	t.Helper()
	port := map[int]string{1: "9093", 2: "9193", 3: "9293"}[id]
	c, err := FromKeys(map[string]string{"process.roles": "controller", "node.id": strings.TrimSpace(string(rune('0' + id))),
		"controller.quorum.bootstrap.servers": "127.0.0.1:9093,127.0.0.1:9193,127.0.0.1:9293",
		"listeners":                           "CONTROLLER://127.0.0.1:" + port, "controller.listener.names": "CONTROLLER",
		"log.dirs": filepath.Join(dir, "logs"), "metadata.log.dir": filepath.Join(dir, "meta")})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFormatDynamicQuorum: --standalone, --initial-controllers and
// --no-initial-controllers write kraft.version 1 and the initial voters (with the
// metadata directory's id) into the bootstrap records, as kafka-storage.sh; a
// controller given bootstrap servers of others needs one of them, one given
// controller.quorum.voters none; DynamicQuorum reads the format back.
func TestFormatDynamicQuorum(t *testing.T) {
	id := RandomUUID()
	c1 := dynamicCfg(t, t.TempDir(), 1)
	if !c1.QuorumBootstrap || c1.SoleVoter() || len(c1.Voters) != 3 || c1.Voters[0].ID != -1 {
		t.Fatalf("config %+v", c1)
	}
	if _, err := FormatWith(c1, id, FormatOptions{}); err == nil || !strings.Contains(err.Error(), "--standalone, --initial-controllers, or --no-initial-controllers") {
		t.Fatalf("no flag: %v", err)
	}
	if _, err := DynamicQuorum(c1); err == nil || !errors.Is(err, ErrConfig) {
		t.Fatalf("an unformatted dynamic controller: %v", err)
	}
	res, err := FormatWith(c1, id, FormatOptions{Quorum: QuorumFormat{Standalone: true}})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := ReadBootstrap(c1.MetadataDir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := (&metadata.Image{}).Apply(recs...)
	if err != nil {
		t.Fatal(err)
	}
	mp, _ := ReadMetaProperties(c1.MetadataDir)
	dir, _ := metadata.ParseUUID(mp.DirectoryID)
	vs, ok := im.QuorumVoters()
	if !ok || len(vs) != 1 || vs[0].ID != 1 || vs[0].DirectoryID != dir || vs[0].RaftID != quorum.DynamicRaftID(1, dir) ||
		vs[0].Endpoints[0] != (metadata.VoterEndpoint{Name: "CONTROLLER", Host: "127.0.0.1", Port: 9093}) || im.FinalizedLevel("kraft.version") != 1 {
		t.Fatalf("standalone: voters %+v, kraft.version %d, results %+v", vs, im.FinalizedLevel("kraft.version"), res)
	}
	if dyn, err := DynamicQuorum(c1); !dyn || err != nil {
		t.Fatalf("standalone is dynamic: %v %v", dyn, err)
	}

	c2 := dynamicCfg(t, t.TempDir(), 2)
	if _, err := FormatWith(c2, id, FormatOptions{Quorum: QuorumFormat{NoInitialControllers: true}}); err != nil {
		t.Fatal(err)
	}
	recs, _ = ReadBootstrap(c2.MetadataDir)
	im, _ = (&metadata.Image{}).Apply(recs...)
	if _, ok := im.QuorumVoters(); ok || im.FinalizedLevel("kraft.version") != 1 {
		t.Fatalf("no initial controllers: %v", recs)
	}
	if dyn, err := DynamicQuorum(c2); !dyn || err != nil {
		t.Fatalf("no initial controllers is dynamic: %v %v", dyn, err)
	}

	ics, err := ParseInitialControllers("1@127.0.0.1:9093:" + metadata.NewUUID().String() + ",2@127.0.0.1:9193:" + metadata.NewUUID().String() + ",3@[::1]:9293:" + metadata.NewUUID().String())
	if err != nil || len(ics) != 3 || ics[2].Host != "::1" || ics[2].Port != 9293 {
		t.Fatalf("parse: %+v %v", ics, err)
	}
	c3 := dynamicCfg(t, t.TempDir(), 3)
	if _, err := FormatWith(c3, id, FormatOptions{Quorum: QuorumFormat{InitialControllers: ics}}); err != nil {
		t.Fatal(err)
	}
	mp, _ = ReadMetaProperties(c3.MetadataDir)
	recs, _ = ReadBootstrap(c3.MetadataDir)
	im, _ = (&metadata.Image{}).Apply(recs...)
	if vs, _ := im.QuorumVoters(); len(vs) != 3 || mp.DirectoryID != ics[2].DirectoryID.String() {
		t.Fatalf("initial controllers: voters %+v, directory.id %s", vs, mp.DirectoryID)
	}

	for _, bad := range []string{"1@h:1", "x@h:1:" + metadata.NewUUID().String(), "1@h:0:" + metadata.NewUUID().String(), "1@h:1:zz"} {
		if _, err := ParseInitialControllers(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	static := clusterCfg(t, t.TempDir(), "1")
	if _, err := FormatWith(static, id, FormatOptions{Quorum: QuorumFormat{Standalone: true}}); err == nil || !errors.Is(err, ErrConfig) {
		t.Fatalf("--standalone with controller.quorum.voters: %v", err)
	}
	if _, err := FormatWith(static, id, FormatOptions{Features: map[string]int16{"metadata.version": 33, "kraft.version": 1}}); err == nil {
		t.Fatal("kraft.version 1 on a static quorum was formatted")
	}
	if _, err := FormatWith(c1, id, FormatOptions{Quorum: QuorumFormat{Standalone: true, NoInitialControllers: true}, IgnoreFormatted: true}); err == nil {
		t.Fatal("two quorum flags accepted")
	}
}
