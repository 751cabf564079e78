package kafka

import (
	"bytes"
	"context"
	"net"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/samsa-broker/samsa/coordinator/acl"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/auth"
	"github.com/samsa-broker/samsa/net/request"
)

// allTopicsRequest is a Metadata request for every topic at version v.
func allTopicsRequest(v int16) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(v)
	if v == 0 {
		req.Topics = []kmsg.MetadataRequestTopic{} // v0: an empty list is every topic
	}
	return req
}

func topicNames(resp *kmsg.MetadataResponse) []string {
	var out []string
	for _, t := range resp.Topics {
		if t.Topic != nil {
			out = append(out, *t.Topic)
		}
	}
	return out
}

// TestMetadataCacheServesAndInvalidates: all-topics answers over TCP at every version
// are the same cached and uncached, keep their correlation ids (pipelined on one
// connection), and a topic created in between shows in the next answer.
func TestMetadataCacheServesAndInvalidates(t *testing.T) {
	tb := startTestBroker(t)
	adm := tb.admin(t)
	mustCreate(t, adm, "first", 3, nil)
	rc := tb.raw(t)
	c := tb.b.mdCache

	for v := int16(0); v <= 13; v++ {
		req := allTopicsRequest(v)
		c.disabled.Store(true)
		uncached := rc.roundTrip(req).(*kmsg.MetadataResponse)
		c.disabled.Store(false)
		// Three requests in flight at once on the connection: the first fills the
		// entry, the others are served from it; each carries its own correlation id
		// (recv checks it).
		corrs := []int32{rc.send(req), rc.send(req), rc.send(req)}
		for _, corr := range corrs {
			got := rc.recv(req, corr).(*kmsg.MetadataResponse)
			if !reflect.DeepEqual(got, uncached) {
				t.Fatalf("v%d: cached answer\n%+v\nuncached\n%+v", v, got, uncached)
			}
		}
		if names := topicNames(uncached); len(names) != 1 || names[0] != "first" {
			t.Fatalf("v%d: topics %v", v, names)
		}
	}
	if n := c.size(); n != maxMetadataEntries {
		t.Fatalf("%d entries after 14 versions, want the bound %d", n, maxMetadataEntries)
	}

	// A real client: twice from the cache, then a new topic invalidates it.
	cl := tb.client(t)
	ctx := testCtx(t)
	for range 2 {
		md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil || len(md.Topics) != 1 {
			t.Fatalf("metadata: %v %v", err, md)
		}
	}
	mustCreate(t, adm, "second", 2, nil)
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	names := topicNames(md)
	if len(names) != 2 || !bytes.Contains([]byte(names[0]+names[1]), []byte("second")) {
		t.Fatalf("after creating second: %v", names)
	}
	for _, mt := range md.Topics {
		if *mt.Topic == "second" && len(mt.Partitions) != 2 {
			t.Fatalf("second: %d partitions", len(mt.Partitions))
		}
	}

	// Many connections at once after the change: all get the same answer.
	mustCreate(t, adm, "third", 1, nil)
	req := allTopicsRequest(12)
	var wg sync.WaitGroup
	answers := make([]*kmsg.MetadataResponse, 6)
	conns := make([]*rawConn, len(answers))
	for i := range conns {
		conns[i] = tb.raw(t)
	}
	for i := range answers {
		wg.Go(func() {
			rc := conns[i]
			if a, err := rc.readAfterSend(req); err == nil {
				answers[i] = a
			}
		})
	}
	wg.Wait()
	for i, a := range answers {
		if a == nil || len(a.Topics) != 3 || !reflect.DeepEqual(a, answers[0]) {
			t.Fatalf("connection %d: %+v", i, a)
		}
	}
}

// readAfterSend sends req and reads its answer without failing the test (for use
// off the test goroutine); a wrong correlation id is an error.
func (rc *rawConn) readAfterSend(req kmsg.Request) (*kmsg.MetadataResponse, error) {
	rc.corr++
	if _, err := rc.c.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-test")).AppendRequest(nil, req, rc.corr)); err != nil {
		return nil, err
	}
	b, err := rc.readFrame()
	if err != nil {
		return nil, err
	}
	if len(b) < 5 || int32(uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3])) != rc.corr || b[4] != 0 {
		return nil, net.UnknownNetworkError("bad response header")
	}
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(req.GetVersion())
	return resp, resp.ReadFrom(b[5:])
}

// TestMetadataCacheThrottleAndHeader: a cached body framed for a request is the bytes
// the uncached path encodes, for every version, with and without a throttle time.
func TestMetadataCacheThrottleAndHeader(t *testing.T) {
	name := "t"
	for v := int16(0); v <= 13; v++ {
		for _, throttle := range []int32{0, 1234} {
			resp := kmsg.NewPtrMetadataResponse()
			resp.SetVersion(v)
			resp.Topics = []kmsg.MetadataResponseTopic{{Topic: &name, Partitions: []kmsg.MetadataResponseTopicPartition{{Leader: 1}}}}
			body := resp.AppendTo(nil)
			h := Header{Key: 3, Version: v, CorrelationID: 77, Flexible: v >= 9}
			if throttle > 0 {
				resp.SetThrottle(throttle)
			}
			want := request.Encode(&h, resp)
			got := cachedMetadataResponse(&h, body, throttle)
			var w, g []byte
			for _, ch := range want.Chunks {
				w = append(w, ch.Bytes...)
			}
			for _, ch := range got.Chunks {
				g = append(g, ch.Bytes...)
			}
			want.Release.Release()
			got.Release.Release()
			if !bytes.Equal(g, w) {
				t.Fatalf("v%d throttle %d:\n got %x\nwant %x", v, throttle, g, w)
			}
		}
	}
}

// TestMetadataCacheListenersAndPrincipals: answers are not shared across listeners
// (each advertises its own endpoints) nor with a principal whose topics the authorizer
// filters; a super user's answer is cached and stays whole after a filtered one.
func TestMetadataCacheListenersAndPrincipals(t *testing.T) {
	tb := startTestBroker(t)
	ca := newTestCA(t)
	tb.setScram(t, "admin", "admin-secret")
	tb.setScram(t, "alice", "alice-secret")
	adm := tb.admin(t)
	mustCreate(t, adm, "granted", 1, nil)
	mustCreate(t, adm, "refused", 1, nil)
	az := acl.New(acl.Config{SuperUsers: []string{"User:admin"}})
	addr := tb.secureListener(t, auth.SASLPlaintext, ca, az)
	ctx := testCtx(t)
	sasl := func(user, pass string) *kgo.Client {
		dial := func(ctx context.Context, network, host string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr) // every broker is this listener
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.Dialer(dial), kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	plainCl, admin, alice := tb.client(t), sasl("admin", "admin-secret"), sasl("alice", "alice-secret")
	acls := kmsgACL("User:alice", "granted")
	if cr, err := acls.RequestWith(ctx, admin); err != nil || cr.Results[0].ErrorCode != 0 {
		t.Fatalf("creating the ACL: %v %+v", err, cr)
	}
	eventually(t, 10*time.Second, "the ACL in the image", func() bool { return len(tb.image().ACLs().All()) == 1 })

	// A second broker that advertises a different endpoint per listener (the image
	// alone: no controller writes after this point).
	off, im := tb.b.Image()
	next, err := im.Apply(&metadata.RegisterBrokerRecord{ID: 2, Epoch: im.MaxBrokerEpoch() + 1, Endpoints: []metadata.Endpoint{
		{Name: "PLAINTEXT", Host: "127.0.0.2", Port: 19092, SecurityProtocol: metadata.ProtocolPlaintext},
		{Name: auth.SASLPlaintext.String(), Host: "127.0.0.3", Port: 29092, SecurityProtocol: metadata.ProtocolSASLPlaintext},
	}})
	if err != nil {
		t.Fatal(err)
	}
	tb.a.MetadataChanged(off+1, im, next)

	broker2 := func(md *kmsg.MetadataResponse) string {
		for _, b := range md.Brokers {
			if b.NodeID == 2 {
				return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
			}
		}
		return ""
	}
	ask := func(cl *kgo.Client, topicOps bool) *kmsg.MetadataResponse {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.IncludeTopicAuthorizedOperations = topicOps
		resp, err := cl.SeedBrokers()[0].Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.MetadataResponse)
	}

	for range 2 {
		md := ask(plainCl, false)
		if got := broker2(md); got != "127.0.0.2:19092" || len(md.Topics) != 2 {
			t.Fatalf("plaintext listener: broker 2 at %q, topics %v", got, topicNames(md))
		}
		md = ask(admin, false)
		if got := broker2(md); got != "127.0.0.3:29092" || len(md.Topics) != 2 {
			t.Fatalf("SASL listener, super user: broker 2 at %q, topics %v", got, topicNames(md))
		}
		md = ask(alice, false)
		if got := broker2(md); got != "127.0.0.3:29092" || len(md.Topics) != 1 || *md.Topics[0].Topic != "granted" {
			t.Fatalf("SASL listener, alice: broker 2 at %q, topics %v", got, topicNames(md))
		}
	}
	if n := tb.b.mdCache.size(); n != 2 {
		t.Fatalf("%d cache entries, want 2 (one per listener; alice's answers uncached)", n)
	}
	// Authorized operations are per principal: never from the cache.
	md := ask(admin, true)
	if len(md.Topics) != 2 || md.Topics[0].AuthorizedOperations == authorizedOpsUnknown {
		t.Fatalf("super user's topic operations: %+v", md.Topics)
	}
	md = ask(alice, true)
	if len(md.Topics) != 1 || md.Topics[0].AuthorizedOperations == authorizedOpsUnknown {
		t.Fatalf("alice's topic operations: %+v", md.Topics)
	}
	if n := tb.b.mdCache.size(); n != 2 {
		t.Fatalf("%d cache entries after authorized-operations requests, want 2", n)
	}
}

// kmsgACL allows principal to read and describe topic.
func kmsgACL(principal, topic string) *kmsg.CreateACLsRequest {
	req := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, topic, kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = principal, "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	req.Creations = append(req.Creations, c)
	return req
}

// TestMetadataCacheEntries: one entry per key and image, none for an image older than
// the cache's, all dropped by a newer image, at most maxMetadataEntries.
func TestMetadataCacheEntries(t *testing.T) {
	c := newMetadataCache()
	im5, im6 := new(metadata.Image), new(metadata.Image) // compared by identity only
	k := metadataKey{version: 12}
	e, fill := c.entry(5, im5, k)
	if e == nil || !fill {
		t.Fatalf("first request: %v %v", e, fill)
	}
	if again, fill := c.entry(5, im5, k); again != e || fill {
		t.Fatalf("second request: a new entry (%v) or asked to fill (%v)", again != e, fill)
	}
	if old, _ := c.entry(4, im6, k); old != nil {
		t.Fatal("an entry for an image older than the cache's")
	}
	if e6, fill := c.entry(6, im6, k); e6 == e || !fill || c.size() != 1 {
		t.Fatalf("newer image: reused %v, fill %v, %d entries", e6 == e, fill, c.size())
	}
	var first *metadataEntry
	for v := range int16(maxMetadataEntries + 1) {
		e, _ := c.entry(6, im6, metadataKey{version: v, listener: "L"})
		if v == 0 {
			first = e
		}
	}
	if c.size() != maxMetadataEntries {
		t.Fatalf("%d entries, want %d", c.size(), maxMetadataEntries)
	}
	if e, fill := c.entry(6, im6, metadataKey{version: 0, listener: "L"}); e == first || !fill {
		t.Fatal("the oldest entry was not the one dropped")
	}
}
