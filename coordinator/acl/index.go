package acl

import (
	"net/netip"
	"slices"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// index is the lookup structure of one ACL set (the package doc draws it). Immutable.
type index struct {
	set    *metadata.ACLSet
	n      int
	byType [metadata.ACLResourceUser + 1]*typeIndex
}

type typeIndex struct {
	literal    map[string]*group
	wildcard   *group
	prefixed   map[string]*group
	prefixLens []int // distinct len(prefix) of prefixed, ascending
	// byPrincipal lists the type's ACLs per principal, for AuthorizeByResourceType.
	byPrincipal map[string][]patternEntry
}

type group struct {
	byPrincipal map[string][]entry
}

type entry struct {
	id      metadata.UUID
	op      metadata.ACLOperation
	allow   bool
	anyHost bool
	host    netip.Addr // valid only if the ACL's host is an IP address
	b       *metadata.ACLBinding
}

type patternEntry struct {
	entry
	pattern metadata.ACLPatternType
	name    string
}

func buildIndex(set *metadata.ACLSet) *index {
	ix := &index{set: set}
	if set == nil {
		return ix
	}
	all := set.All()
	ix.n = len(all)
	for i := range all {
		a := &all[i]
		if a.ResourceType < 0 || int(a.ResourceType) >= len(ix.byType) {
			continue // Apply admits only stored resource types; be safe anyway
		}
		ti := ix.byType[a.ResourceType]
		if ti == nil {
			ti = &typeIndex{literal: map[string]*group{}, prefixed: map[string]*group{}, byPrincipal: map[string][]patternEntry{}}
			ix.byType[a.ResourceType] = ti
		}
		e := entry{id: a.ID, op: a.Operation, allow: a.Permission == metadata.ACLPermissionAllow, anyHost: a.Host == Wildcard, b: &a.ACLBinding}
		if !e.anyHost {
			if ip, err := netip.ParseAddr(a.Host); err == nil {
				e.host = ip.Unmap()
			}
		}
		var g *group
		switch {
		case a.PatternType == metadata.ACLPatternLiteral && a.ResourceName == Wildcard:
			if ti.wildcard == nil {
				ti.wildcard = &group{byPrincipal: map[string][]entry{}}
			}
			g = ti.wildcard
		case a.PatternType == metadata.ACLPatternLiteral:
			g = ti.literal[a.ResourceName]
			if g == nil {
				g = &group{byPrincipal: map[string][]entry{}}
				ti.literal[a.ResourceName] = g
			}
		case a.PatternType == metadata.ACLPatternPrefixed:
			g = ti.prefixed[a.ResourceName]
			if g == nil {
				g = &group{byPrincipal: map[string][]entry{}}
				ti.prefixed[a.ResourceName] = g
				if l := len(a.ResourceName); !slices.Contains(ti.prefixLens, l) {
					ti.prefixLens = append(ti.prefixLens, l)
				}
			}
		default:
			continue
		}
		g.byPrincipal[a.Principal] = append(g.byPrincipal[a.Principal], e)
		ti.byPrincipal[a.Principal] = append(ti.byPrincipal[a.Principal], patternEntry{entry: e, pattern: a.PatternType, name: a.ResourceName})
	}
	for _, ti := range ix.byType {
		if ti != nil {
			slices.Sort(ti.prefixLens)
		}
	}
	return ix
}

// hostMatches applies an ACL's host to the client's address.
func (e *entry) hostMatches(client netip.Addr) bool {
	return e.anyHost || (e.host.IsValid() && e.host == client)
}

// matcher accumulates rule 4 of the package doc over the groups that apply.
type matcher struct {
	ctx      Context
	op       metadata.ACLOperation
	applies  bool // some ACL applies to the resource
	allow    *entry
	deny     *entry
	wildcard string
}

// check applies group g's ACLs of the request's principal and of User:*. It returns
// true once a DENY matched (nothing can change the answer then).
func (m *matcher) check(g *group) bool {
	if g == nil {
		return false
	}
	m.applies = true
	for _, p := range [2]string{m.ctx.Principal, WildcardPrincipal} {
		es := g.byPrincipal[p]
		for i := range es {
			e := &es[i]
			if !e.hostMatches(m.ctx.Host) {
				continue
			}
			if e.allow {
				if m.allow == nil && impliedBy(m.op, e.op) {
					m.allow = e
				}
			} else if e.op == metadata.ACLOpAll || e.op == m.op {
				m.deny = e
				return true
			}
		}
		if m.ctx.Principal == WildcardPrincipal {
			break
		}
	}
	return false
}

func (ix *index) decide(ctx Context, act Action, allowIfNoACL bool) Decision {
	var ti *typeIndex
	if act.Resource >= 0 && int(act.Resource) < len(ix.byType) {
		ti = ix.byType[act.Resource]
	}
	m := matcher{ctx: ctx, op: act.Operation}
	if ti != nil {
		done := m.check(ti.literal[act.Name])
		for _, l := range ti.prefixLens {
			if done || l > len(act.Name) {
				break
			}
			done = m.check(ti.prefixed[act.Name[:l]])
		}
		if !done {
			m.check(ti.wildcard)
		}
	}
	switch {
	case m.deny != nil:
		return Decision{Allowed: false, Rule: RuleDenyACL, ACL: metadata.ACL{ID: m.deny.id, ACLBinding: *m.deny.b}}
	case m.allow != nil:
		return Decision{Allowed: true, Rule: RuleAllowACL, ACL: metadata.ACL{ID: m.allow.id, ACLBinding: *m.allow.b}}
	case !m.applies && allowIfNoACL:
		return Decision{Allowed: true, Rule: RuleNoACLAllow}
	case !m.applies:
		return Decision{Rule: RuleNoACLDeny}
	}
	return Decision{Rule: RuleDefaultDeny}
}

// byResourceType is the ACL part of Authorizer.AuthorizeByResourceType.
func (ix *index) byResourceType(ctx Context, op metadata.ACLOperation, rt metadata.ACLResourceType) bool {
	if rt < 0 || int(rt) >= len(ix.byType) || ix.byType[rt] == nil {
		return false
	}
	ti := ix.byType[rt]
	denyLiteral := map[string]bool{}
	denyPrefix := map[string]bool{}
	var allows []patternEntry
	for _, p := range [2]string{ctx.Principal, WildcardPrincipal} {
		for _, e := range ti.byPrincipal[p] {
			if !e.hostMatches(ctx.Host) || (e.op != op && e.op != metadata.ACLOpAll) {
				continue
			}
			if !e.allow {
				switch {
				case e.pattern == metadata.ACLPatternLiteral && e.name == Wildcard:
					return false
				case e.pattern == metadata.ACLPatternLiteral:
					denyLiteral[e.name] = true
				default:
					denyPrefix[e.name] = true
				}
				continue
			}
			allows = append(allows, e)
		}
		if ctx.Principal == WildcardPrincipal {
			break
		}
	}
	for _, e := range allows {
		if e.pattern == metadata.ACLPatternLiteral && e.name == Wildcard {
			return true
		}
	}
	for _, e := range allows {
		if e.pattern == metadata.ACLPatternLiteral && denyLiteral[e.name] {
			continue
		}
		dominated := false
		for l := 1; l <= len(e.name); l++ {
			if denyPrefix[e.name[:l]] {
				dominated = true
				break
			}
		}
		if !dominated {
			return true
		}
	}
	return false
}
