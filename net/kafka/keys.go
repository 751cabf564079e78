package kafka

import (
	"log/slog"
	"strconv"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
)

// brokerKeys resolves this node's broker keys and a topic's or a group's configs from
// an image, through coordinator/configs' layers: dynamic per node, dynamic cluster
// default, static (Config.Static), Kafka's default. Read-only: safe from any goroutine.
type brokerKeys struct {
	nodeID int32
	static map[string]string
	log    *slog.Logger
}

// layers returns the config layers for topic (empty: broker keys only).
func (k brokerKeys) layers(im *metadata.Image, topic string) configs.Layers {
	return configs.ForImage(im, k.nodeID, k.static, topic)
}

// groupLayers is layers for group: its own configs (GROUP resources) over the broker's.
func (k brokerKeys) groupLayers(im *metadata.Image, group string) configs.Layers {
	return configs.ForGroup(im, k.nodeID, k.static, group)
}

// topicLogConfig is the engine configuration of topic in image im.
func (k brokerKeys) topicLogConfig(im *metadata.Image, topic string) engine.LogConfig {
	l := k.layers(im, topic)
	return l.LogConfig()
}

// value resolves a broker key: dynamic node, dynamic default, static, default.
func (k brokerKeys) value(im *metadata.Image, key string) string {
	l := k.layers(im, "")
	return l.BrokerValue(key)
}

// groupInt is the broker key key as an integer, def when it is not set or does not
// parse (with a warning).
func (k brokerKeys) groupInt(im *metadata.Image, key string, def int64) int64 {
	v := k.value(im, key)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		k.log.Warn("ignoring unparsable group setting", "key", key, "value", v)
		return def
	}
	return n
}
