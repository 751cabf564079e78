package acl

import (
	"errors"
	"testing"

	m "github.com/samsa-broker/samsa/coordinator/metadata"
)

func sp(s string) *string { return &s }

func TestValidateBinding(t *testing.T) {
	good := bind("topic:orders", "User:alice", "*", m.ACLOpRead, "allow")
	if err := ValidateBinding(good); err != nil {
		t.Fatal(err)
	}
	if err := ValidateBinding(bind("cluster", "User:alice", "*", m.ACLOpAlter, "allow")); err != nil {
		t.Fatal(err)
	}
	mod := func(f func(b *m.ACLBinding)) m.ACLBinding { b := good; f(&b); return b }
	for name, b := range map[string]m.ACLBinding{
		"any resource":      mod(func(b *m.ACLBinding) { b.ResourceType = m.ACLResourceAny }),
		"unknown resource":  mod(func(b *m.ACLBinding) { b.ResourceType = m.ACLResourceUnknown }),
		"match pattern":     mod(func(b *m.ACLBinding) { b.PatternType = m.ACLPatternMatch }),
		"any operation":     mod(func(b *m.ACLBinding) { b.Operation = m.ACLOpAny }),
		"any permission":    mod(func(b *m.ACLBinding) { b.Permission = m.ACLPermissionAny }),
		"empty name":        mod(func(b *m.ACLBinding) { b.ResourceName = "" }),
		"bad principal":     mod(func(b *m.ACLBinding) { b.Principal = "alice" }),
		"other cluster":     mod(func(b *m.ACLBinding) { b.ResourceType, b.ResourceName = m.ACLResourceCluster, "prod" }),
		"empty host":        mod(func(b *m.ACLBinding) { b.Host = "" }),
		"invalid utf-8":     mod(func(b *m.ACLBinding) { b.ResourceName = "\xff" }),
		"operation too big": mod(func(b *m.ACLBinding) { b.Operation = 15 }),
	} {
		if err := ValidateBinding(b); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: ValidateBinding = %v", name, err)
		}
	}
}

// TestFilterMatches follows Kafka's ResourcePatternFilterTest and
// AccessControlEntryFilterTest cases.
func TestFilterMatches(t *testing.T) {
	lit := bind("topic:Name", "User:alice", "*", m.ACLOpRead, "allow")
	wild := bind("topic:*", "User:alice", "*", m.ACLOpRead, "allow")
	pre := bind("topic-prefix:Na", "User:alice", "*", m.ACLOpRead, "allow")
	any := Filter{ResourceType: m.ACLResourceAny, PatternType: m.ACLPatternAny, Operation: m.ACLOpAny, Permission: m.ACLPermissionAny}
	with := func(f func(f *Filter)) Filter { c := any; f(&c); return c }
	for _, c := range []struct {
		name string
		f    Filter
		b    m.ACLBinding
		want bool
	}{
		{"any matches all", any, lit, true},
		{"resource type", with(func(f *Filter) { f.ResourceType = m.ACLResourceGroup }), lit, false},
		{"literal filter, literal acl", with(func(f *Filter) { f.PatternType, f.Name = m.ACLPatternLiteral, sp("Name") }), lit, true},
		{"literal filter, prefixed acl", with(func(f *Filter) { f.PatternType, f.Name = m.ACLPatternLiteral, sp("Na") }), pre, false},
		{"literal filter is exact: * is a name", with(func(f *Filter) { f.PatternType, f.Name = m.ACLPatternLiteral, sp("Name") }), wild, false},
		{"literal filter of *", with(func(f *Filter) { f.PatternType, f.Name = m.ACLPatternLiteral, sp("*") }), wild, true},
		{"prefixed filter is exact", with(func(f *Filter) { f.PatternType, f.Name = m.ACLPatternPrefixed, sp("Name") }), pre, false},
		{"prefixed filter of the prefix", with(func(f *Filter) { f.PatternType, f.Name = m.ACLPatternPrefixed, sp("Na") }), pre, true},
		{"any filter with a name is exact", with(func(f *Filter) { f.Name = sp("Na") }), pre, true},
		{"any filter with a name, literal", with(func(f *Filter) { f.Name = sp("Na") }), lit, false},
		{"match: literal", with(func(f *Filter) { f.PatternType, f.Name = m.ACLPatternMatch, sp("Name") }), lit, true},
		{"match: wildcard", with(func(f *Filter) { f.PatternType, f.Name = m.ACLPatternMatch, sp("Name") }), wild, true},
		{"match: prefixed", with(func(f *Filter) { f.PatternType, f.Name = m.ACLPatternMatch, sp("Name") }), pre, true},
		{"match: prefixed longer than the name", with(func(f *Filter) { f.PatternType, f.Name = m.ACLPatternMatch, sp("N") }), pre, false},
		{"match: other literal", with(func(f *Filter) { f.PatternType, f.Name = m.ACLPatternMatch, sp("Other") }), lit, false},
		{"match without a name", with(func(f *Filter) { f.PatternType = m.ACLPatternMatch }), pre, true},
		{"principal", with(func(f *Filter) { f.Principal = sp("User:alice") }), lit, true},
		{"principal differs", with(func(f *Filter) { f.Principal = sp("User:*") }), lit, false},
		{"host", with(func(f *Filter) { f.Host = sp("*") }), lit, true},
		{"host differs", with(func(f *Filter) { f.Host = sp("1.2.3.4") }), lit, false},
		{"operation", with(func(f *Filter) { f.Operation = m.ACLOpRead }), lit, true},
		{"operation differs (no implication)", with(func(f *Filter) { f.Operation = m.ACLOpDescribe }), lit, false},
		{"permission", with(func(f *Filter) { f.Permission = m.ACLPermissionDeny }), lit, false},
	} {
		if got := c.f.Matches(c.b); got != c.want {
			t.Errorf("%s: Matches = %v", c.name, got)
		}
	}
	for name, f := range map[string]Filter{
		"unknown resource":   with(func(f *Filter) { f.ResourceType = m.ACLResourceUnknown }),
		"unknown pattern":    with(func(f *Filter) { f.PatternType = m.ACLPatternUnknown }),
		"unknown operation":  with(func(f *Filter) { f.Operation = m.ACLOpUnknown }),
		"unknown permission": with(func(f *Filter) { f.Permission = m.ACLPermissionUnknown }),
		"pattern too big":    with(func(f *Filter) { f.PatternType = 9 }),
	} {
		if err := f.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate = %v", name, err)
		}
	}
}

func TestCreateAndDeleteRecords(t *testing.T) {
	a1 := bind("topic:orders", "User:alice", "*", m.ACLOpRead, "allow")
	a2 := bind("topic:orders", "User:alice", "*", m.ACLOpWrite, "allow")
	a3 := bind("group-prefix:app", "User:bob", "*", m.ACLOpRead, "deny")
	im := imageWith(t, a1)
	n := byte(0)
	newID := func() m.UUID {
		n++
		if n == 2 {
			return m.UUID{} // never used: the zero id
		}
		return im.ACLs().All()[0].ID // taken the first time; then fresh ones below
	}
	calls := 0
	ids := func() m.UUID {
		calls++
		if calls <= 2 {
			return newID()
		}
		return m.UUID{0: 0xee, 15: byte(calls)}
	}
	bad := a2
	bad.Principal = "nobody"
	results, recs := CreateRecords(im.ACLs(), []m.ACLBinding{a1, a2, bad, a2, a3}, ids)
	if len(results) != 5 || results[0].Err != nil || results[1].Err != nil || !errors.Is(results[2].Err, ErrInvalid) ||
		results[3].Err != nil || results[4].Err != nil {
		t.Fatalf("results = %+v", results)
	}
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2 (existing and repeated bindings write none)", len(recs))
	}
	next, err := im.Apply(recs...)
	if err != nil {
		t.Fatalf("created records do not apply: %v", err)
	}
	if next.ACLs().Len() != 3 {
		t.Fatalf("%d ACLs", next.ACLs().Len())
	}
	for _, r := range recs {
		if id := r.(*m.AccessControlEntryRecord).ID; id[0] != 0xee {
			t.Fatalf("record id %v was taken or zero", id)
		}
	}

	// Describe.
	got, err := Describe(next.ACLs(), Filter{ResourceType: m.ACLResourceTopic, PatternType: m.ACLPatternMatch, Name: sp("orders"),
		Operation: m.ACLOpAny, Permission: m.ACLPermissionAny})
	if err != nil || len(got) != 2 {
		t.Fatalf("Describe = %v, %v", got, err)
	}
	if _, err := Describe(next.ACLs(), Filter{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Describe with an unknown filter: %v", err)
	}

	// Delete: two filters match alice's read ACL; it is removed once, reported twice.
	anyF := Filter{ResourceType: m.ACLResourceAny, PatternType: m.ACLPatternAny, Operation: m.ACLOpAny, Permission: m.ACLPermissionAny}
	byOp := anyF
	byOp.Operation = m.ACLOpRead
	byUser := anyF
	byUser.Principal = sp("User:alice")
	dres, drecs := DeleteRecords(next.ACLs(), []Filter{byOp, byUser, {}})
	if len(dres) != 3 || len(dres[0].Matched) != 2 || len(dres[1].Matched) != 2 || !errors.Is(dres[2].Err, ErrInvalid) {
		t.Fatalf("delete results = %+v", dres)
	}
	if len(drecs) != 3 {
		t.Fatalf("%d removal records, want 3", len(drecs))
	}
	after, err := next.Apply(drecs...)
	if err != nil || after.ACLs().Len() != 0 {
		t.Fatalf("removals: %v, %d left", err, after.ACLs().Len())
	}
}
