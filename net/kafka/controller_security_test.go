package kafka

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/samsa-broker/samsa/coordinator/acl"
	"github.com/samsa-broker/samsa/net/auth"
	"github.com/samsa-broker/samsa/net/peer"
	"github.com/samsa-broker/samsa/net/transport"
)

// TestControllerListenerSASL: three voters whose controller listeners are
// SASL_PLAINTEXT (PLAIN users, 500 ms sessions) form a quorum over authenticated
// connections that re-authenticate; a broker with the right password registers, one
// with a wrong password fails with peer.ErrAuthentication; a client of the legacy v0
// handshake (raw tokens) is served; a request before authentication closes the
// connection.
func TestControllerListenerSASL(t *testing.T) {
	users := auth.NewStaticPlain(map[string]string{"voter": "voter-secret", "broker": "broker-secret"})
	mechs, err := auth.Mechanisms([]string{auth.MechPlain}, nil, users)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := auth.NewServer(auth.ServerConfig{Mechanisms: mechs, MaxReauth: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	vs := startVoters(t, voterOptions{
		security:     &ListenerSecurity{Protocol: auth.SASLPlaintext, Auth: srv},
		peerSecurity: peer.Security{SASL: plain.Auth{User: "voter", Pass: "voter-secret"}.AsMechanism()},
	}, 1, 2, 3)
	addrs := map[int32]string{}
	for _, v := range vs {
		addrs[v.id] = v.addr
	}
	broker := func(pass string) *peer.Client {
		cl, err := peer.New(peer.Config{NodeID: 100, ClusterID: "test-cluster", Voters: addrs, Logger: testLogger(t),
			ReconnectBackoff: 5 * time.Millisecond, ReconnectBackoffMax: 50 * time.Millisecond, RetryBackoff: 10 * time.Millisecond,
			VoterTimeout: time.Second, VoterSecurity: peer.Security{SASL: plain.Auth{User: "broker", Pass: pass}.AsMechanism()}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	ctx := testCtx(t)
	resp, err := broker("broker-secret").ControllerChannel().Request(ctx, registration(7))
	if err != nil || resp.(*kmsg.BrokerRegistrationResponse).ErrorCode != 0 {
		t.Fatalf("registration: %v %+v", err, resp)
	}
	eventually(t, 10*time.Second, "the voters re-authenticate", func() bool {
		for _, v := range vs {
			if v.cl.Reauthentications() == 0 {
				return false
			}
		}
		return true
	})
	if _, err := broker("wrong").Request(ctx, peer.Voter(1), peer.PurposeHeartbeat, registration(8)); !errors.Is(err, peer.ErrAuthentication) {
		t.Fatalf("registration with a wrong password: %v", err)
	}

	// SaslHandshake v0, then the PLAIN token as a raw frame, then requests.
	c, err := net.Dial("tcp", vs[0].addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	f := kmsg.NewRequestFormatter()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 0, auth.MechPlain
	write(t, c, f.AppendRequest(nil, hs, 1))
	if r := readResponse(t, br, 1); len(r) < 2 || binary.BigEndian.Uint16(r) != 0 {
		t.Fatalf("SaslHandshake v0 answer %x", r)
	}
	token := []byte("\x00broker\x00broker-secret")
	write(t, c, binary.BigEndian.AppendUint32(nil, uint32(len(token))))
	write(t, c, token)
	var hdr [4]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil || binary.BigEndian.Uint32(hdr[:]) != 0 {
		t.Fatalf("raw token answer: %x %v", hdr, err)
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.Version, dc.EndpointType = 1, 2
	write(t, c, f.AppendRequest(nil, dc, 2))
	if r := readResponse(t, br, 2); len(r) == 0 {
		t.Fatal("no DescribeCluster answer after a raw-token authentication")
	}

	// Before authentication, a controller request closes the connection.
	c2, err := net.Dial("tcp", vs[0].addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.SetDeadline(time.Now().Add(10 * time.Second))
	write(t, c2, f.AppendRequest(nil, registration(9), 1))
	if _, err := io.ReadFull(c2, hdr[:]); err == nil {
		t.Fatal("a BrokerRegistration before authentication was answered")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the connection stayed open after a request before authentication")
	}
}

func write(t *testing.T, c net.Conn, b []byte) {
	t.Helper()
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
}

// readResponse reads one response frame with correlation id corr and returns its
// body (v0 header: after the correlation id).
func readResponse(t *testing.T, r io.Reader, corr int32) []byte {
	t.Helper()
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		t.Fatal(err)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if got := int32(binary.BigEndian.Uint32(hdr[4:])); got != corr || n < 4 || n > 1<<20 {
		t.Fatalf("response size %d correlation id %d (want %d)", n, got, corr)
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(r, body); err != nil {
		t.Fatal(err)
	}
	return body
}

// FuzzSecuredControllerListener feeds frame sequences to one connection of a
// SASL_PLAINTEXT controller listener: the session admits, answers or closes, and no
// handler panics.
func FuzzSecuredControllerListener(f *testing.F) {
	fm := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	frame := func(r kmsg.Request, v int16) []byte {
		r.SetVersion(v)
		return fm.AppendRequest(nil, r, 1)[4:]
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = auth.MechPlain
	sa := kmsg.NewPtrSASLAuthenticateRequest()
	sa.SASLAuthBytes = []byte("\x00u\x00pw")
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.EndpointType = 2
	f.Add(joinFrames(frame(hs, 1), frame(sa, 1), frame(dc, 1)))
	f.Add(joinFrames(frame(hs, 0), []byte("\x00u\x00pw"), frame(dc, 1)))
	f.Add(joinFrames(frame(hs, 1), []byte("garbage"), frame(registration(3), 0)))
	f.Add(joinFrames(frame(registration(3), 0)))
	for _, s := range controllerSeedFrames(f) {
		f.Add(joinFrames(frame(hs, 1), frame(sa, 2), s))
	}
	users := auth.NewStaticPlain(map[string]string{"u": "pw"})
	mechs, err := auth.Mechanisms([]string{auth.MechPlain}, nil, users)
	if err != nil {
		f.Fatal(err)
	}
	srv, err := auth.NewServer(auth.ServerConfig{Mechanisms: mechs, MaxReauth: time.Hour})
	if err != nil {
		f.Fatal(err)
	}
	vs := startVoters(f, voterOptions{snapshotEntries: 4, security: &ListenerSecurity{Protocol: auth.SASLPlaintext, Auth: srv}}, 1)
	h := vs[0].h
	f.Fuzz(func(t *testing.T, data []byte) {
		c := newFakeConn()
		h.ConnOpened(c)
		defer h.ConnClosed(c)
		for i, fr := range fuzzFrames(data) {
			if len(fr) >= 2 && binary.BigEndian.Uint16(fr) == 1 {
				continue // a metadata fetch may park
			}
			h.Serve(transport.Request{Conn: c, Ticket: transport.NewTicket(c, uint64(i)), Frame: fr})
			c.mu.Lock()
			closed := c.answers[uint64(i)] == transport.CloseConn || c.closed
			c.mu.Unlock()
			if closed {
				break
			}
		}
		if n := h.Panics(); n != 0 {
			t.Fatalf("%d handler panics", n)
		}
	})
}

// TestControllerListenerAuthorization: three voters whose SASL_PLAINTEXT controller
// listeners authorize with the StandardAuthorizer's rules (the voters' principal a super
// user) form a quorum. A principal without ACLs is refused every inter-node API
// (BrokerRegistration and BrokerHeartbeat through net/peer, AlterPartition, a metadata
// Fetch: CLUSTER_AUTHORIZATION_FAILED; SamsaRaft: the connection closed) and the client
// APIs by their own rules (DescribeQuorum: CLUSTER_AUTHORIZATION_FAILED, CreateTopics:
// TOPIC_AUTHORIZATION_FAILED); once the super user grants CLUSTER_ACTION on the cluster
// to the broker and DESCRIBE to alice (CreateAcls through the listener), the broker
// registers and alice's DescribeQuorum is answered.
func TestControllerListenerAuthorization(t *testing.T) {
	users := auth.NewStaticPlain(map[string]string{"voter": "voter-secret", "broker": "broker-secret", "alice": "alice-secret"})
	mechs, err := auth.Mechanisms([]string{auth.MechPlain}, nil, users)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := auth.NewServer(auth.ServerConfig{Mechanisms: mechs})
	if err != nil {
		t.Fatal(err)
	}
	vs := startVoters(t, voterOptions{
		security:     &ListenerSecurity{Protocol: auth.SASLPlaintext, Auth: srv, Authorizer: acl.New(acl.Config{SuperUsers: []string{"User:voter"}})},
		peerSecurity: peer.Security{SASL: plain.Auth{User: "voter", Pass: "voter-secret"}.AsMechanism()},
	}, 1, 2, 3)
	addrs := map[int32]string{}
	for _, v := range vs {
		addrs[v.id] = v.addr
	}
	ctx := testCtx(t)
	var leader *testVoter
	eventually(t, 10*time.Second, "a leader", func() bool {
		for _, v := range vs {
			if id, _ := v.q.Leader(); id == v.id {
				leader = v
				return true
			}
		}
		return false
	})
	client := func(user string) *kgo.Broker {
		cl, err := kgo.NewClient(kgo.SeedBrokers(leader.addr), kgo.SASL(plain.Auth{User: user, Pass: user + "-secret"}.AsMechanism()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl.SeedBrokers()[0]
	}
	send := func(br *kgo.Broker, req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := br.Request(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
		}
		return resp
	}
	cluster := kerr.ClusterAuthorizationFailed.Code
	broker, err := peer.New(peer.Config{NodeID: 100, ClusterID: "test-cluster", Voters: addrs, Logger: testLogger(t),
		ReconnectBackoff: 5 * time.Millisecond, ReconnectBackoffMax: 50 * time.Millisecond, RetryBackoff: 10 * time.Millisecond,
		VoterTimeout: time.Second, VoterSecurity: peer.Security{SASL: plain.Auth{User: "broker", Pass: "broker-secret"}.AsMechanism()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { broker.Close() })
	if resp, err := broker.Request(ctx, peer.Voter(leader.id), peer.PurposeHeartbeat, registration(7)); err != nil || resp.(*kmsg.BrokerRegistrationResponse).ErrorCode != cluster {
		t.Fatalf("registration without CLUSTER_ACTION: %v %+v", err, resp)
	}

	alice := client("alice")
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.BrokerID, hb.BrokerEpoch = 7, 1
	if r := send(alice, hb).(*kmsg.BrokerHeartbeatResponse); r.ErrorCode != cluster {
		t.Fatalf("BrokerHeartbeat without CLUSTER_ACTION: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	ap := kmsg.NewPtrAlterPartitionRequest()
	ap.BrokerID, ap.BrokerEpoch = 7, 1
	if r := send(alice, ap).(*kmsg.AlterPartitionResponse); r.ErrorCode != cluster {
		t.Fatalf("AlterPartition without CLUSTER_ACTION: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	mf := kmsg.NewPtrFetchRequest()
	mft := kmsg.NewFetchRequestTopic()
	mft.Topic, mft.TopicID = "__cluster_metadata", [16]byte{1}
	mft.Partitions = []kmsg.FetchRequestTopicPartition{kmsg.NewFetchRequestTopicPartition()}
	mf.ReplicaID, mf.Topics = 7, []kmsg.FetchRequestTopic{mft}
	if r := send(alice, mf).(*kmsg.FetchResponse); r.ErrorCode != cluster {
		t.Fatalf("a metadata Fetch without CLUSTER_ACTION: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	dq := func() int16 {
		req := kmsg.NewPtrDescribeQuorumRequest()
		rt := kmsg.NewDescribeQuorumRequestTopic()
		rt.Topic = "__cluster_metadata"
		rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
		req.Topics = []kmsg.DescribeQuorumRequestTopic{rt}
		return send(alice, req).(*kmsg.DescribeQuorumResponse).ErrorCode
	}
	if code := dq(); code != cluster {
		t.Fatalf("DescribeQuorum without DESCRIBE: %v", kerr.ErrorForCode(code))
	}
	ct := kmsg.NewPtrCreateTopicsRequest()
	ctt := kmsg.NewCreateTopicsRequestTopic()
	ctt.Topic, ctt.NumPartitions, ctt.ReplicationFactor = "t", 1, 1
	ct.Topics = []kmsg.CreateTopicsRequestTopic{ctt}
	if r := send(alice, ct).(*kmsg.CreateTopicsResponse); len(r.Topics) != 1 || r.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("CreateTopics without CREATE: %+v", r.Topics)
	}

	// SamsaRaft from a principal without CLUSTER_ACTION: no answer, the connection closed.
	c, err := net.Dial("tcp", leader.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	f := kmsg.NewRequestFormatter()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, auth.MechPlain
	write(t, c, f.AppendRequest(nil, hs, 1))
	readResponse(t, br, 1)
	sa := kmsg.NewPtrSASLAuthenticateRequest()
	sa.Version, sa.SASLAuthBytes = 1, []byte("\x00alice\x00alice-secret")
	write(t, c, f.AppendRequest(nil, sa, 2))
	if r := readResponse(t, br, 2); len(r) < 2 || binary.BigEndian.Uint16(r) != 0 {
		t.Fatalf("SaslAuthenticate answer %x", r)
	}
	write(t, c, f.AppendRequest(nil, &peer.SamsaRaftRequest{Message: marshalRaft(t, 2, leader.id)}, 3))
	var hdr [4]byte
	if _, err := io.ReadFull(br, hdr[:]); err == nil {
		t.Fatal("SamsaRaft without CLUSTER_ACTION was answered")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the connection stayed open after SamsaRaft without CLUSTER_ACTION")
	}

	// The super user grants the ACLs; the broker registers, alice describes the quorum.
	ca := kmsg.NewPtrCreateACLsRequest()
	for _, g := range []struct {
		principal string
		op        kmsg.ACLOperation
	}{{"User:broker", kmsg.ACLOperationClusterAction}, {"User:alice", kmsg.ACLOperationDescribe}} {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLResourcePatternTypeLiteral
		cr.Principal, cr.Host, cr.Operation, cr.PermissionType = g.principal, "*", g.op, kmsg.ACLPermissionTypeAllow
		ca.Creations = append(ca.Creations, cr)
	}
	voter := client("voter")
	eventually(t, 10*time.Second, "CreateAcls by the super user", func() bool { // NOT_CONTROLLER if the leadership moved
		for _, res := range send(voter, ca).(*kmsg.CreateACLsResponse).Results {
			if res.ErrorCode == kerr.NotController.Code {
				for _, v := range vs {
					if id, _ := v.q.Leader(); id == v.id {
						leader = v
					}
				}
				voter = client("voter")
				return false
			}
			if res.ErrorCode != 0 {
				t.Fatalf("CreateAcls: %v", kerr.ErrorForCode(res.ErrorCode))
			}
		}
		return true
	})
	eventually(t, 10*time.Second, "the broker registers with CLUSTER_ACTION", func() bool {
		resp, err := broker.ControllerChannel().Request(ctx, registration(7))
		return err == nil && resp.(*kmsg.BrokerRegistrationResponse).ErrorCode == 0
	})
	eventually(t, 10*time.Second, "alice's DescribeQuorum with DESCRIBE", func() bool { return dq() == 0 })
}
