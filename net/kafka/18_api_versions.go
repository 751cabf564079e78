// ApiVersions (key 18), versions 0-5.
//
// The advertised list is built from the listener's handler table: every registered API
// with the version range it serves, capped at what kmsg can encode, so registering a
// handler is all it takes to advertise it. The broker listeners and the controller
// listener have a table each; the controller's lists the private SamsaRaft (10000).
//
// A request at a version above the served range is answered, as Kafka (KIP-511) does,
// with UNSUPPORTED_VERSION in the v0 body format plus the full key list, so the client
// can retry at a version both sides know. ApiVersions responses always use response
// header v0, even at flexible versions (the client cannot know yet which header the
// broker would use).
//
// v3+: ClientSoftwareName/Version must match [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?,
// else INVALID_REQUEST (as Kafka). v5 (KIP-1242): ClusterID and NodeID are both set or
// both unset (else INVALID_REQUEST); set and not ours: REBOOTSTRAP_REQUIRED.
//
// v3+ on the broker listeners: the feature flags (KIP-584) from the broker's metadata
// image, as a Kafka 4 broker reports them (reportFeatures, features.go), and the APIs
// of the group types its finalized levels serve (the consumer protocol at
// group.version 1, share groups at share.version 1, streams groups at streams.version
// 1): a level changed with UpdateFeatures changes the answer on every broker once its
// image has the change. The controller listener reports none (FinalizedFeaturesEpoch
// -1); Kafka's controllers report theirs.

package kafka

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/request"
)

const apiVersionsKey = 18

func init() {
	register(API{Key: apiVersionsKey, MinVersion: 0, MaxVersion: 5, Handle: handleApiVersions})
}

type apiKeyEntry = kmsg.ApiVersionsResponseApiKey

// buildApiVersions is the broker listener's advertised table.
func buildApiVersions() []apiKeyEntry { return tableApiVersions(brokerAPIs) }

// withoutKeys is entries less the APIs of keys: served by a handler, but turned off by
// the broker's configuration, and then not advertised.
func withoutKeys(entries []apiKeyEntry, keys ...int16) []apiKeyEntry {
	out := make([]apiKeyEntry, 0, len(entries))
	for _, e := range entries {
		if !slices.Contains(keys, e.ApiKey) {
			out = append(out, e)
		}
	}
	return out
}

// tableApiVersions is what ApiVersions advertises for table t.
func tableApiVersions(t *apiTable) []apiKeyEntry {
	var keys []apiKeyEntry
	for _, a := range t.served() {
		keys = append(keys, apiKeyEntry{ApiKey: a.Key, MinVersion: a.MinVersion, MaxVersion: a.MaxVersion})
	}
	return keys
}

func handleApiVersions(b *Broker, r *Request) {
	v := b.features()
	resp := request.ApiVersionsResponse(r, v.advertised, b.cfg.ClusterID, b.cfg.NodeID)
	if r.Header.Version >= 3 {
		reportFeatures(resp, v)
	}
	r.Respond(resp)
}

// reportFeatures fills the feature flags of KIP-584 from the broker's feature levels
// (features.go), as a Kafka 4 broker reports them: every feature this build supports
// with its range (metadata.version 21-33, kraft.version 0-1, transaction.version 0-2,
// group.version, share.version and streams.version 0-1,
// eligible.leader.replicas.version 0-1), and the finalized levels above 0,
// metadata.version included (a feature at level 0 is supported but not finalized, as
// Kafka lists it), at the epoch of the image where they last changed.
func reportFeatures(resp *kmsg.ApiVersionsResponse, v *featureView) {
	supported := metadata.SupportedFeatures()
	for _, name := range supportedFeatureNames {
		r := supported[name]
		resp.SupportedFeatures = append(resp.SupportedFeatures, kmsg.ApiVersionsResponseSupportedFeature{Name: name, MinVersion: r.Min, MaxVersion: r.Max})
	}
	for _, name := range slices.Sorted(maps.Keys(v.levels)) {
		if lvl := v.levels[name]; lvl > 0 {
			resp.FinalizedFeatures = append(resp.FinalizedFeatures, kmsg.ApiVersionsResponseFinalizedFeature{Name: name, MinVersionLevel: lvl, MaxVersionLevel: lvl})
		}
	}
	resp.FinalizedFeaturesEpoch = v.epoch
}
