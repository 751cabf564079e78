package controller

import (
	"crypto/rand"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

func TestACLRecordsThroughTheLog(t *testing.T) {
	h := newHarness(t, nil)
	h.join(1)
	create := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "orders", kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:alice", "*", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow
	bad := c
	bad.Principal = "alice" // not type:name
	create.Creations = []kmsg.CreateACLsRequestCreation{c, bad, c}
	cr := h.do(create).(*kmsg.CreateACLsResponse)
	if len(cr.Results) != 3 || cr.Results[0].ErrorCode != 0 || cr.Results[1].ErrorCode != kerr.InvalidRequest.Code || cr.Results[2].ErrorCode != 0 {
		t.Fatalf("create results %+v", cr.Results)
	}
	if n := h.image().ACLs().Len(); n != 1 {
		t.Fatalf("%d ACLs in the committed image, want 1", n)
	}
	desc := kmsg.NewPtrDescribeACLsRequest()
	desc.ResourceType, desc.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	desc.Operation, desc.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	dr := h.do(desc).(*kmsg.DescribeACLsResponse)
	if dr.ErrorCode != 0 || len(dr.Resources) != 1 || dr.Resources[0].ResourceName != "orders" || len(dr.Resources[0].ACLs) != 1 {
		t.Fatalf("describe %+v", dr)
	}
	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeAny
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = []kmsg.DeleteACLsRequestFilter{f}
	delr := h.do(del).(*kmsg.DeleteACLsResponse)
	if len(delr.Results) != 1 || len(delr.Results[0].MatchingACLs) != 1 || delr.Results[0].MatchingACLs[0].Principal != "User:alice" {
		t.Fatalf("delete %+v", delr)
	}
	if n := h.image().ACLs().Len(); n != 0 {
		t.Fatalf("%d ACLs after delete", n)
	}
}

func TestScramRecordsThroughTheLog(t *testing.T) {
	h := newHarness(t, nil)
	h.join(1)
	salt := make([]byte, 32)
	_, _ = rand.Read(salt)
	salted, err := metadata.ScramSHA512.SaltPassword("secret", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = "alice", int8(metadata.ScramSHA512), 4096, salt, salted
	few := up
	few.Name, few.Iterations = "bob", 10
	alter.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{up, few}
	ar := h.do(alter).(*kmsg.AlterUserSCRAMCredentialsResponse)
	if len(ar.Results) != 2 || ar.Results[0].User != "alice" || ar.Results[0].ErrorCode != 0 || ar.Results[1].ErrorCode != kerr.UnacceptableCredential.Code {
		t.Fatalf("alter %+v", ar.Results)
	}
	cred, ok := h.image().ScramCredential("alice", metadata.ScramSHA512)
	if !ok || cred.Iterations != 4096 {
		t.Fatalf("credential %+v %v", cred, ok)
	}
	dr := h.do(kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()).(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if len(dr.Results) != 1 || dr.Results[0].User != "alice" || len(dr.Results[0].CredentialInfos) != 1 {
		t.Fatalf("describe %+v", dr.Results)
	}
	alter = kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	alter.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "alice", Mechanism: int8(metadata.ScramSHA512)}}
	if ar := h.do(alter).(*kmsg.AlterUserSCRAMCredentialsResponse); len(ar.Results) != 1 || ar.Results[0].ErrorCode != 0 {
		t.Fatalf("delete %+v", ar.Results)
	}
	if _, ok := h.image().ScramCredential("alice", metadata.ScramSHA512); ok {
		t.Fatal("credential still in the image")
	}
}
