package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/acl"
	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/net/auth"
)

// alterGroupConfigs sends one IncrementalAlterConfigs of GROUP resource group with
// name/op/value triples (a nil value for DELETE) and returns its resource's answer.
func alterGroupConfigs(t testing.TB, cl *kgo.Client, group string, ops ...any) kmsg.IncrementalAlterConfigsResponseResource {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i+2 < len(ops)+1; i += 3 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op = ops[i].(string), ops[i+1].(kmsg.IncrementalAlterConfigOp)
		if v, ok := ops[i+2].(string); ok {
			c.Value = &v
		}
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatalf("IncrementalAlterConfigs: %v", err)
	}
	return resp.Resources[0]
}

// mustAlterGroupConfigs is alterGroupConfigs that must succeed.
func mustAlterGroupConfigs(t testing.TB, cl *kgo.Client, group string, ops ...any) {
	t.Helper()
	if r := alterGroupConfigs(t, cl, group, ops...); r.ErrorCode != 0 {
		t.Fatalf("altering group %s's configs: %v: %v", group, kerr.ErrorForCode(r.ErrorCode), strOr(r.ErrorMessage))
	}
}

// describeGroupConfigs is DescribeConfigs of GROUP resource group (names: all when
// none), with synonyms.
func describeGroupConfigs(t testing.TB, cl *kgo.Client, group string, names ...string) kmsg.DescribeConfigsResponseResource {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms, req.IncludeDocumentation = true, true
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.ConfigNames = kmsg.ConfigResourceTypeGroupConfig, group, names
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatalf("DescribeConfigs: %v", err)
	}
	return resp.Resources[0]
}

func groupConfig(t testing.TB, res kmsg.DescribeConfigsResponseResource, name string) kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	for _, c := range res.Configs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("group %s: no config %s in %d", res.ResourceName, name, len(res.Configs))
	return kmsg.DescribeConfigsResponseResourceConfig{}
}

// TestGroupConfigs: GROUP config resources over the wire: set for a group that does
// not exist yet, described with values and sources (the group's, the broker synonym's
// static value, the default) and synonyms, a requested key list honoured, unknown keys
// and out-of-bound values refused with INVALID_CONFIG and Kafka's words, delete,
// AlterConfigs replacing the set, the configs surviving a restart, and DeleteGroups
// removing the configs of the groups it deletes.
func TestGroupConfigs(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Static: map[string]string{
		"group.share.heartbeat.interval.ms":     "200",
		"group.share.min.heartbeat.interval.ms": "100",
		"offsets.topic.num.partitions":          "2",
	}})
	cl := tb.client(t)
	set, del := kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete

	mustAlterGroupConfigs(t, cl, "g1", "share.auto.offset.reset", set, "earliest", "share.record.lock.duration.ms", set, "15000",
		"share.heartbeat.interval.ms", set, "150")
	res := describeGroupConfigs(t, cl, "g1")
	if res.ErrorCode != 0 || len(res.Configs) != len(configs.GroupDefs) {
		t.Fatalf("describe: %v, %d configs (want %d)", kerr.ErrorForCode(res.ErrorCode), len(res.Configs), len(configs.GroupDefs))
	}
	for _, c := range []struct {
		name, value string
		src         kmsg.ConfigSource
	}{
		{"share.auto.offset.reset", "earliest", kmsg.ConfigSourceGroupConfig},
		{"share.record.lock.duration.ms", "15000", kmsg.ConfigSourceGroupConfig},
		{"share.heartbeat.interval.ms", "150", kmsg.ConfigSourceGroupConfig},
		{"share.session.timeout.ms", "45000", kmsg.ConfigSourceDefaultConfig},
		{"share.isolation.level", "read_uncommitted", kmsg.ConfigSourceDefaultConfig},
		{"errors.deadletterqueue.topic.name", "", kmsg.ConfigSourceDefaultConfig},
	} {
		got := groupConfig(t, res, c.name)
		if strOr(got.Value) != c.value || got.Source != c.src || got.ReadOnly {
			t.Errorf("%s: %s source %v read-only %v; want %s source %v", c.name, strOr(got.Value), got.Source, got.ReadOnly, c.value, c.src)
		}
	}
	// Synonyms: the group's value, then its broker synonym (static 200), then Kafka's default.
	hb := groupConfig(t, res, "share.heartbeat.interval.ms")
	if len(hb.ConfigSynonyms) != 3 || hb.ConfigSynonyms[1].Name != "group.share.heartbeat.interval.ms" ||
		strOr(hb.ConfigSynonyms[1].Value) != "200" || hb.ConfigSynonyms[1].Source != kmsg.ConfigSourceStaticBrokerConfig ||
		hb.ConfigType != kmsg.ConfigTypeInt || hb.Documentation == nil {
		t.Errorf("share.heartbeat.interval.ms entry %+v", hb)
	}
	// A group without configs: the broker's values.
	other := describeGroupConfigs(t, cl, "never-configured", "share.heartbeat.interval.ms", "consumer.session.timeout.ms", "no.such.key")
	if len(other.Configs) != 2 {
		t.Fatalf("named keys: %d configs, want 2 (unknown names left out)", len(other.Configs))
	}
	if c := groupConfig(t, other, "share.heartbeat.interval.ms"); strOr(c.Value) != "200" || c.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("broker's share heartbeat: %s %v", strOr(c.Value), c.Source)
	}

	// Refusals leave the configs as they were.
	for _, c := range []struct {
		ops  []any
		code *kerr.Error
		msg  string
	}{
		{[]any{"no.such.key", set, "1"}, kerr.InvalidConfig, "Unknown group config name: no.such.key"},
		{[]any{"share.delivery.count.limit", set, "11"}, kerr.InvalidConfig, "share.delivery.count.limit must be in the range 2 to 10 inclusive."},
		{[]any{"share.record.lock.duration.ms", set, "60001"}, kerr.InvalidConfig, "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive."},
		{[]any{"share.heartbeat.interval.ms", set, "99"}, kerr.InvalidConfig, "share.heartbeat.interval.ms must be in the range 100 to 15000 inclusive."},
		{[]any{"share.auto.offset.reset", set, "by_duration:yesterday"}, kerr.InvalidConfig, "share.auto.offset.reset"},
		{[]any{"consumer.session.timeout.ms", set, "soon"}, kerr.InvalidConfig, "consumer.session.timeout.ms"},
		{[]any{"share.auto.offset.reset", kmsg.IncrementalAlterConfigOpAppend, "latest"}, kerr.InvalidConfig, "not a list"},
	} {
		r := alterGroupConfigs(t, cl, "g1", c.ops...)
		if r.ErrorCode != c.code.Code || !strings.Contains(strOr(r.ErrorMessage), c.msg) {
			t.Errorf("%v: %v %q; want %v %q", c.ops, kerr.ErrorForCode(r.ErrorCode), strOr(r.ErrorMessage), c.code, c.msg)
		}
	}
	if r := alterGroupConfigs(t, cl, "", "share.auto.offset.reset", set, "earliest"); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("empty group name: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := describeGroupConfigs(t, cl, ""); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("describe of the empty group name: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	// Delete one key: back to the broker's default.
	mustAlterGroupConfigs(t, cl, "g1", "share.record.lock.duration.ms", del, nil)
	if c := groupConfig(t, describeGroupConfigs(t, cl, "g1"), "share.record.lock.duration.ms"); strOr(c.Value) != "30000" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("after delete: %s %v", strOr(c.Value), c.Source)
	}
	// AlterConfigs (legacy) replaces the set.
	ac := kmsg.NewPtrAlterConfigsRequest()
	acr := kmsg.NewAlterConfigsRequestResource()
	acr.ResourceType, acr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g2"
	acr.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "share.auto.offset.reset", Value: kmsg.StringPtr("earliest")}}
	ac.Resources = []kmsg.AlterConfigsRequestResource{acr}
	if resp, err := ac.RequestWith(testCtx(t), cl); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("AlterConfigs: %v %+v", err, resp)
	}
	acr.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "share.isolation.level", Value: kmsg.StringPtr("read_committed")}}
	ac.Resources = []kmsg.AlterConfigsRequestResource{acr}
	if resp, err := ac.RequestWith(testCtx(t), cl); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("AlterConfigs: %v %+v", err, resp)
	}
	if got := tb.image().Configs(metadata.ResourceGroup, "g2"); len(got) != 1 || got["share.isolation.level"] != "read_committed" {
		t.Fatalf("after AlterConfigs: %v", got)
	}

	// The configs are records of the metadata log: they survive a restart.
	tb.restart()
	cl = tb.client(t)
	res = describeGroupConfigs(t, cl, "g1", "share.auto.offset.reset", "share.heartbeat.interval.ms")
	if c := groupConfig(t, res, "share.auto.offset.reset"); strOr(c.Value) != "earliest" || c.Source != kmsg.ConfigSourceGroupConfig {
		t.Errorf("after restart: %s %v", strOr(c.Value), c.Source)
	}
	if c := groupConfig(t, res, "share.heartbeat.interval.ms"); strOr(c.Value) != "150" {
		t.Errorf("after restart: %s", strOr(c.Value))
	}

	// DeleteGroups deletes a group's configs with it: g1 becomes a (classic) group by
	// committing an offset; g2 never exists, so its configs stay.
	adm := kadm.NewClient(cl)
	mustCreate(t, adm, "gc-topic", 1, nil)
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "gc-topic", Partition: 0, At: 0, LeaderEpoch: -1})
	eventually(t, 10*time.Second, "an offset commit of g1", func() bool {
		r, err := adm.CommitOffsets(testCtx(t), "g1", offs)
		return err == nil && r.Ok()
	})
	dg, err := adm.DeleteGroups(testCtx(t), "g1", "g2")
	if err != nil {
		t.Fatal(err)
	}
	if err := dg["g1"].Err; err != nil {
		t.Fatalf("deleting g1: %v", err)
	}
	if err := dg["g2"].Err; !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("deleting g2, which does not exist: %v", err)
	}
	if got := tb.image().Configs(metadata.ResourceGroup, "g1"); got != nil {
		t.Fatalf("g1's configs after DeleteGroups: %v", got)
	}
	if c := groupConfig(t, describeGroupConfigs(t, cl, "g1"), "share.auto.offset.reset"); strOr(c.Value) != "latest" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("g1 described after DeleteGroups: %s %v", strOr(c.Value), c.Source)
	}
	if got := tb.image().Configs(metadata.ResourceGroup, "g2"); got == nil {
		t.Fatal("DeleteGroups of a group that does not exist deleted its configs")
	}
}

// TestShareGroupConfigEarliest: share.auto.offset.reset=earliest set as a GROUP config
// (no broker key) makes a share group read a topic from its start; a group without it
// starts at the end (Kafka's latest), and lowering a group's lock duration takes effect
// for the next fetch's locks, without a restart.
func TestShareGroupConfigEarliest(t *testing.T) {
	static := shareStatic()
	delete(static, "share.auto.offset.reset")
	delete(static, "group.share.record.lock.duration.ms")
	tb := startTestBroker(t, testBrokerOptions{Static: static})
	cl := tb.client(t)
	const topic = "share-group-config"
	mustCreate(t, tb.admin(t), topic, 1, nil)
	produceN(t, cl, topic, 0, 10)
	mustAlterGroupConfigs(t, cl, "from-start", "share.auto.offset.reset", kmsg.IncrementalAlterConfigOpSet, "earliest",
		"share.record.lock.duration.ms", kmsg.IncrementalAlterConfigOpSet, "15000")

	sc := shareClient(t, []string{tb.addr}, "from-start", topic)
	var got []*kgo.Record
	eventually(t, 20*time.Second, "the topic's 10 records", func() bool {
		got = append(got, pollShare(t, sc, 200*time.Millisecond)...)
		return len(got) >= 10
	})
	if got[0].Offset != 0 {
		t.Fatalf("first record at offset %d, want 0 (earliest)", got[0].Offset)
	}
	if d := tb.b.shares.mgr.LockDuration("from-start"); d != 15*time.Second {
		t.Fatalf("lock duration %v, want the group's 15 s", d)
	}

	// A group without the config starts at the end: records produced before it first
	// fetched are not delivered.
	lc := shareClient(t, []string{tb.addr}, "from-end", topic)
	var late []*kgo.Record
	eventually(t, 20*time.Second, "a record produced after the group started", func() bool {
		produceN(t, cl, topic, 100, 1)
		late = append(late, pollShare(t, lc, 200*time.Millisecond)...)
		return len(late) > 0
	})
	for _, r := range late {
		if r.Offset < 10 {
			t.Fatalf("group from-end got offset %d, produced before it started", r.Offset)
		}
	}
	if d := tb.b.shares.mgr.LockDuration("from-end"); d != 30*time.Second {
		t.Fatalf("lock duration of a group without configs %v, want the broker's 30 s", d)
	}
	mustAlterGroupConfigs(t, cl, "from-end", "share.record.lock.duration.ms", kmsg.IncrementalAlterConfigOpSet, "20000")
	if d := tb.b.shares.mgr.LockDuration("from-end"); d != 20*time.Second {
		t.Fatalf("lock duration after the alter %v, want 20 s", d)
	}

	// by_duration: the first record at most that old, else the high watermark. A batch
	// of five records two hours old, then one of three a minute old.
	const aged = "share-by-duration"
	mustCreate(t, tb.admin(t), aged, 1, nil)
	now := time.Now()
	for _, b := range []struct {
		n   int
		age time.Duration
	}{{5, 2 * time.Hour}, {3, time.Minute}} {
		var recs []*kgo.Record
		for range b.n {
			recs = append(recs, &kgo.Record{Topic: aged, Value: []byte("r"), Timestamp: now.Add(-b.age)})
		}
		if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	l := tb.log(aged, 0)
	reader := tb.b.shares.reader.(interface {
		InitialStart(group string, l *engine.Log) (int64, error)
	})
	for _, c := range []struct {
		reset string
		want  int64
	}{{"by_duration:PT3H", 0}, {"by_duration:PT1H", 5}, {"by_duration:P0DT30S", 8}, {"earliest", 0}, {"latest", 8}} {
		mustAlterGroupConfigs(t, cl, "by-duration", "share.auto.offset.reset", kmsg.IncrementalAlterConfigOpSet, c.reset)
		if got, err := reader.InitialStart("by-duration", l); err != nil || got != c.want {
			t.Errorf("share.auto.offset.reset=%s: start %d %v, want %d", c.reset, got, err, c.want)
		}
	}
}

// TestConsumerGroupHeartbeatIntervalPerGroup: a consumer group's own
// consumer.heartbeat.interval.ms is the interval its ConsumerGroupHeartbeat answers
// carry, from the next heartbeat after it changes; other groups keep the broker's.
func TestConsumerGroupHeartbeatIntervalPerGroup(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Static: map[string]string{"offsets.topic.num.partitions": "2"}})
	const topic = "cg-interval"
	mustCreate(t, tb.admin(t), topic, 1, nil)
	cl := tb.client(t)
	mustAlterGroupConfigs(t, cl, "own-interval", "consumer.heartbeat.interval.ms", kmsg.IncrementalAlterConfigOpSet, "6000")

	heartbeat := func(group, member string, epoch int32) *kmsg.ConsumerGroupHeartbeatResponse {
		var r *kmsg.ConsumerGroupHeartbeatResponse
		eventually(t, 10*time.Second, "__consumer_offsets and its coordinator", func() bool {
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Version = 1
			req.Group, req.MemberID, req.MemberEpoch = group, member, epoch
			req.RebalanceTimeoutMillis = 30000
			req.SubscribedTopicNames = []string{topic}
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			resp, err := req.RequestWith(testCtx(t), cl)
			var ke *kerr.Error
			switch {
			case errors.As(err, &ke):
				return false // kgo gave up on a retriable coordinator code: again
			case err != nil:
				t.Fatal(err)
			}
			r = resp
			return r.ErrorCode != kerr.CoordinatorLoadInProgress.Code && r.ErrorCode != kerr.CoordinatorNotAvailable.Code && r.ErrorCode != kerr.NotCoordinator.Code
		})
		if r.ErrorCode != 0 {
			t.Fatalf("%s heartbeat: %v", group, kerr.ErrorForCode(r.ErrorCode))
		}
		return r
	}
	r := heartbeat("own-interval", "member-own-0000000000", 0)
	if r.HeartbeatIntervalMillis != 6000 {
		t.Fatalf("join answer interval %d, want the group's 6000", r.HeartbeatIntervalMillis)
	}
	if o := heartbeat("broker-interval", "member-oth-0000000000", 0); o.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("a group without configs: interval %d, want the broker's 5000", o.HeartbeatIntervalMillis)
	}
	mustAlterGroupConfigs(t, cl, "own-interval", "consumer.heartbeat.interval.ms", kmsg.IncrementalAlterConfigOpSet, "7000")
	if r2 := heartbeat("own-interval", "member-own-0000000000", r.MemberEpoch); r2.HeartbeatIntervalMillis != 7000 {
		t.Fatalf("after the alter: interval %d, want 7000", r2.HeartbeatIntervalMillis)
	}
	mustAlterGroupConfigs(t, cl, "own-interval", "consumer.heartbeat.interval.ms", kmsg.IncrementalAlterConfigOpDelete, nil)
	if r3 := heartbeat("own-interval", "member-own-0000000000", r.MemberEpoch); r3.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("after the delete: interval %d, want the broker's 5000", r3.HeartbeatIntervalMillis)
	}
}

// TestShareGroupConfigReadCommitted: share.isolation.level=read_committed set on a
// share group: its members get the records of committed transactions and none of an
// aborted one (archived, not delivered); a group left at read_uncommitted gets both.
func TestShareGroupConfigReadCommitted(t *testing.T) {
	static := shareStatic()
	static["transaction.state.log.num.partitions"] = "2"
	tb := startTestBroker(t, testBrokerOptions{Static: static})
	cl := tb.client(t)
	const topic = "share-read-committed"
	mustCreate(t, tb.admin(t), topic, 1, nil)
	p := tb.client(t, kgo.TransactionalID("share-rc"), kgo.DefaultProduceTopic(topic))
	for _, tx := range []struct {
		commit bool
		values []string
	}{{true, []string{"c1", "c2"}}, {false, []string{"a1", "a2", "a3"}}, {true, []string{"c3"}}} {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range tx.values {
			if err := p.ProduceSync(testCtx(t), &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.EndTransaction(testCtx(t), kgo.TransactionEndTry(tx.commit)); err != nil {
			t.Fatal(err)
		}
	}
	mustAlterGroupConfigs(t, cl, "committed", "share.isolation.level", kmsg.IncrementalAlterConfigOpSet, "read_committed")
	consume := func(group string, want int) []string {
		sc := shareClient(t, []string{tb.addr}, group, topic)
		var got []string
		eventually(t, 20*time.Second, fmt.Sprintf("%d records for %s", want, group), func() bool {
			for _, r := range pollShare(t, sc, 200*time.Millisecond) {
				got = append(got, string(r.Value))
			}
			return len(got) >= want
		})
		return got
	}
	if got := consume("committed", 3); strings.Join(got, ",") != "c1,c2,c3" {
		t.Fatalf("read_committed share group got %v, want c1,c2,c3", got)
	}
	if got := consume("uncommitted", 6); strings.Join(got, ",") != "c1,c2,a1,a2,a3,c3" {
		t.Fatalf("read_uncommitted share group got %v", got)
	}
}

// TestGroupConfigsAuthz: GROUP config resources are authorised on the group:
// ALTER_CONFIGS for IncrementalAlterConfigs and AlterConfigs, DESCRIBE_CONFIGS for
// DescribeConfigs; a group without the ACL answers GROUP_AUTHORIZATION_FAILED and is
// left unchanged.
func TestGroupConfigsAuthz(t *testing.T) {
	tb := startTestBroker(t)
	ctx := testCtx(t)
	superAddr := tb.secureListener(t, auth.Plaintext, testCA{}, acl.New(acl.Config{SuperUsers: []string{"User:ANONYMOUS"}}))
	userAddr := tb.secureListener(t, auth.Plaintext, testCA{}, acl.New(acl.Config{}))
	dialTo := func(addr string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.Dialer(func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	superCl, userCl := dialTo(superAddr), dialTo(userAddr)
	b := kadm.NewACLs().Allow("User:ANONYMOUS").Groups("open").Operations(kadm.OpAlterConfigs, kadm.OpDescribeConfigs).ResourcePatternType(kadm.ACLPatternLiteral)
	if res, err := kadm.NewClient(superCl).CreateACLs(ctx, b); err != nil || res[0].Err != nil {
		t.Fatalf("create ACL: %v %+v", err, res)
	}
	set := kmsg.IncrementalAlterConfigOpSet
	eventually(t, 10*time.Second, "the ACL in force", func() bool {
		return alterGroupConfigs(t, userCl, "open", "share.auto.offset.reset", set, "earliest").ErrorCode == 0
	})
	if r := alterGroupConfigs(t, userCl, "closed", "share.auto.offset.reset", set, "earliest"); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("alter of a group without the ACL: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if got := tb.image().Configs(metadata.ResourceGroup, "closed"); got != nil {
		t.Fatalf("refused alter recorded %v", got)
	}
	if r := describeGroupConfigs(t, userCl, "open", "share.auto.offset.reset"); r.ErrorCode != 0 || strOr(groupConfig(t, r, "share.auto.offset.reset").Value) != "earliest" {
		t.Fatalf("describe of the allowed group: %v %+v", kerr.ErrorForCode(r.ErrorCode), r.Configs)
	}
	if r := describeGroupConfigs(t, userCl, "closed"); r.ErrorCode != kerr.GroupAuthorizationFailed.Code || len(r.Configs) != 0 {
		t.Fatalf("describe of a group without the ACL: %v, %d configs", kerr.ErrorForCode(r.ErrorCode), len(r.Configs))
	}
	// The super user may do both.
	mustAlterGroupConfigs(t, superCl, "closed", "share.auto.offset.reset", set, "earliest")
	if r := describeGroupConfigs(t, superCl, "closed"); r.ErrorCode != 0 {
		t.Fatalf("super user's describe: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// TestShareGroupHeartbeatIntervalPerGroup: a share group's own
// share.heartbeat.interval.ms is the interval its ShareGroupHeartbeat answers carry,
// from the next heartbeat after it changes.
func TestShareGroupHeartbeatIntervalPerGroup(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Static: map[string]string{"offsets.topic.num.partitions": "2"}})
	const topic = "share-interval"
	mustCreate(t, tb.admin(t), topic, 1, nil)
	cl := tb.client(t)
	mustAlterGroupConfigs(t, cl, "share-own", "share.heartbeat.interval.ms", kmsg.IncrementalAlterConfigOpSet, "6000")
	rc := tb.raw(t)
	heartbeat := func(epoch int32) *kmsg.ShareGroupHeartbeatResponse {
		var r *kmsg.ShareGroupHeartbeatResponse
		eventually(t, 10*time.Second, "__consumer_offsets and its coordinator", func() bool {
			req := kmsg.NewPtrShareGroupHeartbeatRequest()
			req.Version, req.GroupID, req.MemberID, req.MemberEpoch = 1, "share-own", "share-member-000000000", epoch
			if epoch == 0 {
				req.SubscribedTopicNames = []string{topic}
			}
			r = rc.roundTrip(req).(*kmsg.ShareGroupHeartbeatResponse)
			return r.ErrorCode != kerr.CoordinatorLoadInProgress.Code && r.ErrorCode != kerr.NotCoordinator.Code
		})
		if r.ErrorCode != 0 {
			t.Fatalf("heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		return r
	}
	r := heartbeat(0)
	if r.HeartbeatIntervalMillis != 6000 {
		t.Fatalf("join answer interval %d, want the group's 6000", r.HeartbeatIntervalMillis)
	}
	mustAlterGroupConfigs(t, cl, "share-own", "share.heartbeat.interval.ms", kmsg.IncrementalAlterConfigOpSet, "8000")
	if r2 := heartbeat(r.MemberEpoch); r2.HeartbeatIntervalMillis != 8000 {
		t.Fatalf("after the alter: interval %d, want 8000", r2.HeartbeatIntervalMillis)
	}
}
