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

// TestAuthzEveryServedAPIHasARule: a request of a served API from a principal that is
// not a super user is decided by its rule, or by clusterRow when its row names only the
// cluster; an API with neither has the connection closed (fail closed), which a
// client meets as a hang and a timeout (TxnOffsetCommit did: send_offsets_to_transaction
// failed after 60 s). Every API of the broker's table must have one or the other.
func TestAuthzEveryServedAPIHasARule(t *testing.T) {
	for key := int16(0); key <= maxAPIKey; key++ {
		if brokerAPIs.lookup(key) == nil {
			continue
		}
		row, ok := acl.Lookup(key)
		if !ok {
			t.Errorf("api %d (%s) is served but has no row in acl.APIs", key, apiName(key))
			continue
		}
		if row.None {
			continue
		}
		if _, ok := authzRules[key]; ok {
			continue
		}
		clusterOnly := true
		for _, q := range row.Requirements {
			if q.Scope != acl.ScopeCluster || q.When != acl.Always {
				clusterOnly = false
			}
		}
		if !clusterOnly && len(row.Requirements) > 0 {
			t.Errorf("api %d (%s) is served, its row names more than the cluster, and it has no authorisation rule: every request of a principal that is not a super user would close its connection", key, apiName(key))
		}
	}
}

// TestAuthzTxnOffsetCommit: a transactional producer that is not a super user commits
// its consumer's offsets in its transaction (send_offsets_to_transaction: TxnOffsetCommit
// v5, which under transaction version 2 also adds the group's partition): WRITE on the
// transactional id, READ on the group and READ on each topic, refused per partition with
// Kafka's codes, and the connection stays open (it was closed: TxnOffsetCommit had a row
// in acl.APIs but no rule).
func TestAuthzTxnOffsetCommit(t *testing.T) {
	tb := startTestBroker(t, testBrokerOptions{Static: txnV2Static(), Sync: engine.SyncNone})
	ctx := testCtx(t)
	superAddr := tb.secureListener(t, auth.Plaintext, testCA{}, acl.New(acl.Config{SuperUsers: []string{"User:ANONYMOUS"}}))
	userAddr := tb.secureListener(t, auth.Plaintext, testCA{}, acl.New(acl.Config{}))
	superCl, err := kgo.NewClient(kgo.SeedBrokers(superAddr), kgo.Dialer(func(ctx context.Context, network, _ string) (net.Conn, error) {
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
		kadm.NewACLs().Allow("User:ANONYMOUS").TransactionalIDs("tx-ok").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Allow("User:ANONYMOUS").Groups("g-ok").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral),
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
	c.SetDeadline(time.Now().Add(60 * time.Second))
	rc := &rawConn{t: t, c: c}

	eventually(t, 30*time.Second, "the coordinator of tx-ok", func() bool {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorType, req.CoordinatorKeys = 4, 1, []string{"tx-ok"}
		r := rc.roundTrip(req).(*kmsg.FindCoordinatorResponse)
		return len(r.Coordinators) == 1 && r.Coordinators[0].ErrorCode == 0
	})
	var init *kmsg.InitProducerIDResponse
	eventually(t, 30*time.Second, "InitProducerId of tx-ok", func() bool {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version, req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = 5, kmsg.StringPtr("tx-ok"), 60000, -1, -1
		init = rc.roundTrip(req).(*kmsg.InitProducerIDResponse)
		return init.ErrorCode == 0
	})
	commit := func(id, group string) map[string]int16 {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.Version, req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = 5, id, group, init.ProducerID, init.ProducerEpoch, -1
		for _, topic := range []string{"readable", "secret"} {
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = 0, 1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		resp := rc.roundTrip(req).(*kmsg.TxnOffsetCommitResponse)
		out := map[string]int16{}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				out[rt.Topic] = rp.ErrorCode
			}
		}
		return out
	}
	var got map[string]int16
	eventually(t, 30*time.Second, "the readable topic's offset committed in the transaction", func() bool {
		got = commit("tx-ok", "g-ok")
		return got["readable"] == 0
	})
	if got["secret"] != kerr.TopicAuthorizationFailed.Code || len(got) != 2 {
		t.Fatalf("READ on one topic only: %v", got)
	}
	if got := commit("tx-ok", "g-no"); got["readable"] != kerr.GroupAuthorizationFailed.Code || got["secret"] != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("no READ on the group: %v", got)
	}
	if got := commit("tx-no", "g-ok"); got["readable"] != kerr.TransactionalIDAuthorizationFailed.Code || got["secret"] != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("no WRITE on the transactional id: %v", got)
	}
	// The same connection ends the transaction: it was never closed.
	end := kmsg.NewPtrEndTxnRequest()
	end.Version, end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = 5, "tx-ok", init.ProducerID, init.ProducerEpoch, true
	if r := rc.roundTrip(end).(*kmsg.EndTxnResponse); r.ErrorCode != 0 {
		t.Fatalf("EndTxn: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	offs, err := admin.FetchOffsets(ctx, "g-ok")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("readable", 0); !ok || o.At != 1 {
		t.Fatalf("the committed transaction's offset: %+v", offs)
	}
}
