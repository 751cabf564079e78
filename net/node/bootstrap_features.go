package node

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// Bootstrap feature levels: the finalized feature levels a cluster's metadata log
// starts with, written by `samsa storage format` into a controller's bootstrap records
// (bootstrap.go) as FeatureLevelRecords, as kafka-storage.sh format writes them into
// its bootstrap.checkpoint (KIP-1022):
//
//	--release-version V   the metadata.version of release V ("4.2": its newest level,
//	                      4.2-IV1; "4.0-IV1": that level) and each feature's default
//	                      level there (metadata.ReleaseLevels); default: the newest
//	                      Samsa supports, 4.4-IV2
//	--feature name=level  one feature at another level (repeatable)
//
// The node key samsa.transaction.version, where a node's configuration sets it, is the
// transaction.version level when no --feature names it: a configuration of a build
// that read the level from that key formats the cluster at the same level. Every level
// must be one Samsa supports, and each keeps its dependencies (share.version 1 needs
// metadata.version 4.1-IV1). Format every controller with the same arguments (their
// first snapshots must be the same).

// BootstrapFeatures returns the levels a cluster formatted with cfg, --release-version
// release ("" for the default) and --feature arguments features starts with, or
// Kafka's refusal.
func BootstrapFeatures(cfg *Config, release string, features []string) (map[string]int16, error) {
	given := map[string]int16{}
	for _, f := range features {
		name, level, err := ParseFeatureLevel(f)
		if err != nil {
			return nil, err
		}
		if _, dup := given[name]; dup {
			return nil, fmt.Errorf("%w: feature %s was specified more than once", ErrConfig, name)
		}
		given[name] = level
	}
	mv := metadata.LatestMetadataVersion()
	if l, ok := given[metadata.FeatureMetadataVersion]; ok {
		if release != "" {
			return nil, fmt.Errorf("%w: use --release-version instead of --feature %s=X to avoid ambiguity", ErrConfig, metadata.FeatureMetadataVersion)
		}
		if mv, ok = metadata.MetadataVersionOf(l); !ok {
			return nil, fmt.Errorf("%w: unknown metadata.version %d: supported levels are %d (%s) to %d (%s)", ErrConfig, l,
				metadata.MinMetadataVersion().Level, metadata.MinMetadataVersion(), metadata.LatestMetadataVersion().Level, metadata.LatestMetadataVersion())
		}
	} else if release != "" {
		var err error
		if mv, err = metadata.ParseMetadataVersion(release); err != nil {
			return nil, fmt.Errorf("%w: unknown release version '%s'; supported versions are: %s to %s", ErrConfig, release,
				metadata.MinMetadataVersion(), metadata.LatestMetadataVersion())
		}
	}
	levels := metadata.ReleaseLevels(mv.Level)
	// kraft.version is the quorum's, not the release's: 0 (a static voter set)
	// unless named; the format of a dynamic quorum raises it (FormatWith).
	levels[metadata.FeatureKRaftVersion] = 0
	if v, ok := cfg.Keys[configs.TransactionVersionKey]; ok {
		if _, named := given[metadata.FeatureTransactionVersion]; !named {
			n, err := strconv.ParseInt(v, 10, 16)
			if err != nil {
				return nil, fmt.Errorf("%w: %s=%q", ErrConfig, configs.TransactionVersionKey, v)
			}
			levels[metadata.FeatureTransactionVersion] = int16(n)
		}
	}
	for name, l := range given {
		if name == metadata.FeatureMetadataVersion {
			continue
		}
		if _, ok := metadata.FeatureByName(name); !ok {
			names := make([]string, 0, len(metadata.Features()))
			for _, f := range metadata.Features() {
				names = append(names, f.Name)
			}
			return nil, fmt.Errorf("%w: unsupported feature: %s. Supported features are: %s", ErrConfig, name, strings.Join(names, ", "))
		}
		levels[name] = l
	}
	for _, name := range slices.Sorted(maps.Keys(levels)) {
		if err := metadata.CheckDependencies(name, levels[name], levels); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrConfig, err)
		}
	}
	return levels, nil
}

// ParseFeatureLevel parses a name=level argument (--feature), as Kafka's tools do.
func ParseFeatureLevel(s string) (string, int16, error) {
	name, level, ok := strings.Cut(s, "=")
	if !ok {
		return "", 0, fmt.Errorf("%w: can't parse feature=level string %s: equals sign not found", ErrConfig, s)
	}
	name, level = strings.TrimSpace(name), strings.TrimSpace(level)
	n, err := strconv.ParseInt(level, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("%w: can't parse feature=level string %s: unable to parse %s as a short", ErrConfig, s, level)
	}
	return name, int16(n), nil
}

// FeatureRecords returns the records that finalize levels: metadata.version first,
// then the features above 0 by name (kraft.version 1 only for a dynamic quorum:
// FormatWith); with eligible.leader.replicas.version 1, then the cluster-level
// min.insync.replicas, cfg's (Kafka's ActivationRecordsGenerator: with ELR on, the
// controller and every leader read one value per topic).
func FeatureRecords(cfg *Config, levels map[string]int16) []metadata.Record {
	out := []metadata.Record{&metadata.FeatureLevelRecord{Name: metadata.FeatureMetadataVersion, Level: levels[metadata.FeatureMetadataVersion]}}
	for _, name := range slices.Sorted(maps.Keys(levels)) {
		if name != metadata.FeatureMetadataVersion && levels[name] > 0 {
			out = append(out, &metadata.FeatureLevelRecord{Name: name, Level: levels[name]})
		}
	}
	if levels[metadata.FeatureELRVersion] >= 1 {
		minISR := configs.Layers{Static: cfg.Keys}.BrokerValue("min.insync.replicas")
		out = append(out, &metadata.ConfigRecord{Resource: metadata.ResourceBroker, Key: "min.insync.replicas", Value: metadata.StringPtr(minISR)})
	}
	return out
}
