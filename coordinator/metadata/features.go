package metadata

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Feature levels (KIP-584, KIP-778, KIP-1022), as KRaft keeps them: the cluster's
// finalized level of each feature is a FeatureLevelRecord in the metadata log, written
// at format time (the bootstrap records of `samsa storage format --release-version V
// --feature f=n`) and changed by UpdateFeatures through the active controller. Every
// node acts on the finalized levels of its image, so nodes of two builds can run in one
// cluster while it is upgraded: a level is raised only once every registered broker
// supports it.
//
// The tables below are Samsa's: the levels of each feature this build supports, and
// Kafka's numbering of them (server-common's MetadataVersion, TransactionVersion,
// GroupVersion, ShareVersion, StreamsVersion, EligibleLeaderReplicasVersion and
// KRaftVersion enums), with the metadata.version at which Kafka makes each level the
// default of a newly formatted cluster (its "bootstrap metadata version") and the
// levels it depends on.

// The features Samsa serves, by Kafka's names.
const (
	FeatureMetadataVersion    = "metadata.version"
	FeatureKRaftVersion       = "kraft.version"
	FeatureTransactionVersion = "transaction.version"
	FeatureGroupVersion       = "group.version"
	FeatureShareVersion       = "share.version"
	FeatureStreamsVersion     = "streams.version"
	FeatureELRVersion         = "eligible.leader.replicas.version"
)

// VersionRange is a range of feature levels, both ends inclusive (Kafka's
// SupportedVersionRange).
type VersionRange struct {
	Min, Max int16
}

// Contains reports whether level is in r.
func (r VersionRange) Contains(level int16) bool { return level >= r.Min && level <= r.Max }

// String is Kafka's VersionRange.toString: "1" for a single level, "1-2" otherwise.
func (r VersionRange) String() string {
	if r.Min == r.Max {
		return strconv.Itoa(int(r.Min))
	}
	return fmt.Sprintf("%d-%d", r.Min, r.Max)
}

// MetadataVersion is one level of metadata.version: Kafka's MetadataVersion enum
// value of that feature level.
type MetadataVersion struct {
	Level   int16
	Release string // "4.0"
	IV      string // "IV3"
	// Changed is Kafka's didMetadataChange: this level changed what the metadata log
	// holds, so a cluster finalized at it or above cannot safely go below it.
	Changed bool
}

// String is Kafka's spelling, "4.0-IV3".
func (v MetadataVersion) String() string { return v.Release + "-" + v.IV }

// metadataVersions are the metadata.version levels Samsa supports, oldest first, as
// Kafka numbers them: 3.9-IV0 (21), the last release before Kafka 4.0, to 4.4-IV2
// (33), Kafka 4.4's latest production level. Samsa's metadata log is its own (its
// record layouts are in the package doc), so a level here changes no record Samsa
// writes: it is the level Kafka's tools and clients read, and the one the other
// features' levels depend on.
var metadataVersions = []MetadataVersion{
	{21, "3.9", "IV0", false},
	{22, "4.0", "IV0", false},
	{23, "4.0", "IV1", true},
	{24, "4.0", "IV2", false},
	{25, "4.0", "IV3", false},
	{26, "4.1", "IV0", false},
	{27, "4.1", "IV1", false},
	{28, "4.2", "IV0", false},
	{29, "4.2", "IV1", false},
	{30, "4.3", "IV0", true},
	{31, "4.4", "IV0", false},
	{32, "4.4", "IV1", true},
	{33, "4.4", "IV2", true},
}

// LatestMetadataVersion is the newest metadata.version Samsa supports: the default of
// `samsa storage format` without --release-version.
func LatestMetadataVersion() MetadataVersion { return metadataVersions[len(metadataVersions)-1] }

// MinMetadataVersion is the oldest metadata.version Samsa supports.
func MinMetadataVersion() MetadataVersion { return metadataVersions[0] }

// MetadataVersions returns every supported metadata.version, oldest first. The slice
// is shared: do not modify it.
func MetadataVersions() []MetadataVersion { return metadataVersions }

// LegacyMetadataVersion is the level a metadata log without a metadata.version record
// is read at: one formatted before Samsa kept feature levels. It is 4.2-IV1, release
// 4.2's level, whose defaults are what such a build served (consumer, share and
// streams groups, transaction.version 2).
const LegacyMetadataVersion int16 = 29

// MetadataVersionOf returns metadata.version level.
func MetadataVersionOf(level int16) (MetadataVersion, bool) {
	i, ok := slices.BinarySearchFunc(metadataVersions, level, func(v MetadataVersion, l int16) int { return int(v.Level) - int(l) })
	if !ok {
		return MetadataVersion{}, false
	}
	return metadataVersions[i], true
}

// ParseMetadataVersion reads a release version as Kafka's MetadataVersion.fromVersionString
// does: "4.0" (or "4.0.1": the patch is ignored) is the newest level of release 4.0
// (4.0-IV3), "4.0-IV1" is exactly that level.
func ParseMetadataVersion(s string) (MetadataVersion, error) {
	key := s
	if parts := strings.Split(s, "."); len(parts) > 2 {
		key = parts[0] + "." + parts[1]
	}
	var found *MetadataVersion
	for i := range metadataVersions {
		v := &metadataVersions[i]
		if v.String() == key || v.Release == key {
			found = v // the last of a release is its newest level
		}
	}
	if found == nil {
		return MetadataVersion{}, fmt.Errorf("%w: unknown release version %q (supported: %s to %s)", ErrInvalidRecord, s,
			MinMetadataVersion(), LatestMetadataVersion())
	}
	return *found, nil
}

// MetadataChanged reports whether a level between from and to (either may be the
// higher) changed what the metadata log holds (Kafka's
// MetadataVersion.checkIfMetadataChanged): going down across such a level may lose
// metadata, so Kafka, and Samsa, refuse it.
func MetadataChanged(from, to int16) bool {
	lo, hi := min(from, to), max(from, to)
	for _, v := range metadataVersions {
		if v.Level > lo && v.Level <= hi && v.Changed {
			return true
		}
	}
	return false
}

// FeatureLevel is one level of a feature other than metadata.version.
type FeatureLevel struct {
	Level int16
	// Bootstrap is the metadata.version from which Kafka formats a new cluster at this
	// level by default (Kafka's bootstrapMetadataVersion).
	Bootstrap int16
	// DependsOn are the levels other features must be at for this one (Kafka's
	// dependencies).
	DependsOn map[string]int16
}

// Feature is a feature other than metadata.version and the levels of it this build
// supports, lowest first.
type Feature struct {
	Name   string
	Levels []FeatureLevel
}

// Supported is the range of levels this build supports.
func (f Feature) Supported() VersionRange {
	return VersionRange{f.Levels[0].Level, f.Levels[len(f.Levels)-1].Level}
}

// DefaultLevel is the feature's level in a cluster formatted at metadata.version mv
// (Kafka's Feature.defaultLevel): its highest level whose bootstrap version is at
// most mv.
func (f Feature) DefaultLevel(mv int16) int16 {
	level := f.Levels[0].Level
	for _, l := range f.Levels {
		if l.Bootstrap <= mv {
			level = l.Level
		}
	}
	return level
}

func (f Feature) level(l int16) (FeatureLevel, bool) {
	for _, fl := range f.Levels {
		if fl.Level == l {
			return fl, true
		}
	}
	return FeatureLevel{}, false
}

// features are the features other than metadata.version, by name. Each lists only
// the levels Samsa supports:
//
//   - kraft.version 0-1: 0 is a static voter set (controller.quorum.voters), 1 a
//     dynamic one (KIP-853: the log records the voters, VotersRecord, and
//     AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter change them); Kafka's
//     default from 3.9-IV0, which its format command, as Samsa's, applies only to
//     a quorum formatted without controller.quorum.voters (--standalone,
//     --initial-controllers, --no-initial-controllers).
//   - transaction.version 0-2: 2 is KIP-890 part 2, an epoch bump at every
//     transaction (coordinator/txn); Kafka's default from 4.0-IV2.
//   - group.version 0-1: 1 serves the consumer rebalance protocol (KIP-848,
//     ConsumerGroupHeartbeat); default from 4.0-IV0.
//   - share.version 0-1: 1 serves share groups (KIP-932); default from 4.2-IV0, and it
//     needs metadata.version 4.1-IV1.
//   - streams.version 0-1: 1 serves streams groups (KIP-1071); default from 4.2-IV1.
//   - eligible.leader.replicas.version 0-1: 1 keeps eligible leader replicas
//     (KIP-966: the high watermark advances only with min.insync.replicas in the
//     ISR, and a leader is elected from the ISR, then the ELR); default from 4.1-IV0,
//     and it needs metadata.version 4.0-IV1.
var features = []Feature{
	{Name: FeatureELRVersion, Levels: []FeatureLevel{{Level: 0}, {Level: 1, Bootstrap: 26, DependsOn: map[string]int16{FeatureMetadataVersion: 23}}}},
	{Name: FeatureGroupVersion, Levels: []FeatureLevel{{Level: 0}, {Level: 1, Bootstrap: 22}}},
	{Name: FeatureKRaftVersion, Levels: []FeatureLevel{{Level: 0}, {Level: 1, Bootstrap: 21}}},
	{Name: FeatureShareVersion, Levels: []FeatureLevel{{Level: 0}, {Level: 1, Bootstrap: 28, DependsOn: map[string]int16{FeatureMetadataVersion: 27}}}},
	{Name: FeatureStreamsVersion, Levels: []FeatureLevel{{Level: 0}, {Level: 1, Bootstrap: 29}}},
	{Name: FeatureTransactionVersion, Levels: []FeatureLevel{{Level: 0}, {Level: 1, Bootstrap: 24}, {Level: 2, Bootstrap: 24}}},
}

// Features returns the features other than metadata.version, sorted by name. The
// slice is shared: do not modify it.
func Features() []Feature { return features }

// FeatureByName returns the feature called name (not metadata.version).
func FeatureByName(name string) (Feature, bool) {
	for _, f := range features {
		if f.Name == name {
			return f, true
		}
	}
	return Feature{}, false
}

// SupportedFeatures returns the levels this build supports, metadata.version
// included: what a broker registers (BrokerRegistration's Features) and ApiVersions
// reports as supported.
func SupportedFeatures() map[string]VersionRange {
	out := map[string]VersionRange{FeatureMetadataVersion: {MinMetadataVersion().Level, LatestMetadataVersion().Level}}
	for _, f := range features {
		out[f.Name] = f.Supported()
	}
	return out
}

// ReleaseLevels returns the levels a cluster formatted at metadata.version mv starts
// with: mv, and each feature's default at mv (Kafka's kafka-features version-mapping).
func ReleaseLevels(mv int16) map[string]int16 {
	out := map[string]int16{FeatureMetadataVersion: mv}
	for _, f := range features {
		out[f.Name] = f.DefaultLevel(mv)
	}
	return out
}

// CheckDependencies checks that feature name at level may be finalized beside levels
// (the finalized or proposed levels of every feature; a missing one is at 0), as
// Kafka's Feature.validateVersion: a level of 1 or more needs metadata.version, and
// each level's dependencies must hold. The error's text is Kafka's (the message of
// UpdateFeatures' INVALID_UPDATE_VERSION and of the format command's refusal).
func CheckDependencies(name string, level int16, levels map[string]int16) error {
	if name == FeatureMetadataVersion {
		return nil
	}
	f, ok := FeatureByName(name)
	if !ok {
		return fmt.Errorf("Feature %s not found.", name)
	}
	fl, ok := f.level(level)
	if !ok {
		return fmt.Errorf("No feature:%s with feature level %d", name, level)
	}
	if mv := levels[FeatureMetadataVersion]; level >= 1 && mv < MinMetadataVersion().Level {
		return fmt.Errorf("%s could not be set to %d because it depends on metadata.version=%d (%s)",
			name, level, MinMetadataVersion().Level, MinMetadataVersion())
	}
	deps := make([]string, 0, len(fl.DependsOn))
	for d := range fl.DependsOn {
		deps = append(deps, d)
	}
	slices.Sort(deps)
	for _, d := range deps {
		if levels[d] < fl.DependsOn[d] {
			return fmt.Errorf("%s could not be set to %d because it depends on %s level %d", name, level, d, fl.DependsOn[d])
		}
	}
	return nil
}

// FeatureLevelRecord finalizes feature Name at Level (Kafka's FeatureLevelRecord,
// metadata record api key 12). Level 0 removes the feature (it is then at 0, not
// finalized); metadata.version is never removed. Image.Apply accepts any feature
// name, so that an image keeps the levels of features a newer build wrote; the
// controller writes only the features of this package's tables, at levels every
// registered broker supports.
type FeatureLevelRecord struct {
	Name  string
	Level int16
}

func (*FeatureLevelRecord) recordType() recordType { return typeFeatureLevel }

// typeFeatureLevel is Kafka's api key of FeatureLevelRecord. This log gave type 12 to
// RemoveUserScramCredential (version 1) before it kept feature levels: a feature level
// is type 12 at version 2, and the version byte tells the two apart.
const (
	typeFeatureLevel    recordType = 12
	featureLevelVersion byte       = 2
)

// maxFeatureName bounds a feature's name (Kafka's are under 40 bytes).
const maxFeatureName = 255

// FinalizedFeatures returns the finalized level of every feature the log names at a
// level above 0, metadata.version included once recorded (nil while the log holds no
// feature level). The map is shared: do not modify it.
func (im *Image) FinalizedFeatures() map[string]int16 { return im.features }

// FinalizedLevel returns feature name's finalized level (0 when not finalized).
func (im *Image) FinalizedLevel(name string) int16 { return im.features[name] }

// ELREnabled reports whether eligible.leader.replicas.version is 1 or more: the
// controller keeps eligible leader replicas and a leader's high watermark advances
// only with min.insync.replicas in the ISR (KIP-966). A log without feature levels
// is at 0.
func (im *Image) ELREnabled() bool { return im.features[FeatureELRVersion] >= 1 }

// FeaturesRecorded reports whether the log holds a metadata.version record: a log
// formatted before Samsa kept feature levels holds none (see LegacyMetadataVersion).
func (im *Image) FeaturesRecorded() bool {
	_, ok := im.features[FeatureMetadataVersion]
	return ok
}

// featureRecords returns the records that rebuild the finalized levels:
// metadata.version first, then the others by name.
func (im *Image) featureRecords() []Record {
	if len(im.features) == 0 {
		return nil
	}
	names := make([]string, 0, len(im.features))
	for n := range im.features {
		if n != FeatureMetadataVersion {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var out []Record
	if mv, ok := im.features[FeatureMetadataVersion]; ok {
		out = append(out, &FeatureLevelRecord{Name: FeatureMetadataVersion, Level: mv})
	}
	for _, n := range names {
		out = append(out, &FeatureLevelRecord{Name: n, Level: im.features[n]})
	}
	return out
}

// featureLevel applies a FeatureLevelRecord.
func (b *builder) featureLevel(r *FeatureLevelRecord) error {
	switch {
	case r.Name == "" || len(r.Name) > maxFeatureName:
		return fmt.Errorf("%w: feature name of %d bytes", ErrInvalidRecord, len(r.Name))
	case r.Level < 0:
		return fmt.Errorf("%w: feature %s level %d", ErrInvalidRecord, r.Name, r.Level)
	case r.Name == FeatureMetadataVersion && r.Level < 1:
		return fmt.Errorf("%w: metadata.version level %d: it is never removed", ErrInvalidRecord, r.Level)
	}
	if cur, ok := b.im.features[r.Name]; ok == (r.Level != 0) && cur == r.Level {
		return nil
	}
	if r.Name == FeatureELRVersion && r.Level == 0 && b.im.ELREnabled() {
		// What only ELR allows must be gone first (the controller writes the changes
		// before the level, in the same entry): a build before ELR reads the
		// partitions of the images after this one.
		if err := b.noELRState(); err != nil {
			return fmt.Errorf("%w: %s to 0: %v", ErrInvalidRecord, FeatureELRVersion, err)
		}
	}
	if !b.featuresCopied {
		b.im.features = cloneMap(b.im.features)
		b.featuresCopied = true
	}
	if r.Level == 0 {
		delete(b.im.features, r.Name)
		if len(b.im.features) == 0 {
			b.im.features = nil
		}
	} else {
		b.im.features[r.Name] = r.Level
	}
	return nil
}

// noELRState returns an error naming a partition with an ELR, a last known ELR or an
// empty ISR.
func (b *builder) noELRState() error {
	for _, t := range b.im.topics.all() {
		for i, p := range t.Partitions {
			if len(p.ELR) > 0 || len(p.LastKnownELR) > 0 || len(p.ISR) == 0 {
				return fmt.Errorf("partition %d of %q has ISR %v, ELR %v, last known ELR %v", i, t.Name, p.ISR, p.ELR, p.LastKnownELR)
			}
		}
	}
	return nil
}

// BrokerFeature is the range of levels of a feature a broker registered as supported
// (BrokerRegistration's Features, kept in its RegisterBrokerRecord as Kafka's).
type BrokerFeature struct {
	Name     string
	Min, Max int16
}

// SupportedFeature returns the range of feature name broker b registered, and false
// when it registered none for it.
func (b BrokerImage) SupportedFeature(name string) (VersionRange, bool) {
	for _, f := range b.Features {
		if f.Name == name {
			return VersionRange{f.Min, f.Max}, true
		}
	}
	return VersionRange{}, false
}

// validBrokerFeatures checks a registration's features: named once each, with a
// range of levels at or above 0.
func validBrokerFeatures(fs []BrokerFeature) error {
	for i, f := range fs {
		if f.Name == "" || len(f.Name) > maxFeatureName || f.Min < 0 || f.Max < f.Min {
			return fmt.Errorf("feature %q range %d-%d", f.Name, f.Min, f.Max)
		}
		for _, o := range fs[:i] {
			if o.Name == f.Name {
				return fmt.Errorf("feature %q listed twice", f.Name)
			}
		}
	}
	return nil
}
