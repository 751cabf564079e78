package metadata

import (
	"bytes"
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"io"
	"reflect"
	"testing"
)

// scramCred returns a valid credential of user for mechanism m.
func scramCred(t testing.TB, user string, m ScramMechanism, password string) ScramCredential {
	t.Helper()
	salt := []byte("salt-of-" + user)
	sp, err := m.SaltPassword(password, salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewScramCredential(user, m, salt, sp, 4096)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func aclRec(id byte, b ACLBinding) *AccessControlEntryRecord {
	return &AccessControlEntryRecord{ID: UUID{0: 0xac, 15: id}, ACLBinding: b}
}

var topicAllow = ACLBinding{ResourceType: ACLResourceTopic, ResourceName: "orders", PatternType: ACLPatternLiteral,
	Principal: "User:alice", Host: "*", Operation: ACLOpRead, Permission: ACLPermissionAllow}

// sampleSecurityRecords has one record of every security type.
func sampleSecurityRecords(t testing.TB) []Record {
	return []Record{
		&UserScramCredentialRecord{scramCred(t, "alice", ScramSHA256, "pw")},
		&UserScramCredentialRecord{scramCred(t, "b=o,b", ScramSHA512, "pw2")},
		&RemoveUserScramCredentialRecord{Name: "alice", Mechanism: ScramSHA256},
		aclRec(1, topicAllow),
		aclRec(2, ACLBinding{ResourceType: ACLResourceCluster, ResourceName: "kafka-cluster", PatternType: ACLPatternPrefixed,
			Principal: "User:*", Host: "10.0.0.1", Operation: ACLOpAll, Permission: ACLPermissionDeny}),
		&RemoveAccessControlEntryRecord{ID: UUID{0: 0xac, 15: 1}},
		&ClientQuotaRecord{Entity: QuotaEntity{User: QuotaDefault, ClientID: QuotaName("app")}, Key: QuotaProducerByteRate, Value: 1024},
	}
}

// TestScramKeysRFC7677 checks the key derivation against RFC 7677's example (user
// "user", password "pencil", salt W22ZaJ0SNY7soEsUEjb6gQ==, 4096 iterations): the
// ServerSignature of the example's AuthMessage under the derived ServerKey is the
// example's v= value.
func TestScramKeysRFC7677(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	sp, err := ScramSHA256.SaltPassword("pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewScramCredential("user", ScramSHA256, salt, sp, 4096)
	if err != nil {
		t.Fatal(err)
	}
	authMsg := "n=user,r=rOprNGfwEbeRWgbNEkqO," +
		"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096," +
		"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	sig := hmacSum(ScramSHA256, c.ServerKey, authMsg)
	if got := base64.StdEncoding.EncodeToString(sig); got != "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=" {
		t.Fatalf("server signature %s", got)
	}
	if ScramSHA512.KeyLen() != 64 || ScramSHA256.KeyLen() != 32 || ScramUnknown.KeyLen() != 0 {
		t.Fatal("key lengths")
	}
	if m, ok := ParseScramMechanism("SCRAM-SHA-512"); !ok || m != ScramSHA512 || m.String() != "SCRAM-SHA-512" {
		t.Fatal("ParseScramMechanism")
	}
	if _, ok := ParseScramMechanism("scram-sha-512"); ok {
		t.Fatal("mechanism names are matched exactly")
	}
}

func hmacSum(m ScramMechanism, key []byte, msg string) []byte {
	h := m.Hash()
	mac := hmac.New(h, key)
	mac.Write([]byte(msg))
	return mac.Sum(nil)
}

func TestSecurityRecordsRoundTrip(t *testing.T) {
	recs := sampleSecurityRecords(t)
	for _, r := range recs {
		buf := Encode(nil, r)
		got, n, err := Decode(buf)
		if err != nil || n != len(buf) {
			t.Fatalf("Decode(%T) = %d, %v", r, n, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", got, r)
		}
		for i := 0; i < len(buf); i++ {
			if _, _, err := Decode(buf[:i]); !errors.Is(err, ErrCorrupt) || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("%T cut at %d: %v", r, i, err)
			}
		}
		for i := 0; i < len(buf)*8; i++ {
			b := bytes.Clone(buf)
			b[i/8] ^= 1 << (i % 8)
			if _, _, err := Decode(b); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%T bit %d flipped: %v", r, i, err)
			}
		}
	}
	entry := EncodeEntry(nil, recs...)
	got, _, err := DecodeEntry(entry)
	if err != nil || !reflect.DeepEqual(got, recs) {
		t.Fatalf("entry round trip: %v", err)
	}
}

func TestSecurityHostileLengths(t *testing.T) {
	frame := func(body ...byte) []byte {
		b := make([]byte, frameHeaderSize, frameHeaderSize+len(body))
		return finishFrame(append(b, body...), 0)
	}
	huge := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f}
	for name, b := range map[string][]byte{
		"salt length":  frame(append([]byte{1, byte(typeUserScramCredential), 1, 'u', 1}, huge...)...),
		"name length":  frame(append([]byte{1, byte(typeRemoveUserScramCredential)}, huge...)...),
		"acl trailing": frame(append(append([]byte{1, byte(typeRemoveAccessControlEntry)}, make([]byte, 16)...), 9)...),
		"acl short":    frame(append([]byte{1, byte(typeAccessControlEntry)}, make([]byte, 17)...)...),
		"version":      frame(2, byte(typeAccessControlEntry)),
	} {
		if _, _, err := Decode(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Decode = %v", name, err)
		}
	}
}

func TestApplySecurity(t *testing.T) {
	alice256 := scramCred(t, "alice", ScramSHA256, "pw")
	alice512 := scramCred(t, "alice", ScramSHA512, "pw")
	bob := scramCred(t, "bob", ScramSHA256, "x")
	base := mustApply(t, &Image{}, &UserScramCredentialRecord{alice256}, &UserScramCredentialRecord{bob}, aclRec(1, topicAllow))
	with := func(f func(c *ScramCredential)) *UserScramCredentialRecord {
		c := alice512
		c.Salt, c.StoredKey, c.ServerKey = bytes.Clone(c.Salt), bytes.Clone(c.StoredKey), bytes.Clone(c.ServerKey)
		f(&c)
		return &UserScramCredentialRecord{c}
	}
	bind := func(f func(b *ACLBinding)) ACLBinding { b := topicAllow; f(&b); return b }
	for _, c := range []struct {
		name string
		recs []Record
		ok   bool
	}{
		{"second mechanism", []Record{&UserScramCredentialRecord{alice512}}, true},
		{"replace", []Record{&UserScramCredentialRecord{scramCred(t, "alice", ScramSHA256, "new")}}, true},
		{"unknown mechanism", []Record{with(func(c *ScramCredential) { c.Mechanism = 3 })}, false},
		{"short stored key", []Record{with(func(c *ScramCredential) { c.StoredKey = c.StoredKey[:32] })}, false},
		{"short server key", []Record{with(func(c *ScramCredential) { c.ServerKey = nil })}, false},
		{"no salt", []Record{with(func(c *ScramCredential) { c.Salt = nil })}, false},
		{"too few iterations", []Record{with(func(c *ScramCredential) { c.Iterations = 4095 })}, false},
		{"too many iterations", []Record{with(func(c *ScramCredential) { c.Iterations = 16385 })}, false},
		{"empty user", []Record{with(func(c *ScramCredential) { c.Name = "" })}, false},
		{"invalid utf-8 user", []Record{with(func(c *ScramCredential) { c.Name = "\xff" })}, false},
		{"remove", []Record{&RemoveUserScramCredentialRecord{Name: "bob", Mechanism: ScramSHA256}}, true},
		{"remove missing mechanism", []Record{&RemoveUserScramCredentialRecord{Name: "bob", Mechanism: ScramSHA512}}, false},
		{"remove missing user", []Record{&RemoveUserScramCredentialRecord{Name: "carol", Mechanism: ScramSHA256}}, false},
		{"acl", []Record{aclRec(2, bind(func(b *ACLBinding) { b.Operation = ACLOpWrite }))}, true},
		{"acl duplicate id", []Record{aclRec(1, bind(func(b *ACLBinding) { b.Operation = ACLOpWrite }))}, false},
		{"acl duplicate binding", []Record{aclRec(2, topicAllow)}, false},
		{"acl zero id", []Record{&AccessControlEntryRecord{ACLBinding: bind(func(b *ACLBinding) { b.Host = "1.2.3.4" })}}, false},
		{"acl any resource", []Record{aclRec(2, bind(func(b *ACLBinding) { b.ResourceType = ACLResourceAny }))}, false},
		{"acl unknown resource", []Record{aclRec(2, bind(func(b *ACLBinding) { b.ResourceType = 8 }))}, false},
		{"acl match pattern", []Record{aclRec(2, bind(func(b *ACLBinding) { b.PatternType = ACLPatternMatch }))}, false},
		{"acl any operation", []Record{aclRec(2, bind(func(b *ACLBinding) { b.Operation = ACLOpAny }))}, false},
		{"acl any permission", []Record{aclRec(2, bind(func(b *ACLBinding) { b.Permission = ACLPermissionAny }))}, false},
		{"acl empty name", []Record{aclRec(2, bind(func(b *ACLBinding) { b.ResourceName = "" }))}, false},
		{"acl empty host", []Record{aclRec(2, bind(func(b *ACLBinding) { b.Host = "" }))}, false},
		{"acl principal without type", []Record{aclRec(2, bind(func(b *ACLBinding) { b.Principal = "alice" }))}, false},
		{"acl principal empty name", []Record{aclRec(2, bind(func(b *ACLBinding) { b.Principal = "User:" }))}, false},
		{"acl remove", []Record{&RemoveAccessControlEntryRecord{ID: UUID{0: 0xac, 15: 1}}}, true},
		{"acl remove then re-add", []Record{&RemoveAccessControlEntryRecord{ID: UUID{0: 0xac, 15: 1}}, aclRec(3, topicAllow)}, true},
		{"acl remove missing", []Record{&RemoveAccessControlEntryRecord{ID: UUID{0: 0xac, 15: 9}}}, false},
		{"nil credential", []Record{(*UserScramCredentialRecord)(nil)}, false},
		{"nil acl", []Record{(*AccessControlEntryRecord)(nil)}, false},
		{"nil acl removal", []Record{(*RemoveAccessControlEntryRecord)(nil)}, false},
		{"nil credential removal", []Record{(*RemoveUserScramCredentialRecord)(nil)}, false},
	} {
		next, err := base.Apply(c.recs...)
		if (err == nil) != c.ok {
			t.Errorf("%s: Apply = %v", c.name, err)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidRecord) {
				t.Errorf("%s: error %v is not ErrInvalidRecord", c.name, err)
			}
			continue
		}
		if !sameImage(mustApply(t, &Image{}, next.Records()...), next) {
			t.Errorf("%s: Records() does not rebuild the image", c.name)
		}
	}

	// Accessors.
	next := mustApply(t, base, &UserScramCredentialRecord{alice512}, aclRec(2, bind(func(b *ACLBinding) { b.Operation = ACLOpWrite })))
	if got, ok := next.ScramCredential("alice", ScramSHA512); !ok || !reflect.DeepEqual(got, alice512) {
		t.Fatalf("ScramCredential = %+v, %v", got, ok)
	}
	if got := next.ScramCredentialsOf("alice"); len(got) != 2 || got[0].Mechanism != ScramSHA256 || got[1].Mechanism != ScramSHA512 {
		t.Fatalf("ScramCredentialsOf = %+v", got)
	}
	if got := next.ScramCredentials(); len(got) != 3 || got[0].Name != "alice" || got[2].Name != "bob" {
		t.Fatalf("ScramCredentials = %+v", got)
	}
	if next.ScramCredentialsOf("nobody") != nil {
		t.Fatal("credentials of an unknown user")
	}
	all := next.ACLs().All()
	if len(all) != 2 || next.ACLs().Len() != 2 || all[0].ID != (UUID{0: 0xac, 15: 1}) || all[1].Operation != ACLOpWrite {
		t.Fatalf("ACLs = %+v", all)
	}
	if id, ok := next.ACLs().Find(topicAllow); !ok || id != all[0].ID {
		t.Fatal("Find")
	}
	// The base image is untouched, and a batch without ACL records shares the set.
	if base.ACLs().Len() != 1 || len(base.ScramCredentials()) != 2 {
		t.Fatal("Apply changed its input image")
	}
	shared := mustApply(t, next, &UserScramCredentialRecord{bob})
	if shared.ACLs() != next.ACLs() {
		t.Fatal("an image without ACL changes does not share the ACL set")
	}
	if (&Image{}).ACLs().Len() != 0 || len((&Image{}).ACLs().All()) != 0 {
		t.Fatal("empty image ACLs")
	}
}

// TestApplySecurityDoesNotAliasInput: the image keeps its own copies of a credential's
// bytes.
func TestApplySecurityDoesNotAliasInput(t *testing.T) {
	c := scramCred(t, "alice", ScramSHA256, "pw")
	rec := &UserScramCredentialRecord{c}
	im := mustApply(t, &Image{}, rec)
	want := bytes.Clone(c.StoredKey)
	rec.StoredKey[0] ^= 0xff
	rec.Salt[0] ^= 0xff
	got, _ := im.ScramCredential("alice", ScramSHA256)
	if !bytes.Equal(got.StoredKey, want) || got.Salt[0] == rec.Salt[0] {
		t.Fatal("the image aliases the record's bytes")
	}
}

func TestSecuritySnapshotRoundTrip(t *testing.T) {
	recs := []Record{&UserScramCredentialRecord{scramCred(t, "alice", ScramSHA256, "pw")}}
	for i := byte(1); i < 50; i++ {
		b := topicAllow
		b.ResourceName = string(rune('a'+i%26)) + "topic"
		b.Host = "10.0.0." + string(rune('0'+i%10))
		b.Operation = ACLOperation(2 + i%13)
		recs = append(recs, aclRec(i, b))
	}
	im := mustApply(t, &Image{}, append(createTopic("orders", idA, 1), recs...)...)
	snap, err := EncodeSnapshot(nil, im)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	if !sameImage(back, im) || back.ACLs().Len() != 49 {
		t.Fatal("snapshot round trip changed the image")
	}
}

func TestEnumNames(t *testing.T) {
	if ACLResourceTransactionalID.String() != "TRANSACTIONAL_ID" || ACLPatternPrefixed.String() != "PREFIXED" ||
		ACLOpIdempotentWrite.String() != "IDEMPOTENT_WRITE" || ACLPermissionDeny.String() != "DENY" || ACLOperation(99).String() != "99" {
		t.Fatal("enum names")
	}
}

func FuzzDecodeSecurityRecord(f *testing.F) {
	for _, r := range sampleSecurityRecords(f) {
		f.Add(Encode(nil, r))
	}
	f.Add(EncodeEntry(nil, sampleSecurityRecords(f)...))
	base := mustApply(f, &Image{}, &UserScramCredentialRecord{scramCred(f, "alice", ScramSHA256, "pw")}, aclRec(1, topicAllow))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, n, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		if again := Encode(nil, r); !bytes.Equal(again, b[:n]) {
			t.Fatal("decoded frame does not re-encode to itself")
		}
		for _, im := range []*Image{{}, base} {
			if next, err := im.Apply(r); err == nil {
				if !sameImage(mustApply(t, &Image{}, next.Records()...), next) {
					t.Fatal("Records() does not rebuild an applied image")
				}
			}
		}
	})
}
