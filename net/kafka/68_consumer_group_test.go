package kafka

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cgConsumer is a franz-go group consumer on the consumer protocol (KIP-848:
// kgo.ServerSideBalancer, ConsumerGroupHeartbeat v1) that processes each poll, commits
// it and only then lets the group take partitions away (BlockRebalanceOnPoll), so that
// every record is processed once across members joining and leaving.
type cgConsumer struct {
	name string
	cl   *kgo.Client
	done chan struct{}
}

// cgRecord is one record a consumer processed.
type cgRecord struct {
	by, value string
}

func startCGConsumer(t *testing.T, tb *testBroker, name, group, topic string, out chan<- cgRecord, opts ...kgo.Opt) *cgConsumer {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(tb.addr),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ServerSideBalancer(),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.ClientID(name),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	c := &cgConsumer{name: name, cl: cl, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				out <- cgRecord{by: name, value: string(r.Value)}
			})
			if err := cl.CommitUncommittedOffsets(context.Background()); err != nil && err != kgo.ErrClientClosed {
				t.Logf("%s: commit: %v", name, err)
			}
			cl.AllowRebalance()
		}
	}()
	return c
}

// close leaves the group (ConsumerGroupHeartbeat with epoch -1) and stops the poller.
func (c *cgConsumer) close() {
	c.cl.Close()
	<-c.done
}

// produceValues produces values from..to-1 (as decimal strings) round-robin over the
// topic's partitions.
func produceValues(t *testing.T, cl *kgo.Client, topic string, from, to int) {
	t.Helper()
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 6), Value: []byte(strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// collect reads records from in until every value in from..to-1 was seen; a value
// seen twice fails the test.
func collect(t *testing.T, in <-chan cgRecord, seen map[string]string, from, to int) {
	t.Helper()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	missing := func() int {
		n := 0
		for i := from; i < to; i++ {
			if _, ok := seen[strconv.Itoa(i)]; !ok {
				n++
			}
		}
		return n
	}
	for missing() > 0 {
		select {
		case r := <-in:
			if by, dup := seen[r.value]; dup {
				t.Fatalf("record %s processed twice (by %s and by %s)", r.value, by, r.by)
			}
			seen[r.value] = r.by
		case <-timeout.C:
			t.Fatalf("timed out: %d of the records %d..%d not consumed", missing(), from, to-1)
		}
	}
}

// perMember counts who processed each of the values from..to-1.
func perMember(seen map[string]string, from, to int) map[string]int {
	by := map[string]int{}
	for i := from; i < to; i++ {
		by[seen[strconv.Itoa(i)]]++
	}
	return by
}

// checkOwners checks that each of the values from..to-1 (produced to partition
// value mod 6) was processed by the member the stable group assigns its partition to.
func checkOwners(t *testing.T, cl *kgo.Client, group string, seen map[string]string, from, to int) {
	t.Helper()
	owner := map[int32]string{}
	for _, m := range describeConsumerGroup(t, cl, group).Members {
		for _, tp := range m.Assignment.TopicPartitions {
			for _, p := range tp.Partitions {
				owner[p] = m.ClientID
			}
		}
	}
	for i := from; i < to; i++ {
		if by, want := seen[strconv.Itoa(i)], owner[int32(i%6)]; by != want {
			t.Fatalf("record %d of partition %d processed by %q, its owner is %q (owners %v)", i, i%6, by, want, owner)
		}
	}
}

func describeConsumerGroup(t *testing.T, cl *kgo.Client, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Groups) != 1 {
		t.Fatalf("describe: %d groups", len(resp.Groups))
	}
	return resp.Groups[0]
}

// stableWith reports whether the group is Stable with exactly the named clients as
// members, every partition of the 6 assigned to exactly one of them.
func stableWith(t *testing.T, cl *kgo.Client, group string, clients ...string) bool {
	g := describeConsumerGroup(t, cl, group)
	if g.ErrorCode != 0 || g.State != "Stable" || len(g.Members) != len(clients) {
		return false
	}
	want := map[string]bool{}
	for _, c := range clients {
		want[c] = true
	}
	owned := map[int32]int{}
	for _, m := range g.Members {
		if !want[m.ClientID] || m.MemberEpoch != g.Epoch {
			return false
		}
		for _, tp := range m.Assignment.TopicPartitions {
			for _, p := range tp.Partitions {
				owned[p]++
			}
		}
	}
	for p := int32(0); p < 6; p++ {
		if owned[p] != 1 {
			return false
		}
	}
	return true
}

// TestConsumerGroupProtocolFranzGo runs franz-go consumers on the KIP-848 protocol over
// TCP: one member, a second joining, a third joining and the first leaving; every
// record is processed exactly once across the reassignments, the group is described
// as Kafka 4 describes it, and the committed offsets survive a broker restart.
func TestConsumerGroupProtocolFranzGo(t *testing.T) {
	for _, c := range []struct {
		assignor string
		bal      kgo.GroupBalancer
	}{
		{"uniform", kgo.CooperativeStickyBalancer()}, // franz-go asks for uniform
		{"range", kgo.RangeBalancer()},               // and for range
	} {
		t.Run(c.assignor, func(t *testing.T) { testConsumerGroupProtocolFranzGo(t, c.assignor, kgo.Balancers(c.bal)) })
	}
}

func testConsumerGroupProtocolFranzGo(t *testing.T, assignor string, bal kgo.Opt) {
	tb := startTestBroker(t, testBrokerOptions{Static: map[string]string{
		"group.consumer.heartbeat.interval.ms": "100",
	}})
	const group, topic = "cg-848", "cg-848-topic"
	adm := tb.admin(t)
	mustCreate(t, adm, topic, 6, nil)
	producer := tb.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	obs := tb.client(t)

	recs := make(chan cgRecord, 1024)
	seen := map[string]string{}

	a := startCGConsumer(t, tb, "a", group, topic, recs, bal)
	produceValues(t, producer, topic, 0, 100)
	collect(t, recs, seen, 0, 100)
	eventually(t, 20*time.Second, "a alone and stable", func() bool { return stableWith(t, obs, group, "a") })

	b := startCGConsumer(t, tb, "b", group, topic, recs, bal)
	eventually(t, 20*time.Second, "a and b stable", func() bool { return stableWith(t, obs, group, "a", "b") })
	produceValues(t, producer, topic, 100, 200)
	collect(t, recs, seen, 100, 200)
	checkOwners(t, obs, group, seen, 100, 200)

	c := startCGConsumer(t, tb, "c", group, topic, recs, bal)
	produceValues(t, producer, topic, 200, 250)
	a.close() // leaves while c joins
	produceValues(t, producer, topic, 250, 300)
	collect(t, recs, seen, 200, 300)
	eventually(t, 20*time.Second, "b and c stable", func() bool { return stableWith(t, obs, group, "b", "c") })
	produceValues(t, producer, topic, 300, 400)
	collect(t, recs, seen, 300, 400)

	checkOwners(t, obs, group, seen, 300, 400)

	// ListGroups v5 and DescribeGroups v6 report it as Kafka 4 does.
	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.TypesFilter = []string{"consumer"}
	lresp, err := lreq.RequestWith(testCtx(t), obs)
	if err != nil {
		t.Fatal(err)
	}
	if len(lresp.Groups) != 1 || lresp.Groups[0].Group != group || lresp.Groups[0].GroupType != "consumer" ||
		lresp.Groups[0].ProtocolType != "consumer" || lresp.Groups[0].GroupState != "Stable" {
		t.Fatalf("ListGroups(consumer): %+v", lresp.Groups)
	}
	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.Groups = []string{group}
	dresp, err := dreq.RequestWith(testCtx(t), obs)
	if err != nil {
		t.Fatal(err)
	}
	if g := dresp.Groups[0]; g.ErrorCode != kerr.GroupIDNotFound.Code || g.State != "Dead" {
		t.Fatalf("DescribeGroups of a consumer group: code %d state %q, want GROUP_ID_NOT_FOUND and Dead", g.ErrorCode, g.State)
	}

	b.close()
	c.close()
	eventually(t, 20*time.Second, "the group empty", func() bool {
		g := describeConsumerGroup(t, obs, group)
		return g.ErrorCode == 0 && g.State == "Empty" && len(g.Members) == 0
	})

	// The committed offsets survive a restart: a new member starts after record 399.
	tb.restart()
	producer2 := tb.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceValues(t, producer2, topic, 400, 450)
	d := startCGConsumer(t, tb, "d", group, topic, recs, bal)
	defer d.close()
	collect(t, recs, seen, 400, 450)
	obs2 := tb.client(t)
	eventually(t, 20*time.Second, "d alone and stable", func() bool { return stableWith(t, obs2, group, "d") })
	g := describeConsumerGroup(t, obs2, group)
	if g.AssignorName != assignor {
		t.Fatalf("assignor %q, want %s", g.AssignorName, assignor)
	}
	// Nothing of before the restart came again.
	select {
	case r := <-recs:
		t.Fatalf("record %s (by %s) after every record was consumed", r.value, r.by)
	default:
	}
}

// startClassicConsumer is a franz-go group consumer on the classic protocol
// (JoinGroup/SyncGroup, cooperative-sticky), committing each poll like startCGConsumer.
func startClassicConsumer(t *testing.T, tb *testBroker, name, group, topic string, out chan<- cgRecord) *cgConsumer {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(tb.addr),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.HeartbeatInterval(100*time.Millisecond),
		kgo.ClientID(name),
	)
	if err != nil {
		t.Fatal(err)
	}
	c := &cgConsumer{name: name, cl: cl, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				out <- cgRecord{by: name, value: string(r.Value)}
			})
			if err := cl.CommitUncommittedOffsets(context.Background()); err != nil && err != kgo.ErrClientClosed {
				t.Logf("%s: commit: %v", name, err)
			}
			cl.AllowRebalance()
		}
	}()
	return c
}

// TestConsumerGroupClassicCoexistence: one group id, the classic protocol and the
// consumer protocol in turn, as Kafka 4 lets them: a consumer-protocol member cannot
// join a classic group that has members (GROUP_ID_NOT_FOUND), a classic member cannot
// join a consumer group that has members (INCONSISTENT_GROUP_PROTOCOL: Kafka 4 would
// take it in as a classic member of the consumer group; Samsa does not), and once
// empty the group converts either way keeping its committed offsets (offline
// migration), each record processed once throughout.
func TestConsumerGroupClassicCoexistence(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Static: map[string]string{
		"group.consumer.heartbeat.interval.ms": "100",
		"group.initial.rebalance.delay.ms":     "0",
	}})
	const group, topic = "cg-mixed", "cg-mixed-topic"
	mustCreate(t, tb.admin(t), topic, 6, nil)
	producer := tb.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	obs := tb.client(t)
	recs := make(chan cgRecord, 1024)
	seen := map[string]string{}

	joinHeartbeat := func() *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group, req.MemberID, req.MemberEpoch = group, "raw-member-0000000000", 0
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicNames = []string{topic}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp, err := req.RequestWith(testCtx(t), obs)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	classicJoin := func() *kmsg.JoinGroupResponse {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.ProtocolType = group, "", "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", (&kmsg.ConsumerMemberMetadata{Topics: []string{topic}}).AppendTo(nil)
		req.Protocols = []kmsg.JoinGroupRequestProtocol{p}
		resp, err := req.RequestWith(testCtx(t), obs)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	// 1. Classic.
	a := startClassicConsumer(t, tb, "classic-a", group, topic, recs)
	produceValues(t, producer, topic, 0, 60)
	collect(t, recs, seen, 0, 60)
	if r := joinHeartbeat(); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("ConsumerGroupHeartbeat to a classic group with a member: %v, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(r.ErrorCode))
	}
	a.close()

	// 2. The empty classic group becomes a consumer group and keeps its offsets.
	b := startCGConsumer(t, tb, "consumer-b", group, topic, recs)
	produceValues(t, producer, topic, 60, 120)
	collect(t, recs, seen, 60, 120)
	eventually(t, 20*time.Second, "b alone and stable", func() bool { return stableWith(t, obs, group, "consumer-b") })
	if r := classicJoin(); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("JoinGroup to a consumer group with a member: %v, want INCONSISTENT_GROUP_PROTOCOL", kerr.ErrorForCode(r.ErrorCode))
	}
	lreq := kmsg.NewPtrListGroupsRequest()
	lresp, err := lreq.RequestWith(testCtx(t), obs)
	if err != nil {
		t.Fatal(err)
	}
	if len(lresp.Groups) != 1 || lresp.Groups[0].GroupType != "consumer" {
		t.Fatalf("ListGroups after the migration: %+v", lresp.Groups)
	}
	b.close()

	// 3. And back: the empty consumer group becomes classic, offsets kept.
	c := startClassicConsumer(t, tb, "classic-c", group, topic, recs)
	defer c.close()
	produceValues(t, producer, topic, 120, 180)
	collect(t, recs, seen, 120, 180)
	if n := perMember(seen, 120, 180); n["classic-c"] != 60 {
		t.Fatalf("records 120..179 per member %v, want all by classic-c", n)
	}
	g := describeConsumerGroup(t, obs, group)
	if g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("ConsumerGroupDescribe of the classic group again: %v, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(g.ErrorCode))
	}
	lresp, err = lreq.RequestWith(testCtx(t), obs)
	if err != nil {
		t.Fatal(err)
	}
	if len(lresp.Groups) != 1 || lresp.Groups[0].GroupType != "classic" || lresp.Groups[0].ProtocolType != "consumer" {
		t.Fatalf("ListGroups after migrating back: %+v", lresp.Groups)
	}
}

// TestConsumerGroupConfigKeys: group.consumer.assignors picks the default server
// assignor (Kafka's class names accepted), group.consumer.heartbeat.interval.ms is
// handed to members, and without "consumer" in group.coordinator.rebalance.protocols
// the consumer protocol is refused as by a broker without it.
func TestConsumerGroupConfigKeys(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Static: map[string]string{
		"group.consumer.assignors":             "org.apache.kafka.coordinator.group.assignor.RangeAssignor,uniform",
		"group.consumer.heartbeat.interval.ms": "1234",
	}})
	const topic = "cg-keys"
	mustCreate(t, tb.admin(t), topic, 4, nil)
	cl := tb.client(t)
	join := func(cl *kgo.Client) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group, req.MemberID, req.MemberEpoch = "cg-keys-group", "member-one-0000000000", 0
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicNames = []string{topic}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp, err := req.RequestWith(testCtx(t), cl)
		var ke *kerr.Error
		if errors.As(err, &ke) {
			// kgo's FindCoordinator gave up on a retriable code (__consumer_offsets
			// still being created or loaded): the caller retries.
			resp = kmsg.NewPtrConsumerGroupHeartbeatResponse()
			resp.ErrorCode = ke.Code
			return resp
		}
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var r *kmsg.ConsumerGroupHeartbeatResponse
	eventually(t, 10*time.Second, "__consumer_offsets and its coordinator", func() bool {
		r = join(cl)
		return r.ErrorCode != kerr.CoordinatorLoadInProgress.Code && r.ErrorCode != kerr.CoordinatorNotAvailable.Code && r.ErrorCode != kerr.NotCoordinator.Code
	})
	if r.ErrorCode != 0 || r.HeartbeatIntervalMillis != 1234 || r.MemberEpoch != 1 || r.Assignment == nil ||
		len(r.Assignment.Topics) != 1 || len(r.Assignment.Topics[0].Partitions) != 4 {
		t.Fatalf("join: %+v", r)
	}
	if g := describeConsumerGroup(t, cl, "cg-keys-group"); g.AssignorName != "range" {
		t.Fatalf("assignor %q, want range (the first of group.consumer.assignors)", g.AssignorName)
	}

	// With the protocol off, ApiVersions does not advertise 68 and 69 (as Kafka 4), and
	// a client that sends one anyway is answered UNSUPPORTED_VERSION.
	off := startTestBroker(t, testBrokerOptions{Static: map[string]string{"group.coordinator.rebalance.protocols": "classic"}})
	for _, key := range []int16{consumerGroupHeartbeatKey, consumerGroupDescribeKey} {
		if slices.ContainsFunc(off.b.features().advertised, func(e apiKeyEntry) bool { return e.ApiKey == key }) {
			t.Errorf("ApiVersions lists %d with the consumer protocol off", key)
		}
		if !slices.ContainsFunc(tb.b.features().advertised, func(e apiKeyEntry) bool { return e.ApiKey == key }) {
			t.Errorf("ApiVersions does not list %d with the consumer protocol on", key)
		}
	}
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch = "cg-keys-group", "member-one-0000000000", 0
	req.RebalanceTimeoutMillis = 30000
	req.SubscribedTopicNames = []string{topic}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if resp := off.raw(t).roundTrip(req).(*kmsg.ConsumerGroupHeartbeatResponse); resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("consumer protocol disabled: %v, want UNSUPPORTED_VERSION", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// TestConsumerGroupRegexFranzGo: a franz-go consumer on the consumer protocol
// subscribes with a regular expression, which the broker resolves
// (SubscribedTopicRegex): a topic created after the member joined, and matching, is
// assigned to it; a topic that does not match is not.
func TestConsumerGroupRegexFranzGo(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Static: map[string]string{
		"group.consumer.heartbeat.interval.ms": "100",
	}})
	adm := tb.admin(t)
	mustCreate(t, adm, "re-orders", 2, nil)
	mustCreate(t, adm, "other", 1, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.addr),
		kgo.ConsumerGroup("cg-regex"), kgo.ConsumeRegex(), kgo.ConsumeTopics("re-.*"), kgo.ServerSideBalancer(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.MetadataMinAge(50*time.Millisecond), kgo.MetadataMaxAge(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	producer := tb.client(t)
	got := make(chan string, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) { got <- r.Topic + "/" + string(r.Value) })
		}
	}()
	defer func() { cl.Close(); <-done }()
	want := func(vals ...string) {
		t.Helper()
		timeout := time.NewTimer(20 * time.Second)
		defer timeout.Stop()
		need := map[string]bool{}
		for _, v := range vals {
			need[v] = true
		}
		for len(need) > 0 {
			select {
			case v := <-got:
				if !need[v] {
					t.Fatalf("consumed %s, want only %v", v, vals)
				}
				delete(need, v)
			case <-timeout.C:
				t.Fatalf("not consumed: %v", need)
			}
		}
	}
	produce := func(topic, v string) {
		t.Helper()
		if err := producer.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce("re-orders", "1")
	produce("other", "x")
	want("re-orders/1")
	mustCreate(t, adm, "re-payments", 3, nil)
	produce("re-payments", "2")
	want("re-payments/2")
	g := describeConsumerGroup(t, producer, "cg-regex")
	// franz-go matches anywhere in a name and so sends ".*(?:(?:re-.*)).*" (the broker
	// matches whole names, as Kafka).
	if len(g.Members) != 1 || g.Members[0].SubscribedTopicRegex == nil || *g.Members[0].SubscribedTopicRegex != ".*(?:(?:re-.*)).*" {
		t.Fatalf("described: %+v", g)
	}
	n := 0
	for _, tp := range g.Members[0].Assignment.TopicPartitions {
		if tp.Topic != "re-orders" && tp.Topic != "re-payments" {
			t.Fatalf("assigned %s", tp.Topic)
		}
		n += len(tp.Partitions)
	}
	if n != 5 {
		t.Fatalf("%d partitions assigned, want 5: %+v", n, g.Members[0].Assignment)
	}
}

// TestConsumerGroupStaticFranzGo: static members (group.instance.id) on the consumer
// protocol: a static member that stops leaves for now (member epoch -2), and the one
// that starts again with its instance id takes its place and its partitions back
// without a new group epoch (no reassignment of the others).
func TestConsumerGroupStaticFranzGo(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Static: map[string]string{
		"group.consumer.heartbeat.interval.ms": "100",
	}})
	const group, topic = "cg-static", "cg-static-topic"
	mustCreate(t, tb.admin(t), topic, 6, nil)
	obs := tb.client(t)
	recs := make(chan cgRecord, 1024)
	// Closed after the consumers stopped (deferred later, run earlier); the records are
	// not checked here.
	defer close(recs)
	go func() {
		for range recs {
		}
	}()
	byInstance := func() (map[string][]int32, int32) {
		g := describeConsumerGroup(t, obs, group)
		out := map[string][]int32{}
		for _, m := range g.Members {
			if m.InstanceID == nil {
				t.Fatalf("member %s without its instance id", m.MemberID)
			}
			for _, tp := range m.Assignment.TopicPartitions {
				out[*m.InstanceID] = append(out[*m.InstanceID], tp.Partitions...)
			}
		}
		return out, g.Epoch
	}
	a := startCGConsumer(t, tb, "sa", group, topic, recs, kgo.InstanceID("inst-a"))
	b := startCGConsumer(t, tb, "sb", group, topic, recs, kgo.InstanceID("inst-b"))
	defer b.close()
	eventually(t, 20*time.Second, "a and b stable", func() bool { return stableWith(t, obs, group, "sa", "sb") })
	before, epoch := byInstance()
	a.close()
	a2 := startCGConsumer(t, tb, "sa", group, topic, recs, kgo.InstanceID("inst-a"))
	defer a2.close()
	eventually(t, 20*time.Second, "a's instance back and stable", func() bool {
		if !stableWith(t, obs, group, "sa", "sb") {
			return false
		}
		d := describeConsumerGroup(t, obs, group)
		for _, m := range d.Members {
			if m.MemberEpoch < 0 {
				return false
			}
		}
		return true
	})
	after, epoch2 := byInstance()
	if epoch2 != epoch || !slices.Equal(after["inst-a"], before["inst-a"]) || !slices.Equal(after["inst-b"], before["inst-b"]) {
		t.Fatalf("before: epoch %d %v; after the static member came back: epoch %d %v", epoch, before, epoch2, after)
	}
}

// TestConsumerGroupMemberDies: a member that stops heartbeating (a crashed consumer,
// driven here with raw requests) is fenced after group.consumer.session.timeout.ms and
// its partitions go to the franz-go consumer that stays, which then consumes them.
func TestConsumerGroupMemberDies(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Static: map[string]string{
		"group.consumer.heartbeat.interval.ms": "100",
		"group.consumer.session.timeout.ms":    "1000",
	}})
	const group, topic = "cg-dies", "cg-dies-topic"
	mustCreate(t, tb.admin(t), topic, 6, nil)
	obs := tb.client(t)
	join := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	join.Version = 1
	join.Group, join.MemberID, join.MemberEpoch = group, "doomed-member-000000000", 0
	join.RebalanceTimeoutMillis = 30000
	join.SubscribedTopicNames = []string{topic}
	join.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	var r *kmsg.ConsumerGroupHeartbeatResponse
	eventually(t, 10*time.Second, "the doomed member's join", func() bool {
		var err error
		r, err = join.RequestWith(testCtx(t), obs)
		if err != nil {
			t.Fatal(err)
		}
		return r.ErrorCode != kerr.CoordinatorLoadInProgress.Code && r.ErrorCode != kerr.NotCoordinator.Code
	})
	if r.ErrorCode != 0 || r.Assignment == nil || len(r.Assignment.Topics[0].Partitions) != 6 {
		t.Fatalf("join: %+v", r)
	}
	// It never heartbeats again. A franz-go consumer joins and, once the doomed member
	// is fenced, owns everything and reads every partition.
	recs := make(chan cgRecord, 1024)
	producer := tb.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceValues(t, producer, topic, 0, 60)
	s := startCGConsumer(t, tb, "survivor", group, topic, recs)
	defer s.close()
	seen := map[string]string{}
	collect(t, recs, seen, 0, 60)
	eventually(t, 20*time.Second, "the survivor alone and stable", func() bool { return stableWith(t, obs, group, "survivor") })
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version = 1
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = group, join.MemberID, r.MemberEpoch, -1
	if r2, err := hb.RequestWith(testCtx(t), obs); err != nil || r2.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("the fenced member's heartbeat: %v %+v, want UNKNOWN_MEMBER_ID", err, r2)
	}
}
