package controller

import (
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// Client quotas (KIP-546): AlterClientQuotas (49) writes ClientQuotaRecords, the
// request's records as one entry (Kafka's ClientQuotaControlManager); an entity with
// an invalid component or op gets INVALID_REQUEST and no record, the other entities
// of the request still apply. DescribeClientQuotas (48) is answered from an image
// (brokers answer it from their own: DescribeQuotasResponse).

// errQuota is wrapped by the reasons an entity or filter is refused (INVALID_REQUEST).
var errQuota = errors.New("invalid client quota request")

// quotaEntity converts a request's entity components (type, name; a nil name is the
// default) into an entity.
func quotaEntity(n int, part func(i int) (typ string, name *string)) (metadata.QuotaEntity, error) {
	var e metadata.QuotaEntity
	for i := range n {
		typ, name := part(i)
		var p *metadata.QuotaPart
		switch typ {
		case metadata.QuotaEntityUser:
			p = &e.User
		case metadata.QuotaEntityClientID:
			p = &e.ClientID
		case metadata.QuotaEntityIP:
			p = &e.IP
		default:
			return e, fmt.Errorf("%w: unknown entity type %q", errQuota, typ)
		}
		if p.Set {
			return e, fmt.Errorf("%w: entity type %s given twice", errQuota, typ)
		}
		switch {
		case name == nil:
			*p = metadata.QuotaDefault
		case p == &e.IP && net.ParseIP(*name) != nil:
			*p = metadata.QuotaName(net.ParseIP(*name).String()) // one spelling per address
		default:
			*p = metadata.QuotaName(*name)
		}
	}
	if err := e.Validate(); err != nil {
		return e, fmt.Errorf("%w: %v", errQuota, err)
	}
	return e, nil
}

// quotaEntityParts lists e's components as (type, name) with a nil name for a default.
func quotaEntityParts(e metadata.QuotaEntity, add func(typ string, name *string)) {
	for _, p := range []struct {
		t string
		p metadata.QuotaPart
	}{{metadata.QuotaEntityUser, e.User}, {metadata.QuotaEntityClientID, e.ClientID}, {metadata.QuotaEntityIP, e.IP}} {
		if !p.p.Set {
			continue
		}
		if p.p.Default {
			add(p.t, nil)
		} else {
			name := p.p.Name
			add(p.t, &name)
		}
	}
}

// AlterQuotaRecords validates each entry of r against im and returns the error of
// each (nil: valid) and the records of the valid ones (none for a ValidateOnly
// request). Removing a key the entity does not have is no error and writes nothing,
// as in Kafka; setting a key to its current value writes nothing either.
func AlterQuotaRecords(im *metadata.Image, r *kmsg.AlterClientQuotasRequest) ([]error, []metadata.Record) {
	errs := make([]error, len(r.Entries))
	var recs []metadata.Record
	q := im.ClientQuotas()
	for i := range r.Entries {
		en := &r.Entries[i]
		e, err := quotaEntity(len(en.Entity), func(j int) (string, *string) { return en.Entity[j].Type, en.Entity[j].Name })
		if err != nil {
			errs[i] = err
			continue
		}
		cur := q.Of(e)
		var mine []metadata.Record
		seen := map[string]bool{}
		for _, op := range en.Ops {
			if seen[op.Key] {
				err = fmt.Errorf("%w: key %s given twice for %s", errQuota, op.Key, e)
				break
			}
			seen[op.Key] = true
			if op.Remove {
				if err = metadata.ValidQuotaKey(e, op.Key, 1); err != nil {
					err = fmt.Errorf("%w: %v", errQuota, err)
					break
				}
				if _, ok := cur[op.Key]; ok {
					mine = append(mine, &metadata.ClientQuotaRecord{Entity: e, Key: op.Key, Remove: true})
				}
				continue
			}
			if err = metadata.ValidQuotaKey(e, op.Key, op.Value); err != nil {
				err = fmt.Errorf("%w: %v", errQuota, err)
				break
			}
			if v, ok := cur[op.Key]; !ok || v != op.Value {
				mine = append(mine, &metadata.ClientQuotaRecord{Entity: e, Key: op.Key, Value: op.Value})
			}
		}
		if err != nil {
			errs[i] = err
			continue
		}
		if !r.ValidateOnly {
			recs = append(recs, mine...)
		}
	}
	return errs, recs
}

func (c *Controller) alterQuotasLocked(r *kmsg.AlterClientQuotasRequest) *op {
	resp := r.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	resp.SetVersion(r.GetVersion())
	errs, recs := AlterQuotaRecords(c.mu.pending, r)
	for i := range r.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		for _, p := range r.Entries[i].Entity {
			ent := kmsg.NewAlterClientQuotasResponseEntryEntity()
			ent.Type, ent.Name = p.Type, p.Name
			re.Entity = append(re.Entity, ent)
		}
		if errs[i] != nil {
			re.ErrorCode = kerr.InvalidRequest.Code
			msg := errs[i].Error()
			re.ErrorMessage = &msg
		}
		resp.Entries = append(resp.Entries, re)
	}
	if len(recs) == 0 {
		return &op{resp: resp}
	}
	return &op{recs: recs, finish: func(uint64) kmsg.Response { return resp }}
}

func (c *Controller) describeQuotasLocked(r *kmsg.DescribeClientQuotasRequest) *op {
	return &op{resp: DescribeQuotasResponse(c.mu.pending, r)}
}

// quotaFilter is a DescribeClientQuotas filter: components by type, each matching
// a name (exact), the default (exact with a nil name) or any entity of the type.
type quotaFilter struct {
	exact  map[string]*string
	anyOf  map[string]bool
	strict bool
}

func newQuotaFilter(r *kmsg.DescribeClientQuotasRequest) (quotaFilter, error) {
	f := quotaFilter{exact: map[string]*string{}, anyOf: map[string]bool{}, strict: r.Strict}
	for _, c := range r.Components {
		switch c.EntityType {
		case metadata.QuotaEntityUser, metadata.QuotaEntityClientID, metadata.QuotaEntityIP:
		default:
			return f, fmt.Errorf("%w: unknown entity type %q", errQuota, c.EntityType)
		}
		if _, ok := f.exact[c.EntityType]; ok || f.anyOf[c.EntityType] {
			return f, fmt.Errorf("%w: entity type %s cannot appear more than once in the filter", errQuota, c.EntityType)
		}
		switch c.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if c.Match == nil {
				return f, fmt.Errorf("%w: MATCH_TYPE_EXACT with a null match", errQuota)
			}
			f.exact[c.EntityType] = c.Match
		case kmsg.QuotasMatchTypeDefault:
			if c.Match != nil {
				return f, fmt.Errorf("%w: MATCH_TYPE_DEFAULT with a match string", errQuota)
			}
			f.exact[c.EntityType] = nil
		case kmsg.QuotasMatchTypeAny:
			if c.Match != nil {
				return f, fmt.Errorf("%w: MATCH_TYPE_SPECIFIED with a match string", errQuota)
			}
			f.anyOf[c.EntityType] = true
		default:
			return f, fmt.Errorf("%w: unknown match type %d", errQuota, c.MatchType)
		}
	}
	_, ipExact := f.exact[metadata.QuotaEntityIP]
	if ipExact || f.anyOf[metadata.QuotaEntityIP] {
		for _, t := range []string{metadata.QuotaEntityUser, metadata.QuotaEntityClientID} {
			if _, ok := f.exact[t]; ok || f.anyOf[t] {
				return f, fmt.Errorf("%w: an ip filter component cannot be used with user or client-id components", errQuota)
			}
		}
	}
	return f, nil
}

// matches is Kafka's ClientQuotasImage rule: every exact component names the entity's
// part (or its default), every "any" component's type is present, and under strict the
// entity has no other part.
func (f quotaFilter) matches(e metadata.QuotaEntity) bool {
	parts := map[string]metadata.QuotaPart{}
	quotaEntityParts(e, func(typ string, name *string) {
		if name == nil {
			parts[typ] = metadata.QuotaDefault
		} else {
			parts[typ] = metadata.QuotaName(*name)
		}
	})
	if f.strict && len(parts) != len(f.exact)+len(f.anyOf) {
		return false
	}
	for t, name := range f.exact {
		p, ok := parts[t]
		switch {
		case !ok:
			return false
		case name == nil && !p.Default, name != nil && (p.Default || p.Name != *name):
			return false
		}
	}
	for t := range f.anyOf {
		if _, ok := parts[t]; !ok {
			return false
		}
	}
	return true
}

// DescribeQuotasResponse answers DescribeClientQuotas (48) from im.
func DescribeQuotasResponse(im *metadata.Image, r *kmsg.DescribeClientQuotasRequest) *kmsg.DescribeClientQuotasResponse {
	resp := kmsg.NewPtrDescribeClientQuotasResponse()
	resp.SetVersion(r.GetVersion())
	f, err := newQuotaFilter(r)
	if err != nil {
		resp.ErrorCode = kerr.InvalidRequest.Code
		msg := err.Error()
		resp.ErrorMessage = &msg
		return resp
	}
	q := im.ClientQuotas()
	for _, e := range q.Entities() {
		if !f.matches(e) {
			continue
		}
		re := kmsg.NewDescribeClientQuotasResponseEntry()
		quotaEntityParts(e, func(typ string, name *string) {
			ent := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ent.Type, ent.Name = typ, name
			re.Entity = append(re.Entity, ent)
		})
		vals := q.Of(e)
		keys := make([]string, 0, len(vals))
		for k := range vals {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, vals[k]
			re.Values = append(re.Values, v)
		}
		resp.Entries = append(resp.Entries, re)
	}
	return resp
}
