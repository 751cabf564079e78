package controller

import (
	"maps"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

func bf(name string, lo, hi int16) metadata.BrokerFeature {
	return metadata.BrokerFeature{Name: name, Min: lo, Max: hi}
}

// thisBuild is the feature ranges of this build, as a broker registers them.
func thisBuild() []metadata.BrokerFeature {
	var out []metadata.BrokerFeature
	for name, r := range metadata.SupportedFeatures() {
		out = append(out, metadata.BrokerFeature{Name: name, Min: r.Min, Max: r.Max})
	}
	return out
}

// featureImage is an image at levels with brokers 1-3 registered (unfenced) with
// this build's features, and broker 4 with features (nil: none, a build before them).
func featureImage(t *testing.T, levels map[string]int16, fourth []metadata.BrokerFeature, fourthFenced bool) *metadata.Image {
	t.Helper()
	var recs []metadata.Record
	for n, l := range levels {
		recs = append(recs, &metadata.FeatureLevelRecord{Name: n, Level: l})
	}
	for id := int32(1); id <= 4; id++ {
		fs := thisBuild()
		if id == 4 {
			fs = fourth
		}
		recs = append(recs, &metadata.RegisterBrokerRecord{ID: id, Epoch: int64(id), Features: fs, Fenced: id == 4 && fourthFenced,
			Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9000 + id}}})
	}
	return mustApply(t, &metadata.Image{}, recs...)
}

// TestUpdateFeatureRecords: Kafka's FeatureControlManager rules, with its messages.
func TestUpdateFeatureRecords(t *testing.T) {
	at44 := metadata.ReleaseLevels(33)
	at42 := metadata.ReleaseLevels(29)
	up := func(name string, level int16) FeatureUpdate { return FeatureUpdate{name, level, UpgradeTypeUpgrade} }
	down := func(name string, level int16) FeatureUpdate {
		return FeatureUpdate{name, level, UpgradeTypeSafeDowngrade}
	}
	unsafe := func(name string, level int16) FeatureUpdate {
		return FeatureUpdate{name, level, UpgradeTypeUnsafeDowngrade}
	}
	old := []metadata.BrokerFeature(nil)
	static44 := maps.Clone(at44) // formatted with controller.quorum.voters
	static44["kraft.version"] = 0
	for _, tc := range []struct {
		name    string
		levels  map[string]int16
		fourth  []metadata.BrokerFeature
		fenced  bool
		updates []FeatureUpdate
		want    map[string]int16 // the levels after; nil: refused
		msg     string           // the refusal's message
	}{
		{name: "upgrade metadata.version", levels: at42, fourth: thisBuild(), updates: []FeatureUpdate{up("metadata.version", 33)},
			want: map[string]int16{"metadata.version": 33}},
		{name: "upgrade to the release's levels", levels: metadata.ReleaseLevels(21), fourth: thisBuild(),
			updates: []FeatureUpdate{up("metadata.version", 29), up("transaction.version", 2), up("group.version", 1), up("share.version", 1), up("streams.version", 1)},
			want:    map[string]int16{"metadata.version": 29, "transaction.version": 2, "group.version": 1, "share.version": 1, "streams.version": 1}},
		{name: "the same level again", levels: at44, fourth: thisBuild(), updates: []FeatureUpdate{up("transaction.version", 2)},
			want: map[string]int16{"transaction.version": 2}},
		{name: "safe downgrade where no level changed the metadata", levels: at42, fourth: thisBuild(),
			updates: []FeatureUpdate{down("metadata.version", 27)}, want: map[string]int16{"metadata.version": 27}},
		{name: "downgrade of a feature", levels: at44, fourth: thisBuild(), updates: []FeatureUpdate{down("transaction.version", 1)},
			want: map[string]int16{"transaction.version": 1}},
		{name: "disable a feature", levels: at44, fourth: thisBuild(), updates: []FeatureUpdate{down("streams.version", 0)},
			want: map[string]int16{"streams.version": 0}},
		{name: "downgrade across a metadata change", levels: at44, fourth: thisBuild(), updates: []FeatureUpdate{down("metadata.version", 29)},
			msg: "Unsupported metadata.version downgrade from 33 to 29. Refusing to perform the requested downgrade because it might delete metadata information."},
		{name: "unsafe downgrade", levels: at44, fourth: thisBuild(), updates: []FeatureUpdate{unsafe("metadata.version", 29)},
			msg: "Unsupported metadata.version downgrade from 33 to 29. Unsafe metadata downgrade is not supported in this version."},
		{name: "a downgrade as an upgrade", levels: at44, fourth: thisBuild(), updates: []FeatureUpdate{up("transaction.version", 1)},
			msg: "Invalid update version 1 for feature transaction.version. Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade."},
		{name: "an upgrade as a downgrade", levels: at42, fourth: thisBuild(), updates: []FeatureUpdate{down("metadata.version", 33)},
			msg: "Invalid update version 33 for feature metadata.version. Can't downgrade to a newer version."},
		{name: "unknown upgrade type", levels: at44, fourth: thisBuild(), updates: []FeatureUpdate{{"transaction.version", 2, 4}},
			msg: "Invalid update version 2 for feature transaction.version. The controller does not support the given upgrade type."},
		{name: "negative level", levels: at44, fourth: thisBuild(), updates: []FeatureUpdate{down("group.version", -1)},
			msg: "Invalid update version -1 for feature group.version. A feature version cannot be less than 0."},
		{name: "above what the controller supports", levels: at44, fourth: thisBuild(), updates: []FeatureUpdate{up("transaction.version", 3)},
			msg: "Invalid update version 3 for feature transaction.version. Local controller 1 only supports versions 0-2"},
		{name: "enable eligible leader replicas", levels: metadata.ReleaseLevels(25), fourth: thisBuild(), updates: []FeatureUpdate{up("eligible.leader.replicas.version", 1)},
			want: map[string]int16{"eligible.leader.replicas.version": 1}},
		{name: "eligible leader replicas need 4.0-IV1", levels: metadata.ReleaseLevels(22), fourth: thisBuild(), updates: []FeatureUpdate{up("eligible.leader.replicas.version", 1)},
			msg: "Invalid update version 1 for feature eligible.leader.replicas.version. eligible.leader.replicas.version could not be set to 1 because it depends on metadata.version level 23"},
		{name: "eligible leader replicas above 1", levels: at44, fourth: thisBuild(), updates: []FeatureUpdate{up("eligible.leader.replicas.version", 2)},
			msg: "Invalid update version 2 for feature eligible.leader.replicas.version. Local controller 1 only supports versions 0-1"},
		{name: "a broker of a build before eligible leader replicas", levels: metadata.ReleaseLevels(25),
			fourth: []metadata.BrokerFeature{bf("metadata.version", 21, 33), bf("eligible.leader.replicas.version", 0, 0)}, updates: []FeatureUpdate{up("eligible.leader.replicas.version", 1)},
			msg: "Invalid update version 1 for feature eligible.leader.replicas.version. Broker 4 does not support this feature."},
		{name: "disable eligible leader replicas", levels: at44, fourth: thisBuild(), updates: []FeatureUpdate{down("eligible.leader.replicas.version", 0)},
			want: map[string]int16{"eligible.leader.replicas.version": 0}},
		{name: "a broker of an older build", levels: at42, fourth: old, updates: []FeatureUpdate{up("metadata.version", 33)},
			msg: "Invalid update version 33 for feature metadata.version. Broker 4 only supports versions 29"},
		{name: "a broker without the feature", levels: at42, fourth: []metadata.BrokerFeature{bf("metadata.version", 21, 33)}, updates: []FeatureUpdate{up("transaction.version", 2)},
			msg: "Invalid update version 2 for feature transaction.version. Broker 4 does not support this feature."},
		{name: "a fenced broker is not asked", levels: at42, fourth: old, fenced: true, updates: []FeatureUpdate{up("metadata.version", 33)},
			want: map[string]int16{"metadata.version": 33}},
		{name: "a dependency", levels: metadata.ReleaseLevels(25), fourth: thisBuild(), updates: []FeatureUpdate{up("share.version", 1)},
			msg: "Invalid update version 1 for feature share.version. share.version could not be set to 1 because it depends on metadata.version level 27"},
		{name: "a dependency of a level left as it is", levels: at42, fourth: thisBuild(), updates: []FeatureUpdate{down("metadata.version", 25)},
			msg: "Invalid update version 25 for feature metadata.version. share.version could not be set to 1 because it depends on metadata.version level 27"},
		{name: "both at once", levels: at42, fourth: thisBuild(), updates: []FeatureUpdate{down("metadata.version", 25), down("share.version", 0)},
			want: map[string]int16{"metadata.version": 25, "share.version": 0}},
		{name: "kraft.version from 0 to 1", levels: static44, fourth: thisBuild(), updates: []FeatureUpdate{up("kraft.version", 1)},
			want: map[string]int16{"kraft.version": 1}},
		{name: "kraft.version is not downgraded", levels: at44, fourth: thisBuild(), updates: []FeatureUpdate{down("kraft.version", 0)},
			msg: "Invalid update version 0 for feature kraft.version. Can't downgrade the version of this feature."},
		{name: "kraft.version 2 does not exist", levels: at44, fourth: thisBuild(), updates: []FeatureUpdate{up("kraft.version", 2)},
			msg: "Invalid update version 2 for feature kraft.version. Local controller 1 only supports versions 0-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im := featureImage(t, tc.levels, tc.fourth, tc.fenced)
			recs, msg := UpdateFeatureRecords(im, im.FinalizedFeatures(), 1, tc.updates, nil)
			if tc.want == nil {
				if msg != tc.msg || recs != nil {
					t.Fatalf("refusal %q, records %v; want %q", msg, recs, tc.msg)
				}
				return
			}
			if msg != "" {
				t.Fatalf("refused: %s", msg)
			}
			next := mustApply(t, im, recs...)
			for n, l := range tc.want {
				if got := next.FinalizedLevel(n); got != l {
					t.Errorf("%s at %d, want %d", n, got, l)
				}
			}
		})
	}
}

// TestUpdateFeaturesOnALegacyLog: a log without feature records is at the levels of
// the controller's keys; the first update writes every level, metadata.version first.
func TestUpdateFeaturesOnALegacyLog(t *testing.T) {
	im := featureImage(t, nil, thisBuild(), false)
	l := configs.Layers{Static: map[string]string{"samsa.transaction.version": "1"}}
	cur := configs.FinalizedLevels(im, l)
	if want := map[string]int16{"metadata.version": 29, "transaction.version": 1, "group.version": 1, "share.version": 1, "streams.version": 1}; !maps.Equal(cur, want) {
		t.Fatalf("legacy levels %v", cur)
	}
	recs, msg := UpdateFeatureRecords(im, cur, 1, []FeatureUpdate{{"transaction.version", 2, UpgradeTypeUpgrade}}, nil)
	if msg != "" {
		t.Fatal(msg)
	}
	if first := recs[0].(*metadata.FeatureLevelRecord); first.Name != "metadata.version" || first.Level != 29 || len(recs) != 5 {
		t.Fatalf("records %v", recs)
	}
	next := mustApply(t, im, recs...)
	if want := map[string]int16{"metadata.version": 29, "transaction.version": 2, "group.version": 1, "share.version": 1, "streams.version": 1}; !maps.Equal(next.FinalizedFeatures(), want) {
		t.Fatalf("finalized %v", next.FinalizedFeatures())
	}
}

func TestRegistrationFeatureCheck(t *testing.T) {
	im := featureImage(t, metadata.ReleaseLevels(33), thisBuild(), false)
	if why := RegistrationFeatureCheck(im, thisBuild()); why != "" {
		t.Fatal(why)
	}
	for _, tc := range []struct {
		features []metadata.BrokerFeature
		want     string
	}{
		{nil, "Unable to register because the broker does not support finalized version 1 of eligible.leader.replicas.version. The broker wants a version between 0 and 0, inclusive."},
		{[]metadata.BrokerFeature{bf("metadata.version", 21, 33), bf("eligible.leader.replicas.version", 0, 1), bf("group.version", 0, 1), bf("share.version", 0, 1), bf("streams.version", 0, 1), bf("transaction.version", 0, 1)},
			"Unable to register because the broker does not support finalized version 2 of transaction.version. The broker wants a version between 0 and 1, inclusive."},
		{[]metadata.BrokerFeature{bf("metadata.version", 21, 33), bf("eligible.leader.replicas.version", 0, 1)},
			"Unable to register because the broker does not support finalized version 1 of group.version. The broker wants a version between 0 and 0, inclusive."},
		{[]metadata.BrokerFeature{bf("metadata.version", 21, 30)}, "Unable to register because the broker does not support finalized version 1 of eligible.leader.replicas.version. The broker wants a version between 0 and 0, inclusive."},
	} {
		if why := RegistrationFeatureCheck(im, tc.features); why != tc.want {
			t.Errorf("%v: %q, want %q", tc.features, why, tc.want)
		}
	}
	// A broker listing no metadata.version supports only the legacy level.
	at42 := featureImage(t, map[string]int16{"metadata.version": 29}, thisBuild(), false)
	if why := RegistrationFeatureCheck(at42, nil); why != "" {
		t.Fatalf("a build before feature levels at 4.2-IV1: %s", why)
	}
	// A log without feature records checks nothing.
	if why := RegistrationFeatureCheck(featureImage(t, nil, thisBuild(), false), nil); why != "" {
		t.Fatal(why)
	}
}

func updateFeatures(version int16, validateOnly bool, updates ...FeatureUpdate) *kmsg.UpdateFeaturesRequest {
	r := kmsg.NewPtrUpdateFeaturesRequest()
	r.Version, r.ValidateOnly = version, validateOnly
	for _, u := range updates {
		fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		fu.Feature, fu.MaxVersionLevel, fu.UpgradeType = u.Name, u.Level, u.Type
		fu.AllowDowngrade = u.Type != UpgradeTypeUpgrade
		r.FeatureUpdates = append(r.FeatureUpdates, fu)
	}
	return r
}

// TestUpdateFeaturesThroughController drives UpdateFeatures through the controller
// over a MemLog: validate-only writes nothing, an update commits, a refusal is
// INVALID_UPDATE_VERSION with Kafka's message, v0's AllowDowngrade is a safe
// downgrade, and once a level is finalized a registration that does not support it is
// UNSUPPORTED_VERSION while one that does joins.
func TestUpdateFeaturesThroughController(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Static = map[string]string{"samsa.transaction.version": "1"} })
	nodes, driveAll := lifecycleNodes(h, 1, 2)
	driveAll()
	for _, n := range nodes {
		if n.b.State() != StateRunning {
			t.Fatalf("broker state %v", n.b.State())
		}
	}
	// The log has no feature records: the controller reads its keys.
	if h.image().FeaturesRecorded() {
		t.Fatal("feature records in a log nothing wrote them into")
	}
	up2 := FeatureUpdate{"transaction.version", 2, UpgradeTypeUpgrade}
	before := h.offset()
	r := h.do(updateFeatures(2, true, up2)).(*kmsg.UpdateFeaturesResponse)
	if r.ErrorCode != 0 || h.offset() != before {
		t.Fatalf("validate only: %+v, offset %d -> %d", r, before, h.offset())
	}
	r = h.do(updateFeatures(1, false, up2)).(*kmsg.UpdateFeaturesResponse)
	if r.ErrorCode != 0 || len(r.Results) != 1 || r.Results[0].Feature != "transaction.version" || r.Results[0].ErrorCode != 0 {
		t.Fatalf("upgrade: %+v", r)
	}
	if im := h.image(); !im.FeaturesRecorded() || im.FinalizedLevel("transaction.version") != 2 || im.FinalizedLevel("metadata.version") != 29 {
		t.Fatalf("finalized %v", im.FinalizedFeatures())
	}
	r = h.do(updateFeatures(2, false, FeatureUpdate{"metadata.version", 33, UpgradeTypeUpgrade})).(*kmsg.UpdateFeaturesResponse)
	if r.ErrorCode != 0 || len(r.Results) != 0 {
		t.Fatalf("metadata.version 33: %+v", r)
	}
	r = h.do(updateFeatures(2, false, FeatureUpdate{"metadata.version", 29, UpgradeTypeSafeDowngrade})).(*kmsg.UpdateFeaturesResponse)
	if r.ErrorCode != kerr.InvalidUpdateVersion.Code || r.ErrorMessage == nil ||
		*r.ErrorMessage != "The update failed for all features since the following feature had an error: Unsupported metadata.version downgrade from 33 to 29. Refusing to perform the requested downgrade because it might delete metadata information." {
		t.Fatalf("downgrade across 4.3-IV0: %+v", r)
	}
	// v0: AllowDowngrade is a safe downgrade.
	r = h.do(updateFeatures(0, false, FeatureUpdate{"transaction.version", 0, UpgradeTypeSafeDowngrade})).(*kmsg.UpdateFeaturesResponse)
	if r.ErrorCode != 0 || h.image().FinalizedLevel("transaction.version") != 0 {
		t.Fatalf("v0 downgrade: %+v, level %d", r, h.image().FinalizedLevel("transaction.version"))
	}
	h.do(updateFeatures(2, false, up2))
	// A broker of a build that supports transaction.version 0-1 only is refused.
	reg := registration(3, 1, "")
	for name, rg := range metadata.SupportedFeatures() {
		if name == "transaction.version" {
			rg.Max = 1
		}
		f := kmsg.NewBrokerRegistrationRequestFeature()
		f.Name, f.MinSupportedVersion, f.MaxSupportedVersion = name, rg.Min, rg.Max
		reg.Features = append(reg.Features, f)
	}
	if rr := h.do(reg).(*kmsg.BrokerRegistrationResponse); rr.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("registration without transaction.version 2: %v", kerr.ErrorForCode(rr.ErrorCode))
	}
	// ... and one of a build before feature levels (no features) too.
	if rr := h.do(registration(3, 1, "")).(*kmsg.BrokerRegistrationResponse); rr.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("registration without features: %v", kerr.ErrorForCode(rr.ErrorCode))
	}
	// This build's lifecycle registers its features and joins.
	third := newLifecycle(t, 3, h.clock, nil)
	h.drive(third, nil)
	if third.Epoch() <= 0 {
		t.Fatal("this build's broker did not register")
	}
	if b, _ := h.image().Broker(3); !strings.Contains(featureNames(b), "transaction.version") {
		t.Fatalf("registered features %v", b.Features)
	}
}

func featureNames(b metadata.BrokerImage) string {
	var s []string
	for _, f := range b.Features {
		s = append(s, f.Name)
	}
	return strings.Join(s, ",")
}

// TestLegacyLogRegistrations: on a log without feature records (a cluster a build
// before feature levels formatted, in a rolling upgrade) registrations are written
// without features, which such a build reads; the controller keeps the ranges each
// broker sent, so an UpdateFeatures passes with this build's brokers and is refused
// while one that sent none (the old build) is registered.
func TestLegacyLogRegistrations(t *testing.T) {
	h := newHarness(t, nil)
	_, driveAll := lifecycleNodes(h, 1, 2)
	driveAll()
	for _, id := range []int32{1, 2} {
		if b, _ := h.image().Broker(id); len(b.Features) != 0 {
			t.Fatalf("broker %d registered with features %v in a log without feature levels", id, b.Features)
		}
	}
	rr := h.do(registration(3, 1, "")).(*kmsg.BrokerRegistrationResponse)
	if rr.ErrorCode != 0 {
		t.Fatalf("a registration without features: %v", kerr.ErrorForCode(rr.ErrorCode))
	}
	unfence := func(epoch int64) {
		t.Helper()
		for range 3 {
			if hb := h.heartbeat(3, epoch, nil); hb.ErrorCode != 0 || !hb.IsFenced {
				return
			}
		}
		t.Fatal("broker 3 stays fenced")
	}
	unfence(rr.BrokerEpoch)
	up := FeatureUpdate{"metadata.version", 33, UpgradeTypeUpgrade}
	r := h.do(updateFeatures(2, false, up)).(*kmsg.UpdateFeaturesResponse)
	if r.ErrorCode != kerr.InvalidUpdateVersion.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "Broker 3 only supports versions 29") {
		t.Fatalf("upgrade with a broker of the old build registered: %+v", r)
	}
	if h.image().FeaturesRecorded() {
		t.Fatal("a refused update wrote feature levels")
	}
	// Broker 3 registers again from this build (its ranges in the registration, not
	// in the record): the upgrade passes.
	reg := registration(3, 2, "")
	SetPredecessor(reg, metadata.UUID{0: 3, 1: 1}) // a restart on the same directories
	for name, rg := range metadata.SupportedFeatures() {
		f := kmsg.NewBrokerRegistrationRequestFeature()
		f.Name, f.MinSupportedVersion, f.MaxSupportedVersion = name, rg.Min, rg.Max
		reg.Features = append(reg.Features, f)
	}
	rr = h.do(reg).(*kmsg.BrokerRegistrationResponse)
	if rr.ErrorCode != 0 {
		t.Fatalf("registration from this build: %v", kerr.ErrorForCode(rr.ErrorCode))
	}
	unfence(rr.BrokerEpoch)
	if b, _ := h.image().Broker(3); len(b.Features) != 0 {
		t.Fatalf("broker 3 registered with features %v in a log without feature levels", b.Features)
	}
	r = h.do(updateFeatures(2, false, up)).(*kmsg.UpdateFeaturesResponse)
	if r.ErrorCode != 0 || h.image().FinalizedLevel("metadata.version") != 33 {
		t.Fatalf("upgrade with this build's brokers: %+v", r)
	}
}

// TestLiveFeatures: UpdateFeatureRecords takes a broker's ranges from what it sent
// the controller where its registration lists none, and asks to retry for one the
// controller has not heard from.
func TestLiveFeatures(t *testing.T) {
	im := featureImage(t, metadata.ReleaseLevels(29), nil, false)
	up := []FeatureUpdate{{"metadata.version", 33, UpgradeTypeUpgrade}}
	if _, msg := UpdateFeatureRecords(im, im.FinalizedFeatures(), 1, up, &LiveFeatures{Sent: map[int32][]metadata.BrokerFeature{4: thisBuild()}}); msg != "" {
		t.Fatalf("broker 4 sent this build's ranges: %s", msg)
	}
	_, msg := UpdateFeatureRecords(im, im.FinalizedFeatures(), 1, up, &LiveFeatures{NotYet: map[int32]bool{4: true}})
	if want := "Invalid update version 33 for feature metadata.version. Broker 4 registered without its supported feature levels and has not sent them to this controller yet; retry after its next heartbeat (broker.heartbeat.interval.ms)."; msg != want {
		t.Fatalf("not heard yet: %q", msg)
	}
	if _, msg := UpdateFeatureRecords(im, im.FinalizedFeatures(), 1, up, &LiveFeatures{}); !strings.Contains(msg, "Broker 4 only supports versions 29") {
		t.Fatalf("heard, sent nothing: %q", msg)
	}
	// The heartbeat's tag carries the ranges.
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	SetHeartbeatFeatures(hb, metadata.SupportedFeatures())
	got, ok := HeartbeatFeatures(hb)
	if !ok || len(got) != len(metadata.SupportedFeatures()) {
		t.Fatalf("round trip: %v %v", got, ok)
	}
	for _, f := range got {
		if r := metadata.SupportedFeatures()[f.Name]; r.Min != f.Min || r.Max != f.Max {
			t.Errorf("%s %d-%d, want %d-%d", f.Name, f.Min, f.Max, r.Min, r.Max)
		}
	}
	bad := kmsg.NewPtrBrokerHeartbeatRequest()
	bad.UnknownTags.Set(FeaturesTag, []byte{0, 9, 'x'})
	if _, ok := HeartbeatFeatures(bad); ok {
		t.Fatal("a truncated tag read as features")
	}
	if _, ok := HeartbeatFeatures(kmsg.NewPtrBrokerHeartbeatRequest()); ok {
		t.Fatal("features read from a heartbeat without the tag")
	}
}

// TestKRaftUpgradeRecord: raising kraft.version from 0 to 1 records the static
// voters, with node id + 1 as raft ids and controller.quorum.voters' endpoints; a
// dynamic quorum, or records that do not raise it, get none.
func TestKRaftUpgradeRecord(t *testing.T) {
	im := featureImage(t, map[string]int16{"metadata.version": 33}, thisBuild(), false)
	st := QuorumStatus{Voters: []VoterStatus{{ID: 1}, {ID: 2}}}
	listeners := map[int32][]kmsg.DescribeQuorumResponseNodeListener{1: {{Name: "CONTROLLER", Host: "h1", Port: 9093}}, 2: {{Name: "CONTROLLER", Host: "h2", Port: 9193}}}
	raise := []metadata.Record{&metadata.FeatureLevelRecord{Name: "kraft.version", Level: 1}}
	up := KRaftUpgradeRecord(im, raise, st, listeners)
	if up == nil || len(up.Voters) != 2 || up.Voters[1].RaftID != 3 || up.Voters[1].Endpoints[0].Host != "h2" || up.Voters[0].DirectoryID != metadata.ZeroUUID {
		t.Fatalf("upgrade record %+v", up)
	}
	next := mustApply(t, im, append(raise, up)...)
	if vs, ok := next.QuorumVoters(); !ok || len(vs) != 2 || next.FinalizedLevel("kraft.version") != 1 {
		t.Fatalf("after the upgrade: %+v", vs)
	}
	if KRaftUpgradeRecord(next, raise, st, listeners) != nil {
		t.Fatal("a dynamic quorum got another voter set")
	}
	if KRaftUpgradeRecord(im, []metadata.Record{&metadata.FeatureLevelRecord{Name: "group.version", Level: 1}}, st, listeners) != nil {
		t.Fatal("records that do not raise kraft.version got a voter set")
	}
}

// TestKRaftUpgradeThroughController: UpdateFeatures raising kraft.version to 1
// commits the level with the quorum's voters in one entry, and a second raise
// writes nothing more.
func TestKRaftUpgradeThroughController(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.VoterListeners = map[int32][]kmsg.DescribeQuorumResponseNodeListener{1: {{Name: "CONTROLLER", Host: "127.0.0.1", Port: 9093}}}
	})
	_, driveAll := lifecycleNodes(h, 1)
	driveAll()
	r := h.do(updateFeatures(2, false, FeatureUpdate{"kraft.version", 1, UpgradeTypeUpgrade})).(*kmsg.UpdateFeaturesResponse)
	if r.ErrorCode != 0 {
		t.Fatalf("kraft.version 1: %+v", r)
	}
	im := h.image()
	vs, dynamic := im.QuorumVoters()
	if !dynamic || im.FinalizedLevel("kraft.version") != 1 || len(vs) != 1 || vs[0].RaftID != 2 || vs[0].Endpoints[0].Port != 9093 {
		t.Fatalf("after the upgrade: level %d, voters %+v", im.FinalizedLevel("kraft.version"), vs)
	}
	before := h.offset()
	if r := h.do(updateFeatures(2, false, FeatureUpdate{"kraft.version", 1, UpgradeTypeUpgrade})).(*kmsg.UpdateFeaturesResponse); r.ErrorCode != 0 || h.offset() != before {
		t.Fatalf("again: %+v, offset %d -> %d", r, before, h.offset())
	}
}
