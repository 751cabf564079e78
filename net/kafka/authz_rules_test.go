package kafka

import (
	"context"
	"fmt"
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
	"github.com/samsa-broker/samsa/net/authz"
	"github.com/samsa-broker/samsa/net/controllerapi"
)

// TestAuthzEveryServedAPIHasARule: each API is described once, by its registration,
// which names its authorisation rule (API.Authz), and its row in acl.APIs; they must
// agree. A request of a served API from a principal that is not a super user is
// decided by its rule, or by its row alone when the row names only the cluster
// (authz.RowAlone); an API with neither has the connection closed (fail closed),
// which a client meets as a hang and a timeout (TxnOffsetCommit did:
// send_offsets_to_transaction failed after 60 s). So: every served API has a row;
// every API whose row names more than the cluster has a rule; no API has a rule
// without a row, or with a row that says no authorisation applies. The controller
// listener applies the broker table's rules: its own registrations carry none, and
// every API it serves to clients has the broker's rule or a cluster-only row.
func TestAuthzEveryServedAPIHasARule(t *testing.T) {
	for _, api := range brokerAPIs.served() {
		row, ok := acl.Lookup(api.Key)
		switch {
		case !ok:
			t.Errorf("api %d (%s) is served but has no row in acl.APIs", api.Key, apiName(api.Key))
		case row.None && api.Authz != nil:
			t.Errorf("api %d (%s) names an authorisation rule, but its row says no authorisation applies", api.Key, apiName(api.Key))
		case api.Authz == nil && !authz.RowAlone(row):
			t.Errorf("api %d (%s) is served, its row names more than the cluster, and it has no authorisation rule: every request of a principal that is not a super user would close its connection", api.Key, apiName(api.Key))
		}
	}
	for _, api := range controllerTable().served() {
		row, ok := acl.Lookup(api.Key)
		switch {
		case !ok:
			t.Errorf("api %d (%s) is served by the controller listener but has no row in acl.APIs", api.Key, apiName(api.Key))
			continue
		case api.Authz != nil:
			t.Errorf("api %d (%s): the controller table's registration names a rule; the controller listener applies the broker table's", api.Key, apiName(api.Key))
		}
		if controllerapi.NodeAPI(api.Key) || authz.RowAlone(row) {
			continue
		}
		if b := lookupAPI(api.Key); b == nil || b.Authz == nil {
			t.Errorf("api %d (%s) is served by the controller listener, its row names more than the cluster, and the broker table has no rule for it", api.Key, apiName(api.Key))
		}
	}
}

// TestAuthzRulesFitTheirAPIs: the rule a registration names reads the request and
// edits the answer of its own API (a rule named on the wrong API would panic on the
// first request). Every rule decides an empty request of each version of its API for a
// principal without ACLs: it does not close the connection, an answer is of the API's
// kind, and the amendment of a request that runs edits an empty answer of the API.
func TestAuthzRulesFitTheirAPIs(t *testing.T) {
	caller := authz.Caller{Authorizer: acl.New(acl.Config{}), Principal: acl.Context{Principal: "User:alice"}}
	for _, api := range brokerAPIs.served() {
		if api.Authz == nil {
			continue
		}
		for v := api.MinVersion; v <= api.MaxVersion; v++ {
			req := authz.Request{Key: api.Key, Version: v}
			body := kmsg.RequestForKey(api.Key)
			body.SetVersion(v)
			if api.Raw {
				req.Raw = body.AppendTo(nil)
			} else {
				req.Body = body
			}
			name := fmt.Sprintf("%s v%d", apiName(api.Key), v)
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("%s: the rule panicked: %v", name, p)
					}
				}()
				d := authz.Broker(caller, req, api.Authz)
				switch d.Outcome {
				case authz.Closed:
					t.Errorf("%s: the connection is closed: %s", name, d.Reason)
				case authz.Answered:
					if d.Response == nil || d.Response.Key() != api.Key {
						t.Errorf("%s: answered with %v", name, d.Response)
					}
				case authz.Run:
					if d.Amend != nil {
						resp := kmsg.ResponseForKey(api.Key)
						resp.SetVersion(v)
						d.Amend(resp)
					}
				}
			}()
		}
	}
}

func strOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
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
	// The commit's markers reach __consumer_offsets after EndTxn is answered (as in
	// Kafka, whose OffsetFetch without RequireStable shows them once written).
	var offs kadm.OffsetResponses
	eventually(t, 10*time.Second, "the committed transaction's offset", func() bool {
		var err error
		offs, err = admin.FetchOffsets(ctx, "g-ok")
		o, ok := offs.Lookup("readable", 0)
		return err == nil && ok && o.At == 1
	})
}

// TestAuthzOffsetsByTopicID: the versions that name topics by id (OffsetCommit v10,
// TxnOffsetCommit v6, OffsetFetch v10) check READ (DESCRIBE to fetch) on the topic the
// id names, in the image; a refused topic is answered with its id and
// TOPIC_AUTHORIZATION_FAILED, an id the image does not know with UNKNOWN_TOPIC_ID
// (KafkaApis resolves ids before the topic's authorisation), the allowed one is served.
// DeleteGroups v3's refusal carries Kafka's message.
func TestAuthzOffsetsByTopicID(t *testing.T) {
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
	eventually(t, 10*time.Second, "the topics in the image", func() bool {
		_, ok1 := tb.meta.Image().Topic("readable")
		_, ok2 := tb.meta.Image().Topic("secret")
		return ok1 && ok2
	})
	readable, secret, unknown := topicID(t, tb, "readable"), topicID(t, tb, "secret"), [16]byte{7, 7, 7}
	ids := [][16]byte{readable, secret, unknown}
	c, err := net.Dial("tcp", userAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	rc := &rawConn{t: t, c: c}
	wantCodes := [][]int16{{0}, {kerr.TopicAuthorizationFailed.Code}, {kerr.UnknownTopicID.Code}}

	// OffsetCommit v10: the answer names each topic by the id asked, refused ones too
	// (they come after the others, net/authz's split).
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version, oc.Group, oc.Generation = 10, "g-ok", -1
	for _, id := range ids {
		oc.Topics = append(oc.Topics, commitTopic(id, 4, 0))
	}
	var codes [][]int16
	eventually(t, 30*time.Second, "OffsetCommit v10 of the readable topic", func() bool {
		resp := rc.roundTrip(oc).(*kmsg.OffsetCommitResponse)
		got := map[[16]byte][]int16{}
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				got[rt.TopicID] = append(got[rt.TopicID], p.ErrorCode)
			}
		}
		codes = inOrder(got, ids)
		return len(codes[0]) == 1 && codes[0][0] == 0
	})
	if !equalCodes(codes, wantCodes) {
		t.Fatalf("OffsetCommit v10, per id asked: %v, want %v", codes, wantCodes)
	}

	// OffsetFetch v10: the refused topic has its partitions refused, the unknown id
	// answered after the others.
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 10
	of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g-ok", MemberEpoch: -1}}
	for _, id := range ids {
		of.Groups[0].Topics = append(of.Groups[0].Topics, kmsg.OffsetFetchRequestGroupTopic{TopicID: id, Partitions: []int32{0}})
	}
	fr := rc.roundTrip(of).(*kmsg.OffsetFetchResponse)
	if len(fr.Groups) != 1 || fr.Groups[0].ErrorCode != 0 || len(fr.Groups[0].Topics) != 3 {
		t.Fatalf("OffsetFetch v10: %+v", fr)
	}
	byID := map[[16]byte]kmsg.OffsetFetchResponseGroupTopicPartition{}
	for _, rt := range fr.Groups[0].Topics {
		byID[rt.TopicID] = rt.Partitions[0]
	}
	if p := byID[readable]; p.ErrorCode != 0 || p.Offset != 4 {
		t.Errorf("OffsetFetch v10 of the readable topic: %+v", p)
	}
	if p := byID[secret]; p.ErrorCode != kerr.TopicAuthorizationFailed.Code || p.Offset != -1 {
		t.Errorf("OffsetFetch v10 of the secret topic: %+v", p)
	}
	if p := byID[unknown]; p.ErrorCode != kerr.UnknownTopicID.Code || p.Offset != -1 {
		t.Errorf("OffsetFetch v10 of an unknown id: %+v", p)
	}
	of.Groups[0].Topics = nil // all offsets: the secret topic is left out
	fr = rc.roundTrip(of).(*kmsg.OffsetFetchResponse)
	if len(fr.Groups) != 1 || len(fr.Groups[0].Topics) != 1 || fr.Groups[0].Topics[0].TopicID != readable {
		t.Fatalf("OffsetFetch v10 of all offsets: %+v", fr)
	}

	// TxnOffsetCommit v6.
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
	tc := kmsg.NewPtrTxnOffsetCommitRequest()
	tc.Version, tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch, tc.Generation = 6, "tx-ok", "g-ok", init.ProducerID, init.ProducerEpoch, -1
	for _, id := range ids {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.TopicID = id
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 9
		rt.Partitions = append(rt.Partitions, rp)
		tc.Topics = append(tc.Topics, rt)
	}
	eventually(t, 30*time.Second, "TxnOffsetCommit v6 of the readable topic", func() bool {
		resp := rc.roundTrip(tc).(*kmsg.TxnOffsetCommitResponse)
		got := map[[16]byte][]int16{}
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				got[rt.TopicID] = append(got[rt.TopicID], p.ErrorCode)
			}
		}
		codes = inOrder(got, ids)
		return len(codes[0]) == 1 && codes[0][0] == 0
	})
	if !equalCodes(codes, wantCodes) {
		t.Fatalf("TxnOffsetCommit v6, per id asked: %v, want %v", codes, wantCodes)
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.Version, end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = 5, "tx-ok", init.ProducerID, init.ProducerEpoch, true
	if r := rc.roundTrip(end).(*kmsg.EndTxnResponse); r.ErrorCode != 0 {
		t.Fatalf("EndTxn: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	eventually(t, 10*time.Second, "the transaction's offset", func() bool {
		offs, err := admin.FetchOffsets(ctx, "g-ok")
		if err != nil {
			return false
		}
		o, ok := offs.Lookup("readable", 0)
		return ok && o.At == 9
	})

	// DeleteGroups v3: no DELETE on the group.
	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Version, dg.Groups = 3, []string{"g-ok"}
	dr := rc.roundTrip(dg).(*kmsg.DeleteGroupsResponse)
	if len(dr.Groups) != 1 || dr.Groups[0].ErrorCode != kerr.GroupAuthorizationFailed.Code ||
		dr.Groups[0].ErrorMessage == nil || *dr.Groups[0].ErrorMessage != "Group authorization failed." {
		t.Fatalf("DeleteGroups v3 without DELETE on the group: %+v", dr.Groups)
	}
}

// inOrder lists the codes of each id of ids (nil for an id the answer lacks).
func inOrder(byID map[[16]byte][]int16, ids [][16]byte) [][]int16 {
	out := make([][]int16, len(ids))
	for i, id := range ids {
		out[i] = byID[id]
	}
	return out
}
