// DescribeConfigs (key 32), versions 0-4.
//
// TOPIC resources: every topic key Kafka 4 defines (coordinator/configs: those Samsa
// does not act on say so in their documentation), or those named, with the
// effective value and its source: the topic override (DYNAMIC_TOPIC_CONFIG), else the
// first broker synonym set (DYNAMIC_BROKER_CONFIG for this node, DYNAMIC_DEFAULT_BROKER_
// CONFIG for the cluster default, STATIC_BROKER_CONFIG from server.properties/env/flags,
// in that order; log.retention.ms before .minutes before .hours, scaled to the topic
// key's unit), else Kafka's default (DEFAULT_CONFIG). Unknown topic:
// UNKNOWN_TOPIC_OR_PARTITION.
//
// BROKER resources: named by this node's id: every broker key with its value and
// source; named "": the cluster-wide dynamic defaults only. Another id:
// INVALID_REQUEST. Read-only keys are flagged; password keys are sensitive (no
// value). Synonyms (v1+) when IncludeSynonyms, in precedence order; types and
// documentation (v3+) when IncludeDocumentation.
//
// GROUP resources (KIP-848, KIP-932), named by a group id that need not exist: every
// group key (coordinator/configs/group_keys.go) with its value and source: the group's
// own (GROUP_CONFIG), else its broker synonym's (DYNAMIC_BROKER_CONFIG for this node,
// DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG), else the default
// (DEFAULT_CONFIG). An empty name: INVALID_REQUEST.
//
// Differences from Apache Kafka: BROKER_LOGGER and other resource types answer
// INVALID_REQUEST; names asked for that Samsa does not know are left out, as Kafka
// does with unknown names.

package kafka

import (
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 32, MinVersion: 0, MaxVersion: 4, Handle: handleDescribeConfigs, Authz: authz.DescribeConfigs})
}

func handleDescribeConfigs(b *Broker, r *Request) {
	req := r.Body.(*kmsg.DescribeConfigsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
	im := b.meta.Image()
	syn := req.IncludeSynonyms && r.Header.Version >= 1
	doc := req.IncludeDocumentation && r.Header.Version >= 3
	for _, res := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		var err error
		rr.Configs, err = b.describeResource(im, res, syn, doc)
		rr.ErrorCode, rr.ErrorMessage = errCode(err), errMsg(err)
		resp.Resources = append(resp.Resources, rr)
	}
	r.Respond(resp)
}

func wanted(names []string, name string) bool {
	return names == nil || slices.Contains(names, name)
}

func (b *Broker) describeResource(im *metadata.Image, res kmsg.DescribeConfigsRequestResource, syn, doc bool) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	entry := func(d *configs.Def, r configs.Resolved) kmsg.DescribeConfigsResponseResourceConfig {
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.Value, c.Source = d.Name, r.Value, r.Source
		c.IsDefault = r.Source == kmsg.ConfigSourceDefaultConfig
		c.ReadOnly = d.ReadOnly
		c.IsSensitive = d.Kind == configs.KindPassword
		c.ConfigType = d.Kind.Wire()
		if c.IsSensitive {
			c.Value = nil
		}
		if syn {
			c.ConfigSynonyms = r.Synonyms
		}
		if doc && d.Doc != "" {
			c.Documentation = &d.Doc
		}
		return c
	}
	switch res.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		if _, ok := im.Topic(res.ResourceName); !ok {
			return nil, errf(kerr.UnknownTopicOrPartition, "topic %q does not exist", res.ResourceName)
		}
		l := b.keys.layers(im, res.ResourceName)
		for _, d := range configs.TopicDefs {
			if wanted(res.ConfigNames, d.Name) {
				out = append(out, entry(d, l.ResolveTopic(d, syn)))
			}
		}
	case kmsg.ConfigResourceTypeBroker:
		l := b.keys.layers(im, "")
		switch res.ResourceName {
		case strconv.Itoa(int(b.cfg.NodeID)):
			for _, d := range configs.BrokerDefs {
				if !wanted(res.ConfigNames, d.Name) {
					continue
				}
				var synp *[]kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
				var syns []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
				if syn {
					synp = &syns
				}
				r, ok := l.ResolveBroker(d.Name, 1, synp)
				if !ok {
					r = configs.Resolved{Value: d.Default, Source: kmsg.ConfigSourceDefaultConfig}
					if v, ok := b.cfg.Derived[d.Name]; ok {
						r.Value = kmsg.StringPtr(v)
					}
				}
				if syn && d.Default != nil {
					syns = append(syns, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{Name: d.Name, Value: d.Default, Source: kmsg.ConfigSourceDefaultConfig})
				}
				r.Synonyms = syns
				out = append(out, entry(d, r))
			}
		case "":
			for _, d := range configs.BrokerDefs {
				if v, ok := l.ClusterDefault[d.Name]; ok && wanted(res.ConfigNames, d.Name) {
					r := configs.Resolved{Value: kmsg.StringPtr(v), Source: kmsg.ConfigSourceDynamicDefaultBrokerConfig}
					r.Synonyms = []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{{Name: d.Name, Value: kmsg.StringPtr(v), Source: r.Source}}
					out = append(out, entry(d, r))
				}
			}
		default:
			return nil, errf(kerr.InvalidRequest, "broker %q is not this broker (%d)", res.ResourceName, b.cfg.NodeID)
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if res.ResourceName == "" {
			return nil, errf(kerr.InvalidRequest, "group name must not be empty")
		}
		l := b.keys.groupLayers(im, res.ResourceName)
		for _, d := range configs.GroupDefs {
			if wanted(res.ConfigNames, d.Name) {
				out = append(out, entry(d, l.ResolveGroup(d, syn)))
			}
		}
	default:
		return nil, errf(kerr.InvalidRequest, "resource type %s is not supported", res.ResourceType)
	}
	return out, nil
}
