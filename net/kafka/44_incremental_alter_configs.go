// IncrementalAlterConfigs (key 44), versions 0-1.
//
// Forwarded to the active controller and answered with its result once this broker's
// image has the change; the live logs of the topics it touches are then reconfigured
// (engine.Log.SetConfig).
//
// TOPIC resources: SET (validated by name and value: INVALID_CONFIG), DELETE (back to
// the broker default), APPEND and SUBTRACT (list keys only: cleanup.policy) on a topic's
// overrides; unknown topic UNKNOWN_TOPIC_OR_PARTITION.
//
// BROKER resources, named by a broker's id (DYNAMIC_BROKER_CONFIG) or "" (the cluster
// default, DYNAMIC_DEFAULT_BROKER_CONFIG): the keys Kafka's documentation gives a
// per-broker or cluster-wide update mode (the topic defaults such as log.retention.ms,
// the log cleaner's, the connection limits, ...), but those Samsa reads only at start
// (configs.StaticInSamsa: listeners, TLS and SASL settings, thread counts); read-only
// keys INVALID_CONFIG. A change re-applies every topic's configuration to its logs, and
// the node applies the others at once (net/node/dynamic.go).
//
// GROUP resources (KIP-848, KIP-932), named by a group id (empty: INVALID_REQUEST),
// existing or not: the group keys (coordinator/configs/group_keys.go), validated as
// Kafka's GroupConfig.validate (the controller: unknown names "Unknown group config
// name", values by type, the broker's group.*.min/max.* bounds, a session timeout above
// its heartbeat interval: INVALID_CONFIG). They act from the next decision that reads
// them (a heartbeat answer, a share partition's next lock or first start offset) and
// are deleted with the group (DeleteGroups).
//
// A key named twice in one resource: INVALID_REQUEST. ValidateOnly validates only.
// Changes are records of the metadata log, so they survive restarts.
//
// Differences from Apache Kafka: BROKER_LOGGER and other resource types answer
// INVALID_REQUEST.

package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 44, MinVersion: 0, MaxVersion: 1, Handle: handleIncrementalAlterConfigs, Authz: authz.IncrementalAlterConfigs})
}

func handleIncrementalAlterConfigs(b *Broker, r *Request) {
	req := r.Body.(*kmsg.IncrementalAlterConfigsRequest)
	b.forward(r, forwarded{write: !req.ValidateOnly})
}
