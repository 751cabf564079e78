package node

import (
	"maps"
	"strconv"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/net/transport"
)

// Broker keys changed at run time (IncrementalAlterConfigs or AlterConfigs of a BROKER
// resource: this node's id, DYNAMIC_BROKER_CONFIG, or "", the cluster default,
// DYNAMIC_DEFAULT_BROKER_CONFIG), applied by the node when an image carrying them is
// published, as Kafka's DynamicBrokerConfig reconfigures its components:
//
//	log.cleaner.threads, .dedupe.buffer.size, .io.buffer.size,   engine.Manager.ReconfigureCleaner
//	.io.buffer.load.factor, .io.max.bytes.per.second, .backoff.ms (the goroutines of the old
//	                                                              options end after their pass)
//	transaction.partition.verification.enable                    engine.Manager.SetTxnVerification
//	max.connections, max.connections.per.ip,                     transport.Limiter.SetLimits
//	max.connections.per.ip.overrides, max.connection.creation.rate (counts of open connections kept)
//
// Topic defaults (log.retention.ms, log.segment.bytes, ...) reach the logs through the
// replica manager's deltas (controller.ReplicaDelta), and quotas through the broker's
// image. Precedence, as in Kafka: this node's dynamic keys, then the cluster default,
// then the static keys of the node's properties, then Kafka's defaults.

// effectiveBrokerKeys is the static keys with the image's dynamic broker keys of node
// (the cluster default, then this node's) over them.
func effectiveBrokerKeys(static map[string]string, im *metadata.Image, node int32) map[string]string {
	out := maps.Clone(static)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, im.Configs(metadata.ResourceBroker, ""))
	maps.Copy(out, im.Configs(metadata.ResourceBroker, strconv.Itoa(int(node))))
	return out
}

// brokerConfigsChanged reports whether the dynamic broker keys that concern node differ
// between old and im.
func brokerConfigsChanged(old, im *metadata.Image, node int32) bool {
	if old == nil {
		return true
	}
	n := strconv.Itoa(int(node))
	return !maps.Equal(old.Configs(metadata.ResourceBroker, ""), im.Configs(metadata.ResourceBroker, "")) ||
		!maps.Equal(old.Configs(metadata.ResourceBroker, n), im.Configs(metadata.ResourceBroker, n))
}

// applyDynamicBrokerConfigs reconfigures the engine and the connection limits for
// the broker keys of im (the caller saw them change).
func (r *brokerRole) applyDynamicBrokerConfigs(im *metadata.Image, limiter *transport.Limiter) {
	keys := effectiveBrokerKeys(r.cfg.Keys, im, r.cfg.NodeID)
	var o engine.Options
	configs.EngineOptions(keys, &o)
	r.eng.ReconfigureCleaner(o.Cleaner)
	r.eng.SetTxnVerification(!o.DisableTxnVerification)
	if limiter == nil {
		return
	}
	c := *r.cfg
	c.Keys = keys
	if err := c.deriveConnLimits(); err != nil {
		r.log.Warn("dynamic connection limits not applied", "err", err)
		return
	}
	lim := c.ConnLimits
	lim.IPCreationRate = limiter.Limits().IPCreationRate
	limiter.SetLimits(lim)
}
