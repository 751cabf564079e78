package main

// samsa features: the cluster's feature levels (KIP-584, KIP-778, KIP-1022), the jobs
// of Kafka's kafka-features.sh, with its flags and output.
//
//	samsa features [--bootstrap-server B] [--command-config F] describe
//	samsa features ... upgrade (--release-version V | --feature name=level...) [--dry-run]
//	samsa features ... downgrade (--release-version V | --feature name=level...) [--unsafe] [--dry-run]
//	samsa features ... disable --feature name... [--unsafe] [--dry-run]
//	samsa features version-mapping [--release-version V]
//
// describe asks one broker (ApiVersions v3) and prints a line per feature this build
// of the broker supports, as kafka-features.sh does:
//
//	Feature: metadata.version	SupportedMinVersion: 3.9-IV0	SupportedMaxVersion: 4.4-IV2	FinalizedVersionLevel: 4.4-IV2	Epoch: 12
//
// upgrade, downgrade and disable send one UpdateFeatures (57) (through a broker, to the
// active controller) and print a line per feature: "transaction.version was upgraded
// to 2." (with --dry-run "can be upgraded"), or "Could not upgrade
// transaction.version to 3. <the controller's reason>" and, after them, "1 out of 1
// operation(s) failed." with exit status 1. --release-version V upgrades
// metadata.version to V's level and every feature to its default there (upgrade sends
// no feature at level 0; downgrade sends them all); disable is a downgrade to 0.
// version-mapping prints the levels of a release without asking the cluster.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

func init() {
	register("features", "feature levels: describe, upgrade, downgrade, disable, version-mapping (kafka-features.sh)", runFeatures)
}

const featuresUsage = `usage: samsa features [flags] <command> [flags]
  describe                  the features a broker supports and the cluster's
                            finalized levels
  upgrade                   --release-version V (metadata.version and every feature
                            to V's defaults) or --feature name=level (repeatable)
  downgrade                 as upgrade; --unsafe (refused: Samsa, like Kafka, does
                            not do unsafe downgrades)
  disable                   --feature name (repeatable): a downgrade to level 0
  version-mapping           [--release-version V]: the levels a release formats at
upgrade, downgrade and disable take --dry-run (validate only).
common flags: --bootstrap-server host:port,... (default 127.0.0.1:9092),
  --command-config FILE (Kafka client properties), --timeout 30s`

// kafkaFeatureOrder is the order kafka-features.sh version-mapping lists the features
// in (Kafka's Feature enum).
var kafkaFeatureOrder = []string{
	metadata.FeatureKRaftVersion, metadata.FeatureTransactionVersion, metadata.FeatureGroupVersion,
	metadata.FeatureELRVersion, metadata.FeatureShareVersion, metadata.FeatureStreamsVersion,
}

type featuresOpts struct {
	release  string
	features repeated
	dryRun   bool
	unsafe   bool
}

func runFeatures(args []string) int { return featuresMain(args, os.Stdout) }

func featuresMain(args []string, out io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(os.Stderr, featuresUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	a := newAdminCmd("features", featuresUsage)
	var o featuresOpts
	a.fs.StringVar(&o.release, "release-version", "", "the release version (upgrade, downgrade, version-mapping)")
	a.fs.Var(&o.features, "feature", "name=level (upgrade, downgrade) or name (disable); repeatable")
	a.fs.BoolVar(&o.dryRun, "dry-run", false, "validate only")
	a.fs.BoolVar(&o.unsafe, "unsafe", false, "an unsafe downgrade")
	pos, ok := a.parse(args)
	if !ok {
		return 2
	}
	if len(pos) != 1 {
		fmt.Fprintf(os.Stderr, "samsa features: want one command, got %q\n%s\n", pos, featuresUsage)
		return 2
	}
	sub := pos[0]
	a.name = "features " + sub
	bad := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "samsa features %s: %s\n", sub, fmt.Sprintf(format, args...))
		return 2
	}
	switch sub {
	case "describe":
		if o.release != "" || len(o.features) > 0 || o.dryRun || o.unsafe {
			return bad("describe takes no --release-version, --feature, --dry-run or --unsafe")
		}
		return a.run(func(ctx context.Context, cl *kgo.Client, _ *kadm.Client) error { return featuresDescribe(ctx, cl, out) })
	case "version-mapping":
		if len(o.features) > 0 || o.dryRun || o.unsafe {
			return bad("version-mapping takes --release-version only")
		}
		if err := featuresVersionMapping(out, o.release); err != nil {
			fmt.Fprintf(os.Stderr, "samsa features %s: %v\n", sub, err)
			return 1
		}
		return 0
	case "upgrade", "downgrade", "disable":
	default:
		fmt.Fprintf(os.Stderr, "samsa features: unknown command %q\n%s\n", sub, featuresUsage)
		return 2
	}
	if sub == "upgrade" && o.unsafe {
		return bad("upgrade takes no --unsafe")
	}
	updates, err := featureUpdates(sub, o)
	if err != nil {
		return bad("%v", err)
	}
	return a.run(func(ctx context.Context, cl *kgo.Client, _ *kadm.Client) error {
		return featuresUpdate(ctx, cl, out, sub, o.dryRun, updates)
	})
}

// featureUpdate is one feature of an update, in the order it is printed.
type featureUpdate struct {
	name  string
	level int16
	typ   int8 // 1 upgrade, 2 safe downgrade, 3 unsafe downgrade (Kafka's UpgradeType)
}

// featureUpdates turns the flags of upgrade, downgrade or disable into updates, as
// kafka-features.sh does.
func featureUpdates(op string, o featuresOpts) ([]featureUpdate, error) {
	typ := int8(1)
	if op != "upgrade" {
		typ = 2
		if o.unsafe {
			typ = 3
		}
	}
	byName := map[string]int16{}
	add := func(name string, level int16) error {
		if _, dup := byName[name]; dup {
			return fmt.Errorf("Feature %s was specified more than once.", name)
		}
		byName[name] = level
		return nil
	}
	switch {
	case op == "disable":
		if o.release != "" {
			return nil, errors.New("disable takes --feature only")
		}
		for _, name := range o.features {
			if err := add(strings.TrimSpace(name), 0); err != nil {
				return nil, err
			}
		}
	case o.release != "" && len(o.features) > 0:
		return nil, errors.New("Can not specify `release-version` with other feature flags.")
	case o.release != "":
		mv, err := metadata.ParseMetadataVersion(o.release)
		if err != nil {
			return nil, fmt.Errorf("Unknown metadata.version %s. Supported metadata.version are %s", o.release, metadataVersionList())
		}
		for name, level := range metadata.ReleaseLevels(mv.Level) {
			// Don't ask to upgrade a feature to 0. kraft.version is left as it
			// is: its upgrade makes the voter set dynamic, an operator's step
			// of its own (--feature kraft.version=1).
			if name != metadata.FeatureKRaftVersion && (typ != 1 || level > 0) {
				byName[name] = level
			}
		}
	default:
		for _, f := range o.features {
			name, level, ok := strings.Cut(f, "=")
			if !ok {
				return nil, fmt.Errorf("Can't parse feature=level string %s: equals sign not found.", f)
			}
			n, err := strconv.ParseInt(strings.TrimSpace(level), 10, 16)
			if err != nil {
				return nil, fmt.Errorf("Can't parse feature=level string %s: unable to parse %s as a short.", f, strings.TrimSpace(level))
			}
			if err := add(strings.TrimSpace(name), int16(n)); err != nil {
				return nil, err
			}
		}
	}
	if len(byName) == 0 {
		return nil, fmt.Errorf("You must specify at least one feature to %s", op)
	}
	var out []featureUpdate
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, featureUpdate{name, byName[name], typ})
	}
	return out, nil
}

// metadataVersionList is "3.9-IV0, 4.0-IV0, ..., 4.4-IV2".
func metadataVersionList() string {
	var s []string
	for _, v := range metadata.MetadataVersions() {
		s = append(s, v.String())
	}
	return strings.Join(s, ", ")
}

// levelString is Kafka's FeatureCommand.levelToString: metadata.version by its
// release name, the others as numbers.
func levelString(feature string, level int16) string {
	if feature != metadata.FeatureMetadataVersion {
		return strconv.Itoa(int(level))
	}
	if v, ok := metadata.MetadataVersionOf(level); ok {
		return v.String()
	}
	return "UNKNOWN " + strconv.Itoa(int(level))
}

// featuresDescribe asks a broker (ApiVersions v3, as Kafka's Admin.describeFeatures)
// and prints kafka-features.sh describe's lines.
func featuresDescribe(ctx context.Context, cl *kgo.Client, out io.Writer) error {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = 3, "samsa-features", "1"
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return err
	}
	finalized := map[string]int16{}
	for _, f := range resp.FinalizedFeatures {
		finalized[f.Name] = f.MaxVersionLevel
	}
	epoch := "-"
	if resp.FinalizedFeaturesEpoch >= 0 {
		epoch = strconv.FormatInt(resp.FinalizedFeaturesEpoch, 10)
	}
	sup := slices.Clone(resp.SupportedFeatures)
	slices.SortFunc(sup, func(a, b kmsg.ApiVersionsResponseSupportedFeature) int { return strings.Compare(a.Name, b.Name) })
	for _, f := range sup {
		fmt.Fprintf(out, "Feature: %s\tSupportedMinVersion: %s\tSupportedMaxVersion: %s\tFinalizedVersionLevel: %s\tEpoch: %s\n",
			f.Name, levelString(f.Name, f.MinVersion), levelString(f.Name, f.MaxVersion), levelString(f.Name, finalized[f.Name]), epoch)
	}
	return nil
}

// featuresUpdate sends the updates (UpdateFeatures, to the active controller through
// a broker) and prints kafka-features.sh's line per feature.
func featuresUpdate(ctx context.Context, cl *kgo.Client, out io.Writer, op string, dryRun bool, updates []featureUpdate) error {
	req := kmsg.NewPtrUpdateFeaturesRequest()
	req.ValidateOnly = dryRun
	for _, u := range updates {
		fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		fu.Feature, fu.MaxVersionLevel, fu.UpgradeType = u.name, u.level, u.typ
		fu.AllowDowngrade = u.typ != 1 // version 0's spelling
		req.FeatureUpdates = append(req.FeatureUpdates, fu)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	// Version 2 answers for the whole request; 0 and 1 per feature.
	failed := map[string]string{}
	if resp.ErrorCode != 0 {
		msg := kerr.ErrorForCode(resp.ErrorCode).Error()
		if resp.ErrorMessage != nil {
			msg = *resp.ErrorMessage
		}
		for _, u := range updates {
			failed[u.name] = msg
		}
	}
	for _, r := range resp.Results {
		if r.ErrorCode != 0 {
			msg := kerr.ErrorForCode(r.ErrorCode).Error()
			if r.ErrorMessage != nil {
				msg = *r.ErrorMessage
			}
			failed[r.Feature] = msg
		}
	}
	for _, u := range updates {
		if msg, bad := failed[u.name]; bad {
			helper := "Could not "
			if dryRun {
				helper = "Can not "
			}
			suffix := op + " " + u.name + " to " + strconv.Itoa(int(u.level))
			if op == "disable" {
				suffix = "disable " + u.name
			}
			fmt.Fprintf(out, "%s%s. %s\n", helper, suffix, msg)
			continue
		}
		verb := " was "
		if dryRun {
			verb = " can be "
		}
		obj := op + "d to " + strconv.Itoa(int(u.level)) + "."
		if op == "disable" {
			obj = "disabled."
		}
		fmt.Fprintf(out, "%s%s%s\n", u.name, verb, obj)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d out of %d operation(s) failed.", len(failed), len(updates))
	}
	return nil
}

// featuresVersionMapping prints the levels a release formats at, as kafka-features.sh
// version-mapping: "metadata.version=33 (4.4-IV2)", then one "name=level" per feature.
func featuresVersionMapping(out io.Writer, release string) error {
	mv := metadata.LatestMetadataVersion()
	if release != "" {
		var err error
		if mv, err = metadata.ParseMetadataVersion(release); err != nil {
			return fmt.Errorf("Unknown release version '%s'. Supported versions are: %s to %s", release, metadata.MinMetadataVersion(), metadata.LatestMetadataVersion())
		}
	} else {
		release = mv.String()
	}
	levels := metadata.ReleaseLevels(mv.Level)
	fmt.Fprintf(out, "metadata.version=%d (%s)\n", mv.Level, release)
	for _, name := range kafkaFeatureOrder {
		fmt.Fprintf(out, "%s=%d\n", name, levels[name])
	}
	return nil
}
