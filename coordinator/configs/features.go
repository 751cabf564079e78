package configs

import (
	"strings"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// GroupTypes are the group types a node's keys allow beside the classic protocol:
// "consumer", "share" and "streams" in group.coordinator.rebalance.protocols, or
// group.share.enable=true for share groups. A type is served only when its feature is
// finalized too (group.version, share.version, streams.version at 1 or more): the keys
// turn a type off on a node, the finalized levels turn it on in the cluster.
type GroupTypes struct {
	Consumer, Share, Streams bool
}

// AllowedGroupTypes reads GroupTypes from l.
func AllowedGroupTypes(l Layers) GroupTypes {
	var g GroupTypes
	for _, p := range strings.Split(l.BrokerValue("group.coordinator.rebalance.protocols"), ",") {
		switch strings.ToLower(strings.TrimSpace(p)) {
		case "consumer":
			g.Consumer = true
		case "share":
			g.Share = true
		case "streams":
			g.Streams = true
		}
	}
	g.Share = g.Share || l.BrokerValue("group.share.enable") == "true"
	return g
}

// TransactionVersionKey is the node key an earlier Samsa read the finalized
// transaction.version from. It now sets only the level a metadata log starts with
// (`samsa storage format` without --feature transaction.version) and the level of a
// log formatted before feature levels were kept (LegacyFeatureLevels).
const TransactionVersionKey = "samsa.transaction.version"

// LegacyFeatureLevels returns the finalized levels a node reads a metadata log at
// that holds no metadata.version record (one formatted by a Samsa that did not keep
// feature levels): metadata.version 4.2-IV1 (metadata.LegacyMetadataVersion), and
// the levels that build's node keys gave, so that such a cluster behaves as it did
// until its levels are written (the first UpdateFeatures writes them all):
// transaction.version = samsa.transaction.version (default 2), group.version,
// share.version and streams.version 1 where the keys allow the group type
// (AllowedGroupTypes; by default all three), kraft.version and
// eligible.leader.replicas.version 0. Like Image.FinalizedFeatures it lists the
// features above 0 only.
func LegacyFeatureLevels(l Layers) map[string]int16 {
	out := map[string]int16{metadata.FeatureMetadataVersion: metadata.LegacyMetadataVersion}
	if tv := int16(min(max(l.BrokerInt(TransactionVersionKey), 0), 2)); tv > 0 {
		out[metadata.FeatureTransactionVersion] = tv
	}
	g := AllowedGroupTypes(l)
	for name, on := range map[string]bool{metadata.FeatureGroupVersion: g.Consumer, metadata.FeatureShareVersion: g.Share, metadata.FeatureStreamsVersion: g.Streams} {
		if on {
			out[name] = 1
		}
	}
	return out
}

// FinalizedLevels returns the levels a node acts on in im: the image's finalized
// levels once the log holds them, else LegacyFeatureLevels of the node's keys l.
func FinalizedLevels(im *metadata.Image, l Layers) map[string]int16 {
	if im.FeaturesRecorded() {
		return im.FinalizedFeatures()
	}
	return LegacyFeatureLevels(l)
}
