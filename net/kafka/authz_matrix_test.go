package kafka

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/acl"
	"github.com/samsa-broker/samsa/net/auth"
)

// TestAuthzMatrix runs requests of many APIs as User:ANONYMOUS on a PLAINTEXT listener
// with an authorizer, against ACLs made through a listener where ANONYMOUS is a super
// user: literal, prefixed, deny beside allow, no ACL at all.
func TestAuthzMatrix(t *testing.T) {
	tb := startTestBroker(t)
	ctx := context.Background()
	superAddr := tb.secureListener(t, auth.Plaintext, testCA{}, acl.New(acl.Config{SuperUsers: []string{"User:ANONYMOUS"}}))
	userAddr := tb.secureListener(t, auth.Plaintext, testCA{}, acl.New(acl.Config{}))
	redirect := func(addr string) kgo.Opt {
		var d net.Dialer
		return kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			if host == tb.addr { // the broker advertises its first listener
				host = addr
			}
			return d.DialContext(ctx, network, host)
		})
	}
	superCl, err := kgo.NewClient(kgo.SeedBrokers(superAddr), redirect(superAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer superCl.Close()
	admin := kadm.NewClient(superCl)
	if _, err := admin.CreateTopics(ctx, 1, 1, nil, "described", "hidden", "pre-a", "pre-secret"); err != nil {
		t.Fatal(err)
	}
	b := kadm.NewACLs().Allow("User:ANONYMOUS").Topics("described").Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	b2 := kadm.NewACLs().Allow("User:ANONYMOUS").Topics("pre-").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternPrefixed)
	b3 := kadm.NewACLs().Deny("User:ANONYMOUS").Topics("pre-secret").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral)
	for _, bb := range []*kadm.ACLBuilder{b, b2, b3} {
		res, err := admin.CreateACLs(ctx, bb)
		if err != nil || res[0].Err != nil {
			t.Fatalf("create ACL: %v %+v", err, res)
		}
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(userAddr), redirect(userAddr), kgo.DisableIdempotentWrite(), kgo.RequestRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	user := kadm.NewClient(cl)

	// Metadata of all topics: the describable ones only (pre-* by the implied DESCRIBE of WRITE).
	md, err := user.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, n := range md.Topics.Names() {
		names[n] = true
	}
	if !names["described"] || names["hidden"] || !names["pre-a"] || len(names) != 3 {
		t.Fatalf("metadata lists %v", md.Topics.Names())
	}
	// Named topics: the hidden one is TOPIC_AUTHORIZATION_FAILED.
	mr := kmsg.NewPtrMetadataRequest()
	mr.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("described")}, {Topic: kmsg.StringPtr("hidden")}}
	mresp, err := mr.RequestWith(ctx, cl)
	if err != nil || len(mresp.Topics) != 2 {
		t.Fatalf("named metadata: %v %+v", err, mresp)
	}
	for _, mt := range mresp.Topics {
		want := int16(0)
		if *mt.Topic == "hidden" {
			want = kerr.TopicAuthorizationFailed.Code
		}
		if mt.ErrorCode != want || (want != 0 && len(mt.Partitions) != 0) {
			t.Fatalf("named metadata of %s: %v, %d partitions", *mt.Topic, kerr.ErrorForCode(mt.ErrorCode), len(mt.Partitions))
		}
	}

	// DescribeTopicPartitions: all topics, the describable ones; named, the hidden one
	// refused.
	dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
	dresp, err := dtp.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	dnames := map[string]bool{}
	for _, dt := range dresp.Topics {
		dnames[*dt.Topic] = true
	}
	if !dnames["described"] || dnames["hidden"] || !dnames["pre-a"] || len(dnames) != 3 {
		t.Fatalf("DescribeTopicPartitions lists %v", dnames)
	}
	dtp.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "described"}, {Topic: "hidden"}}
	if dresp, err = dtp.RequestWith(ctx, cl); err != nil || len(dresp.Topics) != 2 {
		t.Fatalf("named DescribeTopicPartitions: %v %+v", err, dresp)
	}
	for _, dt := range dresp.Topics {
		want := int16(0)
		if *dt.Topic == "hidden" {
			want = kerr.TopicAuthorizationFailed.Code
		}
		if dt.ErrorCode != want || (want != 0 && len(dt.Partitions) != 0) {
			t.Fatalf("DescribeTopicPartitions of %s: %v, %d partitions", *dt.Topic, kerr.ErrorForCode(dt.ErrorCode), len(dt.Partitions))
		}
	}

	// KIP-430: the topic's authorized operations, from the ACLs.
	mr = kmsg.NewPtrMetadataRequest()
	mr.IncludeTopicAuthorizedOperations = true
	mr.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("described")}, {Topic: kmsg.StringPtr("pre-a")}}
	mresp, err = mr.RequestWith(ctx, cl)
	if err != nil || len(mresp.Topics) != 2 {
		t.Fatalf("metadata with authorized operations: %v %+v", err, mresp)
	}
	for _, mt := range mresp.Topics {
		want := int32(1 << 8) // DESCRIBE
		if *mt.Topic == "pre-a" {
			want |= 1 << 4 // WRITE
		}
		if mt.AuthorizedOperations != want {
			t.Errorf("authorized operations of %s: %b, want %b", *mt.Topic, mt.AuthorizedOperations, want)
		}
	}

	// Produce: prefixed allow, deny beside it.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "pre-a", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce pre-a: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "pre-secret", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce pre-secret: %v", err)
	}

	// ListOffsets, per topic.
	lr := kmsg.NewPtrListOffsetsRequest()
	for _, n := range []string{"described", "hidden"} {
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = n
		lt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -1, CurrentLeaderEpoch: -1}}
		lr.Topics = append(lr.Topics, lt)
	}
	// kgo routes ListOffsets by metadata, which hides "hidden": ask over a raw connection.
	nc, err := net.Dial("tcp", userAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	rc := &rawConn{t: t, c: nc}
	lr.SetVersion(7)
	lresp := rc.recv(lr, rc.send(lr)).(*kmsg.ListOffsetsResponse)
	if len(lresp.Topics) != 2 {
		t.Fatalf("list offsets: %+v", lresp)
	}
	for _, lt := range lresp.Topics {
		want := int16(0)
		if lt.Topic == "hidden" {
			want = kerr.TopicAuthorizationFailed.Code
		}
		if p := lt.Partitions[0]; p.ErrorCode != want || (want != 0 && p.Offset != -1) {
			t.Fatalf("list offsets of %s: %v offset %d", lt.Topic, kerr.ErrorForCode(p.ErrorCode), p.Offset)
		}
	}

	// Changes refused, nothing changed.
	dt, err := user.DeleteTopics(ctx, "hidden")
	if err != nil || !errors.Is(dt["hidden"].Err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("delete hidden: %v %v", err, dt["hidden"].Err)
	}
	if _, ok := tb.image().Topic("hidden"); !ok {
		t.Fatal("hidden was deleted")
	}
	cp, err := user.CreatePartitions(ctx, 2, "described")
	if err != nil || !errors.Is(cp["described"].Err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("create partitions: %v %v", err, cp["described"].Err)
	}

	// Cluster-level refusals.
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1"}}
	if r, err := dc.RequestWith(ctx, cl); err != nil || r.Resources[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(r.Resources[0].Configs) != 0 {
		t.Fatalf("describe broker configs: %v %+v", err, r)
	}
	da := kmsg.NewPtrDescribeACLsRequest()
	da.ResourceType, da.ResourcePatternType, da.Operation, da.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if r, err := da.RequestWith(ctx, cl); err != nil || r.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(r.Resources) != 0 {
		t.Fatalf("describe ACLs: %v %+v", err, r)
	}
	as := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	as.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "x", Mechanism: 1}}
	if r, err := as.RequestWith(ctx, cl); err != nil || len(r.Results) != 1 || r.Results[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("alter SCRAM: %v %+v", err, r)
	}
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionTimeoutMillis = 60000
	if r, err := ip.RequestWith(ctx, cl); err != nil || r.ErrorCode != 0 {
		// WRITE on some topic (pre-*) allows an idempotent producer (KIP-679).
		t.Fatalf("init producer id: %v %+v", err, r)
	}
	ip.TransactionalID = kmsg.StringPtr("tx")
	if r, err := ip.RequestWith(ctx, cl); !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) && (err != nil || r.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code) {
		t.Fatalf("transactional init producer id: %v %+v", err, r)
	}

	// WriteTxnMarkers from an admin client (an operator aborting a hanging
	// transaction) without ALTER or CLUSTER_ACTION on the cluster: every partition
	// CLUSTER_AUTHORIZATION_FAILED, and the connection stays open.
	wm := kmsg.NewPtrWriteTxnMarkersRequest()
	wm.Markers = []kmsg.WriteTxnMarkersRequestMarker{{ProducerID: 7, ProducerEpoch: 0,
		Topics: []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "pre-a", Partitions: []int32{0}}}}}
	if r, err := wm.RequestWith(ctx, cl); err != nil || len(r.Markers) != 1 || len(r.Markers[0].Topics) != 1 ||
		r.Markers[0].ProducerID != 7 || r.Markers[0].Topics[0].Partitions[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("write txn markers: %v %+v", err, r)
	}

	// Groups: no ACL, refused.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{"g"}
	if r, err := fc.RequestWith(ctx, cl); err != nil || len(r.Coordinators) != 1 || r.Coordinators[0].ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("find coordinator: %v %+v", err, r)
	}
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Group, jg.ProtocolType, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis = "g", "consumer", 10000, 10000
	jg.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	jg.SetVersion(5) // raw: kgo would stop at the refused FindCoordinator
	if r := rc.recv(jg, rc.send(jg)).(*kmsg.JoinGroupResponse); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("join group: %+v", r)
	}
	if lg, err := user.ListGroups(ctx); err != nil || len(lg) != 0 {
		t.Fatalf("list groups: %v %v", err, lg)
	}
}
