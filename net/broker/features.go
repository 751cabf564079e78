package broker

import (
	"maps"
	"sync/atomic"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/kafka"
)

// featureState is the feature levels (KIP-584) this broker acts on, followed from its
// metadata image as Kafka's brokers follow theirs (FeaturesPublisher): the image's
// finalized levels, or, for a log formatted before Samsa kept feature levels, the
// levels the node's keys gave (configs.LegacyFeatureLevels). What depends on them
// changes at run time, with the image:
//
//   - the adapter (kafka.Broker.SetFeatures): ApiVersions v3+ reports them, with
//     FinalizedFeaturesEpoch the metadata offset of the image where they last changed
//     (the image this broker started from, before any change), and advertises the
//     group APIs of the group types served;
//   - the consumer protocol (ConsumerGroupHeartbeat, ConsumerGroupDescribe) is served
//     at group.version 1, share groups at share.version 1, streams groups at
//     streams.version 1, each only where the node's keys allow the type too
//     (configs.AllowedGroupTypes: group.coordinator.rebalance.protocols,
//     group.share.enable), as Kafka asks both;
//   - the transaction coordinator bumps the epoch per transaction only at
//     transaction.version 2 (txn.Coordinator.SetTransactionVersion).
//
// follow runs on MetadataChanged's goroutine; the coordinators and the adapter read
// the current view (atomic).
type featureState struct {
	allowed configs.GroupTypes // the node's read-only keys, read at start
	keySet  bool               // samsa.transaction.version is set explicitly
	cur     atomic.Pointer[featureView]
}

// featureView is the levels of one image and what they turn on.
type featureView struct {
	levels   map[string]int16 // finalized, above 0, metadata.version included
	recorded bool             // the log holds them (else the keys gave them)
	epoch    int64            // the offset of the image where they last changed

	consumer, share, streams bool
}

// initFeatures computes the view of the broker's first image, at offset.
func (b *Broker) initFeatures(offset uint64, im *metadata.Image) {
	l := b.layers(im, "")
	b.feat.allowed = configs.AllowedGroupTypes(l)
	_, b.feat.keySet = b.cfg.Static[configs.TransactionVersionKey]
	v := b.featureView(im, int64(offset))
	b.feat.cur.Store(v)
	b.log.Info("feature levels", "levels", v.levels, "in the metadata log", v.recorded, "offset", offset)
	b.warnTransactionKey(v)
}

// followFeatures moves the view to image im at offset when its levels differ from the
// current ones, and hands the transaction coordinator its level.
func (b *Broker) followFeatures(offset uint64, im *metadata.Image) {
	old := b.feat.cur.Load()
	if im.FeaturesRecorded() == old.recorded && maps.Equal(configs.FinalizedLevels(im, b.layers(im, "")), old.levels) {
		return
	}
	v := b.featureView(im, int64(offset))
	b.feat.cur.Store(v)
	b.log.Info("feature levels changed", "levels", v.levels, "were", old.levels, "offset", offset)
	if v.recorded && !old.recorded {
		b.warnTransactionKey(v)
	}
	if kb := b.kafka.Load(); kb != nil {
		kb.SetFeatures(b.features())
	}
	if c := b.txns.coordinator(); c != nil {
		c.SetTransactionVersion(v.levels[metadata.FeatureTransactionVersion])
	}
}

func (b *Broker) featureView(im *metadata.Image, epoch int64) *featureView {
	levels := configs.FinalizedLevels(im, b.layers(im, ""))
	v := &featureView{levels: levels, recorded: im.FeaturesRecorded(), epoch: epoch,
		consumer: b.feat.allowed.Consumer && levels[metadata.FeatureGroupVersion] >= 1,
		share:    b.feat.allowed.Share && levels[metadata.FeatureShareVersion] >= 1,
		streams:  b.feat.allowed.Streams && levels[metadata.FeatureStreamsVersion] >= 1,
	}
	return v
}

// warnTransactionKey says, once the log holds the levels, that the node key
// samsa.transaction.version no longer sets one.
func (b *Broker) warnTransactionKey(v *featureView) {
	if v.recorded && b.feat.keySet {
		b.log.Warn("samsa.transaction.version has no effect at run time: transaction.version is finalized in the metadata log (change it with samsa features); the key sets only the level a cluster is formatted with",
			"transaction.version", v.levels[metadata.FeatureTransactionVersion])
	}
}

// features is the current view as the adapter takes it.
func (b *Broker) features() kafka.Features {
	v := b.feat.cur.Load()
	return kafka.Features{Levels: v.levels, Epoch: v.epoch, Consumer: v.consumer, Share: v.share, Streams: v.streams}
}

// sharesEnabled reports whether share groups (KIP-932) are served: share.version 1,
// and group.share.enable (or "share" in group.coordinator.rebalance.protocols).
func (b *Broker) sharesEnabled() bool { return b.feat.cur.Load().share }

// transactionVersion is the finalized transaction.version.
func (b *Broker) transactionVersion() int16 {
	return b.feat.cur.Load().levels[metadata.FeatureTransactionVersion]
}
