package acl

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"testing"

	m "github.com/samsa-broker/samsa/coordinator/metadata"
)

// bind is a compact ACL constructor: resource "topic:orders", "topic-prefix:ord",
// "group:g", "cluster", ...; perm "allow" or "deny".
func bind(resource, principal, host string, op m.ACLOperation, perm string) m.ACLBinding {
	b := m.ACLBinding{Principal: principal, Host: host, Operation: op, PatternType: m.ACLPatternLiteral, Permission: m.ACLPermissionAllow}
	if perm == "deny" {
		b.Permission = m.ACLPermissionDeny
	}
	kind, name, _ := strings.Cut(resource, ":")
	if k, ok := strings.CutSuffix(kind, "-prefix"); ok {
		kind, b.PatternType = k, m.ACLPatternPrefixed
	}
	b.ResourceName = name
	switch kind {
	case "topic":
		b.ResourceType = m.ACLResourceTopic
	case "group":
		b.ResourceType = m.ACLResourceGroup
	case "txn":
		b.ResourceType = m.ACLResourceTransactionalID
	case "token":
		b.ResourceType = m.ACLResourceDelegationToken
	case "user":
		b.ResourceType = m.ACLResourceUser
	case "cluster":
		b.ResourceType, b.ResourceName = m.ACLResourceCluster, ClusterName
	default:
		panic("bad resource " + resource)
	}
	return b
}

// imageWith returns an image holding bindings as ACLs.
func imageWith(t testing.TB, bindings ...m.ACLBinding) *m.Image {
	t.Helper()
	var recs []m.Record
	for i, b := range bindings {
		recs = append(recs, &m.AccessControlEntryRecord{ID: m.UUID{0: 1, 12: byte(i >> 24), 13: byte(i >> 16), 14: byte(i >> 8), 15: byte(i)}, ACLBinding: b})
	}
	im, err := (&m.Image{}).Apply(recs...)
	if err != nil {
		t.Fatal(err)
	}
	return im
}

func authz(t testing.TB, cfg Config, bindings ...m.ACLBinding) *Authorizer {
	a := New(cfg)
	a.Update(imageWith(t, bindings...).ACLs())
	return a
}

var (
	local  = netip.MustParseAddr("127.0.0.1")
	remote = netip.MustParseAddr("10.1.2.3")
	v6     = netip.MustParseAddr("::1")
)

func alice(host netip.Addr) Context { return Context{Principal: "User:alice", Host: host} }

func act(op m.ACLOperation, resource string) Action {
	b := bind(resource, "User:x", "*", op, "allow")
	return Action{Operation: op, Resource: b.ResourceType, Name: b.ResourceName}
}

func TestAuthorizeTable(t *testing.T) {
	const A, D = "allow", "deny"
	all := "*"
	for _, c := range []struct {
		name string
		acls []m.ACLBinding
		cfg  Config
		ctx  Context
		act  Action
		want bool
		rule Rule
	}{
		{"no acls: denied by default", nil, Config{}, alice(local), act(m.ACLOpRead, "topic:orders"), false, RuleNoACLDeny},
		{"no acls: allow.everyone.if.no.acl.found", nil, Config{AllowIfNoACL: true}, alice(local), act(m.ACLOpRead, "topic:orders"), true, RuleNoACLAllow},
		{"acl for someone else: denied even with allow.everyone", []m.ACLBinding{bind("topic:orders", "User:bob", all, m.ACLOpRead, A)},
			Config{AllowIfNoACL: true}, alice(local), act(m.ACLOpRead, "topic:orders"), false, RuleDefaultDeny},
		{"acl on another topic leaves this one open", []m.ACLBinding{bind("topic:other", "User:bob", all, m.ACLOpRead, A)},
			Config{AllowIfNoACL: true}, alice(local), act(m.ACLOpRead, "topic:orders"), true, RuleNoACLAllow},
		{"literal allow", []m.ACLBinding{bind("topic:orders", "User:alice", all, m.ACLOpRead, A)}, Config{}, alice(local), act(m.ACLOpRead, "topic:orders"), true, RuleAllowACL},
		{"literal allow, other operation", []m.ACLBinding{bind("topic:orders", "User:alice", all, m.ACLOpRead, A)}, Config{}, alice(local), act(m.ACLOpWrite, "topic:orders"), false, RuleDefaultDeny},
		{"literal is not a prefix", []m.ACLBinding{bind("topic:ord", "User:alice", all, m.ACLOpRead, A)}, Config{}, alice(local), act(m.ACLOpRead, "topic:orders"), false, RuleNoACLDeny},
		{"prefixed allow", []m.ACLBinding{bind("topic-prefix:ord", "User:alice", all, m.ACLOpRead, A)}, Config{}, alice(local), act(m.ACLOpRead, "topic:orders"), true, RuleAllowACL},
		{"prefixed equal to the name", []m.ACLBinding{bind("topic-prefix:orders", "User:alice", all, m.ACLOpRead, A)}, Config{}, alice(local), act(m.ACLOpRead, "topic:orders"), true, RuleAllowACL},
		{"prefix longer than the name", []m.ACLBinding{bind("topic-prefix:orders-eu", "User:alice", all, m.ACLOpRead, A)}, Config{}, alice(local), act(m.ACLOpRead, "topic:orders"), false, RuleNoACLDeny},
		{"prefix of another name", []m.ACLBinding{bind("topic-prefix:pay", "User:alice", all, m.ACLOpRead, A)}, Config{}, alice(local), act(m.ACLOpRead, "topic:orders"), false, RuleNoACLDeny},
		{"wildcard resource", []m.ACLBinding{bind("topic:*", "User:alice", all, m.ACLOpRead, A)}, Config{}, alice(local), act(m.ACLOpRead, "topic:orders"), true, RuleAllowACL},
		{"prefixed '*' is a prefix, not the wildcard", []m.ACLBinding{bind("topic-prefix:*", "User:alice", all, m.ACLOpRead, A)}, Config{}, alice(local), act(m.ACLOpRead, "topic:orders"), false, RuleNoACLDeny},
		{"wildcard principal", []m.ACLBinding{bind("topic:orders", "User:*", all, m.ACLOpRead, A)}, Config{}, alice(local), act(m.ACLOpRead, "topic:orders"), true, RuleAllowACL},
		{"other principal type", []m.ACLBinding{bind("topic:orders", "Group:alice", all, m.ACLOpRead, A)}, Config{}, alice(local), act(m.ACLOpRead, "topic:orders"), false, RuleDefaultDeny},
		{"resource types do not mix", []m.ACLBinding{bind("group:orders", "User:alice", all, m.ACLOpRead, A)}, Config{}, alice(local), act(m.ACLOpRead, "topic:orders"), false, RuleNoACLDeny},
		{"deny wins over allow", []m.ACLBinding{bind("topic:orders", "User:alice", all, m.ACLOpRead, A), bind("topic:orders", "User:alice", all, m.ACLOpRead, D)},
			Config{}, alice(local), act(m.ACLOpRead, "topic:orders"), false, RuleDenyACL},
		{"prefixed deny wins over literal allow", []m.ACLBinding{bind("topic:orders", "User:alice", all, m.ACLOpRead, A), bind("topic-prefix:o", "User:alice", all, m.ACLOpAll, D)},
			Config{}, alice(local), act(m.ACLOpRead, "topic:orders"), false, RuleDenyACL},
		{"wildcard deny wins over literal allow", []m.ACLBinding{bind("topic:orders", "User:alice", all, m.ACLOpRead, A), bind("topic:*", "User:*", all, m.ACLOpRead, D)},
			Config{}, alice(local), act(m.ACLOpRead, "topic:orders"), false, RuleDenyACL},
		{"deny of another principal does not apply", []m.ACLBinding{bind("topic:orders", "User:alice", all, m.ACLOpRead, A), bind("topic:orders", "User:bob", all, m.ACLOpRead, D)},
			Config{}, alice(local), act(m.ACLOpRead, "topic:orders"), true, RuleAllowACL},
		{"read implies describe", []m.ACLBinding{bind("topic:orders", "User:alice", all, m.ACLOpRead, A)}, Config{}, alice(local), act(m.ACLOpDescribe, "topic:orders"), true, RuleAllowACL},
		{"write implies describe", []m.ACLBinding{bind("topic:orders", "User:alice", all, m.ACLOpWrite, A)}, Config{}, alice(local), act(m.ACLOpDescribe, "topic:orders"), true, RuleAllowACL},
		{"delete implies describe", []m.ACLBinding{bind("topic:orders", "User:alice", all, m.ACLOpDelete, A)}, Config{}, alice(local), act(m.ACLOpDescribe, "topic:orders"), true, RuleAllowACL},
		{"alter implies describe", []m.ACLBinding{bind("topic:orders", "User:alice", all, m.ACLOpAlter, A)}, Config{}, alice(local), act(m.ACLOpDescribe, "topic:orders"), true, RuleAllowACL},
		{"create does not imply describe", []m.ACLBinding{bind("topic:orders", "User:alice", all, m.ACLOpCreate, A)}, Config{}, alice(local), act(m.ACLOpDescribe, "topic:orders"), false, RuleDefaultDeny},
		{"describe does not imply read", []m.ACLBinding{bind("topic:orders", "User:alice", all, m.ACLOpDescribe, A)}, Config{}, alice(local), act(m.ACLOpRead, "topic:orders"), false, RuleDefaultDeny},
		{"alter configs implies describe configs", []m.ACLBinding{bind("topic:orders", "User:alice", all, m.ACLOpAlterConfigs, A)}, Config{}, alice(local), act(m.ACLOpDescribeConfigs, "topic:orders"), true, RuleAllowACL},
		{"alter does not imply alter configs", []m.ACLBinding{bind("topic:orders", "User:alice", all, m.ACLOpAlter, A)}, Config{}, alice(local), act(m.ACLOpAlterConfigs, "topic:orders"), false, RuleDefaultDeny},
		{"deny read does not deny describe", []m.ACLBinding{bind("topic:orders", "User:alice", all, m.ACLOpDescribe, A), bind("topic:orders", "User:alice", all, m.ACLOpRead, D)},
			Config{}, alice(local), act(m.ACLOpDescribe, "topic:orders"), true, RuleAllowACL},
		{"deny alter configs does not deny describe configs", []m.ACLBinding{bind("topic:orders", "User:alice", all, m.ACLOpAll, A), bind("topic:orders", "User:alice", all, m.ACLOpAlterConfigs, D)},
			Config{}, alice(local), act(m.ACLOpDescribeConfigs, "topic:orders"), true, RuleAllowACL},
		{"allow all", []m.ACLBinding{bind("cluster", "User:alice", all, m.ACLOpAll, A)}, Config{}, alice(local), act(m.ACLOpClusterAction, "cluster"), true, RuleAllowACL},
		{"deny all denies describe", []m.ACLBinding{bind("topic:orders", "User:alice", all, m.ACLOpRead, A), bind("topic:orders", "User:alice", all, m.ACLOpAll, D)},
			Config{}, alice(local), act(m.ACLOpDescribe, "topic:orders"), false, RuleDenyACL},
		{"host match", []m.ACLBinding{bind("topic:orders", "User:alice", "10.1.2.3", m.ACLOpRead, A)}, Config{}, alice(remote), act(m.ACLOpRead, "topic:orders"), true, RuleAllowACL},
		{"host mismatch", []m.ACLBinding{bind("topic:orders", "User:alice", "10.1.2.3", m.ACLOpRead, A)}, Config{}, alice(local), act(m.ACLOpRead, "topic:orders"), false, RuleDefaultDeny},
		{"deny from one host only", []m.ACLBinding{bind("topic:orders", "User:alice", all, m.ACLOpRead, A), bind("topic:orders", "User:alice", "10.1.2.3", m.ACLOpRead, D)},
			Config{}, alice(local), act(m.ACLOpRead, "topic:orders"), true, RuleAllowACL},
		{"deny from that host", []m.ACLBinding{bind("topic:orders", "User:alice", all, m.ACLOpRead, A), bind("topic:orders", "User:alice", "10.1.2.3", m.ACLOpRead, D)},
			Config{}, alice(remote), act(m.ACLOpRead, "topic:orders"), false, RuleDenyACL},
		{"ipv6 host in Java's form", []m.ACLBinding{bind("topic:orders", "User:alice", "0:0:0:0:0:0:0:1", m.ACLOpRead, A)}, Config{}, alice(v6), act(m.ACLOpRead, "topic:orders"), true, RuleAllowACL},
		{"ipv6 host short form", []m.ACLBinding{bind("topic:orders", "User:alice", "::1", m.ACLOpRead, A)}, Config{}, alice(v6), act(m.ACLOpRead, "topic:orders"), true, RuleAllowACL},
		{"hostname hosts never match", []m.ACLBinding{bind("topic:orders", "User:alice", "localhost", m.ACLOpRead, A)}, Config{}, alice(local), act(m.ACLOpRead, "topic:orders"), false, RuleDefaultDeny},
		{"unknown client address matches only *", []m.ACLBinding{bind("topic:orders", "User:alice", "10.1.2.3", m.ACLOpRead, A)}, Config{}, alice(netip.Addr{}), act(m.ACLOpRead, "topic:orders"), false, RuleDefaultDeny},
		{"super user beats deny", []m.ACLBinding{bind("topic:orders", "User:alice", all, m.ACLOpAll, D)}, Config{SuperUsers: []string{"User:alice"}}, alice(local), act(m.ACLOpRead, "topic:orders"), true, RuleSuperUser},
		{"super user of another type", nil, Config{SuperUsers: []string{"Group:alice"}}, alice(local), act(m.ACLOpRead, "topic:orders"), false, RuleNoACLDeny},
		{"group", []m.ACLBinding{bind("group-prefix:app-", "User:alice", all, m.ACLOpRead, A)}, Config{}, alice(local), act(m.ACLOpRead, "group:app-1"), true, RuleAllowACL},
		{"transactional id", []m.ACLBinding{bind("txn:tx-1", "User:alice", all, m.ACLOpWrite, A)}, Config{}, alice(local), act(m.ACLOpDescribe, "txn:tx-1"), true, RuleAllowACL},
		{"delegation token", []m.ACLBinding{bind("token:tok", "User:alice", all, m.ACLOpDescribe, A)}, Config{}, alice(local), act(m.ACLOpDescribe, "token:tok"), true, RuleAllowACL},
		{"user resource", []m.ACLBinding{bind("user:User:bob", "User:alice", all, m.ACLOpCreateTokens, A)}, Config{}, alice(local), act(m.ACLOpCreateTokens, "user:User:bob"), true, RuleAllowACL},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := authz(t, c.cfg, c.acls...)
			d := a.Decide(c.ctx, c.act)
			if d.Allowed != c.want || d.Rule != c.rule {
				t.Fatalf("Decide = %v by %s, want %v by %s", d.Allowed, d.Rule, c.want, c.rule)
			}
			if d.Rule == RuleAllowACL || d.Rule == RuleDenyACL {
				if d.ACL.ID == (m.UUID{}) || d.ACL.Permission == m.ACLPermissionUnknown {
					t.Fatalf("deciding ACL not reported: %+v", d.ACL)
				}
			}
			if got := reference(c.acls, c.cfg, c.ctx, c.act); got != c.want {
				t.Fatalf("the reference model says %v", got)
			}
		})
	}
}

// reference is the package doc's rules applied by scanning every ACL: the model the
// index is checked against.
func reference(acls []m.ACLBinding, cfg Config, ctx Context, act Action) bool {
	for _, s := range cfg.SuperUsers {
		if s == ctx.Principal {
			return true
		}
	}
	applies, allowed := false, false
	for _, b := range acls {
		if b.ResourceType != act.Resource {
			continue
		}
		switch b.PatternType {
		case m.ACLPatternLiteral:
			if b.ResourceName != act.Name && b.ResourceName != "*" {
				continue
			}
		case m.ACLPatternPrefixed:
			if !strings.HasPrefix(act.Name, b.ResourceName) {
				continue
			}
		}
		applies = true
		if b.Principal != ctx.Principal && b.Principal != "User:*" {
			continue
		}
		if b.Host != "*" {
			ip, err := netip.ParseAddr(b.Host)
			if err != nil || !ctx.Host.IsValid() || ip.Unmap() != ctx.Host {
				continue
			}
		}
		if b.Permission == m.ACLPermissionDeny {
			if b.Operation == m.ACLOpAll || b.Operation == act.Operation {
				return false
			}
			continue
		}
		ok := b.Operation == m.ACLOpAll || b.Operation == act.Operation
		switch act.Operation {
		case m.ACLOpDescribe:
			ok = ok || b.Operation == m.ACLOpRead || b.Operation == m.ACLOpWrite || b.Operation == m.ACLOpDelete || b.Operation == m.ACLOpAlter
		case m.ACLOpDescribeConfigs:
			ok = ok || b.Operation == m.ACLOpAlterConfigs
		}
		allowed = allowed || ok
	}
	if allowed {
		return true
	}
	return !applies && cfg.AllowIfNoACL
}

// TestAuthorizeMatchesModel checks the index against the reference on random ACL sets
// and requests drawn from small alphabets, so that prefixes, wildcards, hosts and
// principals collide often.
func TestAuthorizeMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "ab", "abc", "abd", "b", "ba", "*"}
	principals := []string{"User:alice", "User:bob", "User:*", "Group:alice"}
	hosts := []string{"*", "10.0.0.1", "10.0.0.2", "::1"}
	types := []m.ACLResourceType{m.ACLResourceTopic, m.ACLResourceGroup}
	ops := []m.ACLOperation{m.ACLOpAll, m.ACLOpRead, m.ACLOpWrite, m.ACLOpDescribe, m.ACLOpAlter, m.ACLOpAlterConfigs, m.ACLOpDescribeConfigs, m.ACLOpCreate}
	clients := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), v6, {}}
	for round := 0; round < 300; round++ {
		seen := map[m.ACLBinding]bool{}
		var acls []m.ACLBinding
		for range rng.IntN(12) {
			b := m.ACLBinding{ResourceType: types[rng.IntN(len(types))], ResourceName: names[rng.IntN(len(names))],
				PatternType: m.ACLPatternLiteral, Principal: principals[rng.IntN(len(principals))], Host: hosts[rng.IntN(len(hosts))],
				Operation: ops[rng.IntN(len(ops))], Permission: m.ACLPermissionAllow}
			if rng.IntN(3) == 0 {
				b.PatternType = m.ACLPatternPrefixed
			}
			if rng.IntN(4) == 0 {
				b.Permission = m.ACLPermissionDeny
			}
			if !seen[b] {
				seen[b] = true
				acls = append(acls, b)
			}
		}
		cfg := Config{AllowIfNoACL: rng.IntN(2) == 0}
		if rng.IntN(5) == 0 {
			cfg.SuperUsers = []string{"User:bob"}
		}
		a := authz(t, cfg, acls...)
		for range 40 {
			ctx := Context{Principal: principals[rng.IntN(2)], Host: clients[rng.IntN(len(clients))]}
			ac := Action{Operation: ops[1+rng.IntN(len(ops)-1)], Resource: types[rng.IntN(len(types))], Name: names[rng.IntN(len(names)-1)] + []string{"", "x"}[rng.IntN(2)]}
			if got, want := a.Authorize(ctx, ac), reference(acls, cfg, ctx, ac); got != want {
				t.Fatalf("round %d: %+v %+v over %v: got %v, model %v", round, ctx, ac, acls, got, want)
			}
		}
	}
}

func TestAuthorizeByResourceType(t *testing.T) {
	const A, D = "allow", "deny"
	w := m.ACLOpWrite
	for _, c := range []struct {
		name string
		acls []m.ACLBinding
		cfg  Config
		want bool
	}{
		{"no acls", nil, Config{}, false},
		{"no acls, allow everyone", nil, Config{AllowIfNoACL: true}, true},
		{"super user", nil, Config{SuperUsers: []string{"User:alice"}}, true},
		{"literal allow", []m.ACLBinding{bind("topic:t1", "User:alice", "*", w, A)}, Config{}, true},
		{"literal allow, literal deny of the same name", []m.ACLBinding{bind("topic:t1", "User:alice", "*", w, A), bind("topic:t1", "User:alice", "*", w, D)}, Config{}, false},
		{"literal allow, literal deny of another name", []m.ACLBinding{bind("topic:t1", "User:alice", "*", w, A), bind("topic:t2", "User:alice", "*", w, D)}, Config{}, true},
		{"literal allow dominated by a prefixed deny", []m.ACLBinding{bind("topic:t1", "User:alice", "*", w, A), bind("topic-prefix:t", "User:alice", "*", w, D)}, Config{}, false},
		{"prefixed allow dominated by a shorter prefixed deny", []m.ACLBinding{bind("topic-prefix:t1", "User:alice", "*", w, A), bind("topic-prefix:t", "User:alice", "*", w, D)}, Config{}, false},
		{"prefixed allow not dominated by a longer prefixed deny", []m.ACLBinding{bind("topic-prefix:t", "User:alice", "*", w, A), bind("topic-prefix:t1", "User:alice", "*", w, D)}, Config{}, true},
		{"prefixed allow, literal deny of the prefix", []m.ACLBinding{bind("topic-prefix:t", "User:alice", "*", w, A), bind("topic:t", "User:alice", "*", w, D)}, Config{}, true},
		{"wildcard allow", []m.ACLBinding{bind("topic:*", "User:alice", "*", w, A), bind("topic:t1", "User:alice", "*", w, D)}, Config{}, true},
		{"wildcard deny", []m.ACLBinding{bind("topic:t1", "User:alice", "*", w, A), bind("topic:*", "User:*", "*", w, D)}, Config{}, false},
		{"allow of another operation", []m.ACLBinding{bind("topic:t1", "User:alice", "*", m.ACLOpRead, A)}, Config{}, false},
		{"allow all", []m.ACLBinding{bind("topic:t1", "User:alice", "*", m.ACLOpAll, A)}, Config{}, true},
		{"allow from another host", []m.ACLBinding{bind("topic:t1", "User:alice", "10.9.9.9", w, A)}, Config{}, false},
		{"allow for User:*", []m.ACLBinding{bind("topic:t1", "User:*", "*", w, A)}, Config{}, true},
		{"allow of another principal", []m.ACLBinding{bind("topic:t1", "User:bob", "*", w, A)}, Config{}, false},
		{"allow on a group", []m.ACLBinding{bind("group:t1", "User:alice", "*", w, A)}, Config{}, false},
		{"deny on another type does not matter", []m.ACLBinding{bind("topic:t1", "User:alice", "*", w, A), bind("group:*", "User:alice", "*", w, D)}, Config{}, true},
	} {
		a := authz(t, c.cfg, c.acls...)
		if got := a.AuthorizeByResourceType(alice(local), w, m.ACLResourceTopic); got != c.want {
			t.Errorf("%s: AuthorizeByResourceType = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestAuthorizedOperations(t *testing.T) {
	a := authz(t, Config{}, bind("topic:orders", "User:alice", "*", m.ACLOpRead, "allow"),
		bind("topic:orders", "User:alice", "*", m.ACLOpAlterConfigs, "allow"))
	got := a.AuthorizedOperations(alice(local), m.ACLResourceTopic, "orders")
	want := int32(1<<m.ACLOpRead | 1<<m.ACLOpDescribe | 1<<m.ACLOpAlterConfigs | 1<<m.ACLOpDescribeConfigs)
	if got != want {
		t.Fatalf("AuthorizedOperations = %b, want %b", got, want)
	}
	if OperationsOf(m.ACLResourceAny) != nil {
		t.Fatal("operations of ANY")
	}
}

func TestUpdateSharesIndex(t *testing.T) {
	im := imageWith(t, bind("topic:orders", "User:alice", "*", m.ACLOpRead, "allow"))
	a := New(Config{})
	if a.Authorize(alice(local), act(m.ACLOpRead, "topic:orders")) {
		t.Fatal("allowed before the first Update")
	}
	a.Update(im.ACLs())
	ix := a.cur.Load()
	a.Update(im.ACLs())
	if a.cur.Load() != ix || a.NumACLs() != 1 {
		t.Fatal("Update rebuilt an unchanged set")
	}
	next, err := im.Apply(&m.RemoveAccessControlEntryRecord{ID: im.ACLs().All()[0].ID})
	if err != nil {
		t.Fatal(err)
	}
	a.Update(next.ACLs())
	if a.Authorize(alice(local), act(m.ACLOpRead, "topic:orders")) || a.NumACLs() != 0 {
		t.Fatal("a removed ACL still allows")
	}
}

func TestParseSuperUsers(t *testing.T) {
	got, err := ParseSuperUsers(" User:admin ; User:CN=broker,OU=x;;")
	if err != nil || len(got) != 2 || got[0] != "User:admin" || got[1] != "User:CN=broker,OU=x" {
		t.Fatalf("ParseSuperUsers = %q, %v", got, err)
	}
	for _, bad := range []string{"admin", ":x", "User:"} {
		if _, err := ParseSuperUsers(bad); err == nil {
			t.Errorf("ParseSuperUsers(%q) accepted", bad)
		}
	}
}

func TestHostOf(t *testing.T) {
	for _, c := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 9}, "10.1.2.3"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:10.1.2.3"), Port: 9}, "10.1.2.3"},
		{&net.TCPAddr{IP: net.ParseIP("::1"), Port: 9}, "::1"},
		{&net.UDPAddr{IP: net.ParseIP("10.0.0.9"), Port: 1}, "10.0.0.9"},
	} {
		if got := HostOf(c.addr); got.String() != c.want {
			t.Errorf("HostOf(%v) = %v", c.addr, got)
		}
	}
	if HostOf(nil).IsValid() {
		t.Error("HostOf(nil) is valid")
	}
}

// BenchmarkAuthorize: 10,000 ACLs (9,000 literal topic ACLs on 3,000 topics for 1,000
// principals, 500 prefixed topic ACLs, 500 group ACLs, a wildcard deny), checks that hit
// and miss, and the cost of building the index.
func BenchmarkAuthorize(b *testing.B) {
	var acls []m.ACLBinding
	for i := range 9000 {
		acls = append(acls, bind(fmt.Sprintf("topic:topic-%d", i/3), fmt.Sprintf("User:u%d", i%1000), "*", m.ACLOpRead, "allow"))
	}
	for i := range 500 {
		acls = append(acls, bind(fmt.Sprintf("topic-prefix:team-%d-", i), fmt.Sprintf("User:u%d", i), "*", m.ACLOpWrite, "allow"))
		acls = append(acls, bind(fmt.Sprintf("group:g-%d", i), fmt.Sprintf("User:u%d", i), "*", m.ACLOpRead, "allow"))
	}
	acls = append(acls, bind("topic:*", "User:*", "10.9.9.9", m.ACLOpAll, "deny"))
	a := authz(b, Config{}, acls...)
	if a.NumACLs() != 10001 {
		b.Fatalf("%d ACLs", a.NumACLs())
	}
	cases := []struct {
		name string
		ctx  Context
		act  Action
		want bool
	}{
		{"literal-hit", Context{Principal: "User:u7", Host: local}, Action{m.ACLOpRead, m.ACLResourceTopic, "topic-2"}, true},
		{"literal-miss", Context{Principal: "User:u9", Host: local}, Action{m.ACLOpRead, m.ACLResourceTopic, "topic-2"}, false},
		{"prefixed-hit", Context{Principal: "User:u42", Host: local}, Action{m.ACLOpWrite, m.ACLResourceTopic, "team-42-events"}, true},
		{"implied-describe", Context{Principal: "User:u7", Host: local}, Action{m.ACLOpDescribe, m.ACLResourceTopic, "topic-2"}, true},
		{"wildcard-deny", Context{Principal: "User:u7", Host: netip.MustParseAddr("10.9.9.9")}, Action{m.ACLOpRead, m.ACLResourceTopic, "topic-7"}, false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if a.Authorize(c.ctx, c.act) != c.want {
					b.Fatal("wrong decision")
				}
			}
		})
	}
	b.Run("build-index", func(b *testing.B) {
		set := imageWith(b, acls...).ACLs()
		b.ReportAllocs()
		for b.Loop() {
			buildIndex(set)
		}
	})
}
