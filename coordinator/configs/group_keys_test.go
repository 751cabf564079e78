package configs

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGroupKeysAgree: each group key's default validates and is its broker synonym's
// default, with the synonym's type; the keys bounding group keys are integer broker
// keys.
func TestGroupKeysAgree(t *testing.T) {
	if len(GroupDefs) != 25 {
		t.Errorf("%d group keys, want Kafka 4.4's 25", len(GroupDefs))
	}
	for _, d := range GroupDefs {
		if Group(d.Name) != d {
			t.Errorf("%s: not indexed", d.Name)
		}
		if d.ReadOnly {
			t.Errorf("%s: read-only", d.Name)
		}
		if d.Default == nil {
			t.Errorf("%s: no default", d.Name)
			continue
		}
		if _, err := d.Validate(*d.Default); err != nil {
			t.Errorf("%s: default %q: %v", d.Name, *d.Default, err)
		}
		for _, s := range d.Synonyms {
			b := Broker(s.Name)
			switch {
			case b == nil:
				t.Errorf("%s: synonym %s is no broker key", d.Name, s.Name)
			case b.Kind != d.Kind || strOrNull(b.Default) != strOrNull(d.Default):
				t.Errorf("%s: %s default %s, its synonym %s %s default %s", d.Name, d.Kind.Wire(), *d.Default, s.Name, b.Kind.Wire(), strOrNull(b.Default))
			}
		}
		if bd, ok := GroupBounds(d.Name); ok {
			for _, k := range []string{bd.Min, bd.Max} {
				if b := Broker(k); k != "" && (b == nil || b.Kind != KindInt || b.Default == nil) {
					t.Errorf("%s: bound %s is no integer broker key with a default", d.Name, k)
				}
			}
		}
	}
	if len(GroupBoundedKeys) != len(groupBounds) {
		t.Errorf("GroupBoundedKeys has %d keys, groupBounds %d", len(GroupBoundedKeys), len(groupBounds))
	}
	for _, k := range GroupBoundedKeys {
		if _, ok := GroupBounds(k); !ok || Group(k) == nil {
			t.Errorf("bounded key %s: no bounds or no group key", k)
		}
	}
	for _, p := range GroupSessionPairs {
		if Group(p[0]) == nil || Group(p[1]) == nil {
			t.Errorf("session pair %v names an unknown key", p)
		}
	}
}

func TestParseShareAutoOffsetReset(t *testing.T) {
	for _, c := range []struct {
		in       string
		strategy string
		back     time.Duration
		bad      bool
	}{
		{in: "latest", strategy: ResetLatest},
		{in: "EARLIEST", strategy: ResetEarliest},
		{in: "by_duration:PT1H", strategy: ResetByDuration, back: time.Hour},
		{in: "by_duration:P1DT2H3M4.5S", strategy: ResetByDuration, back: 26*time.Hour + 3*time.Minute + 4500*time.Millisecond},
		{in: "BY_DURATION:pt0s", strategy: ResetByDuration},
		{in: "by_duration:P2D", strategy: ResetByDuration, back: 48 * time.Hour},
		{in: "by_duration:PT-1H2M", strategy: ResetByDuration, back: -time.Hour + 2*time.Minute, bad: true},
		{in: "by_duration:-PT1H", bad: true},
		{in: "by_duration:PT", bad: true},
		{in: "by_duration:P", bad: true},
		{in: "by_duration:1h", bad: true},
		{in: "by_duration:", bad: true},
		{in: "by_duration:P999999999999D", bad: true},
		{in: "none", bad: true},
		{in: "", bad: true},
	} {
		s, back, err := ParseShareAutoOffsetReset(c.in)
		if c.bad {
			if err == nil {
				t.Errorf("%q: %s %v, want refused", c.in, s, back)
			}
			continue
		}
		if err != nil || s != c.strategy || back != c.back {
			t.Errorf("%q: %s %v %v; want %s %v", c.in, s, back, err, c.strategy, c.back)
		}
	}
}

// TestResolveGroup: a group's value (GROUP_CONFIG), else its broker synonym's layers,
// else the default; GroupInt caps a group's value to the broker's bounds of the time.
func TestResolveGroup(t *testing.T) {
	l := Layers{
		Group:          map[string]string{"share.record.lock.duration.ms": "90000", "consumer.heartbeat.interval.ms": "6000"},
		ClusterDefault: map[string]string{},
		Static:         map[string]string{"group.share.heartbeat.interval.ms": "700", "group.share.max.record.lock.duration.ms": "80000"},
	}
	for _, c := range []struct {
		key, value string
		src        kmsg.ConfigSource
	}{
		{"share.record.lock.duration.ms", "90000", kmsg.ConfigSourceGroupConfig},
		{"share.heartbeat.interval.ms", "700", kmsg.ConfigSourceStaticBrokerConfig},
		{"share.session.timeout.ms", "45000", kmsg.ConfigSourceDefaultConfig},
		{"share.isolation.level", "read_uncommitted", kmsg.ConfigSourceDefaultConfig},
	} {
		r := l.ResolveGroup(Group(c.key), true)
		if r.Value == nil || *r.Value != c.value || r.Source != c.src {
			t.Errorf("%s: %v %v, want %s %v", c.key, strOrNull(r.Value), r.Source, c.value, c.src)
		}
		if len(r.Synonyms) == 0 || r.Synonyms[0].Source != c.src {
			t.Errorf("%s: synonyms %+v", c.key, r.Synonyms)
		}
	}
	if got := l.GroupInt("share.record.lock.duration.ms"); got != 80000 {
		t.Errorf("lock duration above the broker's maximum: %d, want capped to 80000", got)
	}
	if got := l.GroupInt("consumer.heartbeat.interval.ms"); got != 6000 {
		t.Errorf("consumer heartbeat: %d", got)
	}
	if got := l.GroupInt("share.heartbeat.interval.ms"); got != 700 {
		t.Errorf("share heartbeat from the broker key: %d", got)
	}
}
