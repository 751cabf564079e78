// UpdateFeatures (key 57), versions 0-2 (KIP-584, KIP-778).
//
// On a broker listener: forwarded to the active controller, as Kafka's brokers do, and
// answered once this broker's image has the new levels (so its ApiVersions reports
// them at once; the other brokers follow as their images do). On the controller
// listener: handed to the Controller. The controller (coordinator/controller,
// UpdateFeatureRecords) upgrades a level, downgrades one only where Kafka allows it
// (metadata.version: a safe downgrade where no level in between changed the
// metadata; otherwise, and for any unsafe downgrade, INVALID_UPDATE_VERSION with
// Kafka's message), refuses a level this controller or an unfenced registered broker
// does not support, and writes nothing under ValidateOnly. A refusal is
// INVALID_UPDATE_VERSION on the whole request; versions 0 and 1 list every feature in
// Results on success, version 2 has no Results (as Kafka 4). Version 0's
// AllowDowngrade is a safe downgrade. Needs ALTER on the cluster (coordinator/acl).

package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/controller"
)

const updateFeaturesKey = 57

func init() {
	register(API{Key: updateFeaturesKey, MinVersion: 0, MaxVersion: 2, Handle: handleUpdateFeatures})
}

func handleUpdateFeatures(b *Broker, r *Request) {
	req := r.Body.(*kmsg.UpdateFeaturesRequest)
	version := req.Version
	if version == 0 {
		// The controller sees the newest version's shape (Controller.Forward):
		// AllowDowngrade becomes its upgrade type.
		for i := range req.FeatureUpdates {
			u := &req.FeatureUpdates[i]
			u.UpgradeType = controller.UpgradeTypeUpgrade
			if u.AllowDowngrade {
				u.UpgradeType = controller.UpgradeTypeSafeDowngrade
			}
		}
	}
	b.forward(r, forwarded{timeout: time.Duration(req.TimeoutMillis) * time.Millisecond, write: true, after: func(resp kmsg.Response) {
		out, ok := resp.(*kmsg.UpdateFeaturesResponse)
		if !ok || version > 1 || out.ErrorCode != 0 || len(out.Results) > 0 {
			return
		}
		// The controller answered version 2's shape: versions 0 and 1 list each
		// feature.
		for _, u := range req.FeatureUpdates {
			rr := kmsg.NewUpdateFeaturesResponseResult()
			rr.Feature = u.Feature
			out.Results = append(out.Results, rr)
		}
	}})
}
