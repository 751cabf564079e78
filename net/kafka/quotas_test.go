package kafka

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/samsa-broker/samsa/coordinator/acl"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/auth"
	"github.com/samsa-broker/samsa/net/quota"
)

func strp(s string) *string { return &s }

func quotaEntity(parts ...string) kadm.ClientQuotaEntity {
	var e kadm.ClientQuotaEntity
	for i := 0; i < len(parts); i += 2 {
		c := kadm.ClientQuotaEntityComponent{Type: parts[i]}
		if parts[i+1] != "<default>" {
			c.Name = strp(parts[i+1])
		}
		e = append(e, c)
	}
	return e
}

func alterQuotas(t *testing.T, adm *kadm.Client, entries ...kadm.AlterClientQuotaEntry) kadm.AlteredClientQuotas {
	t.Helper()
	res, err := adm.AlterClientQuotas(context.Background(), entries)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// DescribeClientQuotas and AlterClientQuotas through kadm: entities by name and by
// default, Kafka's filter semantics, invalid entities and keys refused per entity,
// validate-only, removal; the quotas are ClientQuotaRecords in the image.
func TestClientQuotasAdmin(t *testing.T) {
	tb := startTestBroker(t)
	adm := tb.admin(t)
	ctx := context.Background()
	res := alterQuotas(t, adm,
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("user", "alice"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1048576}, {Key: "request_percentage", Value: 25.5}}},
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("user", "<default>", "client-id", "app"), Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 2048}}},
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("client-id", "<default>"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 4096}}},
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("ip", "10.1.2.3"), Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 7}}},
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("ip", "10.0.0.1", "user", "bob"), Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 1}}},
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("user", "carol"), Ops: []kadm.AlterClientQuotaOp{{Key: "bogus_rate", Value: 1}}},
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("user", "dave"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: -5}}},
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("ip", "not-an-address"), Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 1}}},
	)
	for i, r := range res {
		if wantErr := i >= 4; (r.Err != nil) != wantErr {
			t.Errorf("entry %d %v: %v %s", i, r.Entity, r.Err, r.ErrMessage)
		} else if wantErr && r.Err != kerr.InvalidRequest {
			t.Errorf("entry %d %v: %v, want INVALID_REQUEST", i, r.Entity, r.Err)
		}
	}
	q := tb.image().ClientQuotas()
	if q.Len() != 4 || q.Of(metadata.QuotaEntity{User: metadata.QuotaName("alice")})["producer_byte_rate"] != 1048576 {
		t.Fatalf("image quotas: %d entities, alice %v", q.Len(), q.Of(metadata.QuotaEntity{User: metadata.QuotaName("alice")}))
	}

	describe := func(strict bool, comps ...kadm.DescribeClientQuotaComponent) kadm.DescribedClientQuotas {
		t.Helper()
		d, err := adm.DescribeClientQuotas(ctx, strict, comps)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := describe(false); len(d) != 4 {
		t.Fatalf("describe all: %v", d)
	}
	d := describe(false, kadm.DescribeClientQuotaComponent{Type: "user", MatchName: strp("alice"), MatchType: kmsg.QuotasMatchTypeExact})
	if len(d) != 1 || len(d[0].Values) != 2 || d[0].Values[0].Key != "producer_byte_rate" || d[0].Values[1].Value != 25.5 {
		t.Fatalf("describe user=alice: %+v", d)
	}
	// Any user: alice and <default>,app; strict leaves out the one with a client id.
	if d := describe(false, kadm.DescribeClientQuotaComponent{Type: "user", MatchType: kmsg.QuotasMatchTypeAny}); len(d) != 2 {
		t.Fatalf("describe any user: %v", d)
	}
	if d := describe(true, kadm.DescribeClientQuotaComponent{Type: "user", MatchType: kmsg.QuotasMatchTypeAny}); len(d) != 1 || d[0].Entity.String() != "{user=alice}" {
		t.Fatalf("describe any user, strict: %v", d)
	}
	if d := describe(false, kadm.DescribeClientQuotaComponent{Type: "client-id", MatchType: kmsg.QuotasMatchTypeDefault}); len(d) != 1 || d[0].Entity.String() != "{client-id=<default>}" {
		t.Fatalf("describe default client id: %v", d)
	}
	if d := describe(false, kadm.DescribeClientQuotaComponent{Type: "ip", MatchType: kmsg.QuotasMatchTypeAny}); len(d) != 1 || d[0].Values[0].Value != 7 {
		t.Fatalf("describe ips: %v", d)
	}
	// A filter mixing ip with user is INVALID_REQUEST.
	if _, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "ip", MatchType: kmsg.QuotasMatchTypeAny}, {Type: "user", MatchType: kmsg.QuotasMatchTypeAny}}); err == nil {
		t.Fatal("ip with user in a filter was accepted")
	}

	// Validate-only writes nothing; removal drops the key (and the entity with its last key).
	if res, err := adm.ValidateAlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: quotaEntity("user", "erin"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 10}}}}); err != nil || res[0].Err != nil {
		t.Fatalf("validate: %v %+v", err, res)
	}
	alterQuotas(t, adm, kadm.AlterClientQuotaEntry{Entity: quotaEntity("client-id", "<default>"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}}},
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("user", "alice"), Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Remove: true}, {Key: "consumer_byte_rate", Remove: true}}})
	if d := describe(false); len(d) != 3 {
		t.Fatalf("after removal: %v", d)
	}
	if d := describe(false, kadm.DescribeClientQuotaComponent{Type: "user", MatchName: strp("alice"), MatchType: kmsg.QuotasMatchTypeExact}); len(d) != 1 || len(d[0].Values) != 1 {
		t.Fatalf("alice after removal: %v", d)
	}
	if r, ok := quota.IPConnectionRate(tb.image().ClientQuotas(), "10.1.2.3"); !ok || r != 7 {
		t.Fatal("ip quota not seen by the connection limiter")
	}
}

// throttleHook counts the throttle times a kgo client was given.
type throttleHook struct {
	n     atomic.Int64
	total atomic.Int64 // ms
}

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.n.Add(1)
		h.total.Add(d.Milliseconds())
	}
}

// A producer over its producer_byte_rate is answered with throttle_time_ms (kgo's
// hook sees it) and held to about its quota; a producer with another client id is
// not throttled. A consumer over its consumer_byte_rate likewise.
func TestClientQuotasThrottle(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Static: map[string]string{"quota.window.num": "2", "quota.window.size.seconds": "1"}})
	adm := tb.admin(t)
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "quota"); err != nil {
		t.Fatal(err)
	}
	const rate = 100_000
	alterQuotas(t, adm,
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("client-id", "slow"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: rate}}},
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("user", "<default>", "client-id", "slow-consumer"), Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: rate}}})

	const total = 200_000
	value := make([]byte, 10_000)
	for i := range value { // incompressible: kgo compresses batches
		value[i] = byte(rand.Uint32())
	}
	produce := func(clientID string) (*throttleHook, time.Duration) {
		var h throttleHook
		cl := tb.client(t, kgo.ClientID(clientID), kgo.WithHooks(&h), kgo.DefaultProduceTopic("quota"))
		start := time.Now()
		for range total / len(value) {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		return &h, time.Since(start)
	}
	fast, _ := produce("fast")
	if fast.n.Load() != 0 {
		t.Fatalf("a client without a quota was throttled %d times", fast.n.Load())
	}
	slow, took := produce("slow")
	if slow.n.Load() == 0 {
		t.Fatal("a producer over producer_byte_rate saw no throttle time")
	}
	// The rate bound, with a wide margin: the first ~rate bytes pass at once (the
	// window is at least one second), the rest at about the quota; three times the
	// quota is far above what the throttling lets through.
	if achieved := float64(total) / took.Seconds(); achieved > 3*rate {
		t.Fatalf("throttled producer achieved %.0f B/s against a quota of %d B/s", achieved, rate)
	}

	consume := func(clientID string) (*throttleHook, time.Duration) {
		var h throttleHook
		cl := tb.client(t, kgo.ClientID(clientID), kgo.WithHooks(&h), kgo.ConsumeTopics("quota"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(20_000), kgo.FetchMaxBytes(20_000))
		start := time.Now()
		n := 0
		for n < total/len(value) {
			fs := cl.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatal(err)
			}
			n += fs.NumRecords()
		}
		return &h, time.Since(start)
	}
	h, took := consume("slow-consumer")
	t.Logf("throttled: producer %d times (%d ms), consumer %d times (%d ms)", slow.n.Load(), slow.total.Load(), h.n.Load(), h.total.Load())
	if h.n.Load() == 0 {
		t.Fatal("a consumer over consumer_byte_rate saw no throttle time")
	}
	if achieved := float64(total) / took.Seconds(); achieved > 3*rate {
		t.Fatalf("throttled consumer achieved %.0f B/s against a quota of %d B/s", achieved, rate)
	}
}

// Requests over socket.request.max.bytes (2 GiB, 100 MiB + 1, a negative size) are
// refused by closing the connection before anything is read or allocated, and the
// broker keeps serving. Before SASL authentication the bound is
// sasl.server.max.receive.size; an authenticated client sends larger requests.
func TestRequestSizeBounds(t *testing.T) {
	tb := startTestBroker(t)
	for _, prefix := range [][]byte{{0x7f, 0xff, 0xff, 0xff}, {0x06, 0x40, 0x00, 0x01}, {0x80, 0, 0, 0}} {
		rc := tb.raw(t)
		rc.write(prefix)
		rc.expectClosed()
	}
	av := kmsg.NewPtrApiVersionsRequest()
	if r := tb.raw(t).roundTrip(av).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}

	tb.setScram(t, "alice", "alice-secret")
	_, addr := tb.secureListenerL(t, auth.SASLPlaintext, testCA{}, acl.New(acl.Config{SuperUsers: []string{"User:alice"}}))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	pre := &rawConn{t: t, c: c}
	pre.write([]byte{0x00, 0x08, 0x00, 0x01}) // 524289 bytes claimed, none sent
	pre.expectClosed()

	var d net.Dialer
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
		kgo.DefaultProduceTopic("big"), kgo.AllowAutoTopicCreation(), kgo.ProducerBatchMaxBytes(2<<20),
		kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			if host == tb.addr {
				host = addr
			}
			return d.DialContext(ctx, network, host)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	big := bytes.Repeat([]byte{'b'}, 600<<10)
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: big}).FirstErr(); err != nil {
		t.Fatalf("a 600 KiB produce after authentication: %v", err)
	}
}

// A client that ignores throttle_time_ms (raw produce requests pipelined without
// waiting) is held back by the broker itself: each throttled answer mutes the
// connection, so its next request is read only after the throttle time, and the
// achieved rate stays near the quota.
func TestClientQuotasMuteHoldsBackIgnoringClient(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Static: map[string]string{"quota.window.num": "2", "quota.window.size.seconds": "1"}})
	adm := tb.admin(t)
	if _, err := adm.CreateTopic(context.Background(), 1, 1, nil, "mute"); err != nil {
		t.Fatal(err)
	}
	const rate = 100_000
	alterQuotas(t, adm, kadm.AlterClientQuotaEntry{Entity: quotaEntity("client-id", "raw-test"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: rate}}})
	rc := tb.raw(t)
	rc.c.SetDeadline(time.Now().Add(30 * time.Second))
	const n = 25
	req := produceReq("mute", 1, appendBatch(nil, batchSpec{pid: -1, n: 1, valueBytes: 10_000}))
	req.SetVersion(9)
	var frames []byte
	for i := range n {
		frames = append(frames, kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-test")).AppendRequest(nil, req, int32(i+1))...)
	}
	start := time.Now()
	go rc.c.Write(frames) // every request at once; the broker's muting paces the reads
	throttled := 0
	for i := range n {
		resp := rc.recv(req, int32(i+1)).(*kmsg.ProduceResponse)
		if resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
		}
		if resp.ThrottleMillis > 0 {
			throttled++
		}
	}
	took := time.Since(start)
	if throttled == 0 {
		t.Fatal("no answer carried a throttle time")
	}
	if achieved := float64(len(frames)) / took.Seconds(); achieved > 3*rate {
		t.Fatalf("a client ignoring throttle times achieved %.0f B/s against a quota of %d B/s", achieved, rate)
	}
}

// heapAndStacks is the memory the runtime holds for the heap and goroutine stacks,
// after a collection.
func heapAndStacks() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

// A flood of half-open connections on a SASL listener (a size prefix claiming the
// whole pre-authentication bound and three bytes of it, then nothing) costs a bounded
// amount per connection, transport and session state together, and an authenticated
// client is served meanwhile.
func TestHalfOpenFloodBeforeAuthentication(t *testing.T) {
	tb := startTestBroker(t)
	tb.setScram(t, "alice", "alice-secret")
	l, addr := tb.secureListenerL(t, auth.SASLPlaintext, testCA{}, acl.New(acl.Config{SuperUsers: []string{"User:alice"}}))
	const n = 200
	before := heapAndStacks()
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.Write([]byte{0x00, 0x08, 0x00, 0x00, 1, 2, 3}) // 524288 bytes claimed: at the bound
	}
	var d net.Dialer
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
		kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			if host == tb.addr {
				host = addr
			}
			return d.DialContext(ctx, network, host)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Ping(context.Background()); err != nil {
		t.Fatalf("an authenticated client beside the flood: %v", err)
	}
	// Every flood connection has been read by now or soon: wait until the listener
	// holds them all, then measure. 160 KiB each is far below the 512 KiB claimed.
	eventually(t, 10*time.Second, "the flood to be accepted", func() bool {
		return l.sessions.Conns() >= n
	})
	after := heapAndStacks()
	t.Logf("%d half-open connections: %d KiB of heap and stacks", n, (int64(after)-int64(before))>>10)
	if after > before && after-before > n*160<<10 {
		t.Fatalf("%d half-open connections grew heap and stacks by %d KiB (%d KiB each)", n, (after-before)>>10, (after-before)/n>>10)
	}
}

// request_percentage (KIP-124): once a client has used more handler time than its
// share, its next request's answer carries a throttle time (and its connection is
// muted); another client id is not throttled, and ApiVersions is exempt.
func TestClientQuotasRequestPercentage(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Static: map[string]string{"quota.window.num": "2", "quota.window.size.seconds": "1"}})
	adm := tb.admin(t)
	// 0.0001% of a second is 1 µs: the first request uses more than that.
	alterQuotas(t, adm, kadm.AlterClientQuotaEntry{Entity: quotaEntity("client-id", "raw-test"), Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 0.0001}}})
	rc := tb.raw(t)
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(12)
	if r := rc.roundTrip(md).(*kmsg.MetadataResponse); r.ThrottleMillis != 0 {
		t.Fatalf("first request throttled %d ms", r.ThrottleMillis)
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	if r := rc.roundTrip(av).(*kmsg.ApiVersionsResponse); r.ThrottleMillis != 0 {
		t.Fatalf("ApiVersions throttled %d ms", r.ThrottleMillis)
	}
	if r := rc.roundTrip(md).(*kmsg.MetadataResponse); r.ThrottleMillis <= 0 {
		t.Fatal("a client over request_percentage got no throttle time")
	}
	// Another client id on its own connection: no quota, no throttle.
	c, err := net.Dial("tcp", tb.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	other := &rawConn{t: t, c: c}
	other.write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("other")).AppendRequest(nil, md, 1))
	if r := other.recv(md, 1).(*kmsg.MetadataResponse); r.ThrottleMillis != 0 {
		t.Fatalf("a client without a quota throttled %d ms", r.ThrottleMillis)
	}
}

// A user over its consumer_byte_rate is answered as Kafka answers (KafkaApis): each
// fetch carries at most quota × (samples − 1) × window bytes; the fetch that puts the
// user over the quota gets throttle_time_ms and no partitions, its incremental
// session's id kept; after the throttle time the records come again. Over SASL_SSL
// with kgo (kmsg requests), the user's SCRAM principal naming the quota.
func TestClientQuotasThrottledFetchEmpty(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Static: map[string]string{"quota.window.num": "2", "quota.window.size.seconds": "1"}})
	adm := tb.admin(t)
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "tf"); err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 500)
	for i := range value {
		value[i] = byte(rand.Uint32())
	}
	pr := tb.client(t, kgo.DefaultProduceTopic("tf"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	const records = 10
	for range records { // one batch each
		if err := pr.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	const rate = 2000 // bytes/s: a fetch may carry 2000 × (2 − 1) × 1 s
	alterQuotas(t, adm, kadm.AlterClientQuotaEntry{Entity: quotaEntity("user", "alice"), Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: rate}}})
	tb.setScram(t, "alice", "alice-secret")
	ca := newTestCA(t)
	addr := tb.secureListener(t, auth.SASLSSL, ca, acl.New(acl.Config{SuperUsers: []string{"User:alice"}}))
	cl := tb.secureClient(t, addr, ca, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())
	ti, ok := tb.image().Topic("tf")
	if !ok {
		t.Fatal("no topic tf")
	}
	topicID := ti.ID

	var sessionID, epoch int32
	offset := int64(0)
	fetch := func() (*kmsg.FetchResponse, int) {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(13)
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 1, 1<<20
		req.SessionID, req.SessionEpoch = sessionID, epoch
		p := kmsg.NewFetchRequestTopicPartition() // the session's partition, at the next offset
		p.Partition, p.FetchOffset, p.PartitionMaxBytes, p.CurrentLeaderEpoch, p.LastFetchedEpoch = 0, offset, 1<<20, -1, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID, rt.Partitions = topicID, []kmsg.FetchRequestTopicPartition{p}
		req.Topics = []kmsg.FetchRequestTopic{rt}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(resp.ErrorCode))
		}
		size, n := 0, 0
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				if p.ErrorCode != 0 {
					t.Fatal(kerr.ErrorForCode(p.ErrorCode))
				}
				size += len(p.RecordBatches)
				fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: "tf", Partition: 0, Offset: offset}, &p, kgo.DefaultDecompressor(), nil)
				n += len(fp.Records)
				if len(fp.Records) > 0 {
					offset = fp.Records[len(fp.Records)-1].Offset + 1
				}
			}
		}
		if size > rate {
			t.Fatalf("a fetch carried %d record bytes, above the quota window's %d", size, rate)
		}
		return resp, n
	}

	resp, n := fetch() // opens a session; within the quota
	if n == 0 || resp.ThrottleMillis != 0 || resp.SessionID == 0 {
		t.Fatalf("first fetch: %d records, throttle %d ms, session %d", n, resp.ThrottleMillis, resp.SessionID)
	}
	sessionID, epoch = resp.SessionID, 1
	got := n
	throttled := 0
	deadline := time.Now().Add(20 * time.Second)
	for got < records {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d records after %d throttled fetches", got, records, throttled)
		}
		resp, n := fetch()
		epoch++
		if resp.SessionID != sessionID {
			t.Fatalf("incremental fetch answered session %d, want %d", resp.SessionID, sessionID)
		}
		if resp.ThrottleMillis > 0 {
			throttled++
			if len(resp.Topics) != 0 || n != 0 {
				t.Fatalf("a throttled fetch (%d ms) carried %d topics, %d records", resp.ThrottleMillis, len(resp.Topics), n)
			}
			continue
		}
		got += n
	}
	if throttled == 0 {
		t.Fatal("no fetch was throttled")
	}
	t.Logf("%d throttled fetches", throttled)
}

// controller_mutation_rate (KIP-599) through kgo's kmsg requests: a default client-id
// quota of 1 partition a second (a bucket of 1 × 2 × 1 s = 2) gives each client id its
// own bucket. A request is accepted while the bucket is not in debt, so a 10-partition
// topic is created and the next topic of the same request (or the next request, the
// debt of 8 taking 8 s to repay) is THROTTLING_QUOTA_EXCEEDED with a throttle time;
// CreatePartitions v3 and DeleteTopics v5 likewise; CreateTopics v5 is accepted and
// only throttled; another client id is not affected.
func TestClientQuotasControllerMutationRate(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Static: map[string]string{"quota.window.num": "2", "quota.window.size.seconds": "1"}})
	ctx := context.Background()
	alterQuotas(t, tb.admin(t), kadm.AlterClientQuotaEntry{Entity: quotaEntity("client-id", "<default>"),
		Ops: []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Value: 1}}})
	throttled := kerr.ThrottlingQuotaExceeded.Code

	createReq := func(partitions ...int32) *kmsg.CreateTopicsRequest {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 10_000
		for i, p := range partitions {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "m"+strconv.Itoa(int(rand.Uint32()))+"-"+strconv.Itoa(i), p, 1
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	codes := func(resp *kmsg.CreateTopicsResponse) map[string]int16 {
		m := map[string]int16{}
		for _, rt := range resp.Topics {
			m[rt.Topic] = rt.ErrorCode
		}
		return m
	}

	// One request: the first topic takes the full bucket into debt, the second is refused.
	c1 := tb.client(t, kgo.ClientID("c1"))
	req := createReq(10, 1)
	resp, err := req.RequestWith(ctx, c1)
	if err != nil {
		t.Fatal(err)
	}
	got := codes(resp)
	if got[req.Topics[0].Topic] != 0 || got[req.Topics[1].Topic] != throttled || resp.ThrottleMillis <= 0 {
		t.Fatalf("CreateTopics v%d [10, 1] partitions: %v, throttle %d ms", resp.Version, got, resp.ThrottleMillis)
	}
	if _, ok := tb.image().Topic(req.Topics[1].Topic); ok {
		t.Fatal("a throttled topic was created")
	}
	big := req.Topics[0].Topic

	// A second client id has a bucket of its own; a large request passes whole, the
	// next one is refused.
	c2 := tb.client(t, kgo.ClientID("c2"))
	req = createReq(10)
	if resp, err = req.RequestWith(ctx, c2); err != nil || resp.Topics[0].ErrorCode != 0 || resp.ThrottleMillis != 0 {
		t.Fatalf("CreateTopics of another client id: %v %+v", err, resp)
	}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.TimeoutMillis = 10_000
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = big, 11
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{cpt}
	cpResp, err := cp.RequestWith(ctx, c2)
	if err != nil {
		t.Fatal(err)
	}
	if cpResp.Version < 3 || cpResp.Topics[0].ErrorCode != throttled || cpResp.ThrottleMillis <= 0 {
		t.Fatalf("CreatePartitions v%d in debt: %+v", cpResp.Version, cpResp.Topics)
	}

	// DeleteTopics v5+: the 10 partitions of big pass a full bucket, the next is refused.
	c3 := tb.client(t, kgo.ClientID("c3"))
	del := func(topic string) *kmsg.DeleteTopicsResponse {
		d := kmsg.NewPtrDeleteTopicsRequest()
		d.TimeoutMillis = 10_000
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic = &topic
		d.Topics, d.TopicNames = []kmsg.DeleteTopicsRequestTopic{dt}, []string{topic}
		resp, err := d.RequestWith(ctx, c3)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if dr := del(big); dr.Topics[0].ErrorCode != 0 {
		t.Fatalf("DeleteTopics with a full bucket: %v", kerr.ErrorForCode(dr.Topics[0].ErrorCode))
	}
	if dr := del(resp.Topics[0].Topic); dr.Version < 5 || dr.Topics[0].ErrorCode != throttled || dr.ThrottleMillis <= 0 {
		t.Fatalf("DeleteTopics v%d in debt: %+v", dr.Version, dr.Topics)
	}
	if _, ok := tb.image().Topic(resp.Topics[0].Topic); !ok {
		t.Fatal("a throttled delete deleted its topic")
	}

	// Before v6 CreateTopics is not refused: the answer carries the throttle time.
	old := kversion.Stable()
	old.SetMaxKeyVersion(19, 5)
	c4 := tb.client(t, kgo.ClientID("c4"), kgo.MaxVersions(old))
	req = createReq(10, 1)
	if resp, err = req.RequestWith(ctx, c4); err != nil {
		t.Fatal(err)
	}
	got = codes(resp)
	if resp.Version != 5 || got[req.Topics[0].Topic] != 0 || got[req.Topics[1].Topic] != 0 || resp.ThrottleMillis <= 0 {
		t.Fatalf("CreateTopics v%d [10, 1] partitions: %v, throttle %d ms", resp.Version, got, resp.ThrottleMillis)
	}
}
