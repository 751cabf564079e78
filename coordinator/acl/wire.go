package acl

import (
	"cmp"
	"errors"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// The conversions between the ACL APIs' wire forms (CreateAcls 30, DescribeAcls 29,
// DeleteAcls 31) and this package's types, shared by the controller (which writes the
// records) and the brokers (which answer DescribeAcls from their image). Version 0 of
// the three APIs has no pattern type: its bindings and filters are LITERAL, as Kafka
// reads them.

// BindingOf is a CreateAcls creation as a binding.
func BindingOf(version int16, c *kmsg.CreateACLsRequestCreation) metadata.ACLBinding {
	pt := metadata.ACLPatternType(c.ResourcePatternType)
	if version == 0 {
		pt = metadata.ACLPatternLiteral
	}
	return metadata.ACLBinding{ResourceType: metadata.ACLResourceType(c.ResourceType), ResourceName: c.ResourceName,
		PatternType: pt, Principal: c.Principal, Host: c.Host, Operation: metadata.ACLOperation(c.Operation),
		Permission: metadata.ACLPermission(c.PermissionType)}
}

// DescribeFilter is a DescribeAcls request as a filter.
func DescribeFilter(r *kmsg.DescribeACLsRequest) Filter {
	pt := metadata.ACLPatternType(r.ResourcePatternType)
	if r.Version == 0 {
		pt = metadata.ACLPatternLiteral
	}
	return Filter{ResourceType: metadata.ACLResourceType(r.ResourceType), Name: r.ResourceName, PatternType: pt,
		Principal: r.Principal, Host: r.Host, Operation: metadata.ACLOperation(r.Operation),
		Permission: metadata.ACLPermission(r.PermissionType)}
}

// DeleteFilter is one DeleteAcls filter.
func DeleteFilter(version int16, f *kmsg.DeleteACLsRequestFilter) Filter {
	pt := metadata.ACLPatternType(f.ResourcePatternType)
	if version == 0 {
		pt = metadata.ACLPatternLiteral
	}
	return Filter{ResourceType: metadata.ACLResourceType(f.ResourceType), Name: f.ResourceName, PatternType: pt,
		Principal: f.Principal, Host: f.Host, Operation: metadata.ACLOperation(f.Operation),
		Permission: metadata.ACLPermission(f.PermissionType)}
}

// ErrorCode maps this package's errors to Kafka's codes (INVALID_REQUEST for
// ErrInvalid, UNKNOWN_SERVER_ERROR otherwise; 0 for nil).
func ErrorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrInvalid):
		return kerr.InvalidRequest.Code
	}
	return kerr.UnknownServerError.Code
}

// DescribeResponse answers a DescribeAcls request from set: its ACLs matching the
// request's filter, grouped by resource pattern (sorted by type, name and pattern).
func DescribeResponse(set *metadata.ACLSet, r *kmsg.DescribeACLsRequest) *kmsg.DescribeACLsResponse {
	resp := kmsg.NewPtrDescribeACLsResponse()
	resp.SetVersion(r.Version)
	acls, err := Describe(set, DescribeFilter(r))
	if err != nil {
		resp.ErrorCode = ErrorCode(err)
		msg := err.Error()
		resp.ErrorMessage = &msg
		return resp
	}
	type pattern struct {
		rt   metadata.ACLResourceType
		name string
		pt   metadata.ACLPatternType
	}
	groups := map[pattern][]kmsg.DescribeACLsResponseResourceACL{}
	var order []pattern
	for _, a := range acls {
		p := pattern{a.ResourceType, a.ResourceName, a.PatternType}
		if _, ok := groups[p]; !ok {
			order = append(order, p)
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host = a.Principal, a.Host
		e.Operation, e.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
		groups[p] = append(groups[p], e)
	}
	slices.SortFunc(order, func(a, b pattern) int {
		return cmp.Or(cmp.Compare(a.rt, b.rt), strings.Compare(a.name, b.name), cmp.Compare(a.pt, b.pt))
	})
	for _, p := range order {
		res := kmsg.NewDescribeACLsResponseResource()
		res.ResourceType, res.ResourceName = kmsg.ACLResourceType(p.rt), p.name
		res.ResourcePatternType = kmsg.ACLResourcePatternType(p.pt)
		res.ACLs = groups[p]
		resp.Resources = append(resp.Resources, res)
	}
	return resp
}

// MatchingACL is a deleted ACL as DeleteAcls reports it.
func MatchingACL(a metadata.ACL) kmsg.DeleteACLsResponseResultMatchingACL {
	m := kmsg.NewDeleteACLsResponseResultMatchingACL()
	m.ResourceType, m.ResourceName = kmsg.ACLResourceType(a.ResourceType), a.ResourceName
	m.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
	m.Principal, m.Host = a.Principal, a.Host
	m.Operation, m.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
	return m
}
