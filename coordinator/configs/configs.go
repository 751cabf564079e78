// Package configs owns Kafka's configuration keys as Samsa serves them: every broker and
// topic key Apache Kafka 4 defines (Samsa's own definitions in this file; the others,
// accepted without effect, generated from Kafka's documentation: kafka_keys.go), and the
// keys a group may set for itself (group_keys.go), with Kafka's names, types, defaults
// and bounds; validation to a canonical value; and the layering Kafka applies (topic
// override or group config, dynamic per-node, dynamic cluster default, static
// server.properties, default), with the synonyms DescribeConfigs reports. The broker's launcher, the protocol handlers and the
// controller all read keys through this package, so a key means one thing everywhere.
package configs

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
)

// ErrInvalidConfig is wrapped by every config validation error (mapped to
// INVALID_CONFIG at the edge).
var ErrInvalidConfig = errors.New("configs: invalid config")

// Kind is a config value's type, as Kafka's ConfigDef declares it.
type Kind int8

// The kinds.
const (
	KindString Kind = iota
	KindInt
	KindShort
	KindLong
	KindBool
	KindDouble
	KindList
	KindPassword
	KindClass // a Java class name: validated as a string
)

// Wire is the kind as DescribeConfigs v3+ reports it.
func (k Kind) Wire() kmsg.ConfigType {
	switch k {
	case KindInt:
		return kmsg.ConfigTypeInt
	case KindShort:
		return kmsg.ConfigTypeShort
	case KindLong:
		return kmsg.ConfigTypeLong
	case KindBool:
		return kmsg.ConfigTypeBoolean
	case KindDouble:
		return kmsg.ConfigTypeDouble
	case KindList:
		return kmsg.ConfigTypeList
	case KindPassword:
		return kmsg.ConfigTypePassword
	case KindClass:
		return kmsg.ConfigTypeClass
	}
	return kmsg.ConfigTypeString
}

// Synonym is a broker key that supplies a topic key's default, with a unit scale
// (log.retention.hours → retention.ms: 3,600,000).
type Synonym struct {
	Name  string
	Scale int64
}

// Def describes one config key. Defs are shared and read-only.
type Def struct {
	Name    string
	Kind    Kind
	Default *string // Kafka's default; nil = null
	Min     int64   // numeric lower bound (inclusive)
	Max     int64   // numeric upper bound (inclusive); 0 = the kind's maximum
	Enum    []string
	Doc     string
	// Synonyms (topic keys): the broker keys supplying the default, in precedence order.
	Synonyms []Synonym
	// Apply maps a validated value onto the engine's LogConfig; nil = stored only.
	Apply func(c *engine.LogConfig, v string)
	// ReadOnly (broker keys): not alterable at run time.
	ReadOnly bool
	// NoEffect: accepted, validated, stored and reported as Kafka does, but nothing in
	// Samsa reads it (kafka_keys.go; the generated keys and the compatOnly ones).
	NoEffect bool
	// Check, if set, is a further check of the canonical value: why it is invalid, or "".
	Check func(canonical string) string
}

func sp(s string) *string { return &s }

// checkIPOverrides checks max.connections.per.ip.overrides' form: host:count pairs
// separated by commas, each count a non-negative integer (hosts are resolved where the
// limits are applied).
func checkIPOverrides(v string) string {
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		i := strings.LastIndexByte(e, ':')
		if i <= 0 {
			return fmt.Sprintf("entry %q: want host:count", e)
		}
		if n, err := strconv.Atoi(strings.TrimSpace(e[i+1:])); err != nil || n < 0 {
			return fmt.Sprintf("entry %q: the count is not a non-negative integer", e)
		}
	}
	return ""
}

func parseInt(v string) int64 { n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64); return n }

// Validate checks v against d and returns the canonical value.
func (d *Def) Validate(v string) (string, error) {
	c, err := d.validate(v)
	if err == nil && d.Check != nil {
		if why := d.Check(c); why != "" {
			return "", fmt.Errorf("%w: invalid value %q for configuration %s: %s", ErrInvalidConfig, v, d.Name, why)
		}
	}
	return c, err
}

func (d *Def) validate(v string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("%w: invalid value %q for configuration %s: %s", ErrInvalidConfig, v, d.Name, why)
	}
	t := strings.TrimSpace(v)
	switch d.Kind {
	case KindInt, KindShort, KindLong:
		bits := map[Kind]int{KindInt: 32, KindShort: 16, KindLong: 64}[d.Kind]
		n, err := strconv.ParseInt(t, 10, bits)
		if err != nil {
			return bad(fmt.Sprintf("not a %d-bit integer", bits))
		}
		if n < d.Min {
			return bad(fmt.Sprintf("value must be at least %d", d.Min))
		}
		if d.Max != 0 && n > d.Max {
			return bad(fmt.Sprintf("value must be at most %d", d.Max))
		}
		return strconv.FormatInt(n, 10), nil
	case KindBool:
		switch strings.ToLower(t) {
		case "true", "false":
			return strings.ToLower(t), nil
		}
		return bad("expected true or false")
	case KindDouble:
		f, err := strconv.ParseFloat(t, 64)
		if err != nil || math.IsNaN(f) || f < float64(d.Min) || (d.Max != 0 && f > float64(d.Max)) {
			return bad(fmt.Sprintf("expected a number in [%d, %d]", d.Min, d.Max))
		}
		return t, nil
	case KindList:
		var items []string
		for _, it := range strings.Split(t, ",") {
			it = strings.TrimSpace(it)
			if it == "" {
				continue
			}
			if d.Enum != nil && !slices.Contains(d.Enum, strings.ToLower(it)) {
				return bad("items must be among " + strings.Join(d.Enum, ", "))
			}
			items = append(items, it)
		}
		if d.Enum != nil && len(items) == 0 {
			return bad("empty list")
		}
		return strings.Join(items, ","), nil
	}
	if d.Enum != nil {
		for _, e := range d.Enum {
			if strings.EqualFold(e, t) {
				return e, nil
			}
		}
		return bad("value must be one of " + strings.Join(d.Enum, ", "))
	}
	return v, nil
}

const (
	weekMs  = "604800000"
	longMax = "9223372036854775807"
)

// TopicDefs are the topic-level keys, Kafka's names and defaults. Keys with apply
// reach the engine; the others are validated and stored (reported by DescribeConfigs).
var TopicDefs = []*Def{
	{Name: "cleanup.policy", Kind: KindList, Default: sp("delete"), Enum: []string{"delete", "compact"},
		Synonyms: []Synonym{{"log.cleanup.policy", 1}}, Doc: "delete (retention by time and size) and/or compact (the log cleaner keeps the last record per key)",
		Apply: func(c *engine.LogConfig, v string) {
			c.Compact, c.Delete = strings.Contains(v, "compact"), strings.Contains(v, "delete")
		}},
	{Name: "compression.type", Kind: KindString, Default: sp("producer"), Enum: []string{"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"},
		Synonyms: []Synonym{{"compression.type", 1}}, Doc: "stored; batches are kept as the producer compressed them"},
	{Name: "retention.ms", Kind: KindLong, Default: sp(weekMs), Min: -1,
		Synonyms: []Synonym{{"log.retention.ms", 1}, {"log.retention.minutes", 60000}, {"log.retention.hours", 3600000}},
		Apply:    func(c *engine.LogConfig, v string) { c.RetentionMs = parseInt(v) }},
	{Name: "retention.bytes", Kind: KindLong, Default: sp("-1"), Min: -1,
		Synonyms: []Synonym{{"log.retention.bytes", 1}}, Apply: func(c *engine.LogConfig, v string) { c.RetentionBytes = parseInt(v) }},
	{Name: "segment.bytes", Kind: KindInt, Default: sp("1073741824"), Min: 14,
		Synonyms: []Synonym{{"log.segment.bytes", 1}}, Apply: func(c *engine.LogConfig, v string) { c.SegmentBytes = parseInt(v) }},
	{Name: "segment.ms", Kind: KindLong, Default: sp(weekMs), Min: 1,
		Synonyms: []Synonym{{"log.roll.ms", 1}, {"log.roll.hours", 3600000}}, Apply: func(c *engine.LogConfig, v string) { c.SegmentMs = parseInt(v) }},
	{Name: "segment.index.bytes", Kind: KindInt, Default: sp("10485760"), Min: 4,
		Synonyms: []Synonym{{"log.index.size.max.bytes", 1}}, Apply: func(c *engine.LogConfig, v string) { c.SegmentIndexBytes = int32(parseInt(v)) }},
	{Name: "index.interval.bytes", Kind: KindInt, Default: sp("4096"), Min: 0,
		Synonyms: []Synonym{{"log.index.interval.bytes", 1}}, Apply: func(c *engine.LogConfig, v string) { c.IndexIntervalBytes = int32(parseInt(v)) }},
	{Name: "max.message.bytes", Kind: KindInt, Default: sp("1048588"), Min: 0,
		Synonyms: []Synonym{{"message.max.bytes", 1}}, Apply: func(c *engine.LogConfig, v string) { c.MaxMessageBytes = int32(parseInt(v)) }},
	{Name: "message.timestamp.type", Kind: KindString, Default: sp("CreateTime"), Enum: []string{"CreateTime", "LogAppendTime"},
		Synonyms: []Synonym{{"log.message.timestamp.type", 1}}, Apply: func(c *engine.LogConfig, v string) {
			c.TimestampType = engine.CreateTime
			if v == "LogAppendTime" {
				c.TimestampType = engine.LogAppendTime
			}
		}},
	{Name: "min.insync.replicas", Kind: KindInt, Default: sp("1"), Min: 1,
		Synonyms: []Synonym{{"min.insync.replicas", 1}}, Doc: "acks=all needs at least this many in-sync replicas"},
	{Name: "file.delete.delay.ms", Kind: KindLong, Default: sp("60000"), Min: 0,
		Synonyms: []Synonym{{"log.segment.delete.delay.ms", 1}}, Apply: func(c *engine.LogConfig, v string) { c.FileDeleteDelayMs = parseInt(v) }},
	{Name: "flush.messages", Kind: KindLong, Default: sp(longMax), Min: 1, Synonyms: []Synonym{{"log.flush.interval.messages", 1}}, Doc: "stored; durability follows the broker's sync policy"},
	{Name: "flush.ms", Kind: KindLong, Default: sp(longMax), Min: 0, Synonyms: []Synonym{{"log.flush.interval.ms", 1}}, Doc: "stored; durability follows the broker's sync policy"},
	{Name: "unclean.leader.election.enable", Kind: KindBool, Default: sp("false"), Synonyms: []Synonym{{"unclean.leader.election.enable", 1}}, Doc: "elect a leader outside the ISR when no ISR member is alive (may lose acknowledged records)"},
	{Name: "unclean.recovery.strategy", Kind: KindString, Default: sp("Balanced"), Enum: []string{"None", "Balanced", "Aggressive"},
		Synonyms: []Synonym{{"unclean.recovery.strategy", 1}},
		Doc:      "KIP-966 (no Kafka release has it), read with unclean.recovery.manager.enabled: None, Balanced (last known leader) or Aggressive"},
	{Name: "delete.retention.ms", Kind: KindLong, Default: sp("86400000"), Min: 0, Synonyms: []Synonym{{"log.cleaner.delete.retention.ms", 1}},
		Doc: "how long a tombstone stays readable after the pass that first kept it", Apply: func(c *engine.LogConfig, v string) { c.DeleteRetentionMs = parseInt(v) }},
	{Name: "min.compaction.lag.ms", Kind: KindLong, Default: sp("0"), Min: 0, Synonyms: []Synonym{{"log.cleaner.min.compaction.lag.ms", 1}},
		Apply: func(c *engine.LogConfig, v string) { c.MinCompactionLagMs = parseInt(v) }},
	{Name: "max.compaction.lag.ms", Kind: KindLong, Default: sp(longMax), Min: 1, Synonyms: []Synonym{{"log.cleaner.max.compaction.lag.ms", 1}},
		Apply: func(c *engine.LogConfig, v string) { c.MaxCompactionLagMs = parseInt(v) }},
	{Name: "min.cleanable.dirty.ratio", Kind: KindDouble, Default: sp("0.5"), Min: 0, Max: 1, Synonyms: []Synonym{{"log.cleaner.min.cleanable.ratio", 1}},
		Apply: func(c *engine.LogConfig, v string) {
			c.MinCleanableDirtyRatio, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
		}},
	{Name: "remote.storage.enable", Kind: KindBool, Default: sp("false"),
		Doc:   "tiered storage (KIP-405) for the topic; true is refused (INVALID_CONFIG) where remote.log.storage.system.enable is off: sealed segments are copied to remote storage and read back from it below the local log start",
		Apply: func(c *engine.LogConfig, v string) { c.RemoteStorage = strings.EqualFold(strings.TrimSpace(v), "true") }},
	{Name: "remote.log.copy.disable", Kind: KindBool, Default: sp("false"),
		Doc: "with remote.storage.enable: no more segments are copied (the copies stay readable), and local segments follow retention.ms and retention.bytes (KIP-950)",
		Apply: func(c *engine.LogConfig, v string) {
			c.RemoteCopyDisable = strings.EqualFold(strings.TrimSpace(v), "true")
		}},
	{Name: "remote.log.delete.on.disable", Kind: KindBool, Default: sp("false"),
		Doc: "turning remote.storage.enable off is refused unless this is true; with it, the topic's copies in remote storage are deleted then, and its log starts at the local log start (KIP-950)",
		Apply: func(c *engine.LogConfig, v string) {
			c.RemoteLogDeleteOnDisable = strings.EqualFold(strings.TrimSpace(v), "true")
		}},
	{Name: "local.retention.ms", Kind: KindLong, Default: sp("-2"), Min: -2, Synonyms: []Synonym{{"log.local.retention.ms", 1}},
		Doc:   "with remote.storage.enable: how long a local segment is kept once copied to remote storage (-2: retention.ms)",
		Apply: func(c *engine.LogConfig, v string) { c.LocalRetentionMs = parseInt(v) }},
	{Name: "local.retention.bytes", Kind: KindLong, Default: sp("-2"), Min: -2, Synonyms: []Synonym{{"log.local.retention.bytes", 1}},
		Doc:   "with remote.storage.enable: the local bytes kept, deleting the oldest segments once copied to remote storage (-2: retention.bytes)",
		Apply: func(c *engine.LogConfig, v string) { c.LocalRetentionBytes = parseInt(v) }},
	{Name: "preallocate", Kind: KindBool, Default: sp("false"), Synonyms: []Synonym{{"log.preallocate", 1}}, Doc: "stored"},
	{Name: "segment.jitter.ms", Kind: KindLong, Default: sp("0"), Min: 0, Synonyms: []Synonym{{"log.roll.jitter.ms", 1}, {"log.roll.jitter.hours", 3600000}}, Doc: "stored"},
	{Name: "message.timestamp.before.max.ms", Kind: KindLong, Default: sp(longMax), Min: 0, Synonyms: []Synonym{{"log.message.timestamp.before.max.ms", 1}}, Doc: "stored"},
	{Name: "message.timestamp.after.max.ms", Kind: KindLong, Default: sp("3600000"), Min: 0, Synonyms: []Synonym{{"log.message.timestamp.after.max.ms", 1}}, Doc: "stored"},
}

// BrokerDefs are the broker keys Samsa knows (Kafka's names; a few of Samsa's
// own at the end). A key of Kafka's is alterable at run time (DYNAMIC_BROKER_CONFIG,
// per node or cluster default) exactly when Kafka's documentation gives it a dynamic
// update mode (per-broker or cluster-wide), but for the keys of StaticInSamsa
// (TestUpdateModesAreKafkas); Samsa's own keys are read-only.
var BrokerDefs = []*Def{
	{Name: "node.id", Kind: KindInt, Default: sp("1"), Min: 0, ReadOnly: true},
	{Name: "broker.id", Kind: KindInt, Default: sp("1"), Min: 0, ReadOnly: true, Doc: "synonym of node.id"},
	{Name: "log.dirs", Kind: KindList, ReadOnly: true, Doc: "default <data-dir>/logs"},
	{Name: "log.dir", Kind: KindString, ReadOnly: true, Doc: "used when log.dirs is unset"},
	{Name: "listeners", Kind: KindString, Default: sp("PLAINTEXT://127.0.0.1:9092"), ReadOnly: true},
	{Name: "advertised.listeners", Kind: KindString, ReadOnly: true},
	{Name: "num.partitions", Kind: KindInt, Default: sp("1"), Min: 1, ReadOnly: true},
	{Name: "default.replication.factor", Kind: KindInt, Default: sp("1"), Min: 1, Max: math.MaxInt16, ReadOnly: true},
	{Name: "auto.create.topics.enable", Kind: KindBool, Default: sp("true"), ReadOnly: true},
	{Name: "socket.request.max.bytes", Kind: KindInt, Default: sp("104857600"), Min: 1, ReadOnly: true},
	{Name: "connections.max.idle.ms", Kind: KindLong, Default: sp("600000"), Min: 1, ReadOnly: true},
	{Name: "log.retention.check.interval.ms", Kind: KindLong, Default: sp("300000"), Min: 1, ReadOnly: true},
	// Tiered storage (KIP-405; replication/tiered, net/broker/tiered.go).
	{Name: "remote.log.storage.system.enable", Kind: KindBool, Default: sp("false"), ReadOnly: true,
		Doc: "tiered storage on this node; set it on the controllers too, which refuse remote.storage.enable=true without it (as Kafka's): topics with remote.storage.enable copy their sealed segments to the S3-compatible store of the rsm.config.* keys"},
	{Name: "remote.log.manager.task.interval.ms", Kind: KindLong, Default: sp("30000"), Min: 1, ReadOnly: true,
		Doc: "how often the remote log manager copies sealed segments and applies retention to remote copies"},
	{Name: "remote.log.manager.copy.max.bytes.per.second", Kind: KindLong, Default: sp(longMax), Min: 1, ReadOnly: true,
		Doc: "the rate copies to remote storage are paced to"},
	{Name: "remote.log.manager.fetch.max.bytes.per.second", Kind: KindLong, Default: sp(longMax), Min: 1, ReadOnly: true,
		Doc: "the rate of bytes read from remote storage for consumers' fetches: over it, a fetch below the local log start is answered empty and waits as a long poll"},
	{Name: "remote.fetch.max.wait.ms", Kind: KindInt, Default: sp("500"), Min: 1, ReadOnly: true,
		Doc: "how long a fetch waits for its read from remote storage; then it is answered without it (the read goes on into the chunk cache)"},
	{Name: "remote.log.reader.threads", Kind: KindInt, Default: sp("10"), Min: 1, ReadOnly: true,
		Doc: "reads from remote storage running at once; more wait"},
	{Name: "log.local.retention.ms", Kind: KindLong, Default: sp("-2"), Min: -2},
	{Name: "log.local.retention.bytes", Kind: KindLong, Default: sp("-2"), Min: -2},
	{Name: "log.retention.ms", Kind: KindLong, Min: -1},
	{Name: "log.retention.minutes", Kind: KindInt, Min: -1, ReadOnly: true},
	{Name: "log.retention.hours", Kind: KindInt, Default: sp("168"), Min: -1, ReadOnly: true},
	{Name: "log.retention.bytes", Kind: KindLong, Default: sp("-1"), Min: -1},
	{Name: "log.segment.bytes", Kind: KindInt, Default: sp("1073741824"), Min: 14},
	{Name: "log.roll.ms", Kind: KindLong, Min: 1},
	{Name: "log.roll.hours", Kind: KindInt, Default: sp("168"), Min: 1, ReadOnly: true},
	{Name: "log.roll.jitter.ms", Kind: KindLong, Min: 0},
	{Name: "log.roll.jitter.hours", Kind: KindInt, Default: sp("0"), Min: 0, ReadOnly: true},
	{Name: "log.index.size.max.bytes", Kind: KindInt, Default: sp("10485760"), Min: 4},
	{Name: "log.index.interval.bytes", Kind: KindInt, Default: sp("4096"), Min: 0},
	{Name: "message.max.bytes", Kind: KindInt, Default: sp("1048588"), Min: 0},
	{Name: "log.message.timestamp.type", Kind: KindString, Default: sp("CreateTime"), Enum: []string{"CreateTime", "LogAppendTime"}},
	{Name: "log.cleanup.policy", Kind: KindList, Default: sp("delete"), Enum: []string{"delete", "compact"}},
	{Name: "compression.type", Kind: KindString, Default: sp("producer"), Enum: []string{"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"}},
	{Name: "min.insync.replicas", Kind: KindInt, Default: sp("1"), Min: 1},
	{Name: "log.segment.delete.delay.ms", Kind: KindLong, Default: sp("60000"), Min: 0},
	{Name: "log.flush.interval.messages", Kind: KindLong, Default: sp(longMax), Min: 1},
	{Name: "log.flush.interval.ms", Kind: KindLong, Min: 0, Doc: "with sync=interval: the flush interval (default 1000)"},
	{Name: "unclean.leader.election.enable", Kind: KindBool, Default: sp("false")},
	{Name: "unclean.recovery.strategy", Kind: KindString, Default: sp("Balanced"), Enum: []string{"None", "Balanced", "Aggressive"},
		Doc: "the topics' default (KIP-966; no Kafka release has it)"},
	{Name: "unclean.recovery.manager.enabled", Kind: KindBool, Default: sp("false"),
		Doc: "KIP-966 (no Kafka release has it): elect by unclean.recovery.strategy, not unclean.leader.election.enable"},
	{Name: "log.cleaner.enable", Kind: KindBool, Default: sp("true"), ReadOnly: true},
	{Name: "log.cleaner.threads", Kind: KindInt, Default: sp("1"), Min: 0},
	{Name: "log.cleaner.dedupe.buffer.size", Kind: KindLong, Default: sp("134217728"), Min: 1 << 20},
	{Name: "log.cleaner.io.buffer.size", Kind: KindInt, Default: sp("524288"), Min: 0},
	{Name: "log.cleaner.io.buffer.load.factor", Kind: KindDouble, Default: sp("0.9"), Min: 0, Max: 1},
	{Name: "log.cleaner.io.max.bytes.per.second", Kind: KindDouble, Default: sp("1.7976931348623157E308"), Min: 0},
	{Name: "log.cleaner.backoff.ms", Kind: KindLong, Default: sp("15000"), Min: 0},
	{Name: "log.cleaner.delete.retention.ms", Kind: KindLong, Default: sp("86400000"), Min: 0},
	{Name: "log.cleaner.min.compaction.lag.ms", Kind: KindLong, Default: sp("0"), Min: 0},
	{Name: "log.cleaner.max.compaction.lag.ms", Kind: KindLong, Default: sp(longMax), Min: 1},
	{Name: "log.cleaner.min.cleanable.ratio", Kind: KindDouble, Default: sp("0.5"), Min: 0, Max: 1},
	{Name: "log.preallocate", Kind: KindBool, Default: sp("false")},
	{Name: "samsa.log.scrub.bytes.per.second", Kind: KindLong, Default: sp("8388608"), Min: 0, ReadOnly: true, Doc: "Samsa: the background scrubber checks the CRC of every batch of every log at this rate, a pass at start-up and then every samsa.log.scrub.interval.ms; a damaged range is refused with CORRUPT_MESSAGE and a follower fetches it again from its leader (0: off; `samsa scrub` checks a stopped node)"},
	{Name: "samsa.log.segment.preallocate.enable", Kind: KindBool, Default: sp("true"), ReadOnly: true, Doc: "Samsa: under the fsync policy, a partition whose flushes carry a few KiB each has its active segment written ahead with zeros (64-256 KiB at a time, at most 64 MiB per log directory), so that an fdatasync carries no file-size or block-allocation metadata; the file is cut back to its data at a roll and at shutdown, and recovery cuts the zeros after a crash (false: segments grow with each append). Kafka's log.preallocate, which sizes a whole new segment, is accepted and not used"},
	{Name: "samsa.log.flush.concurrent.rounds", Kind: KindInt, Default: sp("1"), Min: 1, Max: 64, ReadOnly: true, Doc: "Samsa: under the fsync policy, how many group-commit rounds of one log directory may run at once: with more than one, a partition that becomes dirty while another partition's fdatasync is in progress is synced at once instead of after it (a round of many partitions syncs up to 8 of them in parallel whatever this is; 1: one round at a time)"},
	{Name: "samsa.log.flush.syncfs.min.partitions", Kind: KindInt, Default: sp("0"), Min: 0, ReadOnly: true, Doc: "Samsa: a group-commit round of at least this many partitions of one log directory is made durable with one syncfs(2) of its file system instead of an fdatasync per dirty file (3-4x faster at 64-512 partitions of small batches, with 5-10x less CPU); syncfs writes back every dirty file of the file system, other processes' too, and its error names no file (it may be another process's), so a round whose syncfs fails is synced again file by file and only a failure of those takes the log directory offline; Linux 5.8 or later, else the directory keeps fdatasync (0: off)"},
	{Name: "samsa.log.flush.writeback.enable", Kind: KindBool, Default: sp("true"), ReadOnly: true, Doc: "Samsa: under the fsync policy, a group-commit round of several partitions whose appends all overwrite blocks an earlier fdatasync made durable (their segments written ahead with zeros) writes them back with sync_file_range(2) and makes them durable with one fdatasync, whose flush of the device's write cache covers them all, instead of an fdatasync (and a cache flush) per partition; only on ext4, XFS and tmpfs, whose every fdatasync flushes the cache (false: an fdatasync per dirty file)"},
	{Name: "samsa.log.scrub.interval.ms", Kind: KindLong, Default: sp("3600000"), Min: 1, ReadOnly: true, Doc: "Samsa: the pause between two passes of the scrubber"},
	{Name: "log.message.timestamp.before.max.ms", Kind: KindLong, Default: sp(longMax), Min: 0},
	{Name: "log.message.timestamp.after.max.ms", Kind: KindLong, Default: sp("3600000"), Min: 0},
	// Group coordinator (10_find_coordinator.go); read when the coordinator starts.
	{Name: "group.initial.rebalance.delay.ms", Kind: KindInt, Default: sp("3000"), Min: 0, ReadOnly: true},
	{Name: "group.min.session.timeout.ms", Kind: KindInt, Default: sp("6000"), Min: 0, ReadOnly: true},
	{Name: "group.max.session.timeout.ms", Kind: KindInt, Default: sp("1800000"), Min: 0, ReadOnly: true},
	{Name: "group.max.size", Kind: KindInt, Default: sp("2147483647"), Min: 1, ReadOnly: true},
	{Name: "offsets.retention.minutes", Kind: KindInt, Default: sp("10080"), Min: 1, ReadOnly: true},
	{Name: "offsets.retention.check.interval.ms", Kind: KindLong, Default: sp("600000"), Min: 1, ReadOnly: true},
	{Name: "offset.metadata.max.bytes", Kind: KindInt, Default: sp("4096"), ReadOnly: true},
	{Name: "offsets.topic.num.partitions", Kind: KindInt, Default: sp("50"), Min: 1, ReadOnly: true},
	{Name: "offsets.topic.segment.bytes", Kind: KindInt, Default: sp("104857600"), Min: 1, ReadOnly: true, Doc: "segment.bytes of __consumer_offsets when the node creates it"},
	{Name: "offsets.commit.timeout.ms", Kind: KindInt, Default: sp("5000"), Min: 1, ReadOnly: true, Doc: "how long an offset commit waits for its append to __consumer_offsets to be replicated before it is answered REQUEST_TIMED_OUT"},
	// KIP-848 consumer groups and KIP-932 share groups (net/kafka/groups.go), Kafka 4's
	// names and defaults; read when the coordinator starts. The keys a group may set for
	// itself (GroupDefs, group_keys.go) take these as their defaults, and the
	// group.*.min.* and group.*.max.* keys bound them.
	{Name: "group.coordinator.rebalance.protocols", Kind: KindList, Default: sp("classic,consumer,streams"), Enum: []string{"classic", "consumer", "share", "streams"}, ReadOnly: true, Doc: "consumer: ConsumerGroupHeartbeat and ConsumerGroupDescribe are served; share: share groups are served (as group.share.enable=true); streams: streams groups (KIP-1071) are served, StreamsGroupHeartbeat and StreamsGroupDescribe advertised (on by default, as a new Kafka 4.2 cluster finalizes streams.version 1; without it both APIs answer UNSUPPORTED_VERSION and are not advertised); classic is always served. A group type is served only while its feature is finalized too (group.version, share.version, streams.version at 1)"},
	{Name: "group.consumer.heartbeat.interval.ms", Kind: KindInt, Default: sp("5000"), Min: 1, ReadOnly: true, Doc: "the heartbeat interval of a consumer group that does not set consumer.heartbeat.interval.ms"},
	{Name: "group.consumer.min.heartbeat.interval.ms", Kind: KindInt, Default: sp("5000"), Min: 1, ReadOnly: true, Doc: groupBound},
	{Name: "group.consumer.max.heartbeat.interval.ms", Kind: KindInt, Default: sp("15000"), Min: 1, ReadOnly: true, Doc: groupBound},
	{Name: "group.consumer.session.timeout.ms", Kind: KindInt, Default: sp("45000"), Min: 1, ReadOnly: true, Doc: "the session timeout of a consumer group that does not set consumer.session.timeout.ms"},
	{Name: "group.consumer.min.session.timeout.ms", Kind: KindInt, Default: sp("45000"), Min: 1, ReadOnly: true, Doc: groupBound},
	{Name: "group.consumer.max.session.timeout.ms", Kind: KindInt, Default: sp("60000"), Min: 1, ReadOnly: true, Doc: groupBound},
	{Name: "group.consumer.assignment.interval.ms", Kind: KindInt, Default: sp("1000"), Min: 0, ReadOnly: true, Doc: "the assignment interval of consumer groups; " + groupNoEffect},
	{Name: "group.consumer.min.assignment.interval.ms", Kind: KindInt, Default: sp("0"), Min: 0, ReadOnly: true, Doc: groupBound},
	{Name: "group.consumer.max.assignment.interval.ms", Kind: KindInt, Default: sp("15000"), Min: 0, ReadOnly: true, Doc: groupBound},
	{Name: "group.consumer.assignor.offload.enable", Kind: KindBool, Default: sp("true"), ReadOnly: true, Doc: "consumer group assignment on a background thread; " + groupNoEffect},
	{Name: "group.consumer.max.size", Kind: KindInt, Default: sp("2147483647"), Min: 1, ReadOnly: true},
	{Name: "group.consumer.assignors", Kind: KindList, Default: sp("org.apache.kafka.coordinator.group.assignor.UniformAssignor,org.apache.kafka.coordinator.group.assignor.RangeAssignor"), ReadOnly: true, Doc: "uniform and range, by class name or by name; the first is the default (a value naming another assignor is ignored with a warning: uniform, range)"},
	{Name: "group.consumer.migration.policy", Kind: KindString, Default: sp("bidirectional"), Enum: []string{"disabled", "downgrade", "upgrade", "bidirectional"}, ReadOnly: true, Doc: "empty groups convert between the classic and the consumer protocol whatever it says; groups with members are not converted (online migration is not served)"},
	{Name: "group.share.enable", Kind: KindBool, Default: sp("true"), ReadOnly: true, Doc: "share groups (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch, ShareAcknowledge and the share coordinator are served and advertised while share.version is finalized at 1 (false: they are not). On by default, as Kafka 4.2 turns them on for new clusters with share.version 1 (Kafka's key of the same name is an internal switch that defaults to false)"},
	{Name: "group.share.heartbeat.interval.ms", Kind: KindInt, Default: sp("5000"), Min: 1, ReadOnly: true, Doc: "the heartbeat interval of a share group that does not set share.heartbeat.interval.ms"},
	{Name: "group.share.min.heartbeat.interval.ms", Kind: KindInt, Default: sp("5000"), Min: 1, ReadOnly: true, Doc: groupBound},
	{Name: "group.share.max.heartbeat.interval.ms", Kind: KindInt, Default: sp("15000"), Min: 1, ReadOnly: true, Doc: groupBound},
	{Name: "group.share.session.timeout.ms", Kind: KindInt, Default: sp("45000"), Min: 1, ReadOnly: true, Doc: "the session timeout of a share group that does not set share.session.timeout.ms"},
	{Name: "group.share.min.session.timeout.ms", Kind: KindInt, Default: sp("45000"), Min: 1, ReadOnly: true, Doc: groupBound},
	{Name: "group.share.max.session.timeout.ms", Kind: KindInt, Default: sp("60000"), Min: 1, ReadOnly: true, Doc: groupBound},
	{Name: "group.share.max.size", Kind: KindShort, Default: sp("200"), Min: 10, Max: 1000, ReadOnly: true},
	{Name: "group.share.record.lock.duration.ms", Kind: KindInt, Default: sp("30000"), Min: 1000, Max: 3600000, ReadOnly: true, Doc: "the acquisition lock of a share group that does not set share.record.lock.duration.ms"},
	{Name: "group.share.min.record.lock.duration.ms", Kind: KindInt, Default: sp("15000"), Min: 1000, Max: 30000, ReadOnly: true, Doc: groupBound},
	{Name: "group.share.max.record.lock.duration.ms", Kind: KindInt, Default: sp("60000"), Min: 30000, Max: 3600000, ReadOnly: true, Doc: groupBound},
	{Name: "group.share.delivery.count.limit", Kind: KindInt, Default: sp("5"), Min: 2, Max: 10, ReadOnly: true, Doc: "the delivery count limit of a share group that does not set share.delivery.count.limit"},
	{Name: "group.share.min.delivery.count.limit", Kind: KindInt, Default: sp("2"), Min: 2, Max: 5, ReadOnly: true, Doc: groupBound},
	{Name: "group.share.max.delivery.count.limit", Kind: KindInt, Default: sp("10"), Min: 5, Max: 25, ReadOnly: true, Doc: groupBound},
	{Name: "group.share.partition.max.record.locks", Kind: KindInt, Default: sp("2000"), Min: 100, Max: 10000, ReadOnly: true, Doc: "the in-flight records of a share partition of a group that does not set share.partition.max.record.locks"},
	{Name: "group.share.min.partition.max.record.locks", Kind: KindInt, Default: sp("100"), Min: 100, Max: 10000, ReadOnly: true, Doc: groupBound},
	{Name: "group.share.max.partition.max.record.locks", Kind: KindInt, Default: sp("4000"), Min: 100, Max: 10000, ReadOnly: true, Doc: groupBound},
	{Name: "group.share.assignment.interval.ms", Kind: KindInt, Default: sp("1000"), Min: 0, ReadOnly: true, Doc: "the assignment interval of share groups; " + groupNoEffect},
	{Name: "group.share.min.assignment.interval.ms", Kind: KindInt, Default: sp("0"), Min: 0, ReadOnly: true, Doc: groupBound},
	{Name: "group.share.max.assignment.interval.ms", Kind: KindInt, Default: sp("15000"), Min: 0, ReadOnly: true, Doc: groupBound},
	{Name: "group.share.assignor.offload.enable", Kind: KindBool, Default: sp("true"), ReadOnly: true, Doc: "share group assignment on a background thread; " + groupNoEffect},
	{Name: "group.share.max.share.sessions", Kind: KindInt, Default: sp("2000"), Min: 1, ReadOnly: true},
	{Name: "share.auto.offset.reset", Kind: KindString, Default: sp("latest"), ReadOnly: true, Check: checkShareAutoOffsetReset, Doc: "where a new share partition starts for a share group that does not set share.auto.offset.reset (Kafka has no broker key: a group config only, default latest); latest, earliest or by_duration:<ISO-8601 duration>"},
	// Streams groups (KIP-1071, coordinator/group/streams.go): these keys default and
	// bound the streams.* keys a group may set.
	{Name: "group.streams.session.timeout.ms", Kind: KindInt, Default: sp("45000"), Min: 1, ReadOnly: true, Doc: "the session timeout of a streams group that does not set streams.session.timeout.ms"},
	{Name: "group.streams.heartbeat.interval.ms", Kind: KindInt, Default: sp("5000"), Min: 1, ReadOnly: true, Doc: "the heartbeat interval of a streams group that does not set streams.heartbeat.interval.ms"},
	{Name: "group.streams.num.standby.replicas", Kind: KindInt, Default: sp("0"), Min: 0, ReadOnly: true, Doc: "the standby replicas of each stateful task of a streams group that does not set streams.num.standby.replicas"},
	{Name: "group.streams.max.size", Kind: KindInt, Default: sp("2147483647"), Min: 1, ReadOnly: true, Doc: "the members a streams group may have: a new one beyond it is refused (GROUP_MAX_SIZE_REACHED)"},
	{Name: "group.streams.min.heartbeat.interval.ms", Kind: KindInt, Default: sp("5000"), Min: 1, ReadOnly: true, Doc: groupBound},
	{Name: "group.streams.max.heartbeat.interval.ms", Kind: KindInt, Default: sp("15000"), Min: 1, ReadOnly: true, Doc: groupBound},
	{Name: "group.streams.min.session.timeout.ms", Kind: KindInt, Default: sp("45000"), Min: 1, ReadOnly: true, Doc: groupBound},
	{Name: "group.streams.max.session.timeout.ms", Kind: KindInt, Default: sp("60000"), Min: 1, ReadOnly: true, Doc: groupBound},
	{Name: "group.streams.max.standby.replicas", Kind: KindInt, Default: sp("2"), Min: 0, ReadOnly: true, Doc: groupBound},
	{Name: "group.streams.initial.rebalance.delay.ms", Kind: KindInt, Default: sp("3000"), Min: 0, ReadOnly: true, Doc: "the first rebalance delay of streams groups; " + groupNoEffect},
	{Name: "group.streams.assignment.interval.ms", Kind: KindInt, Default: sp("1000"), Min: 0, ReadOnly: true, Doc: "the assignment interval of streams groups; " + groupNoEffect},
	{Name: "group.streams.min.assignment.interval.ms", Kind: KindInt, Default: sp("0"), Min: 0, ReadOnly: true, Doc: groupBound},
	{Name: "group.streams.max.assignment.interval.ms", Kind: KindInt, Default: sp("15000"), Min: 0, ReadOnly: true, Doc: groupBound},
	{Name: "group.streams.assignor.offload.enable", Kind: KindBool, Default: sp("true"), ReadOnly: true, Doc: "streams group assignment on a background thread; " + groupNoEffect},
	{Name: "group.streams.task.offset.interval.ms", Kind: KindInt, Default: sp("60000"), Min: 1, ReadOnly: true, Doc: "the interval at which members of a streams group that does not set streams.task.offset.interval.ms report their task offsets (handed to them in the heartbeat answer; Samsa does not use the offsets: warm-up tasks are not built)"},
	{Name: "group.streams.min.task.offset.interval.ms", Kind: KindInt, Default: sp("15000"), Min: 1, ReadOnly: true, Doc: groupBound},
	{Name: "group.streams.num.warmup.replicas", Kind: KindInt, Default: sp("2"), Min: 0, ReadOnly: true, Doc: "the warm-up replicas of streams groups; " + groupNoEffect},
	{Name: "group.streams.max.warmup.replicas", Kind: KindInt, Default: sp("20"), Min: 0, ReadOnly: true, Doc: groupBound},
	{Name: "group.streams.acceptable.recovery.lag", Kind: KindLong, Default: sp("10000"), Min: 0, ReadOnly: true, Doc: "the acceptable recovery lag handed to the members of a streams group that does not set streams.acceptable.recovery.lag (Samsa's assignor does not use it: warm-up tasks are not built)"},
	{Name: "share.coordinator.state.topic.num.partitions", Kind: KindInt, Default: sp("50"), Min: 1, ReadOnly: true},
	{Name: "share.coordinator.state.topic.replication.factor", Kind: KindShort, Default: sp("3"), Min: 1, ReadOnly: true},
	{Name: "share.coordinator.state.topic.min.isr", Kind: KindShort, Default: sp("2"), Min: 1, ReadOnly: true},
	{Name: "share.coordinator.state.topic.segment.bytes", Kind: KindInt, Default: sp("104857600"), Min: 1, ReadOnly: true},
	// The cluster (docs/CLUSTER.md): roles, the controller quorum, listeners, the broker
	// lifecycle and replication.
	{Name: "process.roles", Kind: KindList, ReadOnly: true, Enum: []string{"broker", "controller"}, Doc: "broker, controller or broker,controller (unset: a combined single node)"},
	{Name: "controller.quorum.voters", Kind: KindList, ReadOnly: true, Doc: "id@host:port of every controller voter"},
	{Name: "controller.quorum.bootstrap.servers", Kind: KindList, ReadOnly: true, Doc: "host:port of controllers, for broker-only nodes when controller.quorum.voters is unset"},
	{Name: "controller.listener.names", Kind: KindList, ReadOnly: true, Doc: "the listener names controllers bind (the first is used)"},
	{Name: "inter.broker.listener.name", Kind: KindString, ReadOnly: true, Doc: "the listener followers fetch from (default PLAINTEXT)"},
	{Name: "listener.security.protocol.map", Kind: KindString, ReadOnly: true, Default: sp("PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL")},
	{Name: "metadata.log.dir", Kind: KindString, ReadOnly: true, Doc: "the raft log and snapshots of the metadata (default <data.dir>/meta)"},
	{Name: "controller.quorum.election.timeout.ms", Kind: KindInt, Default: sp("1000"), Min: 1, ReadOnly: true},
	{Name: "controller.quorum.fetch.timeout.ms", Kind: KindInt, Default: sp("2000"), Min: 1, ReadOnly: true},
	{Name: "metadata.log.max.snapshot.interval.ms", Kind: KindLong, Default: sp("3600000"), Min: 0, ReadOnly: true},
	{Name: "metadata.log.max.record.bytes.between.snapshots", Kind: KindLong, Default: sp("20971520"), Min: 1, ReadOnly: true},
	{Name: "broker.heartbeat.interval.ms", Kind: KindInt, Default: sp("2000"), Min: 1, ReadOnly: true},
	{Name: "broker.session.timeout.ms", Kind: KindInt, Default: sp("9000"), Min: 1, ReadOnly: true},
	{Name: "broker.rack", Kind: KindString, ReadOnly: true},
	{Name: "replica.lag.time.max.ms", Kind: KindLong, Default: sp("30000"), Min: 1, ReadOnly: true},
	{Name: "num.replica.fetchers", Kind: KindInt, Default: sp("1"), Min: 1},
	{Name: "replica.fetch.max.bytes", Kind: KindInt, Default: sp("1048576"), Min: 0, ReadOnly: true},
	{Name: "replica.fetch.response.max.bytes", Kind: KindInt, Default: sp("10485760"), Min: 0, ReadOnly: true},
	{Name: "replica.fetch.wait.max.ms", Kind: KindInt, Default: sp("500"), Min: 0, ReadOnly: true},
	{Name: "replica.fetch.min.bytes", Kind: KindInt, Default: sp("1"), Min: 1, ReadOnly: true},
	{Name: "replica.fetch.backoff.ms", Kind: KindInt, Default: sp("1000"), Min: 0, ReadOnly: true},
	{Name: "replica.socket.timeout.ms", Kind: KindInt, Default: sp("30000"), Min: 1, ReadOnly: true},
	{Name: "replica.high.watermark.checkpoint.interval.ms", Kind: KindLong, Default: sp("5000"), Min: 1, ReadOnly: true},
	{Name: "follower.replication.throttled.rate", Kind: KindLong, Default: sp(longMax), Min: 0, Doc: "bytes/s for throttled follower replicas (reassignment)"},
	{Name: "leader.replication.throttled.rate", Kind: KindLong, Default: sp(longMax), Min: 0, Doc: "bytes/s for throttled leader replicas (reassignment)"},
	{Name: "auto.leader.rebalance.enable", Kind: KindBool, Default: sp("true"), ReadOnly: true},
	{Name: "leader.imbalance.check.interval.seconds", Kind: KindLong, Default: sp("300"), Min: 1, ReadOnly: true},
	{Name: "leader.imbalance.per.broker.percentage", Kind: KindInt, Default: sp("10"), Min: 0, ReadOnly: true},
	{Name: "controlled.shutdown.enable", Kind: KindBool, Default: sp("true"), ReadOnly: true},
	{Name: "samsa.test.power.loss.journal", Kind: KindString, ReadOnly: true, Doc: "Samsa, tests only: journal synced file sizes here; after a kill, the next start cuts every file back to them (a power loss)"},
	{Name: "num.network.threads", Kind: KindInt, Default: sp("3"), Min: 1, ReadOnly: true, Doc: "transport=reactor: event loops, when set (default: one per CPU)"},
	{Name: "num.io.threads", Kind: KindInt, Default: sp("8"), Min: 1, ReadOnly: true, Doc: "transport=reactor: goroutines running handlers"},
	{Name: "socket.send.buffer.bytes", Kind: KindInt, Default: sp("102400"), Min: -1, ReadOnly: true, Doc: compatOnly},
	{Name: "socket.receive.buffer.bytes", Kind: KindInt, Default: sp("102400"), Min: -1, ReadOnly: true, Doc: compatOnly},
	{Name: "num.recovery.threads.per.data.dir", Kind: KindInt, Default: sp("2"), Min: 1, ReadOnly: true, Doc: compatOnly},
	{Name: "offsets.topic.replication.factor", Kind: KindShort, Default: sp("3"), Min: -1, ReadOnly: true, Doc: "__consumer_offsets' replication factor (capped at the number of brokers)"},
	{Name: "transaction.partition.verification.enable", Kind: KindBool, Default: sp("true"), Doc: "KIP-890: a partition leader checks with the transaction coordinator that a transactional batch opening a transaction was added to it"},
	{Name: "samsa.transaction.version", Kind: KindShort, Default: sp("2"), Min: 0, Max: 2, ReadOnly: true, Doc: "Samsa: the transaction.version level a metadata log starts with (samsa storage format without --feature transaction.version), and the level of a log formatted before feature levels were kept in it; no effect at run time otherwise: the finalized level is in the metadata log, changed with samsa features (kafka-features.sh). 2 is KIP-890 part 2 (an epoch bump per transaction, partitions added by the Produce and TxnOffsetCommit they receive)"},
	{Name: "transaction.state.log.replication.factor", Kind: KindShort, Default: sp("3"), Min: 1, ReadOnly: true, Doc: "__transaction_state's replication factor when the node creates it (capped at the live brokers)"},
	{Name: "transaction.state.log.min.isr", Kind: KindInt, Default: sp("2"), Min: 1, ReadOnly: true, Doc: "__transaction_state's min.insync.replicas when the node creates it (capped at its replication factor)"},
	{Name: "transaction.state.log.num.partitions", Kind: KindInt, Default: sp("50"), Min: 1, ReadOnly: true, Doc: "__transaction_state's partitions (a transactional id's coordinator is the leader of its partition)"},
	{Name: "transaction.state.log.segment.bytes", Kind: KindInt, Default: sp("104857600"), Min: 1, ReadOnly: true, Doc: "segment.bytes of __transaction_state when the node creates it"},
	{Name: "transaction.max.timeout.ms", Kind: KindInt, Default: sp("900000"), Min: 1, ReadOnly: true, Doc: "the longest transaction.timeout.ms an InitProducerId may ask for (INVALID_TRANSACTION_TIMEOUT above it)"},
	{Name: "transactional.id.expiration.ms", Kind: KindInt, Default: sp("604800000"), Min: 1, ReadOnly: true, Doc: "a transactional id with no transaction for this long is forgotten"},
	{Name: "transaction.abort.timed.out.transaction.cleanup.interval.ms", Kind: KindInt, Default: sp("10000"), Min: 1, ReadOnly: true, Doc: "how often the transaction coordinator looks for transactions past their timeout, which it aborts"},
	{Name: "transaction.remove.expired.transaction.cleanup.interval.ms", Kind: KindInt, Default: sp("3600000"), Min: 1, ReadOnly: true, Doc: "how often the transaction coordinator looks for expired transactional ids"},
	{Name: "sync", Kind: KindString, Default: sp("fsync"), Enum: []string{"fsync", "replicated", "interval", "none"}, ReadOnly: true, Doc: "Samsa: when appends are acknowledged durable (fsync: after the group-committed fdatasync; replicated: rely on the ISR, flush in the background)"},
	{Name: "samsa.transport.inline.writes.enable", Kind: KindBool, Default: sp("true"), ReadOnly: true, Doc: "Samsa: transport=std on a plaintext listener: an answer that is the oldest unwritten one of its connection (and has no file range) is written by the goroutine that completes it (the handler, or the log flusher releasing a Produce), with one writev(2) that never waits for room in the socket, instead of by waking the connection's writer goroutine; what the socket does not take at once is left to the writer (false: the writer writes every answer)"},
	{Name: "samsa.log.level", Kind: KindString, Default: sp("info"), Enum: []string{"debug", "info", "warn", "error"}, ReadOnly: true, Doc: "Samsa: the least severe level samsa serve writes to its log (standard error); debug adds, among others, each refused transactional produce with the transaction coordinator's code"},
	{Name: "transport", Kind: KindString, Default: sp("std"), Enum: []string{"std", "reactor"}, ReadOnly: true, Doc: "Samsa: network transport: std (Go's net) or reactor (epoll, Linux)"},
	{Name: "data.dir", Kind: KindString, Default: sp("./data"), ReadOnly: true, Doc: "Samsa: <data.dir>/meta holds metadata, <data.dir>/logs the default log dir"},
	{Name: "admin.listen", Kind: KindString, Default: sp("127.0.0.1:9644"), ReadOnly: true, Doc: "Samsa: HTTP address of /metrics, the probes /live and /ready, and /debug/pprof/ (empty: off)"},
	// Security: TLS listeners (net/transport.SSLConfig), SASL (net/auth), the
	// authorizer (coordinator/acl), quotas and connection limits. These are the
	// unprefixed keys; a listener's listener.name.<listener>.<key> form overrides each
	// one for that listener (transport.ListenerLookup), and SASL's JAAS configuration is
	// listener.name.<listener>.<mechanism>.sasl.jaas.config: callers strip the prefix
	// before validating.
	{Name: "ssl.keystore.type", Kind: KindString, Default: sp("PEM"), Enum: []string{"PEM", "JKS", "PKCS12"}, ReadOnly: true, Doc: "Samsa reads PEM stores only (JKS and PKCS12 are refused at start); unset means PEM, where Kafka's default is JKS"},
	{Name: "ssl.keystore.location", Kind: KindString, ReadOnly: true, Doc: "PEM file of the private key and the certificate chain; reloaded when it changes"},
	{Name: "ssl.keystore.password", Kind: KindPassword, ReadOnly: true, Doc: "refused with PEM stores, as in Kafka (use ssl.key.password)"},
	{Name: "ssl.keystore.key", Kind: KindPassword, ReadOnly: true, Doc: "the private key as PEM text (with ssl.keystore.certificate.chain)"},
	{Name: "ssl.keystore.certificate.chain", Kind: KindPassword, ReadOnly: true, Doc: "the certificate chain as PEM text"},
	{Name: "ssl.key.password", Kind: KindPassword, ReadOnly: true, Doc: "password of an ENCRYPTED PRIVATE KEY (PKCS#8 PBES2: PBKDF2 with AES-CBC or DES-EDE3-CBC)"},
	{Name: "ssl.truststore.type", Kind: KindString, Default: sp("PEM"), Enum: []string{"PEM", "JKS", "PKCS12"}, ReadOnly: true, Doc: "Samsa reads PEM only"},
	{Name: "ssl.truststore.location", Kind: KindString, ReadOnly: true, Doc: "PEM file of CA certificates; reloaded when it changes (unset: the system's roots)"},
	{Name: "ssl.truststore.password", Kind: KindPassword, ReadOnly: true, Doc: "refused with PEM stores, as in Kafka"},
	{Name: "ssl.truststore.certificates", Kind: KindPassword, ReadOnly: true, Doc: "CA certificates as PEM text"},
	{Name: "ssl.client.auth", Kind: KindString, Default: sp("none"), Enum: []string{"none", "requested", "required"}, ReadOnly: true},
	{Name: "ssl.enabled.protocols", Kind: KindList, Default: sp("TLSv1.2,TLSv1.3"), Enum: []string{"tlsv1", "tlsv1.1", "tlsv1.2", "tlsv1.3"}, ReadOnly: true, Doc: "a contiguous range of versions (Go sets a minimum and a maximum)"},
	{Name: "ssl.protocol", Kind: KindString, Default: sp("TLSv1.3"), Enum: []string{"TLSv1.2", "TLSv1.3", "TLS"}, ReadOnly: true, Doc: "the highest version node-to-node clients offer"},
	{Name: "ssl.cipher.suites", Kind: KindList, ReadOnly: true, Doc: "IANA names Go implements; TLS 1.3 suites cannot be chosen in Go (naming none disables TLS 1.3, as in Java)"},
	{Name: "ssl.endpoint.identification.algorithm", Kind: KindString, Default: sp("https"), ReadOnly: true, Doc: "node-to-node clients: https verifies the server's name, empty verifies the chain only"},
	{Name: "ssl.principal.mapping.rules", Kind: KindString, Default: sp("DEFAULT"), ReadOnly: true, Doc: "RULE:pattern/replacement/[LU] rules or DEFAULT, applied to the client certificate's subject (RFC 2253)"},
	{Name: "ssl.keymanager.algorithm", Kind: KindString, Default: sp("SunX509"), ReadOnly: true, Doc: compatOnly},
	{Name: "ssl.trustmanager.algorithm", Kind: KindString, Default: sp("PKIX"), ReadOnly: true, Doc: compatOnly},
	{Name: "samsa.ssl.reload.interval.ms", Kind: KindLong, Default: sp("10000"), Min: 0, ReadOnly: true, Doc: "Samsa: how often the key and trust store files are checked for changes (0: never)"},
	{Name: "security.inter.broker.protocol", Kind: KindString, Default: sp("PLAINTEXT"), Enum: []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}, ReadOnly: true, Doc: "used when inter.broker.listener.name is unset"},
	{Name: "sasl.enabled.mechanisms", Kind: KindList, Default: sp("SCRAM-SHA-256,SCRAM-SHA-512"), Enum: []string{"plain", "scram-sha-256", "scram-sha-512"}, ReadOnly: true, Doc: "Samsa serves PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512; Kafka's default GSSAPI is not served"},
	{Name: "sasl.mechanism.inter.broker.protocol", Kind: KindString, Default: sp("PLAIN"), Enum: []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}, ReadOnly: true, Doc: "Kafka's default GSSAPI is not served"},
	{Name: "sasl.mechanism.controller.protocol", Kind: KindString, Default: sp("PLAIN"), Enum: []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}, ReadOnly: true, Doc: "Kafka's default GSSAPI is not served"},
	{Name: "sasl.jaas.config", Kind: KindPassword, ReadOnly: true, Doc: "one PlainLoginModule or ScramLoginModule entry: username/password the node sends as a client; user_<name>=\"password\" PLAIN users"},
	{Name: "sasl.server.max.receive.size", Kind: KindInt, Default: sp("524288"), Min: 1, ReadOnly: true, Doc: "the largest request accepted before authentication"},
	{Name: "connection.failed.authentication.delay.ms", Kind: KindInt, Default: sp("100"), Min: 0, ReadOnly: true, Doc: "how long the answer to a failed authentication waits before the connection closes (KIP-306)"},
	{Name: "connections.max.reauth.ms", Kind: KindLong, Default: sp("0"), Min: 0, ReadOnly: true, Doc: "SASL session lifetime; clients re-authenticate before it ends (KIP-368); 0: sessions never expire"},
	{Name: "principal.builder.class", Kind: KindClass, Default: sp("org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"), ReadOnly: true, Doc: "only Kafka's default principal builder is implemented"},
	{Name: "authorizer.class.name", Kind: KindString, Default: sp(""), ReadOnly: true, Doc: "org.apache.kafka.metadata.authorizer.StandardAuthorizer enables ACLs (Samsa's authorizer follows its semantics); empty: no authorization"},
	{Name: "super.users", Kind: KindString, ReadOnly: true, Doc: "principals allowed everything, separated by ';' (User:admin;User:CN=broker)"},
	{Name: "allow.everyone.if.no.acl.found", Kind: KindBool, Default: sp("false"), ReadOnly: true, Doc: "a resource no ACL applies to is open to everyone"},
	{Name: "quota.window.num", Kind: KindInt, Default: sp("11"), Min: 1, ReadOnly: true, Doc: "samples kept for client quotas"},
	{Name: "quota.window.size.seconds", Kind: KindInt, Default: sp("1"), Min: 1, ReadOnly: true, Doc: "length of one client quota sample"},
	{Name: "controller.quota.window.num", Kind: KindInt, Default: sp("11"), Min: 1, ReadOnly: true, Doc: "samples kept for controller mutation quotas"},
	{Name: "controller.quota.window.size.seconds", Kind: KindInt, Default: sp("1"), Min: 1, ReadOnly: true, Doc: "length of one controller mutation quota sample"},
	{Name: "client.quota.callback.class", Kind: KindString, ReadOnly: true, Doc: "only Kafka's default quota callback is implemented"},
	{Name: "max.connections", Kind: KindInt, Default: sp("2147483647"), Min: 0, Doc: "connections a broker accepts in all"},
	{Name: "max.connections.per.ip", Kind: KindInt, Default: sp("2147483647"), Min: 0, Doc: "connections a broker accepts from one address"},
	{Name: "max.connections.per.ip.overrides", Kind: KindString, Default: sp(""), Doc: "host:count pairs separated by commas", Check: checkIPOverrides},
	{Name: "max.connection.creation.rate", Kind: KindInt, Default: sp("2147483647"), Min: 0, Doc: "new connections per second a broker accepts"},
}

const compatOnly = "accepted for compatibility with Kafka's server.properties; no effect on Samsa"

// groupBound documents the broker keys that bound a group's own setting of a group key
// (GroupDefs): Kafka's group.<type>.min.<key> and group.<type>.max.<key>.
const groupBound = "bounds a group's own setting (group keys): a GROUP config beyond it is refused (INVALID_CONFIG), one set before it moved is capped to it"

// groupNoEffect ends the documentation of the broker keys that default a group key
// Samsa stores and describes without acting on it.
const groupNoEffect = "no effect in Samsa (the default of a group key Samsa stores and describes)"

var (
	topicDefs  = indexDefs(TopicDefs)
	brokerDefs = indexDefs(BrokerDefs)
)

// Topic returns the definition of a topic key, or nil.
func Topic(key string) *Def { return topicDefs[key] }

// Broker returns the definition of a broker key, or nil.
func Broker(key string) *Def { return brokerDefs[key] }

func indexDefs(defs []*Def) map[string]*Def {
	m := make(map[string]*Def, len(defs))
	for _, d := range defs {
		m[d.Name] = d
	}
	return m
}

// ValidateBroker checks a broker key and value (server.properties, environment,
// flags) and returns the canonical value. Unknown keys return known == false.
func ValidateBroker(key, value string) (canonical string, known bool, err error) {
	d := brokerDefs[key]
	if d == nil {
		d = listenerDef(key)
	}
	if d == nil {
		return value, false, nil
	}
	v, err := d.Validate(value)
	return v, true, err
}

// listenerDef is the definition a listener-prefixed key is validated with:
// listener.name.<listener>.<key> is <key>'s, listener.name.<listener>.<mechanism>.sasl.jaas.config
// is sasl.jaas.config's (Kafka's per-listener overrides); nil for other keys.
func listenerDef(key string) *Def {
	rest, ok := strings.CutPrefix(key, "listener.name.")
	if !ok {
		return nil
	}
	_, sub, ok := strings.Cut(rest, ".")
	if !ok {
		return nil
	}
	if d := brokerDefs[sub]; d != nil && (strings.HasPrefix(sub, "ssl.") || strings.HasPrefix(sub, "sasl.") ||
		strings.HasPrefix(sub, "connections.max.reauth.ms") || sub == "max.connections" || sub == "max.connection.creation.rate") {
		return d
	}
	if _, jaas, ok := strings.Cut(sub, "."); ok && jaas == "sasl.jaas.config" {
		return brokerDefs["sasl.jaas.config"]
	}
	return nil
}

// BrokerDefault returns Kafka's default for a broker key, if it has one.
func BrokerDefault(key string) (string, bool) {
	if d := brokerDefs[key]; d != nil && d.Default != nil {
		return *d.Default, true
	}
	return "", false
}

// ValidateTopic checks a topic key and value and returns the canonical value.
func ValidateTopic(key string, value *string) (string, error) {
	d := topicDefs[key]
	if d == nil {
		return "", fmt.Errorf("%w: unknown topic config %q", ErrInvalidConfig, key)
	}
	if value == nil {
		return "", fmt.Errorf("%w: null value for %s", ErrInvalidConfig, key)
	}
	return d.Validate(*value)
}

// Layers are the places a value can come from, highest precedence first. The maps are
// read, never written.
type Layers struct {
	Topic          map[string]string // topic overrides (metadata)
	Group          map[string]string // a group's own configs (metadata; group_keys.go)
	Node           map[string]string // dynamic, this node (metadata, broker "<id>")
	ClusterDefault map[string]string // dynamic, cluster default (metadata, broker "")
	Static         map[string]string // server.properties / env / flags, explicitly set
}

// ForImage returns the layers of node nodeID in image im, for topic (empty: broker keys
// only), over the node's static keys.
func ForImage(im *metadata.Image, nodeID int32, static map[string]string, topic string) Layers {
	l := Layers{
		Node:           im.Configs(metadata.ResourceBroker, strconv.Itoa(int(nodeID))),
		ClusterDefault: im.Configs(metadata.ResourceBroker, ""),
		Static:         static,
	}
	if topic != "" {
		l.Topic = im.Configs(metadata.ResourceTopic, topic)
	}
	return l
}

// BrokerValue resolves a broker key through the layers, else its default ("" if none).
func (l Layers) BrokerValue(key string) string {
	if r, ok := l.ResolveBroker(key, 1, nil); ok {
		return *r.Value
	}
	v, _ := BrokerDefault(key)
	return v
}

// BrokerInt is BrokerValue parsed as an integer (0 if it does not parse).
func (l Layers) BrokerInt(key string) int64 { return parseInt(l.BrokerValue(key)) }

// TopicValue resolves a topic key through the layers ("" if unknown or null).
func (l Layers) TopicValue(key string) string {
	d := topicDefs[key]
	if d == nil {
		return ""
	}
	if r := l.ResolveTopic(d, false); r.Value != nil {
		return *r.Value
	}
	return ""
}

// Resolved is a value and where it came from, with the synonyms that were consulted.
type Resolved struct {
	Value    *string
	Source   kmsg.ConfigSource
	Synonyms []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
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

// ResolveBroker resolves a broker key: dynamic node, dynamic default, static, default.
func (l Layers) ResolveBroker(name string, scale int64, syn *[]kmsg.DescribeConfigsResponseResourceConfigConfigSynonym) (Resolved, bool) {
	var out Resolved
	found := false
	for _, layer := range []struct {
		m   map[string]string
		src kmsg.ConfigSource
	}{{l.Node, kmsg.ConfigSourceDynamicBrokerConfig}, {l.ClusterDefault, kmsg.ConfigSourceDynamicDefaultBrokerConfig}, {l.Static, kmsg.ConfigSourceStaticBrokerConfig}} {
		v, ok := layer.m[name]
		if !ok {
			continue
		}
		if syn != nil {
			*syn = append(*syn, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{Name: name, Value: sp(v), Source: layer.src})
		}
		if !found {
			out, found = Resolved{Value: sp(scaled(v, scale)), Source: layer.src}, true
		}
	}
	return out, found
}

// ResolveTopic resolves a topic key through its override, its broker synonyms, and
// Kafka's default.
func (l Layers) ResolveTopic(d *Def, wantSynonyms bool) Resolved {
	return l.resolveOverride(d, l.Topic, kmsg.ConfigSourceDynamicTopicConfig, wantSynonyms)
}

// resolveOverride resolves a topic or group key d: its value in own (reported with
// source src), else its broker synonyms, else Kafka's default.
func (l Layers) resolveOverride(d *Def, own map[string]string, src kmsg.ConfigSource, wantSynonyms bool) Resolved {
	var syn []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
	var synp *[]kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
	if wantSynonyms {
		synp = &syn
	}
	var out Resolved
	found := false
	if v, ok := own[d.Name]; ok {
		out, found = Resolved{Value: sp(v), Source: src}, true
		if wantSynonyms {
			syn = append(syn, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{Name: d.Name, Value: sp(v), Source: src})
		}
	}
	for _, s := range d.Synonyms {
		if r, ok := l.ResolveBroker(s.Name, s.Scale, synp); ok && !found {
			out, found = r, true
		}
	}
	if !found {
		out = Resolved{Value: d.Default, Source: kmsg.ConfigSourceDefaultConfig}
	}
	if wantSynonyms && d.Default != nil {
		syn = append(syn, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{Name: d.SynonymDefaultName(), Value: d.Default, Source: kmsg.ConfigSourceDefaultConfig})
	}
	out.Synonyms = syn
	return out
}

func (d *Def) SynonymDefaultName() string {
	if len(d.Synonyms) > 0 {
		return d.Synonyms[0].Name
	}
	return d.Name
}

// LogConfig computes a topic's engine configuration from the layers. A topic's
// remote.storage.enable takes effect only on a broker with
// remote.log.storage.system.enable, and never on a compacted topic (Kafka refuses
// the combination; here the topic stays local).
func (l Layers) LogConfig() engine.LogConfig {
	c := engine.DefaultLogConfig()
	for _, d := range TopicDefs {
		if d.Apply == nil {
			continue
		}
		if r := l.ResolveTopic(d, false); r.Value != nil {
			d.Apply(&c, *r.Value)
		}
	}
	if c.RemoteStorage && (c.Compact || !strings.EqualFold(strings.TrimSpace(l.BrokerValue(RemoteStorageSystemKey)), "true")) {
		c.RemoteStorage = false
	}
	return c
}

// invalidConfig is a validation error whose text is Kafka's message alone.
type invalidConfig string

func (e invalidConfig) Error() string { return string(e) }
func (e invalidConfig) Unwrap() error { return ErrInvalidConfig }

// CheckRemoteStorage checks a topic's configs as a change leaves them (after)
// against those it had (before), by Kafka's LogConfig rules for tiered
// storage, with Kafka's messages: remote.storage.enable only where the node
// validating the change has remote.log.storage.system.enable (after's broker
// layers: Kafka's ControllerConfigurationValidator passes the controller's own
// setting), and only with cleanup.policy delete (or an empty list); and turned
// off only with remote.log.delete.on.disable (KIP-950: its copies are deleted
// then).
func CheckRemoteStorage(before, after Layers) error {
	on := func(l Layers, key string) bool {
		return strings.EqualFold(strings.TrimSpace(l.TopicValue(key)), "true")
	}
	if on(after, "remote.storage.enable") {
		if !strings.EqualFold(strings.TrimSpace(after.BrokerValue(RemoteStorageSystemKey)), "true") {
			return invalidConfig("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.")
		}
		var policy []string
		for _, p := range strings.Split(after.TopicValue("cleanup.policy"), ",") {
			if p = strings.TrimSpace(p); p != "" {
				policy = append(policy, p)
			}
		}
		if len(policy) > 0 && (len(policy) != 1 || policy[0] != "delete") {
			return invalidConfig("Remote log storage only supports topics with cleanup.policy=delete or cleanup.policy being an empty list.")
		}
		return nil
	}
	if on(before, "remote.storage.enable") && !on(after, "remote.log.delete.on.disable") {
		return invalidConfig("It is invalid to disable remote storage without deleting remote data. " +
			"If you want to keep the remote data and turn to read only, please set `remote.storage.enable=true,remote.log.copy.disable=true`. " +
			"If you want to disable remote storage and delete all remote data, please set `remote.storage.enable=false,remote.log.delete.on.disable=true`.")
	}
	return nil
}

// PluginKey reports whether key belongs to one of tiered storage's plugins, under
// Kafka's default remote.log.storage.manager.impl.prefix (rsm.config.) or
// remote.log.metadata.manager.impl.prefix (rlmm.config.): Kafka passes such keys to
// the plugin unvalidated, and so does Samsa (engine/remote reads rsm.config.*,
// net/broker the metadata topic's rlmm.config.* keys).
func PluginKey(key string) bool {
	return strings.HasPrefix(key, "rsm.config.") || strings.HasPrefix(key, "rlmm.config.")
}

// RemoteStorageSystemKey is the broker key that turns tiered storage on.
const RemoteStorageSystemKey = "remote.log.storage.system.enable"

// BrokerKeys lists the broker keys Samsa knows, in a stable order.
func BrokerKeys() []string {
	out := make([]string, len(BrokerDefs))
	for i, d := range BrokerDefs {
		out[i] = d.Name
	}
	return out
}

// DefaultTopicLogConfig is the engine configuration of a topic without overrides, given
// the broker's static keys (log.retention.ms, log.segment.bytes, ...).
func DefaultTopicLogConfig(static map[string]string) engine.LogConfig {
	l := Layers{Static: static}
	return l.LogConfig()
}

// EngineOptions sets the broker-wide parts of the engine's options that come from
// keys of the node's properties (static): the log cleaner's log.cleaner.* keys, the
// scrubber's samsa.log.scrub.* keys and transaction.partition.verification.enable.
// Values were validated at start-up; an unset key takes its default.
func EngineOptions(static map[string]string, o *engine.Options) {
	l := Layers{Static: static}
	b := func(k string) bool { return strings.EqualFold(strings.TrimSpace(l.BrokerValue(k)), "true") }
	f := func(k string) float64 {
		v, _ := strconv.ParseFloat(strings.TrimSpace(l.BrokerValue(k)), 64)
		return v
	}
	o.Cleaner = engine.CleanerOptions{
		Disable:             !b("log.cleaner.enable"),
		Threads:             int(l.BrokerInt("log.cleaner.threads")),
		DedupeBufferSize:    l.BrokerInt("log.cleaner.dedupe.buffer.size"),
		LoadFactor:          f("log.cleaner.io.buffer.load.factor"),
		IOBufferSize:        int(l.BrokerInt("log.cleaner.io.buffer.size")),
		IOMaxBytesPerSecond: f("log.cleaner.io.max.bytes.per.second"),
		Backoff:             time.Duration(l.BrokerInt("log.cleaner.backoff.ms")) * time.Millisecond,
	}
	if o.Cleaner.IOMaxBytesPerSecond >= math.MaxFloat64 {
		o.Cleaner.IOMaxBytesPerSecond = 0 // Kafka's Double.MaxValue: no limit
	}
	if o.Cleaner.Threads == 0 {
		o.Cleaner.Disable = true // Kafka: no cleaner threads, no cleaning
	}
	o.ScrubBytesPerSecond = l.BrokerInt("samsa.log.scrub.bytes.per.second")
	o.ScrubInterval = time.Duration(l.BrokerInt("samsa.log.scrub.interval.ms")) * time.Millisecond
	o.DisableTxnVerification = !b("transaction.partition.verification.enable")
	o.NoPrealloc = !b("samsa.log.segment.preallocate.enable")
	o.FlushConcurrentRounds = int(l.BrokerInt("samsa.log.flush.concurrent.rounds"))
	o.FlushSyncfsMinLogs = int(l.BrokerInt("samsa.log.flush.syncfs.min.partitions"))
	o.NoFlushWriteback = !b("samsa.log.flush.writeback.enable")
}
