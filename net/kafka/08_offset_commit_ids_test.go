package kafka

import (
	"context"
	"encoding/binary"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

// The newest versions of the group offset APIs, with real clients over TCP:
// OffsetCommit v10 and OffsetFetch v10 (topics by id), TxnOffsetCommit v6
// (28_txn_offset_commit_test.go) and DeleteGroups v3 (42_delete_groups_test.go).

// versionsSent records the key and version of every request a kgo client writes. Its
// dial is the client's kgo.Dialer: the connections it returns read each request's
// header off the bytes written (kgo's hooks see the key, not the version).
type versionsSent struct {
	mu  sync.Mutex
	max map[int16]int16 // key -> highest version written
}

func (v *versionsSent) dial(ctx context.Context, network, host string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return &headerConn{Conn: c, v: v}, nil
}

func (v *versionsSent) add(key, version int16) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.max == nil {
		v.max = map[int16]int16{}
	}
	if have, ok := v.max[key]; !ok || version > have {
		v.max[key] = version
	}
}

// highest is the highest version of key written, -1 if none.
func (v *versionsSent) highest(key int16) int16 {
	v.mu.Lock()
	defer v.mu.Unlock()
	if have, ok := v.max[key]; ok {
		return have
	}
	return -1
}

// check fails unless each key of want was written at the version want gives, and none
// higher.
func (v *versionsSent) check(t *testing.T, want map[int16]int16) {
	t.Helper()
	for key, version := range want {
		if got := v.highest(key); got != version {
			t.Errorf("key %d: the client's highest version is %d, want %d", key, got, version)
		}
	}
}

// headerConn is a client connection that reports the header of each request frame it
// writes (size, key, version, ...) to v.
type headerConn struct {
	net.Conn
	v   *versionsSent
	mu  sync.Mutex
	buf []byte // written bytes of the frame not yet whole
}

func (c *headerConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = append(c.buf, b[:n]...)
	for len(c.buf) >= 8 {
		size := int(binary.BigEndian.Uint32(c.buf))
		if len(c.buf) < 4+size {
			break
		}
		c.v.add(int16(binary.BigEndian.Uint16(c.buf[4:])), int16(binary.BigEndian.Uint16(c.buf[6:])))
		c.buf = c.buf[4+size:]
	}
	return n, err
}

// TestGroupOffsetsNewestVersionsKgo: a kgo consumer group commits and fetches its
// offsets with OffsetCommit v10 and OffsetFetch v10 (topics by id), and kadm commits,
// fetches and deletes groups with OffsetCommit v10, OffsetFetch v10 and DeleteGroups
// v3, whose answer to a group with members carries Kafka's message.
func TestGroupOffsetsNewestVersionsKgo(t *testing.T) {
	tb := groupTestBroker(t, engine.SyncNone)
	mustCreate(t, tb.admin(t), "ids", 2, nil)
	prod := tb.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceSync(t, prod, "ids", 0, "a", 5)
	produceSync(t, prod, "ids", 1, "b", 3)
	ctx := testCtx(t)

	var sent versionsSent
	consumer := func() *kgo.Client {
		return tb.client(t, kgo.Dialer(sent.dial), kgo.ConsumerGroup("ids-g"), kgo.ConsumeTopics("ids"),
			kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	}
	cl := consumer()
	read := 0
	for read < 8 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consuming: %d of 8", read)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consuming: %v", err) })
		read += len(fs.Records())
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("committing: %v", err)
	}

	// kadm's DeleteGroups v3: the group has a member.
	var admSent versionsSent
	adm := kadm.NewClient(tb.client(t, kgo.Dialer(admSent.dial)))
	del, err := adm.DeleteGroups(ctx, "ids-g")
	if err != nil {
		t.Fatal(err)
	}
	if d := del["ids-g"]; d.Err != kerr.NonEmptyGroup || d.ErrMessage != "The group is not empty." {
		t.Fatalf("deleting a group with a member: %v %q", d.Err, d.ErrMessage)
	}
	cl.Close() // leaves the group

	// Another member of the group starts at the committed offsets (OffsetFetch v10).
	cl = consumer()
	var assigned map[string]map[int32]kgo.EpochOffset
	eventually(t, 15*time.Second, "the second member's committed offsets", func() bool {
		pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		cl.PollFetches(pctx) // joins, fetches the offsets
		cancel()
		assigned = cl.CommittedOffsets()
		return len(assigned["ids"]) == 2
	})
	if assigned["ids"][0].Offset != 5 || assigned["ids"][1].Offset != 3 {
		t.Fatalf("committed offsets of the group: %+v", assigned)
	}
	cl.Close()
	sent.check(t, map[int16]int16{8: 10, 9: 10})

	// kadm: commit, fetch (named and all) and delete.
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "ids", Partition: 0, At: 2, LeaderEpoch: -1, Metadata: "m"})
	os.Add(kadm.Offset{Topic: "ids", Partition: 1, At: 1, LeaderEpoch: -1})
	committed, err := adm.CommitOffsets(ctx, "adm-g", os)
	if err != nil || committed.Error() != nil {
		t.Fatalf("kadm commit: %v %v", err, committed.Error())
	}
	fetched, err := adm.FetchOffsets(ctx, "adm-g")
	if err != nil || fetched.Error() != nil {
		t.Fatalf("kadm fetch: %v %v", err, fetched.Error())
	}
	if o, ok := fetched.Lookup("ids", 0); !ok || o.At != 2 || o.Metadata != "m" {
		t.Fatalf("kadm fetch of all offsets: %+v", fetched)
	}
	named, err := adm.FetchOffsetsForTopics(ctx, "adm-g", "ids")
	if err != nil || named.Error() != nil {
		t.Fatalf("kadm fetch for topics: %v %v", err, named.Error())
	}
	if o, ok := named.Lookup("ids", 1); !ok || o.At != 1 {
		t.Fatalf("kadm fetch of ids: %+v", named)
	}
	del, err = adm.DeleteGroups(ctx, "adm-g", "ids-g", "no-such-group")
	if err != nil {
		t.Fatal(err)
	}
	for g, want := range map[string]error{"adm-g": nil, "ids-g": nil, "no-such-group": kerr.GroupIDNotFound} {
		if d := del[g]; d.Err != want {
			t.Errorf("deleting %s: %v, want %v", g, d.Err, want)
		}
	}
	if d := del["no-such-group"]; d.ErrMessage != "The group id does not exist." {
		t.Errorf("deleting a group that does not exist: message %q", d.ErrMessage)
	}
	if d := del["adm-g"]; d.ErrMessage != "" {
		t.Errorf("a deleted group has a message: %q", d.ErrMessage)
	}
	if after, err := adm.FetchOffsets(ctx, "adm-g"); err != nil || len(after) != 0 {
		t.Fatalf("the deleted group's offsets: %+v %v", after, err)
	}
	admSent.check(t, map[int16]int16{8: 10, 9: 10, 42: 3})
}

// commitByID commits offset to partition p of the topic with id for the simple group
// group with OffsetCommit v10, retrying while the coordinator loads, and returns the
// codes of each partition of the answer, topic by topic, after checking the answer
// names the topics by the ids the request did.
func commitByID(t *testing.T, rc *rawConn, group string, topics ...kmsg.OffsetCommitRequestTopic) [][]int16 {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation, req.Topics = 10, group, -1, topics
	var resp *kmsg.OffsetCommitResponse
	eventually(t, 10*time.Second, "the group coordinator", func() bool {
		resp = rc.roundTrip(req).(*kmsg.OffsetCommitResponse)
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				if p.ErrorCode == kerr.CoordinatorLoadInProgress.Code || p.ErrorCode == kerr.CoordinatorNotAvailable.Code {
					return false
				}
			}
		}
		return true
	})
	if len(resp.Topics) != len(topics) {
		t.Fatalf("answer of %d topics to %d: %+v", len(resp.Topics), len(topics), resp)
	}
	codes := make([][]int16, len(resp.Topics))
	for i, rt := range resp.Topics {
		if rt.TopicID != topics[i].TopicID || len(rt.Partitions) != len(topics[i].Partitions) {
			t.Fatalf("answer topic %d: %+v, asked %+v", i, rt, topics[i])
		}
		for _, p := range rt.Partitions {
			codes[i] = append(codes[i], p.ErrorCode)
		}
	}
	return codes
}

func commitTopic(id [16]byte, offset int64, partitions ...int32) kmsg.OffsetCommitRequestTopic {
	t := kmsg.OffsetCommitRequestTopic{TopicID: id}
	for _, p := range partitions {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, offset
		t.Partitions = append(t.Partitions, rp)
	}
	return t
}

// fetchByID fetches the offsets of group with OffsetFetch v10 for topics (nil: all).
func fetchByID(t *testing.T, rc *rawConn, group string, topics []kmsg.OffsetFetchRequestGroupTopic) kmsg.OffsetFetchResponseGroup {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 10
	req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group, Topics: topics, MemberEpoch: -1}}
	resp := rc.roundTrip(req).(*kmsg.OffsetFetchResponse)
	if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("OffsetFetch v10: %+v", resp)
	}
	return resp.Groups[0]
}

// TestOffsetCommitFetchByTopicID: OffsetCommit v10 and OffsetFetch v10 by hand. An id
// the broker does not know, the zero id among them, answers UNKNOWN_TOPIC_ID for each
// of its partitions (offset -1 for a fetch, after the known topics), a known one
// commits and fetches under the topic, an unknown partition of it is
// UNKNOWN_TOPIC_OR_PARTITION; the answers name topics by id. After the topic is deleted
// and re-created under the same name, its old id is unknown: a commit by it never
// reaches the new topic.
func TestOffsetCommitFetchByTopicID(t *testing.T) {
	tb := groupTestBroker(t, engine.SyncNone)
	adm := tb.admin(t)
	ctx := testCtx(t)
	mustCreate(t, adm, "known", 2, nil)
	id := topicID(t, tb, "known")
	unknown := [16]byte{0xde, 0xad, 0xbe, 0xef}
	rc := tb.raw(t)

	got := commitByID(t, rc, "g", commitTopic(unknown, 1, 0), commitTopic([16]byte{}, 1, 0), commitTopic(id, 5, 0, 9))
	want := [][]int16{{kerr.UnknownTopicID.Code}, {kerr.UnknownTopicID.Code}, {0, kerr.UnknownTopicOrPartition.Code}}
	if !equalCodes(got, want) {
		t.Fatalf("OffsetCommit v10: %v, want %v", got, want)
	}

	g := fetchByID(t, rc, "g", []kmsg.OffsetFetchRequestGroupTopic{
		{TopicID: unknown, Partitions: []int32{0}},
		{TopicID: id, Partitions: []int32{0, 1}},
	})
	if len(g.Topics) != 2 {
		t.Fatalf("OffsetFetch v10 topics: %+v", g.Topics)
	}
	if k := g.Topics[0]; k.TopicID != id || len(k.Partitions) != 2 ||
		k.Partitions[0].Offset != 5 || k.Partitions[0].ErrorCode != 0 ||
		k.Partitions[1].Offset != -1 || k.Partitions[1].ErrorCode != 0 {
		t.Fatalf("OffsetFetch v10 of the known id: %+v", k)
	}
	if u := g.Topics[1]; u.TopicID != unknown || len(u.Partitions) != 1 ||
		u.Partitions[0].Offset != -1 || u.Partitions[0].LeaderEpoch != -1 || u.Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("OffsetFetch v10 of an unknown id: %+v", u)
	}
	all := fetchByID(t, rc, "g", nil)
	if len(all.Topics) != 1 || all.Topics[0].TopicID != id || len(all.Topics[0].Partitions) != 1 || all.Topics[0].Partitions[0].Offset != 5 {
		t.Fatalf("OffsetFetch v10 of all offsets: %+v", all.Topics)
	}

	// Delete the topic, re-create it under the same name.
	if _, err := adm.DeleteTopics(ctx, "known"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the topic's deletion in the image", func() bool {
		_, ok := tb.meta.Image().Topic("known")
		return !ok
	})
	if all := fetchByID(t, rc, "g", nil); len(all.Topics) != 0 {
		t.Fatalf("OffsetFetch v10 of all offsets lists a deleted topic: %+v", all.Topics)
	}
	mustCreate(t, adm, "known", 2, nil)
	eventually(t, 10*time.Second, "the re-created topic in the image", func() bool {
		_, ok := tb.meta.Image().Topic("known")
		return ok
	})
	newID := topicID(t, tb, "known")
	if newID == id {
		t.Fatal("the re-created topic has the old id")
	}
	got = commitByID(t, rc, "g", commitTopic(id, 99, 0, 1))
	if want := [][]int16{{kerr.UnknownTopicID.Code, kerr.UnknownTopicID.Code}}; !equalCodes(got, want) {
		t.Fatalf("OffsetCommit v10 by the deleted topic's id: %v, want %v", got, want)
	}
	g = fetchByID(t, rc, "g", []kmsg.OffsetFetchRequestGroupTopic{{TopicID: id, Partitions: []int32{0}}, {TopicID: newID, Partitions: []int32{0, 1}}})
	if len(g.Topics) != 2 || g.Topics[1].TopicID != id || g.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("OffsetFetch v10 by the deleted topic's id: %+v", g.Topics)
	}
	for _, p := range g.Topics[0].Partitions {
		if g.Topics[0].TopicID != newID || p.Offset == 99 {
			t.Fatalf("the commit by the old id reached the re-created topic: %+v", g.Topics[0])
		}
	}
	if got := commitByID(t, rc, "g", commitTopic(newID, 7, 1)); !equalCodes(got, [][]int16{{0}}) {
		t.Fatalf("OffsetCommit v10 by the re-created topic's id: %v", got)
	}
	g = fetchByID(t, rc, "g", []kmsg.OffsetFetchRequestGroupTopic{{TopicID: newID, Partitions: []int32{1}}})
	if len(g.Topics) != 1 || g.Topics[0].TopicID != newID || g.Topics[0].Partitions[0].Offset != 7 {
		t.Fatalf("OffsetFetch v10 by the re-created topic's id: %+v", g.Topics)
	}
}

func equalCodes(a, b [][]int16) bool {
	return slices.EqualFunc(a, b, slices.Equal)
}
