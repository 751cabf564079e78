package configs

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// Group keys are the settings a group may have of its own: a GROUP config resource
// (type 32; IncrementalAlterConfigs, AlterConfigs, DescribeConfigs), Kafka's
// GroupConfig (KIP-848 consumer groups, KIP-932 share groups, KIP-1071 streams
// groups, KIP-1191 dead-letter queues). A group need not exist to be configured; its
// configs are ConfigRecords of the metadata log (metadata.ResourceGroup) and go with
// it when DeleteGroups deletes it.
//
// Each key has Kafka's type, default and lower bound; most have a broker synonym (the
// key's default for every group that does not set it), in Synonyms. A value is
// validated in two steps, as Kafka's GroupConfig.validate: by its Def (type, lower
// bound, valid values), then against the bounds the brokers' keys put on it
// (GroupBounds: group.<type>.min.<key> and group.<type>.max.<key>) and the rule that
// a session timeout exceeds its heartbeat interval (GroupSessionPairs), for the keys
// the group sets. The controller does both (coordinator/controller); a broker reading
// a group's value caps it to the bounds it has then (GroupInt, Kafka's
// GroupConfig.evaluate), since bounds may have moved since the value was set.
//
// Keys without NoEffect act: the consumer-group coordinator reads the session timeout
// and heartbeat interval of consumer, share and streams groups (and a streams group's
// standby replicas, task offset interval and recovery lag) at each heartbeat, share
// partitions read the lock duration, delivery count limit, in-flight limit, start
// offset strategy, isolation level and whether renew acknowledgements are accepted at
// each decision that uses them.

// GroupDefs are the group keys, in Kafka's definition order. Read-only.
var GroupDefs = []*Def{
	{Name: "consumer.session.timeout.ms", Kind: KindInt, Default: sp("45000"), Min: 1, Synonyms: syn("group.consumer.session.timeout.ms"),
		Doc: "a member of this consumer group not heard from for this long is removed (read at each heartbeat)"},
	{Name: "consumer.heartbeat.interval.ms", Kind: KindInt, Default: sp("5000"), Min: 1, Synonyms: syn("group.consumer.heartbeat.interval.ms"),
		Doc: "the heartbeat interval ConsumerGroupHeartbeat hands this group's members"},
	{Name: "consumer.assignment.interval.ms", Kind: KindInt, Default: sp("1000"), Min: 0, Synonyms: syn("group.consumer.assignment.interval.ms"), NoEffect: true,
		Doc: groupKeyNoEffect + "; Samsa computes a new target assignment at once"},
	{Name: "consumer.assignor.offload.enable", Kind: KindBool, Default: sp("true"), Synonyms: syn("group.consumer.assignor.offload.enable"), NoEffect: true,
		Doc: groupKeyNoEffect},
	{Name: "share.session.timeout.ms", Kind: KindInt, Default: sp("45000"), Min: 1, Synonyms: syn("group.share.session.timeout.ms"),
		Doc: "a member of this share group not heard from for this long is removed (read at each heartbeat)"},
	{Name: "share.heartbeat.interval.ms", Kind: KindInt, Default: sp("5000"), Min: 1, Synonyms: syn("group.share.heartbeat.interval.ms"),
		Doc: "the heartbeat interval ShareGroupHeartbeat hands this group's members"},
	{Name: "share.record.lock.duration.ms", Kind: KindInt, Default: sp("30000"), Min: 1000, Synonyms: syn("group.share.record.lock.duration.ms"),
		Doc: "how long a member holds a record it acquired (locks taken from then on)"},
	{Name: "share.delivery.count.limit", Kind: KindInt, Default: sp("5"), Min: 2, Synonyms: syn("group.share.delivery.count.limit"),
		Doc: "a record delivered this many times is archived instead of made available again"},
	{Name: "share.partition.max.record.locks", Kind: KindInt, Default: sp("2000"), Min: 100, Synonyms: syn("group.share.partition.max.record.locks"),
		Doc: "the records of one share partition of this group in flight at most"},
	{Name: "share.auto.offset.reset", Kind: KindString, Default: sp("latest"), Check: checkShareAutoOffsetReset, Synonyms: syn("share.auto.offset.reset"),
		Doc: "where a new share partition starts: latest, earliest or by_duration:<ISO-8601 duration>; the broker key of the same name is Samsa's (Kafka has no synonym)"},
	{Name: "share.isolation.level", Kind: KindString, Default: sp("read_uncommitted"), Enum: []string{"read_committed", "read_uncommitted"},
		Doc: "read_committed: records are acquired up to the last stable offset, and those of aborted transactions are archived instead of delivered"},
	{Name: "share.renew.acknowledge.enable", Kind: KindBool, Default: sp("true"),
		Doc: "whether the share group accepts RENEW acknowledgements (KIP-1222): false refuses them with INVALID_RECORD_STATE; a group key only, with no broker key behind it, as in Kafka"},
	{Name: "share.assignment.interval.ms", Kind: KindInt, Default: sp("1000"), Min: 0, Synonyms: syn("group.share.assignment.interval.ms"), NoEffect: true,
		Doc: groupKeyNoEffect + "; Samsa computes a new target assignment at once"},
	{Name: "share.assignor.offload.enable", Kind: KindBool, Default: sp("true"), Synonyms: syn("group.share.assignor.offload.enable"), NoEffect: true,
		Doc: groupKeyNoEffect},
	{Name: "streams.session.timeout.ms", Kind: KindInt, Default: sp("45000"), Min: 1, Synonyms: syn("group.streams.session.timeout.ms"),
		Doc: "a member of this streams group not heard from for this long is removed (read at each heartbeat)"},
	{Name: "streams.heartbeat.interval.ms", Kind: KindInt, Default: sp("5000"), Min: 1, Synonyms: syn("group.streams.heartbeat.interval.ms"),
		Doc: "the heartbeat interval StreamsGroupHeartbeat hands this group's members"},
	{Name: "streams.num.standby.replicas", Kind: KindInt, Default: sp("0"), Min: 0, Synonyms: syn("group.streams.num.standby.replicas"),
		Doc: "the standby replicas of each stateful task of this streams group (a change moves the group epoch: a new assignment)"},
	{Name: "streams.initial.rebalance.delay.ms", Kind: KindInt, Default: sp("3000"), Min: 0, Synonyms: syn("group.streams.initial.rebalance.delay.ms"), NoEffect: true,
		Doc: groupKeyNoEffect + "; Samsa assigns a new streams group's tasks at its first member's join"},
	{Name: "streams.assignment.interval.ms", Kind: KindInt, Default: sp("1000"), Min: 0, Synonyms: syn("group.streams.assignment.interval.ms"), NoEffect: true,
		Doc: groupKeyNoEffect + "; Samsa computes a new target assignment at once"},
	{Name: "streams.assignor.offload.enable", Kind: KindBool, Default: sp("true"), Synonyms: syn("group.streams.assignor.offload.enable"), NoEffect: true,
		Doc: groupKeyNoEffect},
	{Name: "streams.task.offset.interval.ms", Kind: KindInt, Default: sp("60000"), Min: 1, Synonyms: syn("group.streams.task.offset.interval.ms"),
		Doc: "the interval at which this streams group's members report their task offsets (handed to them in the heartbeat answer; Samsa does not use the offsets: warm-up tasks are not built)"},
	{Name: "streams.num.warmup.replicas", Kind: KindInt, Default: sp("2"), Min: 0, Synonyms: syn("group.streams.num.warmup.replicas"), NoEffect: true,
		Doc: groupKeyNoEffect + "; warm-up tasks are not built"},
	{Name: "streams.acceptable.recovery.lag", Kind: KindLong, Default: sp("10000"), Min: 0, Synonyms: syn("group.streams.acceptable.recovery.lag"),
		Doc: "the acceptable recovery lag handed to this streams group's members (Samsa's assignor does not use it: warm-up tasks are not built)"},
	{Name: "errors.deadletterqueue.topic.name", Kind: KindString, Default: sp(""), NoEffect: true,
		Doc: groupKeyNoEffect + "; the dead-letter queue of a share group (KIP-1191) is not served: archived records are not copied anywhere"},
	{Name: "errors.deadletterqueue.copy.record.enable", Kind: KindBool, Default: sp("false"), NoEffect: true,
		Doc: groupKeyNoEffect + "; the dead-letter queue of a share group (KIP-1191) is not served"},
}

// groupKeyNoEffect begins the documentation of the group keys Samsa stores, validates
// and describes without acting on them.
const groupKeyNoEffect = "no effect in Samsa (accepted, validated, stored and described as Kafka does)"

func syn(broker string) []Synonym { return []Synonym{{Name: broker, Scale: 1}} }

var groupDefs = indexDefs(GroupDefs)

// Group returns the definition of a group key, or nil.
func Group(key string) *Def { return groupDefs[key] }

// GroupBound names the broker keys bounding a group key: Min and Max ("" for none).
type GroupBound struct{ Min, Max string }

// groupBounds is Kafka's GroupConfig.validateValues: the range checks of a group's
// own values.
var groupBounds = map[string]GroupBound{
	"consumer.heartbeat.interval.ms":   {"group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"},
	"consumer.session.timeout.ms":      {"group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"},
	"consumer.assignment.interval.ms":  {"group.consumer.min.assignment.interval.ms", "group.consumer.max.assignment.interval.ms"},
	"share.heartbeat.interval.ms":      {"group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"},
	"share.session.timeout.ms":         {"group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"},
	"share.record.lock.duration.ms":    {"group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"},
	"share.delivery.count.limit":       {"group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"},
	"share.partition.max.record.locks": {"group.share.min.partition.max.record.locks", "group.share.max.partition.max.record.locks"},
	"share.assignment.interval.ms":     {"group.share.min.assignment.interval.ms", "group.share.max.assignment.interval.ms"},
	"streams.heartbeat.interval.ms":    {"group.streams.min.heartbeat.interval.ms", "group.streams.max.heartbeat.interval.ms"},
	"streams.session.timeout.ms":       {"group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms"},
	"streams.num.standby.replicas":     {"", "group.streams.max.standby.replicas"},
	"streams.assignment.interval.ms":   {"group.streams.min.assignment.interval.ms", "group.streams.max.assignment.interval.ms"},
	"streams.task.offset.interval.ms":  {"group.streams.min.task.offset.interval.ms", ""},
	"streams.num.warmup.replicas":      {"", "group.streams.max.warmup.replicas"},
}

// GroupBoundedKeys are the group keys that have bounds, in the order Kafka checks
// them (the first out of bounds is the one an error names).
var GroupBoundedKeys = []string{
	"consumer.heartbeat.interval.ms", "consumer.session.timeout.ms", "consumer.assignment.interval.ms",
	"share.heartbeat.interval.ms", "share.session.timeout.ms", "share.record.lock.duration.ms",
	"share.delivery.count.limit", "share.partition.max.record.locks", "share.assignment.interval.ms",
	"streams.heartbeat.interval.ms", "streams.session.timeout.ms", "streams.num.standby.replicas",
	"streams.assignment.interval.ms", "streams.task.offset.interval.ms", "streams.num.warmup.replicas",
}

// GroupBounds returns the broker keys bounding group key key, if any.
func GroupBounds(key string) (GroupBound, bool) {
	b, ok := groupBounds[key]
	return b, ok
}

// GroupSessionPairs are the group keys whose session timeout must exceed the heartbeat
// interval beside it (the broker's default standing in for the one a group does not
// set), in Kafka's order.
var GroupSessionPairs = [][2]string{
	{"consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"},
	{"share.session.timeout.ms", "share.heartbeat.interval.ms"},
	{"streams.session.timeout.ms", "streams.heartbeat.interval.ms"},
}

// ForGroup returns the layers of node nodeID in image im for group: the group's own
// configs over the node's broker layers.
func ForGroup(im *metadata.Image, nodeID int32, static map[string]string, group string) Layers {
	l := ForImage(im, nodeID, static, "")
	l.Group = im.Configs(metadata.ResourceGroup, group)
	return l
}

// ResolveGroup resolves a group key: the group's own value (GROUP_CONFIG), else its
// broker synonym through the broker layers, else Kafka's default.
func (l Layers) ResolveGroup(d *Def, wantSynonyms bool) Resolved {
	return l.resolveOverride(d, l.Group, kmsg.ConfigSourceGroupConfig, wantSynonyms)
}

// GroupValue is the value of group key key as set (ResolveGroup; "" if unknown).
func (l Layers) GroupValue(key string) string {
	d := groupDefs[key]
	if d == nil {
		return ""
	}
	if r := l.ResolveGroup(d, false); r.Value != nil {
		return *r.Value
	}
	return ""
}

// GroupInt is the value a broker acts on for integer group key key: the group's own
// capped to the broker's current bounds of it (Kafka's GroupConfig.evaluate: the
// bounds may have moved since the value was set), else the broker synonym's value,
// else the default.
func (l Layers) GroupInt(key string) int64 {
	v, ok := l.Group[key]
	if !ok {
		return parseInt(l.GroupValue(key))
	}
	n := parseInt(v)
	if b, ok := groupBounds[key]; ok {
		if b.Min != "" {
			n = max(n, l.BrokerInt(b.Min))
		}
		if b.Max != "" {
			n = min(n, l.BrokerInt(b.Max))
		}
	}
	return n
}

// GroupDuration is GroupInt in milliseconds.
func (l Layers) GroupDuration(key string) time.Duration {
	return time.Duration(l.GroupInt(key)) * time.Millisecond
}

// Share auto offset reset strategies (share.auto.offset.reset).
const (
	ResetLatest     = "latest"
	ResetEarliest   = "earliest"
	ResetByDuration = "by_duration"
)

// ParseShareAutoOffsetReset parses a share.auto.offset.reset value as Kafka's
// ShareGroupAutoOffsetResetStrategy does (case-insensitive): latest, earliest, or
// by_duration:<ISO-8601 duration>, which is not negative; back is that duration.
func ParseShareAutoOffsetReset(v string) (strategy string, back time.Duration, err error) {
	lv := strings.ToLower(v)
	switch lv {
	case ResetLatest, ResetEarliest:
		return lv, 0, nil
	}
	if rest, ok := strings.CutPrefix(lv, ResetByDuration+":"); ok {
		d, err := parseISODuration(rest)
		if err != nil {
			return "", 0, err
		}
		if d < 0 {
			return "", 0, fmt.Errorf("negative duration %q", v[len(ResetByDuration)+1:])
		}
		return ResetByDuration, d, nil
	}
	return "", 0, fmt.Errorf("not latest, earliest or by_duration:<duration>")
}

func checkShareAutoOffsetReset(v string) string {
	if _, _, err := ParseShareAutoOffsetReset(v); err != nil {
		return err.Error()
	}
	return ""
}

// reISODuration is java.time.Duration.parse's grammar: PnDTnHnMn.nS, signs allowed on
// the whole and on each part, at least one part, and a T followed by at least one.
var reISODuration = regexp.MustCompile(`^([-+]?)p(?:([-+]?[0-9]+)d)?(t(?:([-+]?[0-9]+)h)?(?:([-+]?[0-9]+)m)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?s)?)?$`)

// parseISODuration parses a lower-cased ISO-8601 duration as Java's Duration.parse
// does; a duration beyond time.Duration's range is refused.
func parseISODuration(s string) (time.Duration, error) {
	m := reISODuration.FindStringSubmatch(s)
	if m == nil || (m[2] == "" && m[3] == "") || m[3] == "t" {
		return 0, fmt.Errorf("%q is not an ISO-8601 duration (PnDTnHnMn.nS)", s)
	}
	var total time.Duration
	add := func(part string, unit time.Duration) error {
		if part == "" {
			return nil
		}
		n, err := strconv.ParseInt(part, 10, 64)
		limit := int64(1<<63-1) / int64(unit)
		if err != nil || n > limit || n < -limit {
			return fmt.Errorf("duration %q out of range", s)
		}
		d := time.Duration(n) * unit
		if (d > 0 && total > 1<<63-1-d) || (d < 0 && total < -1<<63-d) {
			return fmt.Errorf("duration %q out of range", s)
		}
		total += d
		return nil
	}
	for _, p := range []struct {
		v    string
		unit time.Duration
	}{{m[2], 24 * time.Hour}, {m[4], time.Hour}, {m[5], time.Minute}, {m[6], time.Second}} {
		if err := add(p.v, p.unit); err != nil {
			return 0, err
		}
	}
	if m[7] != "" {
		frac, _ := strconv.ParseInt((m[7] + "000000000")[:9], 10, 64)
		if strings.HasPrefix(m[6], "-") {
			frac = -frac
		}
		if err := add(strconv.FormatInt(frac, 10), time.Nanosecond); err != nil {
			return 0, err
		}
	}
	if m[1] == "-" {
		total = -total
	}
	return total, nil
}
