package kafka

import (
	"maps"
	"slices"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// Features are the feature levels (KIP-584) the node acts on, as its assembly
// (net/broker) follows them from each image: the finalized levels above 0,
// metadata.version included, with Epoch the metadata offset of the image where they
// last changed, and the group types they serve where the node's keys allow them
// (configs.AllowedGroupTypes). What the handlers do with them:
//
//   - ApiVersions v3+ reports the levels at Epoch, and advertises the group APIs of
//     the group types served only;
//   - the consumer protocol (ConsumerGroupHeartbeat, ConsumerGroupDescribe) is served
//     with Consumer (group.version 1), share groups with Share (share.version 1),
//     streams groups with Streams (streams.version 1).
type Features struct {
	Levels                   map[string]int16
	Epoch                    int64
	Consumer, Share, Streams bool
}

// featureView is the levels handlers act on and what ApiVersions advertises with them.
// consumer: the consumer rebalance protocol (KIP-848) is served (group.version 1 and
// "consumer" in group.coordinator.rebalance.protocols); share: share groups (KIP-932,
// share.version 1 and group.share.enable or "share" in the protocols); streams:
// streams groups (streams.version 1 and "streams" in the protocols).
type featureView struct {
	levels                   map[string]int16
	epoch                    int64
	consumer, share, streams bool
	advertised               []apiKeyEntry // the broker's table less the APIs of the group types not served
}

// SetFeatures makes f the levels handlers act on and ApiVersions reports (the
// node's publisher calls it when an image changes them). Safe for concurrent use.
func (b *Broker) SetFeatures(f Features) {
	v := &featureView{levels: f.Levels, epoch: f.Epoch, consumer: f.Consumer, share: f.Share, streams: f.Streams}
	var off []int16
	if !v.consumer {
		// Kafka 4 without the consumer protocol does not advertise its APIs.
		off = append(off, consumerGroupHeartbeatKey, consumerGroupDescribeKey)
	}
	if !v.share {
		off = append(off, shareAPIKeys...)
	}
	if !v.streams {
		off = append(off, streamsAPIKeys...)
	}
	v.advertised = withoutKeys(b.apiVersions, off...)
	b.feat.Store(v)
}

// features returns the current view.
func (b *Broker) features() *featureView { return b.feat.Load() }

// supportedFeatureNames are the features ApiVersions reports as supported, sorted.
var supportedFeatureNames = slices.Sorted(maps.Keys(metadata.SupportedFeatures()))
