package controller

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// TestValidateGroupConfigs: Kafka's GroupConfig.validate of a group's whole set of
// configs: names, values by type, the broker's bounds of the keys set, and the
// session timeout against its heartbeat interval.
func TestValidateGroupConfigs(t *testing.T) {
	// Kafka's default bounds, but for the share heartbeat's (set static, as
	// server.properties would) and the record lock's maximum (dynamic cluster default).
	l := configs.Layers{
		Static:         map[string]string{"group.share.min.heartbeat.interval.ms": "100", "group.share.heartbeat.interval.ms": "200"},
		ClusterDefault: map[string]string{"group.share.max.record.lock.duration.ms": "40000"},
	}
	for _, tc := range []struct {
		name string
		set  map[string]string
		want string // "" = valid; else a substring of the INVALID_CONFIG message
	}{
		{"empty", nil, ""},
		{"every key at its default", defaultsOf(configs.GroupDefs), ""},
		{"unknown name", map[string]string{"share.auto.offset.reset": "earliest", "no.such.key": "1"}, "Unknown group config name: no.such.key"},
		{"broker key name", map[string]string{"group.share.record.lock.duration.ms": "20000"}, "Unknown group config name: group.share.record.lock.duration.ms"},
		{"not an int", map[string]string{"consumer.heartbeat.interval.ms": "soon"}, "not a 32-bit integer"},
		{"int over 32 bits", map[string]string{"share.delivery.count.limit": "4294967296"}, "not a 32-bit integer"},
		{"long", map[string]string{"streams.acceptable.recovery.lag": "4294967296"}, ""},
		{"not a boolean", map[string]string{"share.renew.acknowledge.enable": "1"}, "expected true or false"},
		{"below the key's own floor", map[string]string{"share.record.lock.duration.ms": "999"}, "at least 1000"},
		{"offset reset", map[string]string{"share.auto.offset.reset": "earliest"}, ""},
		{"offset reset by duration", map[string]string{"share.auto.offset.reset": "by_duration:P1DT2H"}, ""},
		{"offset reset negative duration", map[string]string{"share.auto.offset.reset": "by_duration:-PT1H"}, "negative duration"},
		{"offset reset unknown", map[string]string{"share.auto.offset.reset": "none"}, "share.auto.offset.reset"},
		{"isolation level", map[string]string{"share.isolation.level": "read_committed"}, ""},
		{"isolation level unknown", map[string]string{"share.isolation.level": "read_commit"}, "share.isolation.level"},
		{"consumer heartbeat below min", map[string]string{"consumer.heartbeat.interval.ms": "4999"},
			"consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."},
		{"consumer heartbeat above max", map[string]string{"consumer.heartbeat.interval.ms": "15001"},
			"consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."},
		{"consumer heartbeat at max", map[string]string{"consumer.heartbeat.interval.ms": "15000"}, ""},
		{"consumer session above max", map[string]string{"consumer.session.timeout.ms": "60001"},
			"consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."},
		{"heartbeat checked before session", map[string]string{"consumer.session.timeout.ms": "1", "consumer.heartbeat.interval.ms": "1"},
			"consumer.heartbeat.interval.ms must be in the range"},
		{"share heartbeat with a static bound", map[string]string{"share.heartbeat.interval.ms": "100"}, ""},
		{"share heartbeat below the static bound", map[string]string{"share.heartbeat.interval.ms": "99"},
			"share.heartbeat.interval.ms must be in the range 100 to 15000 inclusive."},
		{"lock above the dynamic bound", map[string]string{"share.record.lock.duration.ms": "40001"},
			"share.record.lock.duration.ms must be in the range 15000 to 40000 inclusive."},
		{"lock within", map[string]string{"share.record.lock.duration.ms": "15000"}, ""},
		{"delivery count limit above max", map[string]string{"share.delivery.count.limit": "11"},
			"share.delivery.count.limit must be in the range 2 to 10 inclusive."},
		{"record locks above max", map[string]string{"share.partition.max.record.locks": "4001"},
			"share.partition.max.record.locks must be in the range 100 to 4000 inclusive."},
		{"assignment interval above max", map[string]string{"consumer.assignment.interval.ms": "15001"},
			"consumer.assignment.interval.ms must be in the range 0 to 15000 inclusive."},
		{"standby replicas above max", map[string]string{"streams.num.standby.replicas": "3"},
			"streams.num.standby.replicas must be less than or equal to 2"},
		{"task offset interval below min", map[string]string{"streams.task.offset.interval.ms": "14999"},
			"streams.task.offset.interval.ms must be greater than or equal to 15000"},
		{"warmup replicas above max", map[string]string{"streams.num.warmup.replicas": "21"},
			"streams.num.warmup.replicas must be less than or equal to 20"},
		// Session timeout and heartbeat interval: the broker's value stands in for the
		// one not set (consumer 45000/5000 by default; share heartbeat 200, static).
		// (TestValidateGroupSessionHeartbeat checks the cross-check with bounds that let
		// it fail.)
		{"bounds checked before the cross-check", map[string]string{"consumer.session.timeout.ms": "45000", "consumer.heartbeat.interval.ms": "45000"},
			"consumer.heartbeat.interval.ms must be in the range"},
		{"share heartbeat at its maximum", map[string]string{"share.heartbeat.interval.ms": "15000"}, ""},
		{"streams session above heartbeat", map[string]string{"streams.session.timeout.ms": "45000"}, ""},
		{"dlq topic", map[string]string{"errors.deadletterqueue.topic.name": "dlq"}, ""},
		{"dlq internal topic", map[string]string{"errors.deadletterqueue.topic.name": "__dlq"}, "DLQ topic name must not start with '__'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := validateGroupConfigs(tc.set, &l)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(*errMsg(err), tc.want) {
				t.Fatalf("got %v; want INVALID_CONFIG %q", err, tc.want)
			}
		})
	}
}

// TestValidateGroupSessionHeartbeat: a session timeout must exceed its heartbeat
// interval, with the broker's value for the one the group does not set.
func TestValidateGroupSessionHeartbeat(t *testing.T) {
	// Bounds wide enough that only the cross-check can fail.
	wide := map[string]string{
		"group.share.min.session.timeout.ms": "1", "group.share.max.session.timeout.ms": "100000",
		"group.share.min.heartbeat.interval.ms": "1", "group.share.max.heartbeat.interval.ms": "100000",
		"group.share.session.timeout.ms": "3000", "group.share.heartbeat.interval.ms": "1000",
	}
	l := configs.Layers{Static: wide}
	for _, tc := range []struct {
		set map[string]string
		ok  bool
	}{
		{map[string]string{"share.session.timeout.ms": "2000"}, true},                                       // > broker heartbeat 1000
		{map[string]string{"share.session.timeout.ms": "1000"}, false},                                      // = broker heartbeat
		{map[string]string{"share.heartbeat.interval.ms": "2999"}, true},                                    // < broker session 3000
		{map[string]string{"share.heartbeat.interval.ms": "3000"}, false},                                   // = broker session
		{map[string]string{"share.session.timeout.ms": "500", "share.heartbeat.interval.ms": "400"}, true},  // both set
		{map[string]string{"share.session.timeout.ms": "500", "share.heartbeat.interval.ms": "600"}, false}, // both set
	} {
		err := validateGroupConfigs(tc.set, &l)
		if tc.ok != (err == nil) {
			t.Errorf("%v: %v", tc.set, err)
		}
		if err != nil && *errMsg(err) != "share.session.timeout.ms must be greater than share.heartbeat.interval.ms" {
			t.Errorf("%v: message %q", tc.set, *errMsg(err))
		}
	}
}

// TestAlterGroupConfigs: GROUP resources through the controller: set before the group
// exists, refused values leave nothing, the whole resulting set is checked (a key set
// earlier counts), delete, AlterConfigs replaces the set, and the empty name is
// refused. The controller's static keys widen the share groups' bounds.
func TestAlterGroupConfigs(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Static = map[string]string{"group.share.min.session.timeout.ms": "1000", "group.share.min.heartbeat.interval.ms": "1000"}
	})
	h.join(1)
	set, del, app := kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete, kmsg.IncrementalAlterConfigOpAppend
	groupRT := kmsg.ConfigResourceTypeGroupConfig
	for _, tc := range []struct {
		name string
		req  *kmsg.IncrementalAlterConfigsRequest
		code *kerr.Error
	}{
		{"set", incremental(groupRT, "g", "share.auto.offset.reset", set, "earliest", "share.record.lock.duration.ms", set, "15000"), nil},
		{"unknown key", incremental(groupRT, "g", "no.such.key", set, "1"), kerr.InvalidConfig},
		{"out of bounds", incremental(groupRT, "g", "share.delivery.count.limit", set, "11"), kerr.InvalidConfig},
		{"append to a non-list", incremental(groupRT, "g", "share.auto.offset.reset", app, "latest"), kerr.InvalidConfig},
		{"empty name", incremental(groupRT, "", "share.auto.offset.reset", set, "earliest"), kerr.InvalidRequest},
		{"session and heartbeat", incremental(groupRT, "h", "share.session.timeout.ms", set, "3000", "share.heartbeat.interval.ms", set, "1000"), nil},
		{"heartbeat equal to the session set before", incremental(groupRT, "h", "share.heartbeat.interval.ms", set, "3000"), kerr.InvalidConfig},
		{"below the controller's static bound", incremental(groupRT, "h", "share.session.timeout.ms", set, "999"), kerr.InvalidConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := h.do(tc.req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
			want := int16(0)
			if tc.code != nil {
				want = tc.code.Code
			}
			if got.ErrorCode != want {
				t.Fatalf("code %v (%v), want %v", code(got.ErrorCode), got.ErrorMessage, tc.code)
			}
		})
	}
	if got := h.image().Configs(metadata.ResourceGroup, "g"); !reflect.DeepEqual(got, map[string]string{"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "15000"}) {
		t.Fatalf("group configs %v", got)
	}
	if got := h.image().Configs(metadata.ResourceGroup, "h"); !reflect.DeepEqual(got, map[string]string{"share.session.timeout.ms": "3000", "share.heartbeat.interval.ms": "1000"}) {
		t.Fatalf("group h configs %v", got)
	}
	if got := h.do(incremental(groupRT, "g", "share.record.lock.duration.ms", del, nil)).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; got.ErrorCode != 0 {
		t.Fatal(code(got.ErrorCode))
	}
	if got := h.image().Configs(metadata.ResourceGroup, "g"); !reflect.DeepEqual(got, map[string]string{"share.auto.offset.reset": "earliest"}) {
		t.Fatalf("after delete: %v", got)
	}
	// AlterConfigs: the request's set replaces the group's.
	ac := kmsg.NewPtrAlterConfigsRequest()
	res := kmsg.NewAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = groupRT, "g"
	res.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "consumer.heartbeat.interval.ms", Value: kmsg.StringPtr("6000")}}
	ac.Resources = []kmsg.AlterConfigsRequestResource{res}
	if got := h.do(ac).(*kmsg.AlterConfigsResponse).Resources[0]; got.ErrorCode != 0 {
		t.Fatal(code(got.ErrorCode))
	}
	if got := h.image().Configs(metadata.ResourceGroup, "g"); !reflect.DeepEqual(got, map[string]string{"consumer.heartbeat.interval.ms": "6000"}) {
		t.Fatalf("replaced: %v", got)
	}
	// Deleting every key leaves no configs.
	if got := h.do(incremental(groupRT, "g", "consumer.heartbeat.interval.ms", del, nil)).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; got.ErrorCode != 0 {
		t.Fatal(code(got.ErrorCode))
	}
	if got := h.image().Configs(metadata.ResourceGroup, "g"); got != nil {
		t.Fatalf("after deleting every key: %v", got)
	}
}

func defaultsOf(defs []*configs.Def) map[string]string {
	m := map[string]string{}
	for _, d := range defs {
		m[d.Name] = *d.Default
	}
	return m
}
