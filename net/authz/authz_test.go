package authz

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/acl"
	m "github.com/samsa-broker/samsa/coordinator/metadata"
)

const alice = "User:alice"

// allow is an ACL allowing alice op on a literal resource (cluster: name ignored).
func allow(rt m.ACLResourceType, name string, op m.ACLOperation) m.ACLBinding {
	if rt == m.ACLResourceCluster {
		name = acl.ClusterName
	}
	return m.ACLBinding{ResourceType: rt, ResourceName: name, PatternType: m.ACLPatternLiteral,
		Principal: alice, Host: "*", Operation: op, Permission: m.ACLPermissionAllow}
}

// callerWith is alice before an authorizer (super user: User:admin) whose image holds
// bindings.
func callerWith(t *testing.T, bindings ...m.ACLBinding) Caller {
	t.Helper()
	var recs []m.Record
	for i, b := range bindings {
		recs = append(recs, &m.AccessControlEntryRecord{ID: m.UUID{0: 1, 15: byte(i + 1)}, ACLBinding: b})
	}
	im, err := (&m.Image{}).Apply(recs...)
	if err != nil {
		t.Fatal(err)
	}
	a := acl.New(acl.Config{SuperUsers: []string{"User:admin"}})
	return Caller{Authorizer: a, Principal: acl.Context{Principal: alice}, Image: im}
}

func decoded(body kmsg.Request) Request {
	return Request{Key: body.Key(), Version: body.GetVersion(), Body: body}
}

func TestRowsAndWholeRefusals(t *testing.T) {
	join := func(group string) Request {
		r := kmsg.NewPtrJoinGroupRequest()
		r.Version, r.Group = 9, group
		return decoded(r)
	}
	quorum := kmsg.NewPtrDescribeQuorumRequest()
	quorum.Version = 2
	c := callerWith(t, allow(m.ACLResourceGroup, "g-ok", m.ACLOpRead))

	if d := Broker(c, join("g-ok"), JoinGroup); d.Outcome != Run || d.Amend != nil {
		t.Errorf("READ on the group: %+v", d)
	}
	d := Broker(c, join("g-no"), JoinGroup)
	if d.Outcome != Answered || d.Response.(*kmsg.JoinGroupResponse).ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("no READ on the group: %+v", d)
	}
	admin := c
	admin.Principal.Principal = "User:admin"
	if d := Broker(admin, join("g-no"), JoinGroup); d.Outcome != Run {
		t.Errorf("a super user: %+v", d)
	}

	// A row that names only the cluster needs no rule; a controller API's refusal
	// takes the controller's error shape.
	d = Broker(c, decoded(quorum), nil)
	if d.Outcome != Answered || d.Response.(*kmsg.DescribeQuorumResponse).ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("DescribeQuorum without DESCRIBE on the cluster: %+v", d)
	}
	if d := Broker(callerWith(t, allow(m.ACLResourceCluster, "", m.ACLOpDescribe)), decoded(quorum), nil); d.Outcome != Run {
		t.Errorf("DescribeQuorum with DESCRIBE on the cluster: %+v", d)
	}

	// Fail closed: no row, or a row naming more than the cluster without a rule.
	if d := Broker(c, Request{Key: 9999}, nil); d.Outcome != Closed || d.Reason == "" {
		t.Errorf("an API without a row: %+v", d)
	}
	token := kmsg.NewPtrCreateDelegationTokenRequest()
	if d := Broker(c, decoded(token), nil); d.Outcome != Closed {
		t.Errorf("an API whose row names users, without a rule: %+v", d)
	}
	if d := Broker(c, decoded(kmsg.NewPtrApiVersionsRequest()), nil); d.Outcome != Run {
		t.Errorf("ApiVersions (no check): %+v", d)
	}
}

func TestRowAlone(t *testing.T) {
	for _, c := range []struct {
		key   kmsg.Key
		alone bool
	}{
		{kmsg.ApiVersions, true},
		{kmsg.DescribeQuorum, true},
		{kmsg.WriteTxnMarkers, true},
		{kmsg.Produce, false},
		{kmsg.ListGroups, false},
		{kmsg.AddPartitionsToTxn, false},
	} {
		row, ok := acl.Lookup(int16(c.key))
		if !ok {
			t.Fatalf("%s: no row", c.key.Name())
		}
		if got := RowAlone(row); got != c.alone {
			t.Errorf("%s: RowAlone %v, want %v", c.key.Name(), got, c.alone)
		}
	}
}

// TestProduceSplit: a raw body is narrowed to the topics the principal may write and
// re-encoded; the refused ones come back in the answer; with acks=0 and nothing
// allowed, nothing is answered.
func TestProduceSplit(t *testing.T) {
	c := callerWith(t, allow(m.ACLResourceTopic, "ok", m.ACLOpWrite))
	produce := func(acks int16, topics ...string) Request {
		p := kmsg.NewPtrProduceRequest()
		p.Version, p.Acks = 9, acks
		for _, n := range topics {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = n
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = 3
			rt.Partitions = append(rt.Partitions, rp)
			p.Topics = append(p.Topics, rt)
		}
		return Request{Key: p.Key(), Version: p.Version, Raw: p.AppendTo(nil)}
	}
	if d := Broker(c, produce(-1, "ok"), Produce); d.Outcome != Run || d.Raw != nil || d.Amend != nil {
		t.Errorf("every topic allowed: %+v", d)
	}

	d := Broker(c, produce(-1, "ok", "no"), Produce)
	if d.Outcome != Run || d.Raw == nil || d.Amend == nil {
		t.Fatalf("one topic refused: %+v", d)
	}
	narrowed := kmsg.NewPtrProduceRequest()
	narrowed.Version = 9
	if err := narrowed.ReadFrom(d.Raw); err != nil || len(narrowed.Topics) != 1 || narrowed.Topics[0].Topic != "ok" {
		t.Fatalf("the narrowed body: %v %+v", err, narrowed.Topics)
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 9
	resp.Topics = []kmsg.ProduceResponseTopic{{Topic: "ok", Partitions: []kmsg.ProduceResponseTopicPartition{{Partition: 3}}}}
	d.Amend(resp)
	if len(resp.Topics) != 2 || resp.Topics[1].Topic != "no" || resp.Topics[1].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code ||
		resp.Topics[1].Partitions[0].Partition != 3 || resp.Topics[1].Partitions[0].BaseOffset != -1 {
		t.Errorf("the amended answer: %+v", resp.Topics)
	}

	d = Broker(c, produce(-1, "no"), Produce)
	if d.Outcome != Answered || len(d.Response.(*kmsg.ProduceResponse).Topics) != 1 {
		t.Errorf("every topic refused: %+v", d)
	}
	if d := Broker(c, produce(0, "no"), Produce); d.Outcome != Unanswered {
		t.Errorf("every topic refused, acks=0: %+v", d)
	}
}

// TestMetadataFilterAndOperations: of all topics, those the principal may not
// describe are left out of the answer, and KIP-430's fields are filled when asked
// for, for a super user too.
func TestMetadataFilterAndOperations(t *testing.T) {
	c := callerWith(t, allow(m.ACLResourceTopic, "seen", m.ACLOpDescribe), allow(m.ACLResourceCluster, "", m.ACLOpDescribe))
	req := kmsg.NewPtrMetadataRequest()
	req.Version, req.IncludeClusterAuthorizedOperations, req.IncludeTopicAuthorizedOperations = 12, true, true
	answer := func() *kmsg.MetadataResponse {
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version, resp.AuthorizedOperations = 12, OperationsUnknown
		for _, n := range []string{"seen", "hidden"} {
			resp.Topics = append(resp.Topics, kmsg.MetadataResponseTopic{Topic: kmsg.StringPtr(n), AuthorizedOperations: OperationsUnknown})
		}
		return resp
	}
	d := Broker(c, decoded(req), Metadata)
	if d.Outcome != Run || d.Amend == nil {
		t.Fatalf("all topics: %+v", d)
	}
	resp := answer()
	d.Amend(resp)
	if len(resp.Topics) != 1 || *resp.Topics[0].Topic != "seen" {
		t.Fatalf("topics left: %+v", resp.Topics)
	}
	if resp.Topics[0].AuthorizedOperations == OperationsUnknown || resp.AuthorizedOperations == OperationsUnknown {
		t.Errorf("authorized operations not filled: topic %d, cluster %d", resp.Topics[0].AuthorizedOperations, resp.AuthorizedOperations)
	}

	admin := c
	admin.Principal.Principal = "User:admin"
	d = Broker(admin, decoded(req), Metadata)
	resp = answer()
	if d.Outcome != Run || d.Amend == nil {
		t.Fatalf("a super user asking for authorized operations: %+v", d)
	}
	d.Amend(resp)
	if len(resp.Topics) != 2 || resp.Topics[1].AuthorizedOperations == OperationsUnknown {
		t.Errorf("a super user's answer: %+v", resp.Topics)
	}
}

// TestController: the nodes' APIs need CLUSTER_ACTION; the others follow the broker
// listener's rules; the authentication requests pass.
func TestController(t *testing.T) {
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.Version = 1
	c := callerWith(t)
	d := Controller(c, decoded(hb), nil, true)
	if d.Outcome != Answered || d.Response.(*kmsg.BrokerHeartbeatResponse).ErrorCode != kerr.ClusterAuthorizationFailed.Code || d.Reason == "" {
		t.Errorf("a heartbeat without CLUSTER_ACTION: %+v", d)
	}
	if d := Controller(callerWith(t, allow(m.ACLResourceCluster, "", m.ACLOpClusterAction)), decoded(hb), nil, true); d.Outcome != Run {
		t.Errorf("a heartbeat with CLUSTER_ACTION: %+v", d)
	}
	if d := Controller(Caller{Authorizer: c.Authorizer, Principal: c.Principal}, decoded(kmsg.NewPtrSASLHandshakeRequest()), nil, false); d.Outcome != Run {
		t.Errorf("SaslHandshake, nothing committed yet: %+v", d)
	}
	create := kmsg.NewPtrCreateTopicsRequest()
	create.Version = 7
	create.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "t", NumPartitions: 1, ReplicationFactor: 1}}
	d = Controller(c, decoded(create), CreateTopics, false)
	if d.Outcome != Answered || d.Response.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("CreateTopics without CREATE: %+v", d)
	}
}

func TestCreateDenied(t *testing.T) {
	topics := []string{"a", "b"}
	if got := CreateDenied(callerWith(t, allow(m.ACLResourceCluster, "", m.ACLOpCreate)), topics); got != nil {
		t.Errorf("CREATE on the cluster: %v denied", got)
	}
	if got := CreateDenied(callerWith(t, allow(m.ACLResourceTopic, "a", m.ACLOpCreate)), topics); !slices.Equal(got, []string{"b"}) {
		t.Errorf("CREATE on a: %v denied", got)
	}
}
