package metadata

import (
	"errors"
	"maps"
	"reflect"
	"testing"
)

// TestFeatureLevelFrame: a FeatureLevel record is type 12 at version 2; type 12 at
// version 1 is still a RemoveUserScramCredential (logs written before feature levels
// hold it); a RegisterBroker without features keeps version 2's bytes and one with
// features is version 3.
func TestFeatureLevelFrame(t *testing.T) {
	fl := Encode(nil, &FeatureLevelRecord{Name: FeatureTransactionVersion, Level: 2})
	if fl[8] != 2 || fl[9] != 12 {
		t.Fatalf("FeatureLevel frame header: version %d type %d", fl[8], fl[9])
	}
	rm := Encode(nil, &RemoveUserScramCredentialRecord{Name: "alice", Mechanism: ScramSHA256})
	if rm[8] != 1 || rm[9] != 12 {
		t.Fatalf("RemoveUserScramCredential frame header: version %d type %d", rm[8], rm[9])
	}
	if r, _, err := Decode(rm); err != nil || !reflect.DeepEqual(r, &RemoveUserScramCredentialRecord{Name: "alice", Mechanism: ScramSHA256}) {
		t.Fatalf("type 12 version 1 decodes as %#v, %v", r, err)
	}
	ep := []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 1}}
	if b := Encode(nil, &RegisterBrokerRecord{ID: 1, Epoch: 3, Endpoints: ep}); b[8] != 2 {
		t.Fatalf("RegisterBroker without features: version %d, want 2", b[8])
	}
	if b := Encode(nil, &RegisterBrokerRecord{ID: 1, Epoch: 3, Endpoints: ep, Features: []BrokerFeature{{FeatureGroupVersion, 0, 1}}}); b[8] != 3 {
		t.Fatalf("RegisterBroker with features: version %d, want 3", b[8])
	}
	// Version 3 with a feature count of 0 is not an encoding Encode makes.
	b := Encode(nil, &RegisterBrokerRecord{ID: 1, Epoch: 3, Endpoints: ep})
	b[8] = 3
	b = append(b, 0)
	if _, _, err := Decode(finishFrame(b, 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 3 without features: %v", err)
	}
}

func TestApplyFeatureLevels(t *testing.T) {
	im := mustApply(t, &Image{})
	if im.FeaturesRecorded() || im.FinalizedFeatures() != nil || im.FinalizedLevel(FeatureMetadataVersion) != 0 {
		t.Fatal("the empty image has feature levels")
	}
	im = mustApply(t, im,
		&FeatureLevelRecord{Name: FeatureMetadataVersion, Level: 29},
		&FeatureLevelRecord{Name: FeatureTransactionVersion, Level: 2},
		&FeatureLevelRecord{Name: FeatureShareVersion, Level: 1},
		&FeatureLevelRecord{Name: FeatureStreamsVersion, Level: 0}, // not finalized: a no-op
		&FeatureLevelRecord{Name: "future.version", Level: 7},      // a newer build's feature is kept
	)
	want := map[string]int16{FeatureMetadataVersion: 29, FeatureTransactionVersion: 2, FeatureShareVersion: 1, "future.version": 7}
	if !im.FeaturesRecorded() || !maps.Equal(im.FinalizedFeatures(), want) {
		t.Fatalf("finalized %v", im.FinalizedFeatures())
	}
	// A level of 0 removes the feature; the image before is unchanged.
	next := mustApply(t, im, &FeatureLevelRecord{Name: FeatureShareVersion}, &FeatureLevelRecord{Name: FeatureMetadataVersion, Level: 33})
	if next.FinalizedLevel(FeatureShareVersion) != 0 || next.FinalizedLevel(FeatureMetadataVersion) != 33 || im.FinalizedLevel(FeatureShareVersion) != 1 {
		t.Fatalf("after removing share.version: %v (before: %v)", next.FinalizedFeatures(), im.FinalizedFeatures())
	}
	for _, bad := range []*FeatureLevelRecord{
		{Name: FeatureMetadataVersion, Level: 0},
		{Name: FeatureGroupVersion, Level: -1},
		{Name: "", Level: 1},
	} {
		if _, err := im.Apply(bad); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("Apply(%+v) = %v, want ErrInvalidRecord", bad, err)
		}
	}
	// The snapshot keeps them, metadata.version first.
	recs := next.Records()
	if len(recs) < 3 || !reflect.DeepEqual(recs[0], &FeatureLevelRecord{Name: FeatureMetadataVersion, Level: 33}) {
		t.Fatalf("records: %v", recs)
	}
	snap, err := EncodeSnapshot(nil, next)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeSnapshot(snap)
	if err != nil || !maps.Equal(back.FinalizedFeatures(), next.FinalizedFeatures()) {
		t.Fatalf("snapshot round trip: %v, %v", back.FinalizedFeatures(), err)
	}
}

func TestRegisterBrokerFeatures(t *testing.T) {
	fs := []BrokerFeature{{FeatureMetadataVersion, 21, 33}, {FeatureTransactionVersion, 0, 2}}
	r := &RegisterBrokerRecord{ID: 1, Epoch: 1, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 1}}, Features: fs}
	im := mustApply(t, &Image{}, r)
	fs[1].Max = 9 // the image does not alias the record
	b, _ := im.Broker(1)
	if got, ok := b.SupportedFeature(FeatureTransactionVersion); !ok || got != (VersionRange{0, 2}) {
		t.Fatalf("transaction.version supported %v, %v", got, ok)
	}
	if _, ok := b.SupportedFeature(FeatureShareVersion); ok {
		t.Fatal("share.version was not registered")
	}
	if back, err := DecodeSnapshot(mustSnapshot(t, im)); err != nil || !sameImage(back, im) {
		t.Fatalf("snapshot: %v", err)
	}
	for _, bad := range [][]BrokerFeature{
		{{FeatureGroupVersion, 1, 0}},
		{{FeatureGroupVersion, -1, 1}},
		{{"", 0, 1}},
		{{FeatureGroupVersion, 0, 1}, {FeatureGroupVersion, 0, 1}},
	} {
		r := &RegisterBrokerRecord{ID: 2, Epoch: 5, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 1}}, Features: bad}
		if _, err := im.Apply(r); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("features %v: %v", bad, err)
		}
	}
}

func mustSnapshot(t *testing.T, im *Image) []byte {
	t.Helper()
	b, err := EncodeSnapshot(nil, im)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReleaseLevels is the table of release versions and the levels a cluster
// formatted at each starts with (Kafka's Feature.defaultLevel, capped at the levels
// Samsa supports: kraft.version is 1 from 3.9-IV0, as Kafka's, which the format
// command applies to dynamic quorums only).
func TestReleaseLevels(t *testing.T) {
	type row struct {
		mv                                  int16
		txn, group, share, streams, elr, kr int16
	}
	for _, tc := range []struct {
		release string
		want    row
	}{
		{"3.9", row{21, 0, 0, 0, 0, 0, 1}},
		{"4.0", row{25, 2, 1, 0, 0, 0, 1}},
		{"4.0-IV1", row{23, 0, 1, 0, 0, 0, 1}},
		{"4.1", row{27, 2, 1, 0, 0, 1, 1}},
		{"4.2", row{29, 2, 1, 1, 1, 1, 1}},
		{"4.2-IV0", row{28, 2, 1, 1, 0, 1, 1}},
		{"4.3", row{30, 2, 1, 1, 1, 1, 1}},
		{"4.4", row{33, 2, 1, 1, 1, 1, 1}},
		{"4.4.1", row{33, 2, 1, 1, 1, 1, 1}},
	} {
		mv, err := ParseMetadataVersion(tc.release)
		if err != nil {
			t.Fatalf("%s: %v", tc.release, err)
		}
		l := ReleaseLevels(mv.Level)
		got := row{l[FeatureMetadataVersion], l[FeatureTransactionVersion], l[FeatureGroupVersion], l[FeatureShareVersion],
			l[FeatureStreamsVersion], l[FeatureELRVersion], l[FeatureKRaftVersion]}
		if got != tc.want || len(l) != 7 {
			t.Errorf("%s: %+v (%d features), want %+v", tc.release, got, len(l), tc.want)
		}
		// Every release's levels satisfy their dependencies.
		for name, level := range l {
			if err := CheckDependencies(name, level, l); err != nil {
				t.Errorf("%s: %v", tc.release, err)
			}
		}
	}
	for _, bad := range []string{"3.8", "4.5", "4.0-IV9", "x", ""} {
		if _, err := ParseMetadataVersion(bad); err == nil {
			t.Errorf("ParseMetadataVersion(%q) succeeded", bad)
		}
	}
	if v := LatestMetadataVersion(); v.String() != "4.4-IV2" || v.Level != 33 {
		t.Fatalf("latest %v", v)
	}
	if v, ok := MetadataVersionOf(LegacyMetadataVersion); !ok || v.String() != "4.2-IV1" {
		t.Fatalf("legacy %v", v)
	}
}

func TestMetadataChanged(t *testing.T) {
	for _, tc := range []struct {
		from, to int16
		want     bool
	}{
		{29, 25, false}, // 4.2-IV1 to 4.0-IV3: no level between changed the log
		{25, 29, false},
		{29, 22, true}, // across 4.0-IV1
		{33, 31, true}, // across 4.4-IV1 and IV2
		{31, 30, false},
		{30, 29, true}, // 4.3-IV0 changed it
		{29, 29, false},
	} {
		if got := MetadataChanged(tc.from, tc.to); got != tc.want {
			t.Errorf("MetadataChanged(%d, %d) = %v", tc.from, tc.to, got)
		}
	}
}

func TestCheckDependencies(t *testing.T) {
	if err := CheckDependencies(FeatureShareVersion, 1, map[string]int16{FeatureMetadataVersion: 26}); err == nil ||
		err.Error() != "share.version could not be set to 1 because it depends on metadata.version level 27" {
		t.Fatalf("share.version 1 at 4.1-IV0: %v", err)
	}
	if err := CheckDependencies(FeatureShareVersion, 1, map[string]int16{FeatureMetadataVersion: 27}); err != nil {
		t.Fatal(err)
	}
	if err := CheckDependencies(FeatureELRVersion, 1, map[string]int16{FeatureMetadataVersion: 22}); err == nil ||
		err.Error() != "eligible.leader.replicas.version could not be set to 1 because it depends on metadata.version level 23" {
		t.Fatalf("eligible.leader.replicas.version 1 at 4.0-IV0: %v", err)
	}
	if err := CheckDependencies(FeatureELRVersion, 1, map[string]int16{FeatureMetadataVersion: 23}); err != nil {
		t.Fatal(err)
	}
	if err := CheckDependencies(FeatureELRVersion, 2, map[string]int16{FeatureMetadataVersion: 33}); err == nil {
		t.Fatal("eligible.leader.replicas.version 2 is not supported")
	}
	if err := CheckDependencies(FeatureGroupVersion, 1, map[string]int16{}); err == nil {
		t.Fatal("a level above 0 without metadata.version")
	}
	if r := (VersionRange{0, 2}); r.String() != "0-2" || (VersionRange{1, 1}).String() != "1" || !r.Contains(0) || r.Contains(3) {
		t.Fatal("VersionRange")
	}
}
