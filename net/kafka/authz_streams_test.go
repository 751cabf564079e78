package kafka

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/acl"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/net/auth"
)

// Streams-group APIs as User:ANONYMOUS under ACLs, as Kafka's KafkaApis checks them:
// READ on the group and DESCRIBE on every topic of the topology for
// StreamsGroupHeartbeat; internal topics created only with CREATE (on the cluster or
// the topic), else named in the MISSING_INTERNAL_TOPICS status; DESCRIBE on the group
// for StreamsGroupDescribe, with the authorized operations from the ACLs.
func TestAuthzStreamsGroups(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Sync: engine.SyncNone})
	ctx := testCtx(t)
	superAddr := tb.secureListener(t, auth.Plaintext, testCA{}, acl.New(acl.Config{SuperUsers: []string{"User:ANONYMOUS"}}))
	userAddr := tb.secureListener(t, auth.Plaintext, testCA{}, acl.New(acl.Config{}))
	superCl, err := kgo.NewClient(kgo.SeedBrokers(superAddr), kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, superAddr)
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer superCl.Close()
	admin := kadm.NewClient(superCl)
	if _, err := admin.CreateTopics(ctx, 2, 1, nil, "readable", "secret"); err != nil {
		t.Fatal(err)
	}
	allow := func(b *kadm.ACLBuilder) {
		t.Helper()
		if res, err := admin.CreateACLs(ctx, b.ResourcePatternType(kadm.ACLPatternLiteral)); err != nil || res[0].Err != nil {
			t.Fatalf("create ACL: %v %+v", err, res)
		}
	}
	allow(kadm.NewACLs().Allow("User:ANONYMOUS").Groups("sg-ok").Operations(kadm.OpRead))
	allow(kadm.NewACLs().Allow("User:ANONYMOUS").Topics("readable", "readable-store-changelog").Operations(kadm.OpDescribe))
	c, err := net.Dial("tcp", userAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	rc := &rawConn{t: t, c: c}

	hb := func(group, in string) *kmsg.StreamsGroupHeartbeatResponse {
		m := newStreamsMember(t, nil, group, "m-"+in, "p", wordCountTopology(in, in+"-store-changelog"))
		return rc.roundTrip(m.request(0)).(*kmsg.StreamsGroupHeartbeatResponse)
	}
	if r := hb("sg-no", "readable"); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("heartbeat without READ on the group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := hb("sg-ok", "secret"); r.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("heartbeat naming a topic it may not describe: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	m := newStreamsMember(t, rawSender(rc), "sg-ok", "member", "p", wordCountTopology("readable", "readable-store-changelog"))
	m.heartbeat()
	r := rc.roundTrip(m.request(m.epoch)).(*kmsg.StreamsGroupHeartbeatResponse)
	if len(r.Status) != 1 || r.Status[0].StatusCode != 3 || !strings.Contains(r.Status[0].StatusDetail, "Unauthorized to CREATE on topics readable-store-changelog") {
		t.Fatalf("without CREATE: %+v", r.Status)
	}
	// CREATE on the topic: the next heartbeat has it created.
	allow(kadm.NewACLs().Allow("User:ANONYMOUS").Topics("readable-store-changelog").Operations(kadm.OpCreate))
	eventually(t, 20*time.Second, "the changelog created", func() bool {
		m.heartbeat()
		_, ok := tb.image().Topic("readable-store-changelog")
		return ok && len(m.active) == 2
	})

	// DESCRIBE on the group (READ implies it, as in Kafka); the authorized operations
	// are those the ACLs grant.
	d := kmsg.NewPtrStreamsGroupDescribeRequest()
	d.Version, d.Groups, d.IncludeAuthorizedOperations = 1, []string{"sg-no", "sg-ok"}, true
	gs := rc.roundTrip(d).(*kmsg.StreamsGroupDescribeResponse).Groups
	if gs[0].Group != "sg-no" || gs[0].ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("describe without DESCRIBE on the group: %+v", gs[0])
	}
	const read, describe, del = 1 << 3, 1 << 8, 1 << 6
	if g := gs[1]; g.ErrorCode != 0 || g.State != "Stable" || g.AuthorizedOperations&(read|describe) != read|describe || g.AuthorizedOperations&del != 0 {
		t.Fatalf("describe: %+v", g)
	}
}
