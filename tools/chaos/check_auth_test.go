package chaos

import "testing"

// Failed authentications within a fault's window are counted, outside it reported.
func TestCheckAuthFailures(t *testing.T) {
	b := newHB()
	b.life("p0", "", 0, 30)
	b.ack("p0", 1, 0, 0, "p0-1", 1, 1.1)
	b.op(Op{Proc: "nemesis", F: FFault, Status: OK, Start: ns(5), End: ns(10), Fault: &FaultInfo{Kind: "kill", Nodes: []int{2}}})
	// During the fault: a node's and a client's failures, a send refused.
	b.op(Op{Proc: "node2", F: FEvent, Status: Info, Start: ns(6), End: ns(6), V: EventAuthFailed, Err: "SASL authentication failed"})
	b.op(Op{Proc: "p0", F: FEvent, Status: Info, Start: ns(7), End: ns(7), V: EventAuthFailed, Err: "unable to initialize sasl: EOF"})
	b.sendInfo("p0", 2, 1, "p0-2", 8, 9.5)
	b.h.Ops[len(b.h.Ops)-1].Err = "TOPIC_AUTHORIZATION_FAILED: Not authorized to access topics"
	// After the heal: a node's failed peer authentication and a commit refused.
	b.op(Op{Proc: "node1", F: FEvent, Status: Info, Start: ns(12), End: ns(12), V: EventAuthFailed, Err: "peer authentication failed; retrying"})
	b.op(Op{Proc: "g0", F: FCommit, Status: OK, Group: "g", Start: ns(13), End: ns(13.2), Offs: map[int32]int64{0: 1},
		PartErr: map[int32]string{0: "GROUP_AUTHORIZATION_FAILED: Not authorized to access group"}})
	// Sessions that expired during the fault, refused at re-authentication just after
	// the heal: failures (Kafka accepts a late re-authentication), counted as late.
	b.op(Op{Proc: "node1", F: FEvent, Status: Info, Start: ns(10.01), End: ns(10.01), V: EventAuthFailed,
		Err: `msg="SASL handshake refused" err="session expired before re-authentication began"`})
	b.op(Op{Proc: "node2", F: FEvent, Status: Info, Start: ns(10.02), End: ns(10.02), V: EventAuthFailed,
		Err: `msg="peer re-authentication failed; closing the connection" err="SaslHandshake SCRAM-SHA-512: ILLEGAL_SASL_STATE"`})
	b.op(Op{Proc: "node1", F: FEvent, Status: Info, Start: ns(21), End: ns(21), V: EventAuthFailed,
		Err: `msg="SASL handshake refused" err="session expired before re-authentication began"`})
	// Not authentication: a timeout after the heal.
	b.op(Op{Proc: "p0", F: FSend, Status: Info, Seq: 3, P: 0, V: "p0-3", Start: ns(14), End: ns(20), Err: "REQUEST_TIMED_OUT"})
	res := check(t, b)
	if res.Counts[KAuthFailure] != 5 || res.Auth.DuringFaults != 3 || res.Auth.LateReauth != 3 || res.Auth.Outside != 5 {
		t.Fatalf("counts %v, auth %+v: %+v", res.Counts, res.Auth, res.Anomalies)
	}
	if res.Stats.Events != 0 {
		t.Errorf("auth events counted as events: %d", res.Stats.Events)
	}
	for _, a := range res.Anomalies {
		if a.Kind == KAuthFailure && a.Proc != "node1" && a.Proc != "node2" && a.Proc != "g0" {
			t.Errorf("unexpected %+v", a)
		}
	}
}

func TestIsAuthError(t *testing.T) {
	for s, want := range map[string]bool{
		"SASL_AUTHENTICATION_FAILED: Authentication failed":                                true,
		"TRANSACTIONAL_ID_AUTHORIZATION_FAILED: x":                                         true,
		"tls: failed to verify certificate: x509: certificate signed by unknown authority": true,
		"unable to initialize sasl":                                                        true,
		"NOT_LEADER_OR_FOLLOWER: ...":                                                      false,
		"dial tcp 10.0.0.1:9092: connect: connection refused":                              false,
	} {
		if IsAuthError(s) != want {
			t.Errorf("%q: %v", s, !want)
		}
	}
}
