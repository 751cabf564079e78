package acl

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// Names Kafka fixes.
const (
	// ClusterName is the name of the one CLUSTER resource.
	ClusterName = "kafka-cluster"
	// Wildcard is the resource name and host that match everything, and the principal
	// name of WildcardPrincipal.
	Wildcard = "*"
	// WildcardPrincipal matches every principal.
	WildcardPrincipal = "User:*"
)

// ErrInvalid is wrapped by the errors of invalid bindings, filters and configs
// (INVALID_REQUEST at the edge for requests).
var ErrInvalid = errors.New("acl: invalid")

// Config is the authorizer's static configuration.
type Config struct {
	// SuperUsers are principals ("User:admin") allowed everything (super.users).
	SuperUsers []string
	// AllowIfNoACL is allow.everyone.if.no.acl.found: a resource no ACL applies to is
	// open to everyone. Kafka's default is false.
	AllowIfNoACL bool
}

// ParseSuperUsers parses super.users: principals separated by ';' (Kafka's format),
// each of the form type:name.
func ParseSuperUsers(s string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(s, ";") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if typ, name, ok := strings.Cut(p, ":"); !ok || typ == "" || name == "" {
			return nil, fmt.Errorf("%w: super.users entry %q: want type:name (User:admin)", ErrInvalid, p)
		}
		out = append(out, p)
	}
	return out, nil
}

// Context is who asks: the authenticated principal ("User:alice", as net/auth's
// Principal.String prints it; "User:ANONYMOUS" on PLAINTEXT listeners) and the client's
// address.
type Context struct {
	Principal string
	Host      netip.Addr
}

// HostOf returns the IP address of a connection's remote address (the zero Addr if it
// has none, which matches only "*" hosts).
func HostOf(addr net.Addr) netip.Addr {
	switch a := addr.(type) {
	case *net.TCPAddr:
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	case nil:
		return netip.Addr{}
	}
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// Action is what is asked: an operation on a resource of a type and a name (for the
// cluster, ClusterName).
type Action struct {
	Operation metadata.ACLOperation
	Resource  metadata.ACLResourceType
	Name      string
}

// Rule says why a decision was made (for audit logs, Kafka's "based on rule").
type Rule uint8

// The rules.
const (
	RuleDefaultDeny Rule = iota // ACLs apply to the resource, none matched
	RuleNoACLDeny               // no ACL applies; allow.everyone.if.no.acl.found is false
	RuleNoACLAllow              // no ACL applies; allow.everyone.if.no.acl.found is true
	RuleSuperUser               // the principal is a super user
	RuleAllowACL                // an ALLOW ACL matched and no DENY did
	RuleDenyACL                 // a DENY ACL matched
)

func (r Rule) String() string {
	return [...]string{"DefaultDeny", "NoAclDeny", "NoAclAllow", "SuperUser", "MatchingAllowAcl", "MatchingDenyAcl"}[r]
}

// Decision is the answer to one action.
type Decision struct {
	Allowed bool
	Rule    Rule
	// ACL is the deciding ACL for RuleAllowACL and RuleDenyACL.
	ACL metadata.ACL
}

// Authorizer decides actions against the ACLs of the current image. Call Update with
// each new image's ACLs (cheap when they did not change); until the first Update it
// knows no ACLs. Safe for concurrent use.
type Authorizer struct {
	superUsers   map[string]bool
	allowIfNoACL bool

	cur atomic.Pointer[index]
	mu  sync.Mutex // serialises Update's builds
}

// New returns an authorizer with cfg and no ACLs.
func New(cfg Config) *Authorizer {
	a := &Authorizer{superUsers: make(map[string]bool, len(cfg.SuperUsers)), allowIfNoACL: cfg.AllowIfNoACL}
	for _, p := range cfg.SuperUsers {
		a.superUsers[p] = true
	}
	a.cur.Store(buildIndex(nil))
	return a
}

// Update makes the authorizer use set (an image's ACLs()). It rebuilds its index only
// when set is not the set it already uses.
func (a *Authorizer) Update(set *metadata.ACLSet) {
	if a.cur.Load().set == set {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cur.Load().set == set {
		return
	}
	a.cur.Store(buildIndex(set))
}

// NumACLs is the number of ACLs the authorizer uses.
func (a *Authorizer) NumACLs() int { return a.cur.Load().n }

// IsSuperUser reports whether principal is in super.users.
func (a *Authorizer) IsSuperUser(principal string) bool { return a.superUsers[principal] }

// Authorize reports whether ctx may perform act.
func (a *Authorizer) Authorize(ctx Context, act Action) bool { return a.Decide(ctx, act).Allowed }

// Decide is Authorize with the rule that decided.
func (a *Authorizer) Decide(ctx Context, act Action) Decision {
	if a.superUsers[ctx.Principal] {
		return Decision{Allowed: true, Rule: RuleSuperUser}
	}
	return a.cur.Load().decide(ctx, act, a.allowIfNoACL)
}

// AuthorizeByResourceType reports whether ctx may perform op on at least one resource
// of type rt: Kafka's Authorizer.authorizeByResourceType (used by InitProducerId
// without a transactional id: IDEMPOTENT_WRITE on the cluster or WRITE on any topic).
// A super user, or a principal allowed op on a resource no ACL names (under
// allow.everyone.if.no.acl.found), is allowed. Otherwise some ALLOW ACL of the
// principal (or User:*) for op or ALL, from its host or "*", must be neither a "*"
// LITERAL deny nor dominated by a DENY: a LITERAL allow by a LITERAL deny of the same
// name or a PREFIXED deny that is a prefix of it; a PREFIXED allow by a PREFIXED deny
// that is a prefix of it. Implied operations play no part here (as in Kafka).
func (a *Authorizer) AuthorizeByResourceType(ctx Context, op metadata.ACLOperation, rt metadata.ACLResourceType) bool {
	if a.superUsers[ctx.Principal] {
		return true
	}
	// Kafka's default implementation first authorizes a resource named "hardcode": a
	// principal allowed on an unnamed resource (a wildcard ALLOW with no DENY, or no ACL
	// at all under allow.everyone.if.no.acl.found) is allowed.
	ix := a.cur.Load()
	if ix.decide(ctx, Action{Operation: op, Resource: rt, Name: "hardcode"}, a.allowIfNoACL).Allowed {
		return true
	}
	return ix.byResourceType(ctx, op, rt)
}

// AuthorizedOperations returns KIP-430's authorized-operations bit field of a resource
// for ctx: bit op set for each operation of ops (the resource type's, OperationsOf)
// that ctx may perform.
func (a *Authorizer) AuthorizedOperations(ctx Context, rt metadata.ACLResourceType, name string) int32 {
	var bits int32
	for _, op := range OperationsOf(rt) {
		if a.Authorize(ctx, Action{Operation: op, Resource: rt, Name: name}) {
			bits |= 1 << uint(op)
		}
	}
	return bits
}

// OperationsOf lists the operations Kafka reports in authorized-operations fields for a
// resource type (Kafka's AclEntry.supportedOperations: Metadata's topic and cluster
// operations, DescribeGroups' group operations, DescribeCluster's).
func OperationsOf(rt metadata.ACLResourceType) []metadata.ACLOperation {
	switch rt {
	case metadata.ACLResourceTopic:
		return []metadata.ACLOperation{metadata.ACLOpRead, metadata.ACLOpWrite, metadata.ACLOpCreate, metadata.ACLOpDelete,
			metadata.ACLOpAlter, metadata.ACLOpDescribe, metadata.ACLOpDescribeConfigs, metadata.ACLOpAlterConfigs}
	case metadata.ACLResourceGroup:
		return []metadata.ACLOperation{metadata.ACLOpRead, metadata.ACLOpDescribe, metadata.ACLOpDelete,
			metadata.ACLOpDescribeConfigs, metadata.ACLOpAlterConfigs}
	case metadata.ACLResourceCluster:
		return []metadata.ACLOperation{metadata.ACLOpCreate, metadata.ACLOpClusterAction, metadata.ACLOpDescribeConfigs,
			metadata.ACLOpAlterConfigs, metadata.ACLOpIdempotentWrite, metadata.ACLOpAlter, metadata.ACLOpDescribe}
	case metadata.ACLResourceTransactionalID:
		return []metadata.ACLOperation{metadata.ACLOpDescribe, metadata.ACLOpWrite}
	case metadata.ACLResourceDelegationToken:
		return []metadata.ACLOperation{metadata.ACLOpDescribe}
	case metadata.ACLResourceUser:
		return []metadata.ACLOperation{metadata.ACLOpCreateTokens, metadata.ACLOpDescribeTokens}
	}
	return nil
}

// impliedBy reports whether an ALLOW of aclOp grants op (rule 3 of the package doc).
func impliedBy(op, aclOp metadata.ACLOperation) bool {
	if aclOp == metadata.ACLOpAll || aclOp == op {
		return true
	}
	switch op {
	case metadata.ACLOpDescribe:
		return aclOp == metadata.ACLOpRead || aclOp == metadata.ACLOpWrite || aclOp == metadata.ACLOpDelete || aclOp == metadata.ACLOpAlter
	case metadata.ACLOpDescribeConfigs:
		return aclOp == metadata.ACLOpAlterConfigs
	}
	return false
}
