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

func (b *Broker) alterConfigs(res *kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	im := b.meta.Image()
	var (
		defs    map[string]*configDef
		rt      metadata.ResourceType
		current map[string]string
		layers  configLayers
	)
	switch res.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		if _, ok := im.Topic(res.ResourceName); !ok {
			return errf(kerr.UnknownTopicOrPartition, "topic %q does not exist", res.ResourceName)
		}
		defs, rt = topicDefs, metadata.ResourceTopic
		layers = b.layers(im, res.ResourceName)
		current = layers.topic
	case kmsg.ConfigResourceTypeBroker:
		if res.ResourceName != "" && res.ResourceName != strconv.Itoa(int(b.cfg.NodeID)) {
			return errf(kerr.InvalidRequest, "broker %q is not this broker (%d)", res.ResourceName, b.cfg.NodeID)
		}
		defs, rt = brokerDefs, metadata.ResourceBroker
		layers = b.layers(im, "")
		current = layers.node
		if res.ResourceName == "" {
			current = layers.clusterDefault
		}
	default:
		return errf(kerr.InvalidRequest, "resource type %s is not supported", res.ResourceType)
	}

	var recs []metadata.Record
	seen := map[string]bool{}
	for _, c := range res.Configs {
		if seen[c.Name] {
			return errf(kerr.InvalidRequest, "config %q given more than once", c.Name)
		}
		seen[c.Name] = true
		d := defs[c.Name]
		if d == nil {
			return errf(kerr.InvalidConfig, "unknown config %q", c.Name)
		}
		if d.readOnly {
			return errf(kerr.InvalidConfig, "config %q cannot be updated dynamically", c.Name)
		}
		var value *string
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if c.Value == nil {
				return errf(kerr.InvalidConfig, "null value for config %q", c.Name)
			}
			v, err := d.validate(*c.Value)
			if err != nil {
				return errf(kerr.InvalidConfig, "%v", err)
			}
			value = &v
		case kmsg.IncrementalAlterConfigOpDelete:
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if d.kind != kindList {
				return errf(kerr.InvalidConfig, "config %q is not a list: APPEND and SUBTRACT do not apply", c.Name)
			}
			if c.Value == nil {
				return errf(kerr.InvalidConfig, "null value for config %q", c.Name)
			}
			v, err := listOp(d, b.effective(&layers, res.ResourceType, d), *c.Value, c.Op == kmsg.IncrementalAlterConfigOpAppend)
			if err != nil {
				return errf(kerr.InvalidConfig, "%v", err)
			}
			value = &v
		default:
			return errf(kerr.InvalidRequest, "unknown operation %d for config %q", c.Op, c.Name)
		}
		if value == nil {
			if _, ok := current[c.Name]; !ok {
				continue // deleting what is not set
			}
		}
		recs = append(recs, &metadata.ConfigRecord{Resource: rt, Name: res.ResourceName, Key: c.Name, Value: value})
	}
	if validateOnly || len(recs) == 0 {
		return nil
	}
	if err := b.meta.Append(recs...); err != nil {
		if errors.Is(err, metadata.ErrUnknownTopic) {
			return errf(kerr.UnknownTopicOrPartition, "topic %q does not exist", res.ResourceName)
		}
		return errf(kerr.UnknownServerError, "recording configs: %v", err)
	}
	if rt == metadata.ResourceTopic {
		b.applyTopicConfig(b.meta.Image(), res.ResourceName)
	} else {
		im := b.meta.Image()
		for _, t := range im.Topics() {
			b.applyTopicConfig(im, t.Name)
		}
	}
	return nil
}

// effective is the current value of d for the resource being altered.
func (b *Broker) effective(l *configLayers, rt kmsg.ConfigResourceType, d *configDef) string {
	if rt == kmsg.ConfigResourceTypeTopic {
		if r := l.resolveTopic(d, false); r.value != nil {
			return *r.value
		}
		return ""
	}
	if r, ok := l.resolveBroker(d.name, 1, nil); ok {
		return *r.value
	}
	if d.def != nil {
		return *d.def
	}
	return ""
}

// listOp appends or subtracts the items of arg to or from the list cur.
func listOp(d *configDef, cur, arg string, add bool) (string, error) {
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
	return d.validate(strings.Join(items, ","))
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
