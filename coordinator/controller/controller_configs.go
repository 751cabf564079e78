package controller

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// alterTarget is a config resource being altered.
type alterTarget struct {
	name    string
	def     func(key string) *configs.Def
	rt      metadata.ResourceType
	wire    kmsg.ConfigResourceType
	current map[string]string // the resource's explicitly set keys (shared: read only)
	layers  configs.Layers
	elr     bool // eligible.leader.replicas.version 1 (controller_elr.go)
}

// resolveAlterTarget checks that the resource exists and may be altered: a TOPIC
// that exists (UNKNOWN_TOPIC_OR_PARTITION), a BROKER named by a broker id or "" (the
// cluster default; INVALID_REQUEST otherwise), a GROUP named by a non-empty group id
// (the group need not exist, as in Kafka; INVALID_REQUEST for an empty name); other
// types INVALID_REQUEST.
func (c *Controller) resolveAlterTarget(im *metadata.Image, rtype kmsg.ConfigResourceType, name string) (*alterTarget, error) {
	t := &alterTarget{name: name, wire: rtype, elr: im.ELREnabled()}
	switch rtype {
	case kmsg.ConfigResourceTypeTopic:
		if _, ok := im.Topic(name); !ok {
			return nil, errf(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
		}
		t.def, t.rt = configs.Topic, metadata.ResourceTopic
		t.layers = c.layers(im, name)
		t.current = t.layers.Topic
	case kmsg.ConfigResourceTypeBroker:
		t.def, t.rt = configs.Broker, metadata.ResourceBroker
		if name == "" {
			t.layers = c.layers(im, "")
			t.current = t.layers.ClusterDefault
			break
		}
		id, err := strconv.ParseInt(name, 10, 32)
		if err != nil || id < 0 || strconv.FormatInt(id, 10) != name {
			return nil, errf(kerr.InvalidRequest, "broker %q is not a broker id", name)
		}
		t.layers = configs.ForImage(im, int32(id), c.cfg.Static, "")
		t.current = t.layers.Node
	case kmsg.ConfigResourceTypeGroupConfig:
		if name == "" {
			return nil, errf(kerr.InvalidRequest, "group name must not be empty")
		}
		t.def, t.rt = configs.Group, metadata.ResourceGroup
		t.layers = c.layers(im, "")
		t.layers.Group = im.Configs(metadata.ResourceGroup, name)
		t.current = t.layers.Group
	default:
		return nil, errf(kerr.InvalidRequest, "resource type %s is not supported", rtype)
	}
	return t, nil
}

// alterableDef returns the definition of key if it may be altered on t.
func (t *alterTarget) alterableDef(key string) (*configs.Def, error) {
	d := t.def(key)
	if d == nil && t.rt == metadata.ResourceGroup {
		return nil, errf(kerr.InvalidConfig, "Unknown group config name: %s", key) // Kafka's words
	}
	if d == nil {
		return nil, errf(kerr.InvalidConfig, "unknown config %q", key)
	}
	if d.ReadOnly {
		return nil, errf(kerr.InvalidConfig, "config %q cannot be updated dynamically", key)
	}
	return d, nil
}

func (t *alterTarget) record(key string, value *string) *metadata.ConfigRecord {
	return &metadata.ConfigRecord{Resource: t.rt, Name: t.name, Key: key, Value: value}
}

// incrementalAlterConfigsLocked is IncrementalAlterConfigs (44): SET (validated by
// name and value: INVALID_CONFIG), DELETE (back to the default), APPEND and SUBTRACT
// (list keys only) on a TOPIC's overrides, a BROKER's dynamic keys (a broker id:
// DYNAMIC_BROKER_CONFIG; "": the cluster default) or a GROUP's configs (whose whole
// resulting set is then checked: validateGroupConfigs); read-only keys INVALID_CONFIG;
// a key twice INVALID_REQUEST. The changes of all resources commit as one entry;
// brokers apply them to their logs when they see it. ValidateOnly validates only.
// While ELR is on, min.insync.replicas follows controller_elr.go's rules.
func (c *Controller) incrementalAlterConfigsLocked(r *kmsg.IncrementalAlterConfigsRequest) *op {
	resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	resp.SetVersion(r.GetVersion())
	im := c.mu.pending
	var recs []metadata.Record
	for _, res := range r.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		rrecs, err := c.incrementalRecords(im, &res)
		im, recs, err = c.stage(im, recs, rrecs, err, r.ValidateOnly)
		rr.ErrorCode, rr.ErrorMessage = errCode(err), errMsg(err)
		resp.Resources = append(resp.Resources, rr)
	}
	if len(recs) == 0 {
		return &op{resp: resp}
	}
	return &op{recs: recs, finish: func(uint64) kmsg.Response { return resp }}
}

// stage applies one resource's records to the request's image (unless validateOnly
// or err).
func (c *Controller) stage(im *metadata.Image, recs, add []metadata.Record, err error, validateOnly bool) (*metadata.Image, []metadata.Record, error) {
	if err != nil || validateOnly || len(add) == 0 {
		return im, recs, err
	}
	next, aerr := im.Apply(add...)
	if aerr != nil {
		return im, recs, errf(kerr.UnknownServerError, "recording configs: %v", aerr)
	}
	return next, append(recs, add...), nil
}

func (c *Controller) incrementalRecords(im *metadata.Image, res *kmsg.IncrementalAlterConfigsRequestResource) ([]metadata.Record, error) {
	t, err := c.resolveAlterTarget(im, res.ResourceType, res.ResourceName)
	if err != nil {
		return nil, err
	}
	var recs []metadata.Record
	seen := map[string]bool{}
	for _, cf := range res.Configs {
		if seen[cf.Name] {
			return nil, errf(kerr.InvalidRequest, "config %q given more than once", cf.Name)
		}
		seen[cf.Name] = true
		d, err := t.alterableDef(cf.Name)
		if err != nil {
			return nil, err
		}
		var value *string
		switch cf.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if cf.Value == nil {
				return nil, errf(kerr.InvalidConfig, "null value for config %q", cf.Name)
			}
			v, err := d.Validate(*cf.Value)
			if err != nil {
				return nil, errf(kerr.InvalidConfig, "%v", err)
			}
			value = &v
		case kmsg.IncrementalAlterConfigOpDelete:
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if d.Kind != configs.KindList {
				return nil, errf(kerr.InvalidConfig, "config %q is not a list: APPEND and SUBTRACT do not apply", cf.Name)
			}
			if cf.Value == nil {
				return nil, errf(kerr.InvalidConfig, "null value for config %q", cf.Name)
			}
			v, err := listOp(d, effective(&t.layers, t.wire, d), *cf.Value, cf.Op == kmsg.IncrementalAlterConfigOpAppend)
			if err != nil {
				return nil, errf(kerr.InvalidConfig, "%v", err)
			}
			value = &v
		default:
			return nil, errf(kerr.InvalidRequest, "unknown operation %d for config %q", cf.Op, cf.Name)
		}
		if value == nil {
			if _, ok := t.current[cf.Name]; !ok {
				continue // deleting what is not set
			}
		}
		recs = append(recs, t.record(cf.Name, value))
	}
	if err := t.checkResult(recs); err != nil {
		return nil, err
	}
	return append(recs, t.clearELRRecords(recs)...), nil
}

// alterConfigsLocked is AlterConfigs (33), the legacy non-incremental alter: the
// request's configs become the resource's complete set of overrides (keys given are
// set, overrides not given deleted). Resources and keys as IncrementalAlterConfigs; a
// null value INVALID_CONFIG; a key twice INVALID_REQUEST.
func (c *Controller) alterConfigsLocked(r *kmsg.AlterConfigsRequest) *op {
	resp := r.ResponseKind().(*kmsg.AlterConfigsResponse)
	resp.SetVersion(r.GetVersion())
	im := c.mu.pending
	var recs []metadata.Record
	for _, res := range r.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		rrecs, err := c.replaceRecords(im, &res)
		im, recs, err = c.stage(im, recs, rrecs, err, r.ValidateOnly)
		rr.ErrorCode, rr.ErrorMessage = errCode(err), errMsg(err)
		resp.Resources = append(resp.Resources, rr)
	}
	if len(recs) == 0 {
		return &op{resp: resp}
	}
	return &op{recs: recs, finish: func(uint64) kmsg.Response { return resp }}
}

func (c *Controller) replaceRecords(im *metadata.Image, res *kmsg.AlterConfigsRequestResource) ([]metadata.Record, error) {
	t, err := c.resolveAlterTarget(im, res.ResourceType, res.ResourceName)
	if err != nil {
		return nil, err
	}
	var recs []metadata.Record
	given := map[string]bool{}
	for _, cf := range res.Configs {
		if given[cf.Name] {
			return nil, errf(kerr.InvalidRequest, "config %q given more than once", cf.Name)
		}
		given[cf.Name] = true
		d, err := t.alterableDef(cf.Name)
		if err != nil {
			return nil, err
		}
		if cf.Value == nil {
			return nil, errf(kerr.InvalidConfig, "null value for config %q", cf.Name)
		}
		v, err := d.Validate(*cf.Value)
		if err != nil {
			return nil, errf(kerr.InvalidConfig, "%v", err)
		}
		if cur, ok := t.current[cf.Name]; !ok || cur != v {
			recs = append(recs, t.record(cf.Name, &v))
		}
	}
	keys := make([]string, 0, len(t.current))
	for k := range t.current {
		if !given[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		recs = append(recs, t.record(k, nil))
	}
	if err := t.checkResult(recs); err != nil {
		return nil, err
	}
	return append(recs, t.clearELRRecords(recs)...), nil
}

// checkResult checks the configs the resource would have after recs: a GROUP's whole
// set as Kafka's GroupConfig.validate does (validateGroupConfigs); a TOPIC's tiered
// storage keys against those it had (configs.CheckRemoteStorage); a BROKER's
// min.insync.replicas while ELR is on (elrConfigCheck).
func (t *alterTarget) checkResult(recs []metadata.Record) error {
	if err := t.elrConfigCheck(recs); err != nil {
		return err
	}
	if t.rt != metadata.ResourceGroup && t.rt != metadata.ResourceTopic {
		return nil
	}
	after := maps.Clone(t.current)
	if after == nil {
		after = map[string]string{}
	}
	for _, r := range recs {
		cr := r.(*metadata.ConfigRecord)
		if cr.Value == nil {
			delete(after, cr.Key)
		} else {
			after[cr.Key] = *cr.Value
		}
	}
	if t.rt == metadata.ResourceTopic {
		// Tiered storage's rules (Kafka's LogConfig.validate): INVALID_CONFIG.
		l := t.layers
		l.Topic = after
		if err := configs.CheckRemoteStorage(t.layers, l); err != nil {
			return errf(kerr.InvalidConfig, "%v", err)
		}
		return nil
	}
	return validateGroupConfigs(after, &t.layers)
}

// effective is the current value of d for the resource being altered.
func effective(l *configs.Layers, rt kmsg.ConfigResourceType, d *configs.Def) string {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		if r := l.ResolveTopic(d, false); r.Value != nil {
			return *r.Value
		}
		return ""
	case kmsg.ConfigResourceTypeGroupConfig:
		return l.GroupValue(d.Name)
	}
	if r, ok := l.ResolveBroker(d.Name, 1, nil); ok {
		return *r.Value
	}
	if d.Default != nil {
		return *d.Default
	}
	return ""
}

// listOp appends or subtracts the items of arg to or from the list cur.
func listOp(d *configs.Def, cur, arg string, add bool) (string, error) {
	var items []string
	for _, it := range strings.Split(cur, ",") {
		if it = strings.TrimSpace(it); it != "" {
			items = append(items, it)
		}
	}
	for _, it := range strings.Split(arg, ",") {
		it = strings.TrimSpace(it)
		if it == "" {
			continue
		}
		i := slices.Index(items, it)
		switch {
		case add && i < 0:
			items = append(items, it)
		case !add && i >= 0:
			items = slices.Delete(items, i, i+1)
		}
	}
	return d.Validate(strings.Join(items, ","))
}
