package acl

import (
	"fmt"
	"strings"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// ValidateBinding checks a binding of CreateAcls (30) before the controller writes it:
// the rules every stored ACL keeps (metadata.ACLBinding.Validate: Kafka's
// AclControlManager.validateNewAcl, a type:name principal) and, as Kafka's AclAuthorizer
// did, that a CLUSTER resource is named kafka-cluster (an ACL on another cluster name
// could never match). Errors wrap ErrInvalid (INVALID_REQUEST).
func ValidateBinding(b metadata.ACLBinding) error {
	if err := b.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if b.ResourceType == metadata.ACLResourceCluster && b.ResourceName != ClusterName {
		return fmt.Errorf("%w: the only valid name for the CLUSTER resource is %s", ErrInvalid, ClusterName)
	}
	return nil
}

// Filter is Kafka's AclBindingFilter (DescribeAcls' request, each of DeleteAcls'
// filters). A nil Name, Principal or Host matches any value; the enums' Any values
// match any value.
type Filter struct {
	ResourceType metadata.ACLResourceType // Any, or a concrete type
	Name         *string
	PatternType  metadata.ACLPatternType // Any, Match, Literal or Prefixed
	Principal    *string
	Host         *string
	Operation    metadata.ACLOperation  // Any, or a concrete operation
	Permission   metadata.ACLPermission // Any, Allow or Deny
}

// Validate refuses filters with UNKNOWN fields (Kafka: INVALID_REQUEST, "Unknown
// patternFilter" / "Unknown entryFilter") and values outside the enums.
func (f Filter) Validate() error {
	switch {
	case f.ResourceType == metadata.ACLResourceUnknown || f.ResourceType < 0 || f.ResourceType > metadata.ACLResourceUser:
		return fmt.Errorf("%w: filter resource type %s", ErrInvalid, f.ResourceType)
	case f.PatternType == metadata.ACLPatternUnknown || f.PatternType < 0 || f.PatternType > metadata.ACLPatternPrefixed:
		return fmt.Errorf("%w: filter pattern type %s", ErrInvalid, f.PatternType)
	case f.Operation == metadata.ACLOpUnknown || f.Operation < 0 || f.Operation > metadata.ACLOpDescribeTokens:
		return fmt.Errorf("%w: filter operation %s", ErrInvalid, f.Operation)
	case f.Permission == metadata.ACLPermissionUnknown || f.Permission < 0 || f.Permission > metadata.ACLPermissionAllow:
		return fmt.Errorf("%w: filter permission %s", ErrInvalid, f.Permission)
	}
	return nil
}

// Matches is Kafka's AclBindingFilter.matches: ResourcePatternFilter.matches (a MATCH
// filter with a name selects the ACLs that would apply to a resource of that name:
// LITERAL of the name or "*", PREFIXED of a prefix of it) and
// AccessControlEntryFilter.matches (exact principal and host; no wildcard expansion).
func (f Filter) Matches(b metadata.ACLBinding) bool {
	if f.ResourceType != metadata.ACLResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.PatternType != metadata.ACLPatternAny && f.PatternType != metadata.ACLPatternMatch && f.PatternType != b.PatternType {
		return false
	}
	if f.Name != nil {
		name := *f.Name
		switch {
		case f.PatternType == metadata.ACLPatternAny || f.PatternType == b.PatternType:
			if name != b.ResourceName {
				return false
			}
		case b.PatternType == metadata.ACLPatternLiteral:
			if name != b.ResourceName && b.ResourceName != Wildcard {
				return false
			}
		case b.PatternType == metadata.ACLPatternPrefixed:
			if !strings.HasPrefix(name, b.ResourceName) {
				return false
			}
		default:
			return false
		}
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != metadata.ACLOpAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == metadata.ACLPermissionAny || f.Permission == b.Permission
}

// Describe returns the ACLs of set that f matches, sorted by id (DescribeAcls: the
// broker answers from its image; the caller checks DESCRIBE on the cluster first and
// groups the result by resource pattern as the response wants).
func Describe(set *metadata.ACLSet, f Filter) ([]metadata.ACL, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	var out []metadata.ACL
	for _, a := range set.All() {
		if f.Matches(a.ACLBinding) {
			out = append(out, a)
		}
	}
	return out, nil
}

// CreateResult is the outcome of one binding of a CreateAcls request.
type CreateResult struct {
	Err error // nil: created, or already present (Kafka answers success for both)
}

// CreateRecords is what the active controller does for CreateAcls (30), Kafka's
// AclControlManager.createAcls: each binding is validated (ValidateBinding); a valid
// binding that set (the pending image's ACLs) already has, or that an earlier binding of
// the same request added, succeeds without a record; the others get an
// AccessControlEntryRecord with a fresh id from newID (called until it returns an id
// set does not have and this call has not used). The records are proposed as one
// entry; results are in bindings' order.
func CreateRecords(set *metadata.ACLSet, bindings []metadata.ACLBinding, newID func() metadata.UUID) ([]CreateResult, []metadata.Record) {
	results := make([]CreateResult, len(bindings))
	var recs []metadata.Record
	added := map[metadata.ACLBinding]bool{}
	used := map[metadata.UUID]bool{}
	for i, b := range bindings {
		if err := ValidateBinding(b); err != nil {
			results[i].Err = err
			continue
		}
		if _, ok := set.Find(b); ok || added[b] {
			continue
		}
		id := newID()
		for {
			if _, taken := set.Get(id); !taken && !used[id] && id != metadata.ZeroUUID {
				break
			}
			id = newID()
		}
		used[id], added[b] = true, true
		recs = append(recs, &metadata.AccessControlEntryRecord{ID: id, ACLBinding: b})
	}
	return results, recs
}

// DeleteResult is the outcome of one filter of a DeleteAcls request.
type DeleteResult struct {
	Err     error          // ErrInvalid for an invalid filter
	Matched []metadata.ACL // the ACLs the filter matched (each is deleted), by id
}

// DeleteRecords is what the active controller does for DeleteAcls (31), Kafka's
// AclControlManager.deleteAcls: each valid filter matches ACLs of set (the pending
// image's), reported in its result; one RemoveAccessControlEntryRecord per matched ACL,
// once even when several filters match it. The records are proposed as one entry
// (atomically, as Kafka does); results are in filters' order.
func DeleteRecords(set *metadata.ACLSet, filters []Filter) ([]DeleteResult, []metadata.Record) {
	results := make([]DeleteResult, len(filters))
	var recs []metadata.Record
	removed := map[metadata.UUID]bool{}
	for i, f := range filters {
		if err := f.Validate(); err != nil {
			results[i].Err = err
			continue
		}
		for _, a := range set.All() {
			if !f.Matches(a.ACLBinding) {
				continue
			}
			results[i].Matched = append(results[i].Matched, a)
			if !removed[a.ID] {
				removed[a.ID] = true
				recs = append(recs, &metadata.RemoveAccessControlEntryRecord{ID: a.ID})
			}
		}
	}
	return results, recs
}
