package controller

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// Feature levels (KIP-584, KIP-778), as Kafka's FeatureControlManager and
// ClusterControlManager keep them: UpdateFeatures (57) changes the finalized levels
// (FeatureLevelRecords), a broker registers the ranges of levels it supports, and the
// controller refuses a level some unfenced registered broker does not support, and a
// registration that does not support a finalized level.
//
// A log without feature records (formatted by a build before them) is at the levels
// of configs.LegacyFeatureLevels, read from this controller's keys; the first
// UpdateFeatures on it writes every level, so that from then on the log alone says
// what they are.

// The upgrade types of UpdateFeatures v1+ (Kafka's FeatureUpdate.UpgradeType).
const (
	UpgradeTypeUpgrade         int8 = 1
	UpgradeTypeSafeDowngrade   int8 = 2
	UpgradeTypeUnsafeDowngrade int8 = 3
)

// FeatureUpdate is one update of UpdateFeatures: feature Name to Level, of upgrade
// type Type.
type FeatureUpdate struct {
	Name  string
	Level int16
	Type  int8
}

// disabled is the range of a feature a node does not know (Kafka's
// QuorumFeatures.DISABLED).
var disabled = metadata.VersionRange{}

// UpdateFeatureRecords validates updates against the finalized levels current of
// image im (configs.FinalizedLevels) as Kafka's FeatureControlManager.updateFeatures
// does, for the active controller nodeID, and returns the records that make them, or
// Kafka's message of the first update refused (INVALID_UPDATE_VERSION). Updates are
// checked in name order. The rules:
//
//   - the upgrade type is known; a level is at least 0; a level below the current
//     needs a downgrade type, one above it the upgrade type;
//   - this controller and every unfenced registered broker support the level (a
//     broker that registered no features supports metadata.version
//     LegacyMetadataVersion only and no level above 0 of the others);
//   - metadata.version: a downgrade only where no level in between changed the
//     metadata (MetadataChanged), never an unsafe one (Kafka does not do them either);
//   - every finalized level, updated or not, keeps its dependencies
//     (metadata.CheckDependencies; Kafka checks those of the updated features only);
//   - kraft.version: an upgrade from 0 to 1 makes a static quorum dynamic (KIP-853:
//     the caller adds the VotersRecord of the voters, KRaftUpgradeRecord); it is
//     never downgraded ("Can't downgrade the version of this feature.", Kafka's).
//
// On a log without feature records the records finalize every level (the current
// ones, then the updates), metadata.version first.
//
// live holds what the controller learned of brokers whose registration in im lists
// no features (nil: nothing).
func UpdateFeatureRecords(im *metadata.Image, current map[string]int16, nodeID int32, updates []FeatureUpdate, live *LiveFeatures) ([]metadata.Record, string) {
	proposed := make(map[string]int16, len(current)+len(updates))
	for n, l := range current {
		proposed[n] = l
	}
	byName := map[string]FeatureUpdate{}
	for _, u := range updates {
		byName[u.Name] = u // the last of a name, as Kafka's map of updates
		proposed[u.Name] = u.Level
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	local := metadata.SupportedFeatures()
	var recs []metadata.Record
	for _, n := range names {
		u := byName[n]
		if msg := checkFeatureUpdate(im, current, proposed, local, nodeID, u, live); msg != "" {
			return nil, msg
		}
		if n == metadata.FeatureKRaftVersion && u.Level == current[n] {
			continue // kraft.version is written once, with the voters
		}
		recs = append(recs, &metadata.FeatureLevelRecord{Name: n, Level: u.Level})
	}
	if !im.FeaturesRecorded() {
		recs = recs[:0]
		all := make([]string, 0, len(proposed))
		for n, l := range proposed {
			if n != metadata.FeatureMetadataVersion && l > 0 {
				all = append(all, n)
			}
		}
		slices.Sort(all)
		recs = append(recs, &metadata.FeatureLevelRecord{Name: metadata.FeatureMetadataVersion, Level: proposed[metadata.FeatureMetadataVersion]})
		for _, n := range all {
			recs = append(recs, &metadata.FeatureLevelRecord{Name: n, Level: proposed[n]})
		}
	}
	return recs, ""
}

// checkFeatureUpdate is Kafka's updateFeature for one update; "" when it may be made.
// LiveFeatures is what a controller learned, outside the log, of the brokers whose
// registration lists no features (written to a log without feature levels, or by a
// build before them): the ranges a broker sent (FeaturesTag), and the brokers that
// have not sent a heartbeat to this controller since it became active (their build
// is not known yet). A broker in neither is of a build before feature levels.
type LiveFeatures struct {
	Sent   map[int32][]metadata.BrokerFeature
	NotYet map[int32]bool
}

func checkFeatureUpdate(im *metadata.Image, current, proposed map[string]int16, local map[string]metadata.VersionRange, nodeID int32, u FeatureUpdate, live *LiveFeatures) string {
	invalid := func(msg string) string {
		return fmt.Sprintf("Invalid update version %d for feature %s. %s", u.Level, u.Name, msg)
	}
	if u.Type < UpgradeTypeUpgrade || u.Type > UpgradeTypeUnsafeDowngrade {
		return invalid("The controller does not support the given upgrade type.")
	}
	cur := current[u.Name]
	if u.Level < 0 {
		return invalid("A feature version cannot be less than 0.")
	}
	if why := notSupported(u.Level, fmt.Sprintf("Local controller %d", nodeID), rangeOr(local, u.Name)); why != "" {
		return invalid(why)
	}
	for _, b := range im.Brokers() {
		if b.Fenced {
			continue
		}
		if live != nil && len(b.Features) == 0 {
			if f, ok := live.Sent[b.ID]; ok {
				b.Features = f
			} else if live.NotYet[b.ID] {
				return invalid(fmt.Sprintf("Broker %d registered without its supported feature levels and has not sent them to this controller yet; retry after its next heartbeat (broker.heartbeat.interval.ms).", b.ID))
			}
		}
		if why := notSupported(u.Level, fmt.Sprintf("Broker %d", b.ID), brokerSupports(b, u.Name)); why != "" {
			return invalid(why)
		}
	}
	switch {
	case u.Level < cur && u.Type == UpgradeTypeUpgrade:
		return invalid("Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.")
	case u.Level > cur && u.Type != UpgradeTypeUpgrade:
		return invalid("Can't downgrade to a newer version.")
	}
	if u.Name == metadata.FeatureKRaftVersion && u.Level < cur {
		return invalid("Can't downgrade the version of this feature.")
	}
	if u.Name == metadata.FeatureMetadataVersion && u.Level < cur && metadata.MetadataChanged(cur, u.Level) {
		why := "Refusing to perform the requested downgrade because it might delete metadata information."
		if u.Type == UpgradeTypeUnsafeDowngrade {
			why = "Unsafe metadata downgrade is not supported in this version."
		}
		return fmt.Sprintf("Unsupported metadata.version downgrade from %d to %d. %s", cur, u.Level, why)
	}
	if err := metadata.CheckDependencies(u.Name, u.Level, proposed); err != nil {
		return invalid(err.Error())
	}
	// The levels left as they are must still find theirs (a metadata.version
	// downgrade below what share.version 1 needs, say).
	others := make([]string, 0, len(proposed))
	for n, l := range proposed {
		if n != u.Name && l > 0 {
			others = append(others, n)
		}
	}
	slices.Sort(others)
	for _, n := range others {
		if _, known := metadata.FeatureByName(n); !known {
			continue
		}
		if err := metadata.CheckDependencies(n, proposed[n], proposed); err != nil {
			return invalid(err.Error())
		}
	}
	return ""
}

// notSupported is Kafka's QuorumFeatures.reasonNotSupported.
func notSupported(level int16, what string, r metadata.VersionRange) string {
	if r.Contains(level) {
		return ""
	}
	if r.Max == 0 {
		return what + " does not support this feature."
	}
	return what + " only supports versions " + r.String()
}

func rangeOr(m map[string]metadata.VersionRange, name string) metadata.VersionRange {
	if r, ok := m[name]; ok {
		return r
	}
	return disabled
}

// brokerSupports is the range of feature name broker b registered: none registered
// (a broker of a build before feature levels) supports the metadata.version of a log
// without feature records only, as Kafka takes a broker that sends no
// metadata.version to support only the first one.
func brokerSupports(b metadata.BrokerImage, name string) metadata.VersionRange {
	if r, ok := b.SupportedFeature(name); ok {
		return r
	}
	if name == metadata.FeatureMetadataVersion {
		return metadata.VersionRange{Min: metadata.LegacyMetadataVersion, Max: metadata.LegacyMetadataVersion}
	}
	return disabled
}

// RegistrationFeatureCheck returns why a broker registering features may not join a
// cluster at image im (Kafka's ClusterControlManager.processRegistrationFeature, its
// message), or "": every finalized level must be in the range the broker registered
// (a broker that sends no metadata.version supports LegacyMetadataVersion only, a
// feature it does not list only 0). A log without feature records finalizes nothing
// the registration is checked against: its levels are the nodes' keys'.
func RegistrationFeatureCheck(im *metadata.Image, features []metadata.BrokerFeature) string {
	if !im.FeaturesRecorded() {
		return ""
	}
	b := metadata.BrokerImage{Features: features}
	fin := im.FinalizedFeatures()
	names := make([]string, 0, len(fin)+len(features))
	for n := range fin {
		names = append(names, n)
	}
	for _, f := range features {
		if _, ok := fin[f.Name]; !ok {
			names = append(names, f.Name)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		if n == metadata.FeatureKRaftVersion {
			continue // the quorum's, not the brokers' (Kafka does not check it either)
		}
		r := brokerSupports(b, n)
		if level := fin[n]; !r.Contains(level) {
			return fmt.Sprintf("Unable to register because the broker does not support finalized version %d of %s. The broker wants a version between %d and %d, inclusive.",
				level, n, r.Min, r.Max)
		}
	}
	return ""
}

// registrationFeatures reads a registration's features; false when one is malformed
// (INVALID_REQUEST).
func registrationFeatures(r *kmsg.BrokerRegistrationRequest) ([]metadata.BrokerFeature, bool) {
	var out []metadata.BrokerFeature
	for _, f := range r.Features {
		bf := metadata.BrokerFeature{Name: f.Name, Min: f.MinSupportedVersion, Max: f.MaxSupportedVersion}
		if bf.Name == "" || bf.Min < 0 || bf.Max < bf.Min || slices.ContainsFunc(out, func(o metadata.BrokerFeature) bool { return o.Name == bf.Name }) {
			return nil, false
		}
		out = append(out, bf)
	}
	return out, true
}

// elrLevelRecords returns the records a change of eligible.leader.replicas.version
// among the feature records recs needs before them (controller_elr.go): enabling it,
// the min.insync.replicas configs; disabling it, the partitions back to the classic
// rule, or why that cannot be done.
func (c *Controller) elrLevelRecords(im *metadata.Image, recs []metadata.Record) ([]metadata.Record, string) {
	cur := configs.FinalizedLevels(im, c.layers(im, ""))[metadata.FeatureELRVersion]
	for _, rec := range recs {
		fl := rec.(*metadata.FeatureLevelRecord)
		if fl.Name != metadata.FeatureELRVersion {
			continue
		}
		switch {
		case fl.Level >= 1:
			return ELRSafetyRecords(im, configs.Layers{Static: c.cfg.Static}.BrokerValue(minISRKey)), ""
		case cur >= 1:
			return ELRDowngradeRecords(im)
		}
	}
	return nil, ""
}

// updateFeaturesLocked is UpdateFeatures (57): the updates validated against the
// pending image (UpdateFeatureRecords), written as one entry unless ValidateOnly, and
// answered once committed: a refusal is INVALID_UPDATE_VERSION on the whole request
// with Kafka's message ("The update failed for all features since the following
// feature had an error: ..."); versions 0 and 1 list every feature in Results on
// success. Version 0's AllowDowngrade is a safe downgrade. A change of
// eligible.leader.replicas.version writes what it needs in the same entry, before the
// level (elrLevelRecords).
func (c *Controller) updateFeaturesLocked(r *kmsg.UpdateFeaturesRequest) *op {
	resp := r.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	resp.SetVersion(r.GetVersion())
	im := c.mu.pending
	updates := make([]FeatureUpdate, 0, len(r.FeatureUpdates))
	for _, u := range r.FeatureUpdates {
		t := u.UpgradeType
		if r.GetVersion() == 0 {
			t = UpgradeTypeUpgrade
			if u.AllowDowngrade {
				t = UpgradeTypeSafeDowngrade
			}
		}
		updates = append(updates, FeatureUpdate{Name: u.Feature, Level: u.MaxVersionLevel, Type: t})
	}
	recs, msg := UpdateFeatureRecords(im, configs.FinalizedLevels(im, c.layers(im, "")), c.cfg.NodeID, updates, c.liveFeaturesLocked(im))
	up := KRaftUpgradeRecord(im, recs, c.q.Status(), c.cfg.VoterListeners)
	if up != nil && msg == "" {
		if _, err := (&metadata.Image{}).Apply(up); err != nil {
			msg = fmt.Sprintf("Invalid update version 1 for feature kraft.version. The voter set cannot be recorded: %v", err)
		}
	}
	if msg != "" {
		c.log.Warn("controller: feature update refused", "reason", msg)
		resp.ErrorCode = kerr.InvalidUpdateVersion.Code
		resp.ErrorMessage = kmsg.StringPtr("The update failed for all features since the following feature had an error: " + msg)
		return &op{resp: resp}
	}
	if pre, why := c.elrLevelRecords(im, recs); why != "" {
		msg = fmt.Sprintf("Invalid update version 0 for feature %s. %s", metadata.FeatureELRVersion, why)
		c.log.Warn("controller: feature update refused", "reason", msg)
		resp.ErrorCode = kerr.InvalidUpdateVersion.Code
		resp.ErrorMessage = kmsg.StringPtr("The update failed for all features since the following feature had an error: " + msg)
		return &op{resp: resp}
	} else if len(pre) > 0 {
		recs = append(pre, recs...)
	}
	if r.GetVersion() <= 1 {
		for _, u := range r.FeatureUpdates {
			rr := kmsg.NewUpdateFeaturesResponseResult()
			rr.Feature = u.Feature
			resp.Results = append(resp.Results, rr)
		}
	}
	if r.ValidateOnly || len(recs) == 0 {
		return &op{resp: resp}
	}
	if up != nil {
		recs = append(recs, up)
		c.log.Info("controller: the voter set becomes dynamic (kraft.version 1)", "voters", len(up.Voters))
	}
	for _, rec := range recs {
		if fl, ok := rec.(*metadata.FeatureLevelRecord); ok {
			c.log.Info("controller: finalizing a feature level", "feature", fl.Name, "level", fl.Level, "was", configs.FinalizedLevels(im, c.layers(im, ""))[fl.Name])
		}
	}
	return &op{recs: recs, finish: func(uint64) kmsg.Response { return resp }}
}

// KRaftUpgradeRecord returns the VotersRecord that goes with recs when they raise
// kraft.version from 0 to 1 on image im (nil otherwise): the static quorum's voters
// (st, the leader's view) with raft ids node id + 1, no directory id yet (each voter
// records its own with UpdateRaftVoter once it reads the level) and the endpoints of
// controller.quorum.voters (listeners).
func KRaftUpgradeRecord(im *metadata.Image, recs []metadata.Record, st QuorumStatus, listeners map[int32][]kmsg.DescribeQuorumResponseNodeListener) *metadata.VotersRecord {
	if _, dynamic := im.QuorumVoters(); dynamic || im.FinalizedLevel(metadata.FeatureKRaftVersion) >= 1 {
		return nil
	}
	raised := slices.ContainsFunc(recs, func(r metadata.Record) bool {
		fl, ok := r.(*metadata.FeatureLevelRecord)
		return ok && fl.Name == metadata.FeatureKRaftVersion && fl.Level >= 1
	})
	if !raised {
		return nil
	}
	out := &metadata.VotersRecord{}
	for _, v := range st.Voters {
		qv := metadata.QuorumVoter{ID: v.ID, RaftID: uint64(v.ID) + 1, KRaftVersion: metadata.SupportedFeatures()[metadata.FeatureKRaftVersion]}
		for _, l := range listeners[v.ID] {
			qv.Endpoints = append(qv.Endpoints, metadata.VoterEndpoint{Name: l.Name, Host: l.Host, Port: l.Port})
		}
		out.Voters = append(out.Voters, qv)
	}
	return out
}
