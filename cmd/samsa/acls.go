package main

// samsa acls: the jobs of Kafka's kafka-acls.sh, over kmsg (DescribeAcls 29,
// CreateAcls 30, DeleteAcls 31).
//
//	samsa acls list   [resources] [--resource-pattern-type T] [--principal P]...
//	samsa acls create resources (--allow-principal P | --deny-principal P)...
//	      [--operation OP]... [--host H | --allow-host H | --deny-host H]...
//	      [--resource-pattern-type literal|prefixed]
//	samsa acls delete resources [--allow-principal P | --deny-principal P | --principal P]...
//	      [--operation OP]... [--host H]... [--resource-pattern-type T]
//	samsa acls create|delete ... --producer [--idempotent] | --consumer
//
// resources: --topic T, --group G, --transactional-id X (each repeatable), --cluster.
// --producer and --consumer are kafka-acls.sh's shortcuts in place of --operation:
// --producer is WRITE, DESCRIBE and CREATE on the topics and WRITE and DESCRIBE on the
// transactional ids (with --idempotent also IDEMPOTENT_WRITE on the cluster);
// --consumer is READ and DESCRIBE on the topics and READ on the groups.
// As in kafka-acls.sh: create adds every combination of resource, principal, host
// (default *) and operation (default All); --resource-pattern-type is literal by
// default, and list and delete also take match (the ACLs that apply to the named
// resource: literal, wildcard and prefixed) and any. list without a resource lists
// every ACL. delete removes every ACL of its resources that matches the principals,
// hosts and operations given (all of them when none is), and prints each one it
// removed; unlike kafka-acls.sh it does not ask for confirmation. A broker without an
// authorizer answers SECURITY_DISABLED.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register("acls", "ACLs: list, create, delete", runAcls)
}

const aclsUsage = `usage: samsa acls <command> [flags]
  list                      ACLs, grouped by resource (every ACL without a resource);
                            --principal P (repeatable) to filter
  create                    --allow-principal P / --deny-principal P (User:name,
                            repeatable), --operation OP (Read, Write, Create, Delete,
                            Alter, Describe, ClusterAction, DescribeConfigs,
                            AlterConfigs, IdempotentWrite, All; repeatable; default
                            All), --host H (default *; --allow-host, --deny-host)
  delete                    the ACLs of the resources matching the principals, hosts
                            and operations given (all of them if none is)
  create, delete: --producer (WRITE, DESCRIBE, CREATE on --topic; WRITE, DESCRIBE on
                            --transactional-id; --idempotent: IDEMPOTENT_WRITE on the
                            cluster) or --consumer (READ, DESCRIBE on --topic; READ on
                            --group) instead of --operation
resources: --topic T, --group G, --transactional-id X (repeatable), --cluster;
  --resource-pattern-type literal (default), prefixed; list, delete: also match, any
common flags: --bootstrap-server host:port,... (default 127.0.0.1:9092),
  --command-config FILE (Kafka client properties), --timeout 30s`

type aclsOpts struct {
	allow, deny, principals repeated
	hosts, allowHosts       repeated
	denyHosts, ops          repeated
	topics, groups, txnIDs  repeated
	cluster                 bool
	pattern                 string
	producer, consumer      bool
	idempotent              bool
}

func runAcls(args []string) int { return aclsMain(args, os.Stdout) }

// aclsMain runs `samsa acls` with its results on out.
func aclsMain(args []string, out io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(os.Stderr, aclsUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub := args[0]
	a := newAdminCmd("acls "+sub, aclsUsage)
	var o aclsOpts
	fs := a.fs
	fs.Var(&o.allow, "allow-principal", "principal allowed (User:name; repeatable)")
	fs.Var(&o.deny, "deny-principal", "principal denied (User:name; repeatable)")
	fs.Var(&o.principals, "principal", "list, delete: principal to filter on (repeatable)")
	fs.Var(&o.hosts, "host", "host of the ACL, allow and deny (repeatable; default *)")
	fs.Var(&o.allowHosts, "allow-host", "host of the allow ACLs (repeatable)")
	fs.Var(&o.denyHosts, "deny-host", "host of the deny ACLs (repeatable)")
	fs.Var(&o.ops, "operation", "operation (repeatable; create: default All)")
	fs.Var(&o.topics, "topic", "topic resource (repeatable)")
	fs.Var(&o.groups, "group", "group resource (repeatable)")
	fs.Var(&o.txnIDs, "transactional-id", "transactional id resource (repeatable)")
	fs.BoolVar(&o.cluster, "cluster", false, "the cluster resource")
	fs.StringVar(&o.pattern, "resource-pattern-type", "literal", "literal, prefixed; list, delete: also match, any")
	fs.BoolVar(&o.producer, "producer", false, "create, delete: a producer's ACLs on the topics and transactional ids")
	fs.BoolVar(&o.idempotent, "idempotent", false, "with --producer: IDEMPOTENT_WRITE on the cluster too")
	fs.BoolVar(&o.consumer, "consumer", false, "create, delete: a consumer's ACLs on the topics and groups")
	pos, ok := a.parse(args[1:])
	if !ok {
		return 2
	}
	if len(pos) > 0 {
		fmt.Fprintf(os.Stderr, "samsa acls %s: unexpected arguments %q\n", sub, pos)
		return 2
	}
	var f func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error
	switch sub {
	case "list":
		f = func(ctx context.Context, cl *kgo.Client, _ *kadm.Client) error { return aclsList(ctx, cl, out, &o) }
	case "create":
		f = func(ctx context.Context, cl *kgo.Client, _ *kadm.Client) error { return aclsCreate(ctx, cl, out, &o) }
	case "delete":
		f = func(ctx context.Context, cl *kgo.Client, _ *kadm.Client) error { return aclsDelete(ctx, cl, out, &o) }
	default:
		fmt.Fprintf(os.Stderr, "samsa acls: unknown command %q\n%s\n", sub, aclsUsage)
		return 2
	}
	return a.run(f)
}

// aclResource is one resource pattern (or pattern filter).
type aclResource struct {
	typ     kmsg.ACLResourceType
	name    *string // nil: any name (filters only)
	pattern kmsg.ACLResourcePatternType
	ops     []kmsg.ACLOperation // create, delete: the operations on it
}

// aclEntry is one ACL's principal, host, operation and permission.
type aclEntry struct {
	principal string
	host      string
	op        kmsg.ACLOperation
	perm      kmsg.ACLPermissionType
}

func parsePattern(s string, create bool) (kmsg.ACLResourcePatternType, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "literal":
		return kmsg.ACLResourcePatternTypeLiteral, nil
	case "prefixed":
		return kmsg.ACLResourcePatternTypePrefixed, nil
	case "match":
		if !create {
			return kmsg.ACLResourcePatternTypeMatch, nil
		}
	case "any":
		if !create {
			return kmsg.ACLResourcePatternTypeAny, nil
		}
	}
	if create {
		return 0, fmt.Errorf("--resource-pattern-type %q: create takes literal or prefixed", s)
	}
	return 0, fmt.Errorf("--resource-pattern-type %q: want literal, prefixed, match or any", s)
}

// resources are the resources the flags name, with pattern type pt.
func (o *aclsOpts) resources(pt kmsg.ACLResourcePatternType) []aclResource {
	var out []aclResource
	add := func(typ kmsg.ACLResourceType, names []string) {
		for _, n := range names {
			out = append(out, aclResource{typ: typ, name: kmsg.StringPtr(strings.TrimSpace(n)), pattern: pt})
		}
	}
	add(kmsg.ACLResourceTypeTopic, o.topics)
	add(kmsg.ACLResourceTypeGroup, o.groups)
	add(kmsg.ACLResourceTypeTransactionalId, o.txnIDs)
	if o.cluster {
		out = append(out, aclResource{typ: kmsg.ACLResourceTypeCluster, name: kmsg.StringPtr("kafka-cluster"), pattern: pt})
	}
	return out
}

// plan is create's and delete's resources with their operations: --operation's (def
// when none is given) on each, or --producer's and --consumer's.
func (o *aclsOpts) plan(pt kmsg.ACLResourcePatternType, def kmsg.ACLOperation) ([]aclResource, error) {
	if !o.producer && !o.consumer {
		if o.idempotent {
			return nil, errors.New("--idempotent goes with --producer")
		}
		ops, err := parseOps(o.ops, def)
		if err != nil {
			return nil, err
		}
		res := o.resources(pt)
		for i := range res {
			res[i].ops = ops
		}
		return res, nil
	}
	switch {
	case len(o.ops) > 0:
		return nil, errors.New("--producer and --consumer replace --operation")
	case len(o.topics) == 0:
		return nil, errors.New("--producer and --consumer need --topic")
	case o.consumer && len(o.groups) == 0:
		return nil, errors.New("--consumer needs --group")
	case o.cluster:
		return nil, errors.New("--producer and --consumer take no --cluster (--idempotent: IDEMPOTENT_WRITE on it)")
	case o.idempotent && !o.producer:
		return nil, errors.New("--idempotent goes with --producer")
	}
	const (
		read, write, create = kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate
		describe, idem      = kmsg.ACLOperationDescribe, kmsg.ACLOperationIdempotentWrite
	)
	var res []aclResource
	for _, r := range o.resources(pt) {
		var ops []kmsg.ACLOperation
		if o.producer {
			switch r.typ {
			case kmsg.ACLResourceTypeTopic:
				ops = append(ops, write, describe, create)
			case kmsg.ACLResourceTypeTransactionalId:
				ops = append(ops, write, describe)
			}
		}
		if o.consumer {
			switch r.typ {
			case kmsg.ACLResourceTypeTopic:
				ops = append(ops, read)
				if !o.producer {
					ops = append(ops, describe)
				}
			case kmsg.ACLResourceTypeGroup:
				ops = append(ops, read)
			}
		}
		if len(ops) > 0 {
			r.ops = ops
			res = append(res, r)
		}
	}
	if o.idempotent {
		res = append(res, aclResource{typ: kmsg.ACLResourceTypeCluster, name: kmsg.StringPtr("kafka-cluster"), pattern: kmsg.ACLResourcePatternTypeLiteral,
			ops: []kmsg.ACLOperation{idem}})
	}
	return res, nil
}

func parseOps(ss []string, def kmsg.ACLOperation) ([]kmsg.ACLOperation, error) {
	if len(ss) == 0 {
		return []kmsg.ACLOperation{def}, nil
	}
	var out []kmsg.ACLOperation
	for _, s := range ss {
		op, err := kmsg.ParseACLOperation(s)
		if err != nil || op == kmsg.ACLOperationAny && def != kmsg.ACLOperationAny {
			return nil, fmt.Errorf("--operation %q: want Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens or All", s)
		}
		out = append(out, op)
	}
	return out, nil
}

func checkPrincipals(ps []string) error {
	for _, p := range ps {
		if typ, name, ok := strings.Cut(p, ":"); !ok || typ == "" || name == "" {
			return fmt.Errorf("principal %q: want Type:name, e.g. User:alice", p)
		}
	}
	return nil
}

// entries are the allow and deny entries the flags give (for create, every
// combination; hosts default to *).
func (o *aclsOpts) entries(ops []kmsg.ACLOperation) ([]aclEntry, error) {
	if err := checkPrincipals(append(append([]string{}, o.allow...), o.deny...)); err != nil {
		return nil, err
	}
	hostsOf := func(specific []string) []string {
		hs := append(append([]string{}, o.hosts...), specific...)
		if len(hs) == 0 {
			hs = []string{"*"}
		}
		return hs
	}
	var out []aclEntry
	for _, side := range []struct {
		ps    []string
		hosts []string
		perm  kmsg.ACLPermissionType
	}{{o.allow, o.allowHosts, kmsg.ACLPermissionTypeAllow}, {o.deny, o.denyHosts, kmsg.ACLPermissionTypeDeny}} {
		for _, p := range side.ps {
			for _, h := range hostsOf(side.hosts) {
				for _, op := range ops {
					out = append(out, aclEntry{principal: p, host: h, op: op, perm: side.perm})
				}
			}
		}
	}
	return out, nil
}

func formatResource(typ kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType) string {
	return fmt.Sprintf("ResourcePattern(resourceType=%s, name=%s, patternType=%s)", typ, name, pt)
}

func formatEntry(principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) string {
	return fmt.Sprintf("(principal=%s, host=%s, operation=%s, permissionType=%s)", principal, host, op, perm)
}

func aclsCreate(ctx context.Context, cl *kgo.Client, w io.Writer, o *aclsOpts) error {
	pt, err := parsePattern(o.pattern, true)
	if err != nil {
		return err
	}
	if len(o.resources(pt)) == 0 {
		return errors.New("create needs a resource: --topic, --group, --transactional-id or --cluster")
	}
	if len(o.principals) > 0 {
		return errors.New("create takes --allow-principal or --deny-principal, not --principal")
	}
	res, err := o.plan(pt, kmsg.ACLOperationAll)
	if err != nil {
		return err
	}
	entriesOf := make([][]aclEntry, len(res))
	for i, r := range res {
		if entriesOf[i], err = o.entries(r.ops); err != nil {
			return err
		}
		if len(entriesOf[i]) == 0 {
			return errors.New("create needs --allow-principal or --deny-principal")
		}
	}
	req := kmsg.NewPtrCreateACLsRequest()
	for i, r := range res {
		for _, e := range entriesOf[i] {
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType, c.ResourceName, c.ResourcePatternType = r.typ, *r.name, r.pattern
			c.Principal, c.Host, c.Operation, c.PermissionType = e.principal, e.host, e.op, e.perm
			req.Creations = append(req.Creations, c)
		}
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if len(resp.Results) != len(req.Creations) {
		return fmt.Errorf("%d results for %d ACLs", len(resp.Results), len(req.Creations))
	}
	var errs []error
	i := 0
	for ri, r := range res {
		fmt.Fprintf(w, "Adding ACLs for resource `%s`:\n", formatResource(r.typ, *r.name, r.pattern))
		for _, e := range entriesOf[ri] {
			rr := resp.Results[i]
			i++
			line := "\t" + formatEntry(e.principal, e.host, e.op, e.perm)
			if err := kerr.ErrorForCode(rr.ErrorCode); err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %w%s", formatResource(r.typ, *r.name, r.pattern), line[1:], err, errMessage(rr.ErrorMessage)))
				line += " FAILED"
			}
			fmt.Fprintln(w, line)
		}
		fmt.Fprintln(w)
	}
	return errors.Join(errs...)
}

func errMessage(m *string) string {
	if m == nil || *m == "" {
		return ""
	}
	return ": " + *m
}

func aclsList(ctx context.Context, cl *kgo.Client, w io.Writer, o *aclsOpts) error {
	pt, err := parsePattern(o.pattern, false)
	if err != nil {
		return err
	}
	res := o.resources(pt)
	if len(res) == 0 {
		res = []aclResource{{typ: kmsg.ACLResourceTypeAny, pattern: kmsg.ACLResourcePatternTypeAny}}
	}
	if len(o.allow) > 0 || len(o.deny) > 0 || len(o.ops) > 0 || len(o.hosts) > 0 || o.producer || o.consumer || o.idempotent {
		return errors.New("list filters on resources and --principal only")
	}
	if err := checkPrincipals(o.principals); err != nil {
		return err
	}
	principals := []*string{nil}
	if len(o.principals) > 0 {
		principals = principals[:0]
		for _, p := range o.principals {
			principals = append(principals, kmsg.StringPtr(p))
		}
	}
	type key struct {
		typ  kmsg.ACLResourceType
		name string
		pt   kmsg.ACLResourcePatternType
	}
	got := map[key]map[string]bool{}
	for _, r := range res {
		for _, p := range principals {
			req := kmsg.NewPtrDescribeACLsRequest()
			req.ResourceType, req.ResourceName, req.ResourcePatternType = r.typ, r.name, r.pattern
			req.Principal, req.Operation, req.PermissionType = p, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return err
			}
			if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
				return fmt.Errorf("%w%s", err, errMessage(resp.ErrorMessage))
			}
			for _, rr := range resp.Resources {
				k := key{rr.ResourceType, rr.ResourceName, rr.ResourcePatternType}
				if got[k] == nil {
					got[k] = map[string]bool{}
				}
				for _, a := range rr.ACLs {
					got[k][formatEntry(a.Principal, a.Host, a.Operation, a.PermissionType)] = true
				}
			}
		}
	}
	keys := make([]key, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.typ != b.typ {
			return a.typ < b.typ
		}
		if a.name != b.name {
			return a.name < b.name
		}
		return a.pt < b.pt
	})
	for _, k := range keys {
		fmt.Fprintf(w, "Current ACLs for resource `%s`:\n", formatResource(k.typ, k.name, k.pt))
		lines := make([]string, 0, len(got[k]))
		for l := range got[k] {
			lines = append(lines, l)
		}
		sort.Strings(lines)
		for _, l := range lines {
			fmt.Fprintln(w, "\t"+l)
		}
		fmt.Fprintln(w)
	}
	return nil
}

func aclsDelete(ctx context.Context, cl *kgo.Client, w io.Writer, o *aclsOpts) error {
	pt, err := parsePattern(o.pattern, false)
	if err != nil {
		return err
	}
	if len(o.resources(pt)) == 0 {
		return errors.New("delete needs a resource: --topic, --group, --transactional-id or --cluster")
	}
	res, err := o.plan(pt, kmsg.ACLOperationAny)
	if err != nil {
		return err
	}
	if err := checkPrincipals(append(append(append([]string{}, o.allow...), o.deny...), o.principals...)); err != nil {
		return err
	}
	// principal filters: (principal, permission); none given: any principal.
	type pf struct {
		p    *string
		perm kmsg.ACLPermissionType
	}
	var pfs []pf
	for _, p := range o.allow {
		pfs = append(pfs, pf{kmsg.StringPtr(p), kmsg.ACLPermissionTypeAllow})
	}
	for _, p := range o.deny {
		pfs = append(pfs, pf{kmsg.StringPtr(p), kmsg.ACLPermissionTypeDeny})
	}
	for _, p := range o.principals {
		pfs = append(pfs, pf{kmsg.StringPtr(p), kmsg.ACLPermissionTypeAny})
	}
	if len(pfs) == 0 {
		pfs = []pf{{nil, kmsg.ACLPermissionTypeAny}}
	}
	hosts := []*string{nil}
	if hs := append(append(append([]string{}, o.hosts...), o.allowHosts...), o.denyHosts...); len(hs) > 0 {
		hosts = hosts[:0]
		for _, h := range hs {
			hosts = append(hosts, kmsg.StringPtr(h))
		}
	}
	req := kmsg.NewPtrDeleteACLsRequest()
	for _, r := range res {
		for _, p := range pfs {
			for _, h := range hosts {
				for _, op := range r.ops {
					f := kmsg.NewDeleteACLsRequestFilter()
					f.ResourceType, f.ResourceName, f.ResourcePatternType = r.typ, r.name, r.pattern
					f.Principal, f.Host, f.Operation, f.PermissionType = p.p, h, op, p.perm
					req.Filters = append(req.Filters, f)
				}
			}
		}
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	var errs []error
	removed := 0
	for _, fr := range resp.Results {
		if err := kerr.ErrorForCode(fr.ErrorCode); err != nil {
			errs = append(errs, fmt.Errorf("%w%s", err, errMessage(fr.ErrorMessage)))
			continue
		}
		for _, m := range fr.MatchingACLs {
			if err := kerr.ErrorForCode(m.ErrorCode); err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %w%s", formatResource(m.ResourceType, m.ResourceName, m.ResourcePatternType),
					formatEntry(m.Principal, m.Host, m.Operation, m.PermissionType), err, errMessage(m.ErrorMessage)))
				continue
			}
			removed++
			fmt.Fprintf(w, "Removed from `%s`: %s\n", formatResource(m.ResourceType, m.ResourceName, m.ResourcePatternType),
				formatEntry(m.Principal, m.Host, m.Operation, m.PermissionType))
		}
	}
	fmt.Fprintf(w, "%d ACLs removed.\n", removed)
	return errors.Join(errs...)
}
