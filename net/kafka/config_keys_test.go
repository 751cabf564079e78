package kafka

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/configs"
)

// sampleValue is a value of d other than its default that d accepts, and its
// canonical form; ok false if none of the candidates fits.
func sampleValue(d *configs.Def) (value, canonical string, ok bool) {
	def := ""
	if d.Default != nil {
		def = *d.Default
	}
	var cands []string
	switch d.Kind {
	case configs.KindBool:
		cands = []string{"true", "false"}
	case configs.KindInt, configs.KindShort, configs.KindLong:
		if n, err := strconv.ParseInt(def, 10, 64); err == nil {
			cands = append(cands, strconv.FormatInt(n+1, 10), strconv.FormatInt(n-1, 10))
		}
		cands = append(cands, strconv.FormatInt(d.Min+1, 10), strconv.FormatInt(d.Min, 10), strconv.FormatInt(d.Max, 10), "1", "2", "0", "-1")
	case configs.KindDouble:
		cands = []string{"0.25", "0.75", "2.5", "1", "0"}
	case configs.KindList:
		cands = append(slicesClone(d.Enum), "*", "samsa-a,samsa-b")
	case configs.KindClass:
		cands = []string{"org.example.SamsaTest"}
	case configs.KindPassword:
		cands = []string{"s3cret"}
	default:
		cands = append(slicesClone(d.Enum), "samsa-test", "127.0.0.1:100")
	}
	for _, c := range cands {
		v, err := d.Validate(c)
		if err == nil && !strings.EqualFold(v, def) {
			return c, v, true
		}
	}
	return "", "", false
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// kafkaDefault is the value DescribeConfigs reports for a key nothing sets: Kafka's
// default, or Samsa's where configs.Difference says why it differs.
func kafkaDefault(t *testing.T, topic bool, d *configs.Def) *string {
	k := configs.KafkaBroker(d.Name)
	if topic {
		k = configs.KafkaTopic(d.Name)
	}
	if k == nil || configs.Difference(topic, d.Name) != "" {
		return d.Default // Samsa's own key, or a documented difference
	}
	return k.Default
}

func eqPtr(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func show(p *string) string {
	if p == nil {
		return "null"
	}
	return strconv.Quote(*p)
}

// describeAll asks for every key of one resource with types and documentation (v4).
func describeAll(t *testing.T, rc *rawConn, rt kmsg.ConfigResourceType, name string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version, req.IncludeDocumentation = 4, true
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = rt, name
	req.Resources = append(req.Resources, res)
	resp := rc.roundTrip(req).(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("describe %s %q: %+v", rt, name, resp.Resources)
	}
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		if _, dup := out[c.Name]; dup {
			t.Errorf("%s reported twice", c.Name)
		}
		out[c.Name] = c
	}
	return out
}

// TestEveryConfigKey is the table test over the full key set: DescribeConfigs reports
// every topic and broker key with Kafka's type and default (Samsa's where it documents
// why), the keys without effect say so; IncrementalAlterConfigs and AlterConfigs
// round-trip every alterable key with a valid value, and DELETE brings back the
// defaults; every read-only broker key is refused; the topic keys Kafka 4 removed are
// accepted as Kafka 3 accepted them.
func TestEveryConfigKey(t *testing.T) {
	tb := startTestBroker(t)
	adm := tb.admin(t)
	ctx := testCtx(t)
	mustCreate(t, adm, "keys", 1, map[string]*string{"message.format.version": kadm.StringPtr("2.8")})
	rc := tb.raw(t)

	type resource struct {
		topic bool
		rt    kmsg.ConfigResourceType
		name  string
		defs  []*configs.Def
		src   kmsg.ConfigSource
	}
	resources := []resource{
		{true, kmsg.ConfigResourceTypeTopic, "keys", configs.TopicDefs, kmsg.ConfigSourceDynamicTopicConfig},
		{false, kmsg.ConfigResourceTypeBroker, "1", configs.BrokerDefs, kmsg.ConfigSourceDynamicBrokerConfig},
	}
	checkDefaults := func(r resource, got map[string]kmsg.DescribeConfigsResponseResourceConfig, skip map[string]bool) {
		t.Helper()
		for _, d := range r.defs {
			c, ok := got[d.Name]
			if !ok {
				t.Errorf("%s %s not reported", r.rt, d.Name)
				continue
			}
			if skip[d.Name] {
				continue
			}
			want := kafkaDefault(t, r.topic, d)
			if d.Kind == configs.KindPassword {
				want = nil
			}
			if c.Source != kmsg.ConfigSourceDefaultConfig || !eqPtr(c.Value, want) {
				t.Errorf("%s %s = %s (source %s), want Kafka's default %s", r.rt, d.Name, show(c.Value), c.Source, show(want))
			}
			if c.ConfigType != d.Kind.Wire() || c.ReadOnly != d.ReadOnly || c.IsSensitive != (d.Kind == configs.KindPassword) {
				t.Errorf("%s %s: type %s read-only %v sensitive %v", r.rt, d.Name, c.ConfigType, c.ReadOnly, c.IsSensitive)
			}
			if k := configs.KafkaBroker(d.Name); !r.topic && k != nil && !configs.HandWritten(false, d.Name) && c.ReadOnly != (k.Mode == configs.ModeReadOnly) {
				t.Errorf("broker %s: read-only %v, Kafka's update mode %s", d.Name, c.ReadOnly, k.Mode)
			}
			if d.NoEffect && (c.Documentation == nil || !strings.Contains(strings.ToLower(*c.Documentation), "no effect") && !strings.HasPrefix(*c.Documentation, "stored")) {
				t.Errorf("%s %s has no effect, but its documentation does not say so: %s", r.rt, d.Name, show(c.Documentation))
			}
		}
		if len(got) != len(r.defs) {
			t.Errorf("%s: %d keys reported, %d known", r.rt, len(got), len(r.defs))
		}
	}

	// 1. Every key, with Kafka's default.
	samples := map[string]map[string]string{} // resource name → key → canonical value
	for _, r := range resources {
		checkDefaults(r, describeAll(t, rc, r.rt, r.name), map[string]bool{"message.format.version": r.topic})
		samples[r.name] = map[string]string{}
	}
	if c := describeAll(t, rc, kmsg.ConfigResourceTypeTopic, "keys")["message.format.version"]; !eqPtr(c.Value, kadm.StringPtr("2.8")) || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("message.format.version set at creation: %s %s", show(c.Value), c.Source)
	}

	// 2. IncrementalAlterConfigs SET of every alterable key, one request per resource.
	for _, r := range resources {
		var set []kadm.AlterConfig
		for _, d := range r.defs {
			if d.ReadOnly {
				continue
			}
			if r.topic && d.Name == "remote.storage.enable" {
				// Refused beside cleanup.policy compact, and turned off only with
				// remote.log.delete.on.disable, as Kafka refuses them
				// (TestTieredStorageDisabled).
				continue
			}
			v, canon, ok := sampleValue(d)
			if !ok {
				t.Errorf("%s %s: no valid sample value", r.rt, d.Name)
				continue
			}
			set = append(set, kadm.AlterConfig{Op: kadm.SetConfig, Name: d.Name, Value: kadm.StringPtr(v)})
			samples[r.name][d.Name] = canon
		}
		var resp kadm.AlterConfigsResponses
		var err error
		if r.topic {
			resp, err = adm.AlterTopicConfigs(ctx, set, r.name)
		} else {
			resp, err = adm.AlterBrokerConfigs(ctx, set, 1)
		}
		if err != nil || len(resp) != 1 || resp[0].Err != nil {
			t.Fatalf("incremental alter of %d %s keys: %v %+v", len(set), r.rt, err, resp)
		}
		t.Logf("%s: %d keys, %d alterable", r.rt, len(r.defs), len(set))
	}
	checkSet := func(how string) {
		t.Helper()
		for _, r := range resources {
			got := describeAll(t, rc, r.rt, r.name)
			for name, want := range samples[r.name] {
				c := got[name]
				wantp := &want
				if c.IsSensitive {
					wantp = nil
				}
				if c.Source != r.src || !eqPtr(c.Value, wantp) {
					t.Errorf("%s: %s %s = %s (source %s), want %q", how, r.rt, name, show(c.Value), c.Source, want)
				}
			}
		}
	}
	if len(samples["keys"]) != len(configs.TopicDefs)-1 || len(samples["1"]) < 60 {
		t.Fatalf("%d topic and %d broker keys altered", len(samples["keys"]), len(samples["1"]))
	}
	checkSet("after IncrementalAlterConfigs")

	// 3. DELETE brings every default back.
	for _, r := range resources {
		var del []kadm.AlterConfig
		for name := range samples[r.name] {
			del = append(del, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: name})
		}
		var resp kadm.AlterConfigsResponses
		var err error
		if r.topic {
			resp, err = adm.AlterTopicConfigs(ctx, del, r.name) // message.format.version, set at creation, among them
		} else {
			resp, err = adm.AlterBrokerConfigs(ctx, del, 1)
		}
		if err != nil || len(resp) != 1 || resp[0].Err != nil {
			t.Fatalf("delete of %d %s keys: %v %+v", len(del), r.rt, err, resp)
		}
	}
	for _, r := range resources {
		checkDefaults(r, describeAll(t, rc, r.rt, r.name), nil)
	}

	// 4. AlterConfigs (legacy, the complete set) with the same values, then with none.
	legacy := func(withValues bool) {
		t.Helper()
		req := kmsg.NewPtrAlterConfigsRequest()
		req.Version = 2
		for _, r := range resources {
			res := kmsg.NewAlterConfigsRequestResource()
			res.ResourceType, res.ResourceName = r.rt, r.name
			if withValues {
				for name, v := range samples[r.name] {
					res.Configs = append(res.Configs, kmsg.AlterConfigsRequestResourceConfig{Name: name, Value: kmsg.StringPtr(v)})
				}
			}
			req.Resources = append(req.Resources, res)
		}
		resp := rc.roundTrip(req).(*kmsg.AlterConfigsResponse)
		for _, r := range resp.Resources {
			if r.ErrorCode != 0 {
				t.Fatalf("AlterConfigs %s %q: %s %s", r.ResourceType, r.ResourceName, kerr.ErrorForCode(r.ErrorCode), show(r.ErrorMessage))
			}
		}
	}
	legacy(true)
	checkSet("after AlterConfigs")
	legacy(false)
	for _, r := range resources {
		checkDefaults(r, describeAll(t, rc, r.rt, r.name), nil)
	}

	// 5. Every read-only broker key is refused, as Kafka refuses it; one resource each.
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Version, req.ValidateOnly = 1, true
	for _, d := range configs.BrokerDefs {
		if !d.ReadOnly {
			continue
		}
		v, _, ok := sampleValue(d)
		if !ok {
			v = "1"
		}
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
		res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: d.Name, Op: kmsg.IncrementalAlterConfigOpSet, Value: kmsg.StringPtr(v)}}
		req.Resources = append(req.Resources, res)
	}
	resp := rc.roundTrip(req).(*kmsg.IncrementalAlterConfigsResponse)
	if len(resp.Resources) != len(req.Resources) || len(resp.Resources) < 150 {
		t.Fatalf("%d answers to %d read-only keys", len(resp.Resources), len(req.Resources))
	}
	for i, r := range resp.Resources {
		if r.ErrorCode != kerr.InvalidConfig.Code {
			t.Errorf("read-only %s: %s", req.Resources[i].Configs[0].Name, kerr.ErrorForCode(r.ErrorCode))
		}
	}

	// 6. The removed keys take what Kafka 3 took; unknown keys stay refused.
	for _, c := range []struct {
		key, value string
		err        error
	}{
		{"message.format.version", "3.0-IV1", nil},
		{"message.format.version", "banana", kerr.InvalidConfig},
		{"message.timestamp.difference.max.ms", "60000", nil},
		{"message.downconversion.enable", "false", nil},
		{"no.such.key", "1", kerr.InvalidConfig},
	} {
		resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: c.key, Value: kadm.StringPtr(c.value)}}, "keys")
		if err != nil || len(resp) != 1 || !errors.Is(resp[0].Err, c.err) && (c.err != nil || resp[0].Err != nil) {
			t.Errorf("%s=%s: %v %+v, want %v", c.key, c.value, err, resp, c.err)
		}
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "keys")
	if err != nil {
		t.Fatal(err)
	}
	if c := configOf(t, rcs, "keys", "message.format.version"); *c.Value != "3.0-IV1" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("message.format.version %+v", c)
	}
}
