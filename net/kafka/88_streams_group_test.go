package kafka

import (
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// streamsMember plays a Kafka Streams client on the streams rebalance protocol with raw
// StreamsGroupHeartbeat requests (there is no Java here): it joins with its topology,
// heartbeats with the tasks it owns, and takes the tasks it is given, giving up at once
// those it is no longer given.
type streamsMember struct {
	t        *testing.T
	send     func(kmsg.Request) (kmsg.Response, error)
	group    string
	id       string
	process  string
	topology *kmsg.StreamsGroupHeartbeatRequestTopology
	epoch    int32
	active   []int32 // of subtopology "0"
	standby  []int32
	endpoint int32
	statuses []int8 // of the last answer
}

// rawSender sends over a raw connection (franz-go's client does not know key 88).
func rawSender(rc *rawConn) func(kmsg.Request) (kmsg.Response, error) {
	return func(req kmsg.Request) (kmsg.Response, error) { return rc.roundTrip(req), nil }
}

// coordinatorConn asks the broker at addr for group's coordinator until one is named
// (other than not, when not is not -1) and connects to it.
func coordinatorConn(t *testing.T, addr, group string, not int32) (*rawConn, int32) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	rc := &rawConn{t: t, c: conn}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKey = 3, group
	var coord string
	var node int32
	eventually(t, 30*time.Second, "a coordinator for "+group, func() bool {
		r := rc.roundTrip(fc).(*kmsg.FindCoordinatorResponse)
		coord, node = net.JoinHostPort(r.Host, strconv.Itoa(int(r.Port))), r.NodeID
		return r.ErrorCode == 0 && r.NodeID != not
	})
	cconn, err := net.Dial("tcp", coord)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cconn.Close() })
	cconn.SetDeadline(time.Now().Add(120 * time.Second))
	return &rawConn{t: t, c: cconn}, node
}

// wordCountTopology is one stateful subtopology reading topic in, with the changelog
// of its store.
func wordCountTopology(in, changelog string) *kmsg.StreamsGroupHeartbeatRequestTopology {
	t := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	s := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	s.SubtopologyID = "0"
	s.SourceTopics = []string{in}
	c := kmsg.NewTopicInfo()
	c.Topic = changelog
	c.Configs = []kmsg.TopicInfoConfig{{Key: "cleanup.policy", Value: "compact"}}
	s.StateChangelogTopics = []kmsg.TopicInfo{c}
	t.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{s}
	return &t
}

func newStreamsMember(t *testing.T, send func(kmsg.Request) (kmsg.Response, error), group, id, process string, topo *kmsg.StreamsGroupHeartbeatRequestTopology) *streamsMember {
	return &streamsMember{t: t, send: send, group: group, id: id, process: process, topology: topo, endpoint: -1}
}

func (m *streamsMember) request(epoch int32) *kmsg.StreamsGroupHeartbeatRequest {
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch, req.EndpointInformationEpoch = m.group, m.id, epoch, m.endpoint
	ids := func(ps []int32) []kmsg.TaskIDs {
		if len(ps) == 0 {
			return []kmsg.TaskIDs{}
		}
		return []kmsg.TaskIDs{{SubtopologyID: "0", Partitions: slices.Clone(ps)}}
	}
	if epoch == 0 {
		req.RebalanceTimeoutMillis = 30000
		req.Topology = m.topology
		req.ProcessID = kmsg.StringPtr(m.process)
		req.ClientTags = []kmsg.StreamsGroupHeartbeatRequestClientTag{}
		req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
		return req
	}
	req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = ids(m.active), ids(m.standby), []kmsg.TaskIDs{}
	return req
}

// heartbeat sends one heartbeat (retrying while the coordinator loads or moves) and
// takes its answer.
func (m *streamsMember) heartbeat() *kmsg.StreamsGroupHeartbeatResponse {
	m.t.Helper()
	var r *kmsg.StreamsGroupHeartbeatResponse
	eventually(m.t, 20*time.Second, "a coordinator for "+m.group, func() bool {
		resp, err := m.send(m.request(m.epoch))
		if err != nil {
			return false
		}
		r = resp.(*kmsg.StreamsGroupHeartbeatResponse)
		switch r.ErrorCode {
		case kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code:
			return false
		}
		return true
	})
	if r.ErrorCode != 0 {
		m.t.Fatalf("%s: heartbeat: %v %v", m.id, kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	m.epoch, m.endpoint = r.MemberEpoch, r.EndpointInformationEpoch
	m.statuses = m.statuses[:0]
	for _, s := range r.Status {
		m.statuses = append(m.statuses, s.StatusCode)
	}
	if r.ActiveTasks != nil {
		take := func(ts []kmsg.TaskIDs) []int32 {
			var out []int32
			for _, t := range ts {
				out = append(out, t.Partitions...)
			}
			slices.Sort(out)
			return out
		}
		m.active, m.standby = take(r.ActiveTasks), take(r.StandbyTasks)
	}
	return r
}

func (m *streamsMember) leave() {
	m.t.Helper()
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch = m.group, m.id, -1
	resp, err := m.send(req)
	if err != nil || resp.(*kmsg.StreamsGroupHeartbeatResponse).ErrorCode != 0 {
		m.t.Fatalf("%s: leave: %v %+v", m.id, err, resp)
	}
	m.epoch, m.active, m.standby = 0, nil, nil
}

// settleStreams heartbeats the members until every task of want is active on exactly
// one of them and no heartbeat changes anything.
func settleStreams(t *testing.T, want []int32, ms ...*streamsMember) {
	t.Helper()
	eventually(t, 30*time.Second, "the streams group settled", func() bool {
		moved := false
		for _, m := range ms {
			e, a := m.epoch, slices.Clone(m.active)
			m.heartbeat()
			moved = moved || e != m.epoch || !slices.Equal(a, m.active)
		}
		var all []int32
		for _, m := range ms {
			all = append(all, m.active...)
		}
		slices.Sort(all)
		return !moved && slices.Equal(all, want)
	})
}

// TestStreamsGroupTwoClients: two Kafka Streams clients (raw StreamsGroupHeartbeat v1)
// with a topology of one source topic of 4 partitions and a state store: the first
// join finds the changelog missing and the broker creates it (4 partitions, compacted);
// the first member gets the four tasks, the second joins and they end with disjoint
// halves; StreamsGroupDescribe, ListGroups (type "streams") and ApiVersions
// (streams.version) show them; offsets committed by member epoch with OffsetCommit v9
// are fetched back; one leaves and the other gets all four.
func TestStreamsGroupTwoClients(t *testing.T) {
	tb := startTestBroker(t)
	ctx := testCtx(t)
	adm := tb.admin(t)
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, "streams-in"); err != nil {
		t.Fatal(err)
	}
	rc := tb.raw(t)
	topo := wordCountTopology("streams-in", "wordcount-store-changelog")
	a := newStreamsMember(t, rawSender(rc), "wordcount", "member-a", "process-a", topo)
	b := newStreamsMember(t, rawSender(rc), "wordcount", "member-b", "process-b", topo)
	a.heartbeat()
	if !slices.Equal(a.statuses, []int8{3}) { // MISSING_INTERNAL_TOPICS
		t.Fatalf("first join: statuses %v", a.statuses)
	}
	settleStreams(t, []int32{0, 1, 2, 3}, a)
	if ti, ok := tb.image().Topic("wordcount-store-changelog"); !ok || len(ti.Partitions) != 4 {
		t.Fatalf("changelog: %+v %v", ti, ok)
	}
	tc, err := adm.DescribeTopicConfigs(ctx, "wordcount-store-changelog")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := tc.On("wordcount-store-changelog", nil); err != nil || c.Configs == nil {
		t.Fatalf("changelog configs: %v", err)
	} else {
		found := false
		for _, kv := range c.Configs {
			found = found || (kv.Key == "cleanup.policy" && kv.MaybeValue() == "compact")
		}
		if !found {
			t.Fatalf("changelog is not compacted: %+v", c.Configs)
		}
	}
	if len(a.statuses) != 0 {
		t.Fatalf("statuses once ready: %v", a.statuses)
	}

	b.heartbeat()
	settleStreams(t, []int32{0, 1, 2, 3}, a, b)
	if len(a.active) != 2 || len(b.active) != 2 {
		t.Fatalf("tasks: A %v B %v", a.active, b.active)
	}

	dreq := kmsg.NewPtrStreamsGroupDescribeRequest()
	dreq.Version, dreq.Groups, dreq.IncludeAuthorizedOperations = 1, []string{"wordcount"}, true
	dr := rc.roundTrip(dreq).(*kmsg.StreamsGroupDescribeResponse)
	if len(dr.Groups) != 1 {
		t.Fatalf("describe: %+v", dr)
	}
	d := dr.Groups[0]
	if d.ErrorCode != 0 || d.State != "Stable" || d.Epoch != a.epoch || d.AssignmentEpoch != a.epoch || len(d.Members) != 2 ||
		d.Topology == nil || d.Topology.Subtopologies[0].StateChangelogTopics[0].NumPartitions != 4 || d.AssignorName == nil || *d.AssignorName != "sticky" ||
		d.AuthorizedOperations == -2147483648 {
		t.Fatalf("describe: %+v", d)
	}
	for _, dm := range d.Members {
		m := map[string]*streamsMember{"member-a": a, "member-b": b}[dm.MemberID]
		if m == nil || dm.ProcessID != m.process || len(dm.Assignment.ActiveTasks) != 1 || !slices.Equal(dm.Assignment.ActiveTasks[0].Partitions, m.active) {
			t.Fatalf("described member %+v", dm)
		}
	}
	lg, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := lg["wordcount"]; !ok || g.GroupType != "streams" || g.ProtocolType != "streams" || g.State != "Stable" {
		t.Fatalf("ListGroups: %+v", lg)
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version, av.ClientSoftwareName, av.ClientSoftwareVersion = 3, "samsa-test", "1"
	avr := rc.roundTrip(av).(*kmsg.ApiVersionsResponse)
	if !hasFeature(avr, "streams.version", 1) || !advertises(avr, 88) || !advertises(avr, 89) {
		t.Fatalf("ApiVersions: features %+v / %+v", avr.SupportedFeatures, avr.FinalizedFeatures)
	}

	// A commits the offset of its first partition with its member epoch (OffsetCommit v9)
	// and fetches it back with its member epoch.
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version = 9
	commit.Group, commit.MemberID, commit.Generation = "wordcount", a.id, a.epoch
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "streams-in"
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset, cp.LeaderEpoch = a.active[0], 1234, -1
	ct.Partitions = []kmsg.OffsetCommitRequestTopicPartition{cp}
	commit.Topics = []kmsg.OffsetCommitRequestTopic{ct}
	cr := rc.roundTrip(commit).(*kmsg.OffsetCommitResponse)
	if code := cr.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("commit by member epoch: %v (offsets.go must hand streams groups to validateStreamsCommitLocked)", kerr.ErrorForCode(code))
	}
	commit.Generation = a.epoch - 1
	if cr := rc.roundTrip(commit).(*kmsg.OffsetCommitResponse); cr.Topics[0].Partitions[0].ErrorCode != kerr.StaleMemberEpoch.Code {
		t.Fatalf("commit with an old epoch: %v", kerr.ErrorForCode(cr.Topics[0].Partitions[0].ErrorCode))
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 9
	fg := kmsg.NewOffsetFetchRequestGroup()
	fg.Group, fg.MemberID, fg.MemberEpoch = "wordcount", kmsg.StringPtr(a.id), a.epoch
	fg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "streams-in", Partitions: []int32{a.active[0]}}}
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{fg}
	fr := rc.roundTrip(fetch).(*kmsg.OffsetFetchResponse)
	if fr.Groups[0].ErrorCode != 0 || fr.Groups[0].Topics[0].Partitions[0].Offset != 1234 {
		t.Fatalf("fetch by member epoch: %+v", fr.Groups[0])
	}

	b.leave()
	settleStreams(t, []int32{0, 1, 2, 3}, a)
	if len(a.active) != 4 {
		t.Fatalf("A after B left: %v", a.active)
	}
}

func hasFeature(r *kmsg.ApiVersionsResponse, name string, level int16) bool {
	sup, fin := false, false
	for _, f := range r.SupportedFeatures {
		sup = sup || (f.Name == name && f.MaxVersion >= level)
	}
	for _, f := range r.FinalizedFeatures {
		fin = fin || (f.Name == name && f.MaxVersionLevel == level)
	}
	return sup && fin
}

func advertises(r *kmsg.ApiVersionsResponse, key int16) bool {
	for _, k := range r.ApiKeys {
		if k.ApiKey == key {
			return true
		}
	}
	return false
}

// TestStreamsGroupsOff: with group.coordinator.rebalance.protocols without "streams"
// the broker neither advertises the streams APIs nor finalizes streams.version, and
// answers them UNSUPPORTED_VERSION.
func TestStreamsGroupsOff(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Static: map[string]string{"group.coordinator.rebalance.protocols": "classic,consumer"}})
	rc := tb.raw(t)
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version, av.ClientSoftwareName, av.ClientSoftwareVersion = 3, "samsa-test", "1"
	avr := rc.roundTrip(av).(*kmsg.ApiVersionsResponse)
	if advertises(avr, 88) || advertises(avr, 89) || hasFeature(avr, "streams.version", 1) || !advertises(avr, 68) {
		t.Fatalf("ApiVersions: %+v %+v", avr.ApiKeys, avr.FinalizedFeatures)
	}
	m := newStreamsMember(t, nil, "g", "m", "p", wordCountTopology("x", "x-changelog"))
	r := rc.roundTrip(m.request(0)).(*kmsg.StreamsGroupHeartbeatResponse)
	if r.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("heartbeat: %+v", r)
	}
}

// TestStreamsGroupInvalidTopologyTopics: a topology naming an internal topic or an
// invalid topic name is refused before the coordinator, as KafkaApis refuses it.
func TestStreamsGroupInvalidTopologyTopics(t *testing.T) {
	tb := startTestBroker(t)
	rc := tb.raw(t)
	for _, in := range []string{"__consumer_offsets", "bad topic"} {
		m := newStreamsMember(t, nil, "g", "m", "p", wordCountTopology(in, "x-changelog"))
		r := rc.roundTrip(m.request(0)).(*kmsg.StreamsGroupHeartbeatResponse)
		if r.ErrorCode != kerr.StreamsInvalidTopology.Code || r.ErrorMessage == nil {
			t.Fatalf("%q: %+v", in, r)
		}
	}
}

// TestClusterStreamsGroupFollowsLeadership: a streams group on three nodes; its
// coordinator's broker dies; the new leader of the group's __consumer_offsets
// partition loads the group's records: the members keep their ids, epochs and tasks
// and heartbeat on there without a rebalance, and StreamsGroupDescribe shows the group
// as it was.
func TestClusterStreamsGroupFollowsLeadership(t *testing.T) {
	c := startCluster(t, map[string]string{"offsets.topic.num.partitions": "3", "replica.lag.time.max.ms": "30000"})
	ctx := testCtx(t)
	if _, err := kadm.NewClient(clusterClient(t, c)).CreateTopic(ctx, 4, 3, nil, "streams-ha-in"); err != nil {
		t.Fatal(err)
	}
	const groupID = "streams-ha"
	rc, coord := coordinatorConn(t, c.brokers[0].addr, groupID, -1)
	topo := wordCountTopology("streams-ha-in", "streams-ha-store-changelog")
	a := newStreamsMember(t, rawSender(rc), groupID, "member-a", "process-a", topo)
	b := newStreamsMember(t, rawSender(rc), groupID, "member-b", "process-b", topo)
	a.heartbeat()
	b.heartbeat()
	settleStreams(t, []int32{0, 1, 2, 3}, a, b)
	epoch := a.epoch

	var live string
	for _, br := range c.brokers {
		if br.id == coord {
			br.stop()
		} else {
			live = br.addr
		}
	}
	// The new coordinator, named by a live broker once the dead one is fenced.
	crc, _ := coordinatorConn(t, live, groupID, coord)
	a.send, b.send = rawSender(crc), rawSender(crc)
	aTasks, bTasks := slices.Clone(a.active), slices.Clone(b.active)
	a.heartbeat()
	b.heartbeat()
	if a.epoch != epoch || b.epoch != epoch || !slices.Equal(a.active, aTasks) || !slices.Equal(b.active, bTasks) {
		t.Fatalf("after the failover: A epoch %d tasks %v, B epoch %d tasks %v (were %d, %v, %v)", a.epoch, a.active, b.epoch, b.active, epoch, aTasks, bTasks)
	}
	dreq := kmsg.NewPtrStreamsGroupDescribeRequest()
	dreq.Version, dreq.Groups = 1, []string{groupID}
	d := crc.roundTrip(dreq).(*kmsg.StreamsGroupDescribeResponse).Groups[0]
	if d.ErrorCode != 0 || d.State != "Stable" || d.Epoch != epoch || len(d.Members) != 2 {
		t.Fatalf("the group on the new coordinator: %+v", d)
	}
	b.leave()
	settleStreams(t, []int32{0, 1, 2, 3}, a)
}
