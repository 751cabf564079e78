// AlterConfigs (key 33), versions 0-2: the legacy, non-incremental alter, still used by
// several clients (sarama, kafka-python, older admin tools).
//
// The request's configs become the resource's complete set of overrides: keys given are
// set (validated by name and value: INVALID_CONFIG), overrides not given are deleted.
// Resources and the keys that may be altered are those of IncrementalAlterConfigs
// (44_incremental_alter_configs.go): TOPIC, and BROKER by this node's id or "" for the
// cluster default. A null value or a key given twice: INVALID_REQUEST / INVALID_CONFIG.
// ValidateOnly validates only. Applied to live logs before the answer.
//
// Differences from Apache Kafka: none known for topic and broker resources.
package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

func init() {
	register(API{Key: 33, MinVersion: 0, MaxVersion: 2, Handle: handleAlterConfigs})
}

func handleAlterConfigs(b *Broker, r *Request) {
	req := r.Body.(*kmsg.AlterConfigsRequest)
	resp := r.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, res := range req.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		err := b.replaceConfigs(&res, req.ValidateOnly)
		rr.ErrorCode, rr.ErrorMessage = errCode(err), errMsg(err)
		resp.Resources = append(resp.Resources, rr)
	}
	r.Respond(resp)
}

func (b *Broker) replaceConfigs(res *kmsg.AlterConfigsRequestResource, validateOnly bool) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	t, err := b.resolveAlterTarget(b.meta.Image(), res.ResourceType, res.ResourceName)
	if err != nil {
		return err
	}
	var recs []metadata.Record
	given := map[string]bool{}
	for _, c := range res.Configs {
		if given[c.Name] {
			return errf(kerr.InvalidRequest, "config %q given more than once", c.Name)
		}
		given[c.Name] = true
		d, err := t.alterableDef(c.Name)
		if err != nil {
			return err
		}
		if c.Value == nil {
			return errf(kerr.InvalidConfig, "null value for config %q", c.Name)
		}
		v, err := d.Validate(*c.Value)
		if err != nil {
			return errf(kerr.InvalidConfig, "%v", err)
		}
		if cur, ok := t.current[c.Name]; !ok || cur != v {
			recs = append(recs, t.record(c.Name, &v))
		}
	}
	for k := range t.current {
		if !given[k] {
			recs = append(recs, t.record(k, nil))
		}
	}
	if validateOnly {
		return nil
	}
	return b.commitConfigs(t, recs)
}
