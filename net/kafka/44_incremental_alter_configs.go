// IncrementalAlterConfigs (key 44), versions 0-1.
//
// TOPIC resources: SET (validated by name and value: INVALID_CONFIG), DELETE (back to
// the broker default), APPEND and SUBTRACT (list keys only: cleanup.policy) on a topic's
// overrides; unknown topic UNKNOWN_TOPIC_OR_PARTITION. The new configuration is applied
// to the topic's live logs (engine.Log.SetConfig) before the answer.
//
// BROKER resources, named by this node's id (DYNAMIC_BROKER_CONFIG) or "" (the cluster
// default, DYNAMIC_DEFAULT_BROKER_CONFIG): keys that Kafka can update dynamically and
// Samsa knows (the topic-default keys such as log.retention.ms, plus num.partitions,
// default.replication.factor, auto.create.topics.enable); read-only keys INVALID_CONFIG.
// A change re-applies every topic's configuration to its logs.
//
// A key named twice in one resource: INVALID_REQUEST. ValidateOnly validates only.
// Changes are recorded in the metadata log, so they survive restarts.
//
// Differences from Apache Kafka: BROKER_LOGGER and other resource types answer
// INVALID_REQUEST.
package kafka

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
)

func init() {
	register(API{Key: 44, MinVersion: 0, MaxVersion: 1, Handle: handleIncrementalAlterConfigs})
}

func handleIncrementalAlterConfigs(b *Broker, r *Request) {
	req := r.Body.(*kmsg.IncrementalAlterConfigsRequest)
	resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, res := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		err := b.alterConfigs(&res, req.ValidateOnly)
		rr.ErrorCode, rr.ErrorMessage = errCode(err), errMsg(err)
		resp.Resources = append(resp.Resources, rr)
	}
	r.Respond(resp)
}

// alterTarget is a config resource being altered.
type alterTarget struct {
	name    string
	def     func(key string) *configs.Def
	rt      metadata.ResourceType
	wire    kmsg.ConfigResourceType
	current map[string]string // the resource's explicitly set keys (shared: read only)
	layers  configs.Layers
}

// resolveAlterTarget checks that the resource exists and may be altered. Caller holds
// adminMu.
func (b *Broker) resolveAlterTarget(im *metadata.Image, rtype kmsg.ConfigResourceType, name string) (*alterTarget, error) {
	t := &alterTarget{name: name, wire: rtype}
	switch rtype {
	case kmsg.ConfigResourceTypeTopic:
		if _, ok := im.Topic(name); !ok {
			return nil, errf(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
		}
		t.def, t.rt = configs.Topic, metadata.ResourceTopic
		t.layers = b.layers(im, name)
		t.current = t.layers.Topic
	case kmsg.ConfigResourceTypeBroker:
		if name != "" && name != strconv.Itoa(int(b.cfg.NodeID)) {
			return nil, errf(kerr.InvalidRequest, "broker %q is not this broker (%d)", name, b.cfg.NodeID)
		}
		t.def, t.rt = configs.Broker, metadata.ResourceBroker
		t.layers = b.layers(im, "")
		t.current = t.layers.Node
		if name == "" {
			t.current = t.layers.ClusterDefault
		}
	default:
		return nil, errf(kerr.InvalidRequest, "resource type %s is not supported", rtype)
	}
	return t, nil
}

// alterableDef returns the definition of key if it may be altered on t.
func (t *alterTarget) alterableDef(key string) (*configs.Def, error) {
	d := t.def(key)
	if d == nil {
		return nil, errf(kerr.InvalidConfig, "unknown config %q", key)
	}
	if d.ReadOnly {
		return nil, errf(kerr.InvalidConfig, "config %q cannot be updated dynamically", key)
	}
	return d, nil
}

// record returns the metadata record setting (value != nil) or deleting key.
func (t *alterTarget) record(key string, value *string) *metadata.ConfigRecord {
	return &metadata.ConfigRecord{Resource: t.rt, Name: t.name, Key: key, Value: value}
}

// commitConfigs appends recs and applies the result to live logs. Caller holds adminMu.
func (b *Broker) commitConfigs(t *alterTarget, recs []metadata.Record) error {
	if len(recs) == 0 {
		return nil
	}
	if err := b.meta.Append(recs...); err != nil {
		if errors.Is(err, metadata.ErrUnknownTopic) {
			return errf(kerr.UnknownTopicOrPartition, "topic %q does not exist", t.name)
		}
		return errf(kerr.UnknownServerError, "recording configs: %v", err)
	}
	im := b.meta.Image()
	if t.rt == metadata.ResourceTopic {
		b.applyTopicConfig(im, t.name)
		return nil
	}
	for _, topic := range im.Topics() {
		b.applyTopicConfig(im, topic.Name)
	}
	return nil
}

func (b *Broker) alterConfigs(res *kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	t, err := b.resolveAlterTarget(b.meta.Image(), res.ResourceType, res.ResourceName)
	if err != nil {
		return err
	}
	var recs []metadata.Record
	seen := map[string]bool{}
	for _, c := range res.Configs {
		if seen[c.Name] {
			return errf(kerr.InvalidRequest, "config %q given more than once", c.Name)
		}
		seen[c.Name] = true
		d, err := t.alterableDef(c.Name)
		if err != nil {
			return err
		}
		var value *string
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if c.Value == nil {
				return errf(kerr.InvalidConfig, "null value for config %q", c.Name)
			}
			v, err := d.Validate(*c.Value)
			if err != nil {
				return errf(kerr.InvalidConfig, "%v", err)
			}
			value = &v
		case kmsg.IncrementalAlterConfigOpDelete:
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if d.Kind != configs.KindList {
				return errf(kerr.InvalidConfig, "config %q is not a list: APPEND and SUBTRACT do not apply", c.Name)
			}
			if c.Value == nil {
				return errf(kerr.InvalidConfig, "null value for config %q", c.Name)
			}
			v, err := listOp(d, b.effective(&t.layers, t.wire, d), *c.Value, c.Op == kmsg.IncrementalAlterConfigOpAppend)
			if err != nil {
				return errf(kerr.InvalidConfig, "%v", err)
			}
			value = &v
		default:
			return errf(kerr.InvalidRequest, "unknown operation %d for config %q", c.Op, c.Name)
		}
		if value == nil {
			if _, ok := t.current[c.Name]; !ok {
				continue // deleting what is not set
			}
		}
		recs = append(recs, t.record(c.Name, value))
	}
	if validateOnly {
		return nil
	}
	return b.commitConfigs(t, recs)
}

// effective is the current value of d for the resource being altered.
func (b *Broker) effective(l *configs.Layers, rt kmsg.ConfigResourceType, d *configs.Def) string {
	if rt == kmsg.ConfigResourceTypeTopic {
		if r := l.ResolveTopic(d, false); r.Value != nil {
			return *r.Value
		}
		return ""
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

// applyTopicConfig pushes topic's configuration to its live logs.
func (b *Broker) applyTopicConfig(im *metadata.Image, topic string) {
	t, ok := im.Topic(topic)
	if !ok {
		return
	}
	cfg := b.topicLogConfig(im, topic)
	for p := range t.Partitions {
		if l := b.eng.Log(engine.TopicPartition{Topic: topic, Partition: int32(p)}); l != nil {
			l.SetConfig(cfg)
		}
	}
}
