package acl

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	m "github.com/samsa-broker/samsa/coordinator/metadata"
)

// TestAPITable checks the table's shape: sorted unique keys, named as kmsg names them,
// every Kafka API key from 0 to 87 present (the keys of Kafka's documentation table),
// and every requirement well formed.
func TestAPITable(t *testing.T) {
	for i := 1; i < len(APIs); i++ {
		if APIs[i].Key <= APIs[i-1].Key {
			t.Fatalf("keys out of order at %s", APIs[i].Name)
		}
	}
	for k := int16(0); k <= int16(kmsg.ReadShareGroupStateSummary); k++ {
		a, ok := Lookup(k)
		if !ok {
			t.Errorf("no row for %s (%d)", kmsg.NameForKey(k), k)
			continue
		}
		if a.Key != k || a.Name != kmsg.NameForKey(k) {
			t.Errorf("row %d is %d %s", k, a.Key, a.Name)
		}
	}
	if _, ok := Lookup(SamsaRaftKey); !ok {
		t.Error("no row for SamsaRaft")
	}
	if _, ok := Lookup(9999); ok {
		t.Error("a row for an unknown key")
	}
	for _, a := range APIs {
		if a.None != (len(a.Requirements) == 0) && !isUnservedTokenAPI(a.Key) {
			t.Errorf("%s: None=%v with %d requirements", a.Name, a.None, len(a.Requirements))
		}
		for i, r := range a.Requirements {
			switch r.OnDenied {
			case Refuse:
				if r.Error == 0 {
					t.Errorf("%s requirement %d refuses without an error code", a.Name, i)
				}
			case Omit, TryNext:
				if r.Error != 0 {
					t.Errorf("%s requirement %d has an error code it never sends", a.Name, i)
				}
			}
			if r.OnDenied == TryNext && i == len(a.Requirements)-1 {
				t.Errorf("%s: TryNext on its last requirement", a.Name)
			}
			if !r.Operation.Stored() || r.Operation == m.ACLOpAll || !r.Resource.Stored() {
				t.Errorf("%s requirement %d: %s on %s", a.Name, i, r.Operation, r.Resource)
			}
			if r.Scope == ScopeCluster && r.Resource != m.ACLResourceCluster {
				t.Errorf("%s requirement %d: cluster scope on %s", a.Name, i, r.Resource)
			}
			ops := OperationsOf(r.Resource)
			found := false
			for _, op := range ops {
				found = found || op == r.Operation
			}
			if !found {
				t.Errorf("%s requirement %d: %s is not an operation of %s", a.Name, i, r.Operation, r.Resource)
			}
		}
	}
}

func isUnservedTokenAPI(k int16) bool {
	return k == int16(kmsg.RenewDelegationToken) || k == int16(kmsg.ExpireDelegationToken)
}

// TestAPITableRows spot-checks rows against Kafka's checks.
func TestAPITableRows(t *testing.T) {
	for _, c := range []struct {
		key  kmsg.Key
		want []Requirement
	}{
		{kmsg.Produce, []Requirement{
			{Operation: m.ACLOpWrite, Resource: m.ACLResourceTransactionalID, Scope: ScopeTransactionalID, When: IfTransactional, Error: 53},
			{Operation: m.ACLOpWrite, Resource: m.ACLResourceTopic, Scope: ScopeTopics, Error: 29}}},
		{kmsg.InitProducerID, []Requirement{
			{Operation: m.ACLOpWrite, Resource: m.ACLResourceTransactionalID, Scope: ScopeTransactionalID, When: IfTransactional, Error: 53},
			{Operation: m.ACLOpIdempotentWrite, Resource: m.ACLResourceCluster, Scope: ScopeCluster, When: IfNotTransactional, OnDenied: TryNext},
			{Operation: m.ACLOpWrite, Resource: m.ACLResourceTopic, Scope: ScopeAnyTopic, When: IfNotTransactional, Error: 31}}},
		{kmsg.Fetch, []Requirement{
			{Operation: m.ACLOpClusterAction, Resource: m.ACLResourceCluster, Scope: ScopeCluster, When: IfReplica, Error: 29},
			{Operation: m.ACLOpRead, Resource: m.ACLResourceTopic, Scope: ScopeTopics, When: IfConsumer, Error: 29}}},
		{kmsg.JoinGroup, []Requirement{{Operation: m.ACLOpRead, Resource: m.ACLResourceGroup, Scope: ScopeGroup, Error: 30}}},
		{kmsg.CreateACLs, []Requirement{{Operation: m.ACLOpAlter, Resource: m.ACLResourceCluster, Scope: ScopeCluster, Error: 31}}},
		{kmsg.DescribeUserSCRAMCredentials, []Requirement{{Operation: m.ACLOpDescribe, Resource: m.ACLResourceCluster, Scope: ScopeCluster, Error: 31}}},
		{kmsg.AlterUserSCRAMCredentials, []Requirement{{Operation: m.ACLOpAlter, Resource: m.ACLResourceCluster, Scope: ScopeCluster, Error: 31}}},
	} {
		a, _ := Lookup(int16(c.key))
		if len(a.Requirements) != len(c.want) {
			t.Fatalf("%s: %d requirements", a.Name, len(a.Requirements))
		}
		for i, r := range a.Requirements {
			r.Note = ""
			if r != c.want[i] {
				t.Errorf("%s requirement %d = %+v, want %+v", a.Name, i, r, c.want[i])
			}
		}
	}
	for _, k := range []kmsg.Key{kmsg.ApiVersions, kmsg.SASLHandshake, kmsg.SASLAuthenticate} {
		if a, _ := Lookup(int16(k)); !a.None {
			t.Errorf("%s needs authorisation", a.Name)
		}
	}
}
