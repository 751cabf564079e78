package kafka

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
)

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (tb *testBroker) log(topic string, p int32) *engine.Log {
	return tb.eng.Log(engine.TopicPartition{Topic: topic, Partition: p})
}

func mustCreate(t testing.TB, adm *kadm.Client, topic string, partitions int32, configs map[string]*string) kadm.CreateTopicResponse {
	t.Helper()
	r, err := adm.CreateTopic(testCtx(t), partitions, 1, configs, topic)
	if err != nil {
		t.Fatalf("creating %s: %v (%s)", topic, err, r.ErrMessage)
	}
	return r
}

func TestCreateTopics(t *testing.T) {
	tb := startTestBroker(t)
	adm := tb.admin(t)
	ctx := testCtx(t)

	r := mustCreate(t, adm, "orders", 3, map[string]*string{"retention.ms": kadm.StringPtr("1000"), "cleanup.policy": kadm.StringPtr("compact")})
	if r.NumPartitions != 3 || r.ReplicationFactor != 1 || r.ID == (kadm.TopicID{}) {
		t.Fatalf("response %+v", r)
	}
	if c := r.Configs["retention.ms"]; c.Value == nil || *c.Value != "1000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("retention.ms in response: %+v", c)
	}
	for p := int32(0); p < 3; p++ {
		l := tb.log("orders", p)
		if l == nil {
			t.Fatalf("no log for partition %d", p)
		}
		if c := l.Config(); c.RetentionMs != 1000 || !c.Compact {
			t.Fatalf("log config %+v", c)
		}
	}

	// Defaults: -1 partitions and replication factor take num.partitions / default RF.
	if r := mustCreate(t, adm, "defaulted", -1, nil); r.NumPartitions != 1 {
		t.Fatalf("defaulted: %d partitions", r.NumPartitions)
	}

	for _, c := range []struct {
		topic   string
		parts   int32
		rf      int16
		configs map[string]*string
		want    error
	}{
		{"orders", 1, 1, nil, kerr.TopicAlreadyExists},
		{"bad/name", 1, 1, nil, kerr.InvalidTopicException},
		{"zero", 0, 1, nil, kerr.InvalidPartitions},
		{"rf3", 1, 3, nil, kerr.InvalidReplicationFactor},
		{"badcfg", 1, 1, map[string]*string{"retention.ms": kadm.StringPtr("soon")}, kerr.InvalidConfig},
		{"unknowncfg", 1, 1, map[string]*string{"no.such.config": kadm.StringPtr("1")}, kerr.InvalidConfig},
		{"badenum", 1, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("shred")}, kerr.InvalidConfig},
		{"small", 1, 1, map[string]*string{"segment.bytes": kadm.StringPtr("13")}, kerr.InvalidConfig},
		{"huge", 1 << 30, 1, nil, kerr.PolicyViolation}, // bounded: no allocation per claimed partition
	} {
		_, err := adm.CreateTopic(ctx, c.parts, c.rf, c.configs, c.topic)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.topic, err, c.want)
		}
	}
	if tb.log("badcfg", 0) != nil {
		t.Fatal("failed creation left a log")
	}

	// Validate-only: answered as if created, nothing created.
	vr, err := adm.ValidateCreateTopics(ctx, 2, 1, nil, "dry")
	if err != nil || vr["dry"].Err != nil || vr["dry"].NumPartitions != 2 {
		t.Fatalf("validate-only: %v %+v", err, vr["dry"])
	}
	if td, _ := adm.ListTopics(ctx); td.Has("dry") {
		t.Fatal("validate-only created the topic")
	}
	if vr, _ := adm.ValidateCreateTopics(ctx, 2, 1, nil, "orders"); !errors.Is(vr["orders"].Err, kerr.TopicAlreadyExists) {
		t.Fatalf("validate-only of existing: %v", vr["orders"].Err)
	}
}

func TestCreateTopicsReplicaAssignment(t *testing.T) {
	tb := startTestBroker(t)
	rc := tb.raw(t)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	add := func(name string, assign ...[]int32) {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
		for i, a := range assign {
			ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			ra.Partition, ra.Replicas = int32(i), a
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
		}
		req.Topics = append(req.Topics, rt)
	}
	add("ok", []int32{1}, []int32{1})
	add("otherbroker", []int32{2})
	add("tworeplicas", []int32{1, 2})
	add("dup")
	add("dup")
	resp := rc.roundTrip(req).(*kmsg.CreateTopicsResponse)
	// Broker 2 is not registered: both assignments naming it are invalid (Kafka's
	// controller answers INVALID_REPLICA_ASSIGNMENT for an unknown broker).
	want := []int16{0, kerr.InvalidReplicaAssignment.Code, kerr.InvalidReplicaAssignment.Code, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code}
	for i, rt := range resp.Topics {
		if rt.ErrorCode != want[i] {
			t.Errorf("%s: error %d, want %d", rt.Topic, rt.ErrorCode, want[i])
		}
	}
	if resp.Topics[0].NumPartitions != 2 || tb.log("ok", 1) == nil {
		t.Fatalf("ok: %+v", resp.Topics[0])
	}
}

func TestMetadataAllVersions(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Sync: engine.SyncNone, Static: map[string]string{"num.partitions": "2"}})
	adm := tb.admin(t)
	created := mustCreate(t, adm, "m", 3, nil)
	rc := tb.raw(t)
	for v := int16(0); v <= 13; v++ {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		name := "m"
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: &name}}
		resp := rc.roundTrip(req).(*kmsg.MetadataResponse)
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 1 || resp.Brokers[0].Port == 0 {
			t.Fatalf("v%d brokers %+v", v, resp.Brokers)
		}
		if v >= 1 && resp.ControllerID != 1 {
			t.Fatalf("v%d controller %d", v, resp.ControllerID)
		}
		if v >= 2 && (resp.ClusterID == nil || *resp.ClusterID != "test-cluster") {
			t.Fatalf("v%d cluster id %v", v, resp.ClusterID)
		}
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 3 {
			t.Fatalf("v%d topics %+v", v, resp.Topics)
		}
		if v >= 10 && resp.Topics[0].TopicID != [16]byte(created.ID) {
			t.Fatalf("v%d topic id", v)
		}
		for i, p := range resp.Topics[0].Partitions {
			if p.Partition != int32(i) || p.Leader != 1 || len(p.Replicas) != 1 || len(p.ISR) != 1 || p.ErrorCode != 0 || (v >= 7 && p.LeaderEpoch != 0) {
				t.Fatalf("v%d partition %+v", v, p)
			}
		}
		// All topics: null list (v1+), empty list at v0.
		all := kmsg.NewPtrMetadataRequest()
		all.Version = v
		if v == 0 {
			all.Topics = []kmsg.MetadataRequestTopic{}
		}
		if resp := rc.roundTrip(all).(*kmsg.MetadataResponse); len(resp.Topics) < 1 {
			t.Fatalf("v%d all topics: %d", v, len(resp.Topics))
		}
		// Unknown topic, auto-creation refused (v4+).
		if v >= 4 {
			un := kmsg.NewPtrMetadataRequest()
			un.Version = v
			missing := "missing"
			un.Topics = []kmsg.MetadataRequestTopic{{Topic: &missing}}
			if resp := rc.roundTrip(un).(*kmsg.MetadataResponse); resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
				t.Fatalf("v%d missing: %d", v, resp.Topics[0].ErrorCode)
			}
		}
		if v >= 10 {
			byID := kmsg.NewPtrMetadataRequest()
			byID.Version = v
			byID.Topics = []kmsg.MetadataRequestTopic{{TopicID: created.ID}, {TopicID: [16]byte{1, 2, 3}}}
			resp := rc.roundTrip(byID).(*kmsg.MetadataResponse)
			if resp.Topics[0].ErrorCode != 0 || *resp.Topics[0].Topic != "m" || resp.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
				t.Fatalf("v%d by id: %+v", v, resp.Topics)
			}
		}
	}
	// Auto-creation: v1 always allows it; num.partitions (2) applies.
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 1
	auto, bad := "auto-made", "bad name!"
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: &auto}, {Topic: &bad}}
	resp := rc.roundTrip(req).(*kmsg.MetadataResponse)
	// As Kafka: the request that creates a topic is told LEADER_NOT_AVAILABLE for it;
	// the next one sees its partitions.
	if resp.Topics[0].ErrorCode != kerr.LeaderNotAvailable.Code || len(resp.Topics[0].Partitions) != 0 {
		t.Fatalf("auto-create: %+v", resp.Topics[0])
	}
	if resp.Topics[1].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("bad name: %d", resp.Topics[1].ErrorCode)
	}
	resp = rc.roundTrip(req).(*kmsg.MetadataResponse)
	if resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("after the auto-create: %+v", resp.Topics[0])
	}
	eventually(t, 10*time.Second, "auto-made-1 open", func() bool { return tb.log("auto-made", 1) != nil })
}

func TestAutoCreateDisabled(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Sync: engine.SyncNone, Static: map[string]string{"auto.create.topics.enable": "false"}})
	rc := tb.raw(t)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	name := "nope"
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: &name}}
	req.AllowAutoTopicCreation = true
	if resp := rc.roundTrip(req).(*kmsg.MetadataResponse); resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("got %d", resp.Topics[0].ErrorCode)
	}
}

func configOf(t *testing.T, rcs kadm.ResourceConfigs, name, key string) kadm.Config {
	t.Helper()
	rc, err := rcs.On(name, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("%s: %v %v", name, err, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == key {
			return c
		}
	}
	t.Fatalf("%s: no config %s", name, key)
	return kadm.Config{}
}

func TestDescribeAndAlterConfigs(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Sync: engine.SyncNone, Static: map[string]string{"log.retention.hours": "1"}})
	adm := tb.admin(t)
	ctx := testCtx(t)
	mustCreate(t, adm, "c", 2, map[string]*string{"max.message.bytes": kadm.StringPtr("2000")})

	rcs, err := adm.DescribeTopicConfigs(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if c := configOf(t, rcs, "c", "max.message.bytes"); *c.Value != "2000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig || len(c.Synonyms) < 2 {
		t.Errorf("max.message.bytes %+v", c)
	}
	if c := configOf(t, rcs, "c", "retention.ms"); *c.Value != "3600000" || c.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("retention.ms %+v", c)
	}
	if c := configOf(t, rcs, "c", "segment.bytes"); *c.Value != "1073741824" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("segment.bytes %+v", c)
	}
	if c := configOf(t, rcs, "c", "compression.type"); *c.Value != "producer" {
		t.Errorf("compression.type %+v", c)
	}
	if got := tb.log("c", 1).Config(); got.MaxMessageBytes != 2000 || got.RetentionMs != 3600000 {
		t.Errorf("log config %+v", got)
	}

	// Alter: set, delete, append; applied to live logs.
	_, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "segment.bytes", Value: kadm.StringPtr("1048576")},
		{Op: kadm.DeleteConfig, Name: "max.message.bytes"},
		{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")},
		{Op: kadm.SetConfig, Name: "message.timestamp.type", Value: kadm.StringPtr("LogAppendTime")},
	}, "c")
	if err != nil {
		t.Fatal(err)
	}
	lc := tb.log("c", 0).Config()
	if lc.SegmentBytes != 1048576 || lc.MaxMessageBytes != 1048588 || !lc.Compact || lc.TimestampType != engine.LogAppendTime {
		t.Fatalf("after alter: %+v", lc)
	}
	rcs, _ = adm.DescribeTopicConfigs(ctx, "c")
	if c := configOf(t, rcs, "c", "cleanup.policy"); *c.Value != "delete,compact" {
		t.Errorf("cleanup.policy %q", *c.Value)
	}

	// Bad alters.
	for _, ac := range []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("-5")},
		{Op: kadm.SetConfig, Name: "made.up", Value: kadm.StringPtr("1")},
		{Op: kadm.AppendConfig, Name: "retention.ms", Value: kadm.StringPtr("1")},
	} {
		resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{ac}, "c")
		if err != nil || !errors.Is(resp[0].Err, kerr.InvalidConfig) {
			t.Errorf("%+v: %v %v", ac, err, resp)
		}
	}
	if resp, _ := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("1")}}, "ghost"); !errors.Is(resp[0].Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("unknown topic: %v", resp[0].Err)
	}

	// Broker configs: describe, dynamic alter flows into topic defaults.
	brs, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if c := configOf(t, brs, "1", "num.partitions"); *c.Value != "1" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("num.partitions %+v", c)
	}
	if c := configOf(t, brs, "1", "log.retention.hours"); *c.Value != "1" || c.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("log.retention.hours %+v", c)
	}
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: kadm.StringPtr("120000")}}, 1); err != nil {
		t.Fatal(err)
	}
	if got := tb.log("c", 0).Config().RetentionMs; got != 120000 {
		t.Fatalf("dynamic broker retention not applied: %d", got)
	}
	rcs, _ = adm.DescribeTopicConfigs(ctx, "c")
	if c := configOf(t, rcs, "c", "retention.ms"); *c.Value != "120000" || c.Source != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Errorf("retention.ms after broker alter %+v", c)
	}
	resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "listeners", Value: kadm.StringPtr("PLAINTEXT://x:1")}}, 1)
	if err != nil || !errors.Is(resp[0].Err, kerr.InvalidConfig) {
		t.Errorf("read-only broker key: %v %v", err, resp)
	}

	// Restart: overrides and dynamic broker configs replay from the metadata log.
	tb.restart()
	adm = tb.admin(t)
	rcs, err = adm.DescribeTopicConfigs(testCtx(t), "c")
	if err != nil {
		t.Fatal(err)
	}
	if c := configOf(t, rcs, "c", "segment.bytes"); *c.Value != "1048576" {
		t.Errorf("after restart segment.bytes %+v", c)
	}
	if lc := tb.log("c", 1).Config(); lc.SegmentBytes != 1048576 || lc.RetentionMs != 120000 || !lc.Compact {
		t.Errorf("after restart log config %+v", lc)
	}
}

func TestLegacyAlterConfigsReplaces(t *testing.T) {
	tb := startTestBroker(t)
	adm := tb.admin(t)
	mustCreate(t, adm, "legacy", 1, map[string]*string{"max.message.bytes": kadm.StringPtr("2000"), "retention.ms": kadm.StringPtr("5000")})
	rc := tb.raw(t)
	req := kmsg.NewPtrAlterConfigsRequest()
	req.Version = 1
	res := kmsg.NewAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "legacy"
	res.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: kmsg.StringPtr("7000")}, {Name: "segment.bytes", Value: kmsg.StringPtr("2097152")}}
	bad := kmsg.NewAlterConfigsRequestResource()
	bad.ResourceType, bad.ResourceName = kmsg.ConfigResourceTypeTopic, "legacy"
	bad.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "segment.bytes", Value: kmsg.StringPtr("x")}}
	req.Resources = []kmsg.AlterConfigsRequestResource{res}
	resp := rc.roundTrip(req).(*kmsg.AlterConfigsResponse)
	if resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("alter: %d", resp.Resources[0].ErrorCode)
	}
	lc := tb.log("legacy", 0).Config()
	if lc.RetentionMs != 7000 || lc.SegmentBytes != 2097152 || lc.MaxMessageBytes != 1048588 {
		t.Fatalf("log config %+v", lc)
	}
	req.Resources = []kmsg.AlterConfigsRequestResource{bad}
	if resp := rc.roundTrip(req).(*kmsg.AlterConfigsResponse); resp.Resources[0].ErrorCode != kerr.InvalidConfig.Code {
		t.Fatalf("bad value: %d", resp.Resources[0].ErrorCode)
	}
	if lc := tb.log("legacy", 0).Config(); lc.SegmentBytes != 2097152 {
		t.Fatal("failed alter changed the config")
	}
}

func TestCreatePartitionsAndDelete(t *testing.T) {
	tb := startTestBroker(t)
	adm := tb.admin(t)
	ctx := testCtx(t)
	created := mustCreate(t, adm, "grow", 1, nil)
	if _, err := adm.UpdatePartitions(ctx, 4, "grow"); err != nil {
		t.Fatal(err)
	}
	if tb.log("grow", 3) == nil {
		t.Fatal("no log for new partition 3")
	}
	resp, err := adm.UpdatePartitions(ctx, 2, "grow")
	if err != nil || !errors.Is(resp["grow"].Err, kerr.InvalidPartitions) {
		t.Fatalf("shrink: %v %+v", err, resp)
	}
	resp, _ = adm.UpdatePartitions(ctx, 2, "ghost")
	if !errors.Is(resp["ghost"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("ghost: %+v", resp)
	}
	td, err := adm.ListTopics(ctx, "grow")
	if err != nil || len(td["grow"].Partitions) != 4 {
		t.Fatalf("metadata after grow: %v %+v", err, td)
	}

	// Delete by name.
	mustCreate(t, adm, "byname", 2, nil)
	if _, err := adm.DeleteTopic(ctx, "byname"); err != nil {
		t.Fatal(err)
	}
	if tb.log("byname", 0) != nil {
		t.Fatal("log survived deletion")
	}
	if _, err := adm.DeleteTopic(ctx, "byname"); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("second delete: %v", err)
	}
	// Delete by id (v6).
	rc := tb.raw(t)
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version = 6
	del.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: created.ID}, {TopicID: [16]byte{9}}}
	dr := rc.roundTrip(del).(*kmsg.DeleteTopicsResponse)
	if dr.Topics[0].ErrorCode != 0 || dr.Topics[0].Topic == nil || *dr.Topics[0].Topic != "grow" || dr.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("delete by id: %+v", dr.Topics)
	}
	if tb.log("grow", 3) != nil {
		t.Fatal("log survived deletion by id")
	}
	// A deleted name can be created again, with a new id.
	again := mustCreate(t, adm, "grow", 1, nil)
	if again.ID == created.ID {
		t.Fatal("recreated topic reused the id")
	}
}

func TestDescribeCluster(t *testing.T) {
	tb := startTestBroker(t)
	rc := tb.raw(t)
	for v := int16(0); v <= 2; v++ {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version = v
		req.EndpointType = 1
		resp := rc.roundTrip(req).(*kmsg.DescribeClusterResponse)
		if resp.ErrorCode != 0 || resp.ClusterID != "test-cluster" || resp.ControllerID != 1 || len(resp.Brokers) != 1 || resp.Brokers[0].Port == 0 {
			t.Fatalf("v%d: %+v", v, resp)
		}
	}
	req := kmsg.NewPtrDescribeClusterRequest()
	req.Version, req.EndpointType = 1, 7
	if resp := rc.roundTrip(req).(*kmsg.DescribeClusterResponse); resp.ErrorCode != kerr.UnsupportedEndpointType.Code {
		t.Fatalf("bad endpoint type: %d", resp.ErrorCode)
	}
	// kadm's view.
	m, err := tb.admin(t).BrokerMetadata(testCtx(t))
	if err != nil || m.Controller != 1 || m.Cluster != "test-cluster" {
		t.Fatalf("%v %+v", err, m)
	}
	if bi, ok := tb.image().Broker(1); !ok || bi.Host != "127.0.0.1" || bi.Port == 0 {
		t.Fatalf("broker not registered in the metadata: %+v", bi)
	}
}

func TestRestartKeepsTopics(t *testing.T) {
	tb := startTestBroker(t)
	adm := tb.admin(t)
	created := mustCreate(t, adm, "durable", 3, map[string]*string{"retention.bytes": kadm.StringPtr("123456")})
	tb.restart()
	adm = tb.admin(t)
	td, err := adm.ListTopics(testCtx(t), "durable")
	if err != nil {
		t.Fatal(err)
	}
	d := td["durable"]
	if d.Err != nil || d.ID != created.ID || len(d.Partitions) != 3 {
		t.Fatalf("after restart: %+v", d)
	}
	if tb.log("durable", 2).Config().RetentionBytes != 123456 {
		t.Fatal("config lost across restart")
	}
}

func TestLookupPartition(t *testing.T) {
	tb := startTestBroker(t)
	adm := tb.admin(t)
	created := mustCreate(t, adm, "look", 2, map[string]*string{"segment.bytes": kadm.StringPtr("1048576")})
	// A log the metadata has and the engine lacks is created on lookup, configured.
	// The broker opens a new topic's logs as the metadata change applies, which may
	// come after CreateTopics answers: wait for it, then take the log away.
	tp := engine.TopicPartition{Topic: "look", Partition: 1}
	eventually(t, 10*time.Second, "the engine opening look-1", func() bool { return tb.eng.Log(tp) != nil })
	if err := tb.eng.DeleteLog(engine.TopicPartition{Topic: "look", Partition: 1}); err != nil {
		t.Fatal(err)
	}
	p, err := tb.b.parts.Lookup("look", 1)
	if err != nil || p.Log == nil || p.Log.Config().SegmentBytes != 1048576 || p.Image.Leader != 1 {
		t.Fatalf("lookup: %v %+v", err, p)
	}
	if p, err := tb.b.parts.LookupByID(metadata.UUID(created.ID), 0); err != nil || p.Topic.Name != "look" {
		t.Fatalf("by id: %v", err)
	}
	for _, c := range []struct {
		topic string
		p     int32
		want  error
	}{{"look", 2, kerr.UnknownTopicOrPartition}, {"look", -1, kerr.UnknownTopicOrPartition}, {"nope", 0, kerr.UnknownTopicOrPartition}} {
		if _, err := tb.b.parts.Lookup(c.topic, c.p); !errors.Is(err, c.want) {
			t.Errorf("%s/%d: %v", c.topic, c.p, err)
		}
	}
	if _, err := tb.b.parts.LookupByID(metadata.UUID{7}, 0); !errors.Is(err, kerr.UnknownTopicID) {
		t.Errorf("unknown id: %v", err)
	}
	if _, err := adm.DeleteTopic(testCtx(t), "look"); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.b.parts.Lookup("look", 0); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("after delete: %v", err)
	}
}
