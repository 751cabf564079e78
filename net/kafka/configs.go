package kafka

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

// ErrInvalidConfig is wrapped by every config validation error (mapped to
// INVALID_CONFIG at the edge).
var ErrInvalidConfig = errors.New("kafka: invalid config")

// configKind is a config value's type, as Kafka's ConfigDef declares it.
type configKind int8

const (
	kindString configKind = iota
	kindInt
	kindShort
	kindLong
	kindBool
	kindDouble
	kindList
	kindPassword
)

func (k configKind) wire() kmsg.ConfigType {
	switch k {
	case kindInt:
		return kmsg.ConfigTypeInt
	case kindShort:
		return kmsg.ConfigTypeShort
	case kindLong:
		return kmsg.ConfigTypeLong
	case kindBool:
		return kmsg.ConfigTypeBoolean
	case kindDouble:
		return kmsg.ConfigTypeDouble
	case kindList:
		return kmsg.ConfigTypeList
	case kindPassword:
		return kmsg.ConfigTypePassword
	}
	return kmsg.ConfigTypeString
}

// synonym is a broker key that supplies a topic key's default, with a unit scale
// (log.retention.hours → retention.ms: 3,600,000).
type synonym struct {
	name  string
	scale int64
}

// configDef describes one config key.
type configDef struct {
	name string
	kind configKind
	def  *string // Kafka's default; nil = null
	min  int64   // numeric lower bound (inclusive)
	max  int64   // numeric upper bound (inclusive); 0 = the kind's maximum
	enum []string
	doc  string
	// topic keys: the broker keys supplying the default, in precedence order.
	synonyms []synonym
	// apply maps a validated value onto the engine's LogConfig; nil = stored only.
	apply func(c *engine.LogConfig, v string)
	// broker keys: readOnly = not alterable at run time.
	readOnly bool
}

func sp(s string) *string { return &s }

func parseInt(v string) int64 { n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64); return n }

// validate checks v against d and returns the canonical value.
func (d *configDef) validate(v string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("%w: invalid value %q for configuration %s: %s", ErrInvalidConfig, v, d.name, why)
	}
	t := strings.TrimSpace(v)
	switch d.kind {
	case kindInt, kindShort, kindLong:
		bits := map[configKind]int{kindInt: 32, kindShort: 16, kindLong: 64}[d.kind]
		n, err := strconv.ParseInt(t, 10, bits)
		if err != nil {
			return bad(fmt.Sprintf("not a %d-bit integer", bits))
		}
		if n < d.min {
			return bad(fmt.Sprintf("value must be at least %d", d.min))
		}
		if d.max != 0 && n > d.max {
			return bad(fmt.Sprintf("value must be at most %d", d.max))
		}
		return strconv.FormatInt(n, 10), nil
	case kindBool:
		switch strings.ToLower(t) {
		case "true", "false":
			return strings.ToLower(t), nil
		}
		return bad("expected true or false")
	case kindDouble:
		f, err := strconv.ParseFloat(t, 64)
		if err != nil || math.IsNaN(f) || f < float64(d.min) || (d.max != 0 && f > float64(d.max)) {
			return bad(fmt.Sprintf("expected a number in [%d, %d]", d.min, d.max))
		}
		return t, nil
	case kindList:
		var items []string
		for _, it := range strings.Split(t, ",") {
			it = strings.TrimSpace(it)
			if it == "" {
				continue
			}
			if d.enum != nil && !slices.Contains(d.enum, strings.ToLower(it)) {
				return bad("items must be among " + strings.Join(d.enum, ", "))
			}
			items = append(items, it)
		}
		if d.enum != nil && len(items) == 0 {
			return bad("empty list")
		}
		return strings.Join(items, ","), nil
	}
	if d.enum != nil {
		for _, e := range d.enum {
			if strings.EqualFold(e, t) {
				return e, nil
			}
		}
		return bad("value must be one of " + strings.Join(d.enum, ", "))
	}
	return v, nil
}

const (
	weekMs  = "604800000"
	longMax = "9223372036854775807"
)

// topicConfigDefs are the topic-level keys, Kafka's names and defaults. Keys with apply
// reach the engine; the others are validated and stored (reported by DescribeConfigs).
var topicConfigDefs = []*configDef{
	{name: "cleanup.policy", kind: kindList, def: sp("delete"), enum: []string{"delete", "compact"},
		synonyms: []synonym{{"log.cleanup.policy", 1}}, doc: "delete and/or compact (compaction is not implemented: compacted topics are retained whole)",
		apply: func(c *engine.LogConfig, v string) { c.Compact = strings.Contains(v, "compact") }},
	{name: "compression.type", kind: kindString, def: sp("producer"), enum: []string{"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"},
		synonyms: []synonym{{"compression.type", 1}}, doc: "stored; batches are kept as the producer compressed them"},
	{name: "retention.ms", kind: kindLong, def: sp(weekMs), min: -1,
		synonyms: []synonym{{"log.retention.ms", 1}, {"log.retention.minutes", 60000}, {"log.retention.hours", 3600000}},
		apply:    func(c *engine.LogConfig, v string) { c.RetentionMs = parseInt(v) }},
	{name: "retention.bytes", kind: kindLong, def: sp("-1"), min: -1,
		synonyms: []synonym{{"log.retention.bytes", 1}}, apply: func(c *engine.LogConfig, v string) { c.RetentionBytes = parseInt(v) }},
	{name: "segment.bytes", kind: kindInt, def: sp("1073741824"), min: 14,
		synonyms: []synonym{{"log.segment.bytes", 1}}, apply: func(c *engine.LogConfig, v string) { c.SegmentBytes = parseInt(v) }},
	{name: "segment.ms", kind: kindLong, def: sp(weekMs), min: 1,
		synonyms: []synonym{{"log.roll.ms", 1}, {"log.roll.hours", 3600000}}, apply: func(c *engine.LogConfig, v string) { c.SegmentMs = parseInt(v) }},
	{name: "segment.index.bytes", kind: kindInt, def: sp("10485760"), min: 4,
		synonyms: []synonym{{"log.index.size.max.bytes", 1}}, apply: func(c *engine.LogConfig, v string) { c.SegmentIndexBytes = int32(parseInt(v)) }},
	{name: "index.interval.bytes", kind: kindInt, def: sp("4096"), min: 0,
		synonyms: []synonym{{"log.index.interval.bytes", 1}}, apply: func(c *engine.LogConfig, v string) { c.IndexIntervalBytes = int32(parseInt(v)) }},
	{name: "max.message.bytes", kind: kindInt, def: sp("1048588"), min: 0,
		synonyms: []synonym{{"message.max.bytes", 1}}, apply: func(c *engine.LogConfig, v string) { c.MaxMessageBytes = int32(parseInt(v)) }},
	{name: "message.timestamp.type", kind: kindString, def: sp("CreateTime"), enum: []string{"CreateTime", "LogAppendTime"},
		synonyms: []synonym{{"log.message.timestamp.type", 1}}, apply: func(c *engine.LogConfig, v string) {
			c.TimestampType = engine.CreateTime
			if v == "LogAppendTime" {
				c.TimestampType = engine.LogAppendTime
			}
		}},
	{name: "min.insync.replicas", kind: kindInt, def: sp("1"), min: 1,
		synonyms: []synonym{{"min.insync.replicas", 1}}, doc: "stored; a single node is its own ISR"},
	{name: "file.delete.delay.ms", kind: kindLong, def: sp("60000"), min: 0,
		synonyms: []synonym{{"log.segment.delete.delay.ms", 1}}, apply: func(c *engine.LogConfig, v string) { c.FileDeleteDelayMs = parseInt(v) }},
	{name: "flush.messages", kind: kindLong, def: sp(longMax), min: 1, synonyms: []synonym{{"log.flush.interval.messages", 1}}, doc: "stored; durability follows the broker's sync policy"},
	{name: "flush.ms", kind: kindLong, def: sp(longMax), min: 0, synonyms: []synonym{{"log.flush.interval.ms", 1}}, doc: "stored; durability follows the broker's sync policy"},
	{name: "unclean.leader.election.enable", kind: kindBool, def: sp("false"), synonyms: []synonym{{"unclean.leader.election.enable", 1}}, doc: "stored"},
	{name: "delete.retention.ms", kind: kindLong, def: sp("86400000"), min: 0, synonyms: []synonym{{"log.cleaner.delete.retention.ms", 1}}, doc: "stored"},
	{name: "min.compaction.lag.ms", kind: kindLong, def: sp("0"), min: 0, synonyms: []synonym{{"log.cleaner.min.compaction.lag.ms", 1}}, doc: "stored"},
	{name: "max.compaction.lag.ms", kind: kindLong, def: sp(longMax), min: 1, synonyms: []synonym{{"log.cleaner.max.compaction.lag.ms", 1}}, doc: "stored"},
	{name: "min.cleanable.dirty.ratio", kind: kindDouble, def: sp("0.5"), min: 0, max: 1, synonyms: []synonym{{"log.cleaner.min.cleanable.ratio", 1}}, doc: "stored"},
	{name: "preallocate", kind: kindBool, def: sp("false"), synonyms: []synonym{{"log.preallocate", 1}}, doc: "stored"},
	{name: "segment.jitter.ms", kind: kindLong, def: sp("0"), min: 0, synonyms: []synonym{{"log.roll.jitter.ms", 1}, {"log.roll.jitter.hours", 3600000}}, doc: "stored"},
	{name: "message.timestamp.before.max.ms", kind: kindLong, def: sp(longMax), min: 0, synonyms: []synonym{{"log.message.timestamp.before.max.ms", 1}}, doc: "stored"},
	{name: "message.timestamp.after.max.ms", kind: kindLong, def: sp(longMax), min: 0, synonyms: []synonym{{"log.message.timestamp.after.max.ms", 1}}, doc: "stored"},
}

// brokerConfigDefs are the broker keys Samsa knows (Kafka's names; a few of Samsa's
// own at the end). Keys that are topic-default synonyms are alterable at run time
// (DYNAMIC_BROKER_CONFIG, per node or cluster default); the rest are read-only.
var brokerConfigDefs = []*configDef{
	{name: "node.id", kind: kindInt, def: sp("1"), min: 0, readOnly: true},
	{name: "broker.id", kind: kindInt, def: sp("1"), min: 0, readOnly: true, doc: "synonym of node.id"},
	{name: "log.dirs", kind: kindList, readOnly: true, doc: "default <data-dir>/logs"},
	{name: "log.dir", kind: kindString, readOnly: true, doc: "used when log.dirs is unset"},
	{name: "listeners", kind: kindString, def: sp("PLAINTEXT://127.0.0.1:9092"), readOnly: true},
	{name: "advertised.listeners", kind: kindString, readOnly: true},
	{name: "num.partitions", kind: kindInt, def: sp("1"), min: 1},
	{name: "default.replication.factor", kind: kindShort, def: sp("1"), min: 1},
	{name: "auto.create.topics.enable", kind: kindBool, def: sp("true")},
	{name: "socket.request.max.bytes", kind: kindInt, def: sp("104857600"), min: 1, readOnly: true},
	{name: "connections.max.idle.ms", kind: kindLong, def: sp("600000"), min: 1, readOnly: true},
	{name: "log.retention.check.interval.ms", kind: kindLong, def: sp("300000"), min: 1, readOnly: true},
	{name: "log.retention.ms", kind: kindLong, min: -1},
	{name: "log.retention.minutes", kind: kindInt, min: -1},
	{name: "log.retention.hours", kind: kindInt, def: sp("168"), min: -1},
	{name: "log.retention.bytes", kind: kindLong, def: sp("-1"), min: -1},
	{name: "log.segment.bytes", kind: kindInt, def: sp("1073741824"), min: 14},
	{name: "log.roll.ms", kind: kindLong, min: 1},
	{name: "log.roll.hours", kind: kindInt, def: sp("168"), min: 1},
	{name: "log.roll.jitter.ms", kind: kindLong, min: 0},
	{name: "log.roll.jitter.hours", kind: kindInt, def: sp("0"), min: 0},
	{name: "log.index.size.max.bytes", kind: kindInt, def: sp("10485760"), min: 4},
	{name: "log.index.interval.bytes", kind: kindInt, def: sp("4096"), min: 0},
	{name: "message.max.bytes", kind: kindInt, def: sp("1048588"), min: 0},
	{name: "log.message.timestamp.type", kind: kindString, def: sp("CreateTime"), enum: []string{"CreateTime", "LogAppendTime"}},
	{name: "log.cleanup.policy", kind: kindList, def: sp("delete"), enum: []string{"delete", "compact"}},
	{name: "compression.type", kind: kindString, def: sp("producer"), enum: []string{"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"}},
	{name: "min.insync.replicas", kind: kindInt, def: sp("1"), min: 1},
	{name: "log.segment.delete.delay.ms", kind: kindLong, def: sp("60000"), min: 0},
	{name: "log.flush.interval.messages", kind: kindLong, def: sp(longMax), min: 1},
	{name: "log.flush.interval.ms", kind: kindLong, min: 0, doc: "with sync=interval: the flush interval (default 1000)"},
	{name: "unclean.leader.election.enable", kind: kindBool, def: sp("false")},
	{name: "log.cleaner.delete.retention.ms", kind: kindLong, def: sp("86400000"), min: 0},
	{name: "log.cleaner.min.compaction.lag.ms", kind: kindLong, def: sp("0"), min: 0},
	{name: "log.cleaner.max.compaction.lag.ms", kind: kindLong, def: sp(longMax), min: 1},
	{name: "log.cleaner.min.cleanable.ratio", kind: kindDouble, def: sp("0.5"), min: 0, max: 1},
	{name: "log.preallocate", kind: kindBool, def: sp("false")},
	{name: "log.message.timestamp.before.max.ms", kind: kindLong, def: sp(longMax), min: 0},
	{name: "log.message.timestamp.after.max.ms", kind: kindLong, def: sp(longMax), min: 0},
	// Group coordinator (10_find_coordinator.go); read when the coordinator starts.
	{name: "group.initial.rebalance.delay.ms", kind: kindInt, def: sp("3000"), min: 0, readOnly: true},
	{name: "group.min.session.timeout.ms", kind: kindInt, def: sp("6000"), min: 0, readOnly: true},
	{name: "group.max.session.timeout.ms", kind: kindInt, def: sp("1800000"), min: 0, readOnly: true},
	{name: "group.max.size", kind: kindInt, def: sp("2147483647"), min: 1, readOnly: true},
	{name: "offsets.retention.minutes", kind: kindInt, def: sp("10080"), min: 1, readOnly: true},
	{name: "offsets.retention.check.interval.ms", kind: kindLong, def: sp("600000"), min: 1, readOnly: true},
	{name: "offset.metadata.max.bytes", kind: kindInt, def: sp("4096"), readOnly: true},
	{name: "offsets.topic.num.partitions", kind: kindInt, def: sp("50"), min: 1, readOnly: true},
	// Keys of Kafka's sample server.properties that mean nothing to one Samsa node:
	// accepted (and reported) so such a file loads without warnings, with no effect.
	{name: "process.roles", kind: kindList, readOnly: true, doc: compatOnly},
	{name: "controller.quorum.voters", kind: kindList, readOnly: true, doc: compatOnly},
	{name: "controller.quorum.bootstrap.servers", kind: kindList, readOnly: true, doc: compatOnly},
	{name: "controller.listener.names", kind: kindList, readOnly: true, doc: compatOnly},
	{name: "inter.broker.listener.name", kind: kindString, readOnly: true, doc: compatOnly},
	{name: "listener.security.protocol.map", kind: kindString, readOnly: true, doc: compatOnly},
	{name: "num.network.threads", kind: kindInt, def: sp("3"), min: 1, readOnly: true, doc: "transport=reactor: event loops, when set (default: one per CPU)"},
	{name: "num.io.threads", kind: kindInt, def: sp("8"), min: 1, readOnly: true, doc: "transport=reactor: goroutines running handlers"},
	{name: "socket.send.buffer.bytes", kind: kindInt, def: sp("102400"), min: -1, readOnly: true, doc: compatOnly},
	{name: "socket.receive.buffer.bytes", kind: kindInt, def: sp("102400"), min: -1, readOnly: true, doc: compatOnly},
	{name: "num.recovery.threads.per.data.dir", kind: kindInt, def: sp("2"), min: 1, readOnly: true, doc: compatOnly},
	{name: "offsets.topic.replication.factor", kind: kindShort, def: sp("3"), min: -1, readOnly: true, doc: compatOnly},
	{name: "transaction.state.log.replication.factor", kind: kindShort, def: sp("3"), min: 1, readOnly: true, doc: compatOnly},
	{name: "transaction.state.log.min.isr", kind: kindInt, def: sp("2"), min: 1, readOnly: true, doc: compatOnly},
	{name: "sync", kind: kindString, def: sp("fsync"), enum: []string{"fsync", "interval", "none"}, readOnly: true, doc: "Samsa: when appends are acknowledged durable"},
	{name: "transport", kind: kindString, def: sp("std"), enum: []string{"std", "reactor"}, readOnly: true, doc: "Samsa: network transport: std (Go's net) or reactor (epoll, Linux)"},
	{name: "data.dir", kind: kindString, def: sp("./data"), readOnly: true, doc: "Samsa: <data.dir>/meta holds metadata, <data.dir>/logs the default log dir"},
	{name: "admin.listen", kind: kindString, def: sp("127.0.0.1:9644"), readOnly: true, doc: "Samsa: HTTP address of /metrics and /debug/pprof/ (empty: off)"},
}

const compatOnly = "accepted for compatibility with Kafka's server.properties; no effect on one Samsa node"

var (
	topicDefs  = indexDefs(topicConfigDefs)
	brokerDefs = indexDefs(brokerConfigDefs)
)

func indexDefs(defs []*configDef) map[string]*configDef {
	m := make(map[string]*configDef, len(defs))
	for _, d := range defs {
		m[d.name] = d
	}
	return m
}

// ValidateBrokerConfig checks a broker key and value (server.properties, environment,
// flags) and returns the canonical value. Unknown keys return known == false.
func ValidateBrokerConfig(key, value string) (canonical string, known bool, err error) {
	d := brokerDefs[key]
	if d == nil {
		return value, false, nil
	}
	v, err := d.validate(value)
	return v, true, err
}

// BrokerConfigDefault returns Kafka's default for a broker key, if it has one.
func BrokerConfigDefault(key string) (string, bool) {
	if d := brokerDefs[key]; d != nil && d.def != nil {
		return *d.def, true
	}
	return "", false
}

// ValidateTopicConfig checks a topic key and value and returns the canonical value.
func ValidateTopicConfig(key string, value *string) (string, error) {
	d := topicDefs[key]
	if d == nil {
		return "", fmt.Errorf("%w: unknown topic config %q", ErrInvalidConfig, key)
	}
	if value == nil {
		return "", fmt.Errorf("%w: null value for %s", ErrInvalidConfig, key)
	}
	return d.validate(*value)
}

// configLayers are the places a value can come from, highest precedence first.
type configLayers struct {
	topic          map[string]string // topic overrides (metadata)
	node           map[string]string // dynamic, this node (metadata, broker "<id>")
	clusterDefault map[string]string // dynamic, cluster default (metadata, broker "")
	static         map[string]string // server.properties / env / flags, explicitly set
}

// resolved is a value and where it came from, with the synonyms that were consulted.
type resolved struct {
	value    *string
	source   kmsg.ConfigSource
	synonyms []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
}

func scaled(v string, scale int64) string {
	if scale == 1 {
		return v
	}
	n := parseInt(v)
	if n < 0 {
		return strconv.FormatInt(n, 10) // -1 = unlimited, whatever the unit
	}
	return strconv.FormatInt(n*scale, 10)
}

// resolveBroker resolves a broker key: dynamic node, dynamic default, static, default.
func (l *configLayers) resolveBroker(name string, scale int64, syn *[]kmsg.DescribeConfigsResponseResourceConfigConfigSynonym) (resolved, bool) {
	var out resolved
	found := false
	for _, layer := range []struct {
		m   map[string]string
		src kmsg.ConfigSource
	}{{l.node, kmsg.ConfigSourceDynamicBrokerConfig}, {l.clusterDefault, kmsg.ConfigSourceDynamicDefaultBrokerConfig}, {l.static, kmsg.ConfigSourceStaticBrokerConfig}} {
		v, ok := layer.m[name]
		if !ok {
			continue
		}
		if syn != nil {
			*syn = append(*syn, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{Name: name, Value: sp(v), Source: layer.src})
		}
		if !found {
			out, found = resolved{value: sp(scaled(v, scale)), source: layer.src}, true
		}
	}
	return out, found
}

// resolveTopic resolves a topic key through its override, its broker synonyms, and
// Kafka's default.
func (l *configLayers) resolveTopic(d *configDef, wantSynonyms bool) resolved {
	var syn []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
	var synp *[]kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
	if wantSynonyms {
		synp = &syn
	}
	var out resolved
	found := false
	if v, ok := l.topic[d.name]; ok {
		out, found = resolved{value: sp(v), source: kmsg.ConfigSourceDynamicTopicConfig}, true
		if wantSynonyms {
			syn = append(syn, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{Name: d.name, Value: sp(v), Source: kmsg.ConfigSourceDynamicTopicConfig})
		}
	}
	for _, s := range d.synonyms {
		if r, ok := l.resolveBroker(s.name, s.scale, synp); ok && !found {
			out, found = r, true
		}
	}
	if !found {
		out = resolved{value: d.def, source: kmsg.ConfigSourceDefaultConfig}
	}
	if wantSynonyms && d.def != nil {
		syn = append(syn, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{Name: d.synonymDefaultName(), Value: d.def, Source: kmsg.ConfigSourceDefaultConfig})
	}
	out.synonyms = syn
	return out
}

func (d *configDef) synonymDefaultName() string {
	if len(d.synonyms) > 0 {
		return d.synonyms[0].name
	}
	return d.name
}

// logConfig computes a topic's engine configuration from the layers.
func (l *configLayers) logConfig() engine.LogConfig {
	c := engine.DefaultLogConfig()
	for _, d := range topicConfigDefs {
		if d.apply == nil {
			continue
		}
		if r := l.resolveTopic(d, false); r.value != nil {
			d.apply(&c, *r.value)
		}
	}
	return c
}

// BrokerConfigKeys lists the broker keys Samsa knows, in a stable order.
func BrokerConfigKeys() []string {
	out := make([]string, len(brokerConfigDefs))
	for i, d := range brokerConfigDefs {
		out[i] = d.name
	}
	return out
}

// DefaultTopicLogConfig is the engine configuration of a topic without overrides, given
// the broker's static keys (log.retention.ms, log.segment.bytes, ...).
func DefaultTopicLogConfig(static map[string]string) engine.LogConfig {
	l := configLayers{static: static}
	return l.logConfig()
}
