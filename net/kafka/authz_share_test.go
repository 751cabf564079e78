package kafka

import (
	"context"
	"net"
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

// Share-group APIs as User:ANONYMOUS under ACLs: READ on the group is needed for
// ShareGroupHeartbeat and ShareFetch (GROUP_AUTHORIZATION_FAILED otherwise), READ on
// each topic for its partitions (TOPIC_AUTHORIZATION_FAILED for the others).
func TestAuthzShareGroups(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Static: shareStatic(), Sync: engine.SyncNone})
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
	if _, err := admin.CreateTopics(ctx, 1, 1, nil, "readable", "secret"); err != nil {
		t.Fatal(err)
	}
	for _, b := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:ANONYMOUS").Groups("sg-ok").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Allow("User:ANONYMOUS").Topics("readable").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral),
	} {
		if res, err := admin.CreateACLs(ctx, b); err != nil || res[0].Err != nil {
			t.Fatalf("create ACL: %v %+v", err, res)
		}
	}
	c, err := net.Dial("tcp", userAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	rc := &rawConn{t: t, c: c}
	im := tb.image()
	readable, _ := im.Topic("readable")
	secret, _ := im.Topic("secret")

	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.Version, hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = 1, "sg-no", "m", []string{"readable"}
	if r := rc.roundTrip(hb).(*kmsg.ShareGroupHeartbeatResponse); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("heartbeat without READ on the group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	fetch := func(group string) *kmsg.ShareFetchResponse {
		req := kmsg.NewPtrShareFetchRequest()
		member := "m"
		req.Version, req.GroupID, req.MemberID, req.MaxBytes, req.MaxRecords = 1, &group, &member, 1<<20, 10
		req.Topics = []kmsg.ShareFetchRequestTopic{
			{TopicID: [16]byte(readable.ID), Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}},
			{TopicID: [16]byte(secret.ID), Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}},
		}
		return rc.roundTrip(req).(*kmsg.ShareFetchResponse)
	}
	if r := fetch("sg-no"); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("share fetch without READ on the group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	r := fetch("sg-ok")
	if r.ErrorCode != 0 {
		t.Fatalf("share fetch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	codes := map[[16]byte]int16{}
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			codes[rt.TopicID] = rp.ErrorCode
		}
	}
	if codes[[16]byte(secret.ID)] != kerr.TopicAuthorizationFailed.Code || codes[[16]byte(readable.ID)] != 0 {
		t.Fatalf("share fetch codes by topic: %v", codes)
	}
}
