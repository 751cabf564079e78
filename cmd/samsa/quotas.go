package main

// samsa quotas: client quotas, the job of Kafka's kafka-configs.sh with
// --entity-type users, clients or ips (DescribeClientQuotas 48, AlterClientQuotas 49).
//
//	samsa quotas describe [entity flags]
//	samsa quotas alter    entity flags (--add-config k=v,... | --delete-config k,...)...
//
// Entity flags name one component per type: --user U or --user-default, --client-id C
// or --client-id-default, --ip I or --ip-default. describe without any lists every
// quota; with some it lists the quotas whose entity matches them (Kafka's non-strict
// match: an entity with more components matches too). alter needs at least one and
// sets or removes the keys on exactly that entity: producer_byte_rate,
// consumer_byte_rate, request_percentage, controller_mutation_rate (user and
// client-id entities), connection_creation_rate (ip entities); the broker refuses
// other keys and mixes.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register("quotas", "client quotas: describe, alter", runQuotas)
}

const quotasUsage = `usage: samsa quotas <command> [flags]
  describe                  [entity flags]: every quota, or those matching the entity
  alter                     entity flags, then --add-config k=v[,k=v...] and/or
                            --delete-config k[,k...]
entity flags: --user U | --user-default, --client-id C | --client-id-default,
  --ip I | --ip-default
keys: producer_byte_rate, consumer_byte_rate, request_percentage,
  controller_mutation_rate (users, client ids), connection_creation_rate (ips)
common flags: --bootstrap-server host:port,... (default 127.0.0.1:9092),
  --command-config FILE (Kafka client properties), --timeout 30s`

type quotasOpts struct {
	user, clientID, ip                    string
	userDefault, clientDefault, ipDefault bool
	add, del                              repeated
}

func runQuotas(args []string) int { return quotasMain(args, os.Stdout) }

func quotasMain(args []string, out io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(os.Stderr, quotasUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub := args[0]
	a := newAdminCmd("quotas "+sub, quotasUsage)
	var o quotasOpts
	fs := a.fs
	fs.StringVar(&o.user, "user", "", "the user entity")
	fs.BoolVar(&o.userDefault, "user-default", false, "the default user entity")
	fs.StringVar(&o.clientID, "client-id", "", "the client id entity")
	fs.BoolVar(&o.clientDefault, "client-id-default", false, "the default client id entity")
	fs.StringVar(&o.ip, "ip", "", "the ip entity")
	fs.BoolVar(&o.ipDefault, "ip-default", false, "the default ip entity")
	fs.Var(&o.add, "add-config", "alter: k=v[,k=v...] to set (repeatable)")
	fs.Var(&o.del, "delete-config", "alter: k[,k...] to remove (repeatable)")
	pos, ok := a.parse(args[1:])
	if !ok {
		return 2
	}
	if len(pos) > 0 {
		fmt.Fprintf(os.Stderr, "samsa quotas %s: unexpected arguments %q\n", sub, pos)
		return 2
	}
	entity, err := o.entity()
	if err != nil {
		fmt.Fprintf(os.Stderr, "samsa quotas %s: %v\n", sub, err)
		return 2
	}
	var f func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error
	switch sub {
	case "describe":
		f = func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
			return quotasDescribe(ctx, adm, out, entity)
		}
	case "alter":
		ops, err := o.ops()
		if err == nil && len(entity) == 0 {
			err = errors.New("alter needs an entity: --user, --client-id or --ip (or their -default forms)")
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "samsa quotas alter: %v\n", err)
			return 2
		}
		f = func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
			return quotasAlter(ctx, adm, out, entity, ops)
		}
	default:
		fmt.Fprintf(os.Stderr, "samsa quotas: unknown command %q\n%s\n", sub, quotasUsage)
		return 2
	}
	return a.run(f)
}

// entity is the components the flags name, in Kafka's order (user, client-id, ip).
func (o *quotasOpts) entity() (kadm.ClientQuotaEntity, error) {
	var e kadm.ClientQuotaEntity
	add := func(typ, name string, def bool) error {
		switch {
		case name != "" && def:
			return fmt.Errorf("--%s and --%s-default name the same component: give one", typ, typ)
		case name != "":
			e = append(e, kadm.ClientQuotaEntityComponent{Type: typ, Name: &name})
		case def:
			e = append(e, kadm.ClientQuotaEntityComponent{Type: typ})
		}
		return nil
	}
	if err := add("user", o.user, o.userDefault); err != nil {
		return nil, err
	}
	if err := add("client-id", o.clientID, o.clientDefault); err != nil {
		return nil, err
	}
	if err := add("ip", o.ip, o.ipDefault); err != nil {
		return nil, err
	}
	return e, nil
}

// ops parses --add-config and --delete-config.
func (o *quotasOpts) ops() ([]kadm.AlterClientQuotaOp, error) {
	var ops []kadm.AlterClientQuotaOp
	for _, list := range o.add {
		for _, kv := range strings.Split(list, ",") {
			kv = strings.TrimSpace(kv)
			if kv == "" {
				continue
			}
			k, v, ok := strings.Cut(kv, "=")
			if !ok || strings.TrimSpace(k) == "" {
				return nil, fmt.Errorf("--add-config %q: want key=value", kv)
			}
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return nil, fmt.Errorf("--add-config %s: %q is not a number", k, v)
			}
			ops = append(ops, kadm.AlterClientQuotaOp{Key: strings.TrimSpace(k), Value: f})
		}
	}
	for _, list := range o.del {
		for _, k := range strings.Split(list, ",") {
			if k = strings.TrimSpace(k); k != "" {
				ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Remove: true})
			}
		}
	}
	if len(ops) == 0 {
		return nil, errors.New("alter needs --add-config or --delete-config")
	}
	return ops, nil
}

func quotasDescribe(ctx context.Context, adm *kadm.Client, w io.Writer, entity kadm.ClientQuotaEntity) error {
	var comps []kadm.DescribeClientQuotaComponent
	if len(entity) == 0 {
		for _, typ := range []string{"user", "client-id", "ip"} {
			comps = append(comps, kadm.DescribeClientQuotaComponent{Type: typ, MatchType: kmsg.QuotasMatchTypeAny})
		}
	}
	for _, c := range entity {
		if c.Name == nil {
			comps = append(comps, kadm.DescribeClientQuotaComponent{Type: c.Type, MatchType: kmsg.QuotasMatchTypeDefault})
		} else {
			comps = append(comps, kadm.DescribeClientQuotaComponent{Type: c.Type, MatchName: c.Name, MatchType: kmsg.QuotasMatchTypeExact})
		}
	}
	// Without an entity, every type is asked for on its own: a filter of several
	// components matches entities having all of them.
	var all kadm.DescribedClientQuotas
	if len(entity) == 0 {
		seen := map[string]bool{}
		for _, c := range comps {
			got, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{c})
			if err != nil {
				return err
			}
			for _, q := range got {
				if k := q.Entity.String(); !seen[k] {
					seen[k] = true
					all = append(all, q)
				}
			}
		}
	} else {
		got, err := adm.DescribeClientQuotas(ctx, false, comps)
		if err != nil {
			return err
		}
		all = got
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Entity.String() < all[j].Entity.String() })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENTITY\tQUOTAS")
	for _, q := range all {
		vals := make([]string, len(q.Values))
		for i, v := range q.Values {
			vals[i] = v.Key + "=" + strconv.FormatFloat(v.Value, 'f', -1, 64)
		}
		sort.Strings(vals)
		fmt.Fprintf(tw, "%s\t%s\n", entityString(q.Entity), strings.Join(vals, ","))
	}
	return tw.Flush()
}

// entityString is an entity as kafka-configs.sh prints it: user-principal 'alice',
// client-id 'app', ip '10.0.0.1', or the default of a type.
func entityString(e kadm.ClientQuotaEntity) string {
	parts := make([]string, len(e))
	for i, c := range e {
		if c.Name == nil {
			parts[i] = "default " + c.Type
		} else {
			parts[i] = fmt.Sprintf("%s '%s'", c.Type, *c.Name)
		}
	}
	return strings.Join(parts, ", ")
}

func quotasAlter(ctx context.Context, adm *kadm.Client, w io.Writer, entity kadm.ClientQuotaEntity, ops []kadm.AlterClientQuotaOp) error {
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: ops}})
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range res {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w%s", entityString(r.Entity), r.Err, errMessage(&r.ErrMessage)))
			continue
		}
		fmt.Fprintf(w, "Completed updating quotas of %s.\n", entityString(r.Entity))
	}
	return errors.Join(errs...)
}
