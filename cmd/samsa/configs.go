package main

// samsa configs: the configs of topics, brokers and groups, the job of Kafka's
// kafka-configs.sh for those entity types (DescribeConfigs 32, IncrementalAlterConfigs
// 44). Client quotas and SCRAM users, its other entity types, are samsa quotas and
// samsa users.
//
//	samsa configs --entity-type topics|brokers|groups [--entity-name N | --entity-default]
//	              --describe [--all]
//	samsa configs --entity-type ... (--entity-name N | --entity-default)
//	              --alter [--add-config k1=v1,k2=[a,b]] [--delete-config k1,k2]
//
// --describe prints, as kafka-configs.sh does, the configs set on each entity (a
// topic's overrides, a broker's dynamic keys, a group's configs), or with --all every
// config with its value, source and synonyms; without --entity-name it describes every
// topic, every broker and the brokers' cluster default, or every group. --alter sets
// the --add-config keys (a value in brackets is a list: cleanup.policy=[delete,compact])
// and deletes the --delete-config keys, in one IncrementalAlterConfigs; the broker
// validates them (INVALID_CONFIG names the key and why). --entity-default names the
// brokers' cluster-wide default (brokers only).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register("configs", "topic, broker and group configs: describe, alter (kafka-configs.sh)", runConfigs)
}

const configsUsage = `usage: samsa configs --entity-type topics|brokers|groups [entity] (--describe [--all] | --alter ...)
  --entity-name N            the topic, broker id or group (describe: all when absent)
  --entity-default           the brokers' cluster-wide default (brokers only)
  --describe                 the configs set on the entity; --all: every config, with
                             its source and synonyms
  --alter                    --add-config k1=v1,k2=[a,b] to set (a bracketed value is a
                             list), --delete-config k1,k2 to remove
common flags: --bootstrap-server host:port,... (default 127.0.0.1:9092),
  --command-config FILE (Kafka client properties), --timeout 30s`

type configsOpts struct {
	entityType, entityName string
	entityDefault          bool
	describe, alter, all   bool
	add, del               repeated
}

func runConfigs(args []string) int { return configsMain(args, os.Stdout) }

func configsMain(args []string, out io.Writer) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprintln(os.Stderr, configsUsage)
		return 0
	}
	a := newAdminCmd("configs", configsUsage)
	var o configsOpts
	fs := a.fs
	fs.StringVar(&o.entityType, "entity-type", "", "topics, brokers or groups")
	fs.StringVar(&o.entityName, "entity-name", "", "the topic, broker id or group")
	fs.BoolVar(&o.entityDefault, "entity-default", false, "the brokers' cluster-wide default")
	fs.BoolVar(&o.describe, "describe", false, "describe the configs")
	fs.BoolVar(&o.all, "all", false, "describe: every config, not only those set")
	fs.BoolVar(&o.alter, "alter", false, "alter the configs")
	fs.Var(&o.add, "add-config", "alter: k=v[,k=[a,b]...] to set (repeatable)")
	fs.Var(&o.del, "delete-config", "alter: k[,k...] to remove (repeatable)")
	pos, ok := a.parse(args)
	if !ok {
		return 2
	}
	rt, err := o.check(pos)
	if err != nil {
		fmt.Fprintf(os.Stderr, "samsa configs: %v\n%s\n", err, configsUsage)
		return 2
	}
	if o.describe {
		return a.run(func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
			return configsDescribe(ctx, cl, adm, out, rt, &o)
		})
	}
	ops, err := o.ops()
	if err != nil {
		fmt.Fprintf(os.Stderr, "samsa configs: %v\n", err)
		return 2
	}
	return a.run(func(ctx context.Context, cl *kgo.Client, _ *kadm.Client) error {
		return configsAlter(ctx, cl, out, rt, &o, ops)
	})
}

// check validates the flags and returns the resource type they name.
func (o *configsOpts) check(pos []string) (kmsg.ConfigResourceType, error) {
	var rt kmsg.ConfigResourceType
	switch o.entityType {
	case "topics", "topic":
		rt = kmsg.ConfigResourceTypeTopic
	case "brokers", "broker":
		rt = kmsg.ConfigResourceTypeBroker
	case "groups", "group":
		rt = kmsg.ConfigResourceTypeGroupConfig
	case "users", "clients", "ips":
		return 0, fmt.Errorf("--entity-type %s: client quotas are samsa quotas, SCRAM users samsa users", o.entityType)
	case "":
		return 0, errors.New("--entity-type is required: topics, brokers or groups")
	default:
		return 0, fmt.Errorf("--entity-type %q: want topics, brokers or groups", o.entityType)
	}
	switch {
	case len(pos) > 0:
		return 0, fmt.Errorf("unexpected arguments %q", pos)
	case o.describe == o.alter:
		return 0, errors.New("give one of --describe and --alter")
	case o.entityDefault && rt != kmsg.ConfigResourceTypeBroker:
		return 0, errors.New("--entity-default names the brokers' cluster default: --entity-type brokers only")
	case o.entityDefault && o.entityName != "":
		return 0, errors.New("give --entity-name or --entity-default, not both")
	case o.alter && o.entityName == "" && !o.entityDefault:
		return 0, errors.New("--alter needs --entity-name (or --entity-default for brokers)")
	case o.alter && o.all:
		return 0, errors.New("--all goes with --describe")
	case !o.alter && (len(o.add) > 0 || len(o.del) > 0):
		return 0, errors.New("--add-config and --delete-config go with --alter")
	}
	if rt == kmsg.ConfigResourceTypeBroker && o.entityName != "" {
		if _, err := strconv.ParseInt(o.entityName, 10, 32); err != nil {
			return 0, fmt.Errorf("--entity-name %q: a broker is named by its id", o.entityName)
		}
	}
	return rt, nil
}

// splitConfigs splits a --add-config list on the commas outside brackets:
// "a=1,b=[x,y]" is a=1 and b=[x,y].
func splitConfigs(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '[':
			depth++
		case ']':
			depth = max(depth-1, 0)
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// ops parses --add-config (SET) and --delete-config (DELETE).
func (o *configsOpts) ops() ([]kmsg.IncrementalAlterConfigsRequestResourceConfig, error) {
	var ops []kmsg.IncrementalAlterConfigsRequestResourceConfig
	seen := map[string]bool{}
	add := func(k string, op kmsg.IncrementalAlterConfigOp, v *string) error {
		if seen[k] {
			return fmt.Errorf("config %s given more than once", k)
		}
		seen[k] = true
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = k, op, v
		ops = append(ops, c)
		return nil
	}
	for _, list := range o.add {
		for _, kv := range splitConfigs(list) {
			if kv = strings.TrimSpace(kv); kv == "" {
				continue
			}
			k, v, ok := strings.Cut(kv, "=")
			if k = strings.TrimSpace(k); !ok || k == "" {
				return nil, fmt.Errorf("--add-config %q: want key=value", kv)
			}
			v = strings.TrimSpace(v)
			if strings.HasPrefix(v, "[") && strings.HasSuffix(v, "]") {
				v = v[1 : len(v)-1] // a list: kafka-configs.sh's brackets
			}
			if err := add(k, kmsg.IncrementalAlterConfigOpSet, &v); err != nil {
				return nil, err
			}
		}
	}
	for _, list := range o.del {
		for _, k := range strings.Split(list, ",") {
			if k = strings.TrimSpace(k); k != "" {
				if err := add(k, kmsg.IncrementalAlterConfigOpDelete, nil); err != nil {
					return nil, err
				}
			}
		}
	}
	if len(ops) == 0 {
		return nil, errors.New("--alter needs --add-config or --delete-config")
	}
	return ops, nil
}

// entityLabel is how kafka-configs.sh names an entity in its messages.
func entityLabel(rt kmsg.ConfigResourceType, name string) string {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		return "topic " + name
	case kmsg.ConfigResourceTypeGroupConfig:
		return "group " + name
	}
	if name == "" {
		return "brokers in the cluster"
	}
	return "broker " + name
}

func configsAlter(ctx context.Context, cl *kgo.Client, w io.Writer, rt kmsg.ConfigResourceType, o *configsOpts,
	ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.Configs = rt, o.entityName, ops
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return fmt.Errorf("%s: %w%s", entityLabel(rt, r.ResourceName), err, errMessage(r.ErrorMessage))
		}
	}
	if rt == kmsg.ConfigResourceTypeBroker && o.entityName == "" {
		fmt.Fprintln(w, "Completed updating default config for brokers in the cluster.")
		return nil
	}
	fmt.Fprintf(w, "Completed updating config for %s.\n", entityLabel(rt, o.entityName))
	return nil
}

// dynamicSource is the source of the configs set on an entity of type rt (named
// "": the brokers' cluster default).
func dynamicSource(rt kmsg.ConfigResourceType, name string) kmsg.ConfigSource {
	switch {
	case rt == kmsg.ConfigResourceTypeTopic:
		return kmsg.ConfigSourceDynamicTopicConfig
	case rt == kmsg.ConfigResourceTypeGroupConfig:
		return kmsg.ConfigSourceGroupConfig
	case name == "":
		return kmsg.ConfigSourceDynamicDefaultBrokerConfig
	}
	return kmsg.ConfigSourceDynamicBrokerConfig
}

func configsDescribe(ctx context.Context, cl *kgo.Client, adm *kadm.Client, w io.Writer, rt kmsg.ConfigResourceType, o *configsOpts) error {
	names := []string{o.entityName}
	if o.entityName == "" && !o.entityDefault {
		var err error
		if names, err = configsEntities(ctx, adm, rt); err != nil {
			return err
		}
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	for _, n := range names {
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = rt, n
		req.Resources = append(req.Resources, res)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	// Answers in the order asked for (kgo merges the brokers' answers).
	byName := map[string]kmsg.DescribeConfigsResponseResource{}
	for _, r := range resp.Resources {
		byName[r.ResourceName] = r
	}
	var errs []error
	for _, n := range names {
		r, ok := byName[n]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: not in the answer", entityLabel(rt, n)))
			continue
		}
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w%s", entityLabel(rt, n), err, errMessage(r.ErrorMessage)))
			continue
		}
		switch {
		case rt == kmsg.ConfigResourceTypeBroker && n == "":
			fmt.Fprintln(w, "Default configs for brokers in the cluster are:")
		case o.all:
			fmt.Fprintf(w, "All configs for %s are:\n", entityLabel(rt, n))
		default:
			fmt.Fprintf(w, "Dynamic configs for %s are:\n", entityLabel(rt, n))
		}
		src := dynamicSource(rt, n)
		for _, c := range r.Configs {
			if !o.all && c.Source != src {
				continue
			}
			fmt.Fprintf(w, "  %s=%s sensitive=%v synonyms={%s}\n", c.Name, configValue(c.Value, c.IsSensitive), c.IsSensitive, synonymsString(c.ConfigSynonyms, c.IsSensitive))
		}
	}
	return errors.Join(errs...)
}

// configsEntities lists every entity of type rt: the topics (internal ones too, as
// kafka-configs.sh), the brokers then their cluster default, or the groups.
func configsEntities(ctx context.Context, adm *kadm.Client, rt kmsg.ConfigResourceType) ([]string, error) {
	var names []string
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		td, err := adm.ListTopicsWithInternal(ctx)
		if err != nil {
			return nil, err
		}
		names = td.Names()
	case kmsg.ConfigResourceTypeBroker:
		bs, err := adm.ListBrokers(ctx)
		if err != nil {
			return nil, err
		}
		for _, id := range bs.NodeIDs() {
			names = append(names, strconv.Itoa(int(id)))
		}
		return append(names, ""), nil // the cluster default last, as kafka-configs.sh
	case kmsg.ConfigResourceTypeGroupConfig:
		gs, err := adm.ListGroups(ctx)
		if err != nil {
			return nil, err
		}
		names = gs.Groups()
	}
	slices.Sort(names)
	return names, nil
}

func configValue(v *string, sensitive bool) string {
	if v == nil || sensitive {
		return "null"
	}
	return *v
}

// synonymsString is kafka-configs.sh's synonyms={SOURCE:key=value, ...}.
func synonymsString(syns []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym, sensitive bool) string {
	parts := make([]string, len(syns))
	for i, s := range syns {
		parts[i] = fmt.Sprintf("%s:%s=%s", s.Source, s.Name, configValue(s.Value, sensitive))
	}
	return strings.Join(parts, ", ")
}
