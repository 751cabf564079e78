package metadata

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"strings"
	"unicode/utf8"
)

// Client quotas (KIP-13, KIP-55, KIP-546, KIP-612): Kafka's ClientQuotaRecord (api key
// 14) sets or removes one quota key of one entity. An entity names a user, a client id,
// both, or an IP address, each by name or as the default of its type:
//
//	ClientQuotaRecord payload:
//	  user      part     part = flags byte (bit 0 present, bit 1 default) + string name
//	  client-id part            (the name is empty for an absent or default part)
//	  ip        part
//	  key       string   producer_byte_rate, consumer_byte_rate, request_percentage,
//	                     controller_mutation_rate (user, client-id); connection_creation_rate (ip)
//	  value     float64  IEEE 754 bits, big-endian
//	  remove    byte     1: the key is removed (value ignored)
//
// The controller validates an AlterClientQuotas request against its pending image
// (AlterClientQuotas below); Apply checks the record's structure again.
const typeClientQuota recordType = 14

// The entity types and quota keys, as Kafka names them.
const (
	QuotaEntityUser     = "user"
	QuotaEntityClientID = "client-id"
	QuotaEntityIP       = "ip"

	QuotaProducerByteRate       = "producer_byte_rate"
	QuotaConsumerByteRate       = "consumer_byte_rate"
	QuotaRequestPercentage      = "request_percentage"
	QuotaControllerMutationRate = "controller_mutation_rate"
	QuotaConnectionCreationRate = "connection_creation_rate"
)

// QuotaPart is one component of a quota entity: absent (the zero value), a name, or the
// default of its type.
type QuotaPart struct {
	Set     bool
	Default bool
	Name    string // when Set and not Default
}

// QuotaName is the part naming name.
func QuotaName(name string) QuotaPart { return QuotaPart{Set: true, Name: name} }

// QuotaDefault is the default part of a type.
var QuotaDefault = QuotaPart{Set: true, Default: true}

func (p QuotaPart) String() string {
	switch {
	case !p.Set:
		return "-"
	case p.Default:
		return "<default>"
	}
	return p.Name
}

// QuotaEntity is the entity a quota applies to. It is comparable.
type QuotaEntity struct {
	User, ClientID, IP QuotaPart
}

func (e QuotaEntity) String() string {
	var parts []string
	for _, p := range []struct {
		t string
		p QuotaPart
	}{{QuotaEntityUser, e.User}, {QuotaEntityClientID, e.ClientID}, {QuotaEntityIP, e.IP}} {
		if p.p.Set {
			parts = append(parts, p.t+"="+p.p.String())
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// Validate checks Kafka's entity rules: a user, a client id, both, or an IP alone; an
// IP name is an address.
func (e QuotaEntity) Validate() error {
	bad := func(why string) error { return fmt.Errorf("%w: quota entity %s: %s", ErrInvalidRecord, e, why) }
	switch {
	case !e.User.Set && !e.ClientID.Set && !e.IP.Set:
		return bad("empty")
	case e.IP.Set && (e.User.Set || e.ClientID.Set):
		return bad("an ip entity cannot be combined with user or client-id")
	}
	for _, p := range []QuotaPart{e.User, e.ClientID, e.IP} {
		if p.Default && p.Name != "" {
			return bad("a default part has a name")
		}
		if len(p.Name) > maxACLString || !utf8.ValidString(p.Name) {
			return bad("name too long or not UTF-8")
		}
	}
	if e.User.Set && !e.User.Default && e.User.Name == "" {
		return bad("empty user name")
	}
	if e.IP.Set && !e.IP.Default && net.ParseIP(e.IP.Name) == nil {
		return bad("ip " + e.IP.Name + " is not an address")
	}
	return nil
}

// ValidQuotaKey checks that key applies to e and that v is an acceptable value
// (Kafka's QuotaConfigs: positive; the byte rates and the connection rate whole).
func ValidQuotaKey(e QuotaEntity, key string, v float64) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: quota %s of %s: %s", ErrInvalidRecord, key, e, why)
	}
	whole := false
	switch key {
	case QuotaProducerByteRate, QuotaConsumerByteRate:
		whole = true
		fallthrough
	case QuotaRequestPercentage, QuotaControllerMutationRate:
		if e.IP.Set {
			return bad("not a key of an ip entity")
		}
	case QuotaConnectionCreationRate:
		whole = true
		if !e.IP.Set {
			return bad("a key of ip entities only")
		}
	default:
		return bad("unknown quota key")
	}
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0) || v <= 0:
		return bad(fmt.Sprintf("value %v must be positive", v))
	case whole && v != math.Trunc(v):
		return bad(fmt.Sprintf("value %v must be a whole number", v))
	}
	return nil
}

// ClientQuotaRecord sets (Remove false) or removes one quota key of an entity.
type ClientQuotaRecord struct {
	Entity QuotaEntity
	Key    string
	Value  float64
	Remove bool
}

func (*ClientQuotaRecord) recordType() recordType { return typeClientQuota }
func (*ClientQuotaRecord) securityRecord()        {}

// ClientQuotas are the quotas of an image by entity. It is immutable and shared by
// every image until a batch changes a quota, so a cache keyed by the pointer (the
// broker's quota index) stays valid while the pointer is the image's.
type ClientQuotas struct {
	byEntity map[QuotaEntity]map[string]float64
}

var emptyQuotas = &ClientQuotas{}

// Len is the number of entities with quotas.
func (q *ClientQuotas) Len() int { return len(q.byEntity) }

// Of returns e's quotas by key (nil: none). The map is shared: do not modify it.
func (q *ClientQuotas) Of(e QuotaEntity) map[string]float64 { return q.byEntity[e] }

// Entities returns every entity with quotas, sorted (users, then client ids, then
// ips; defaults before names).
func (q *ClientQuotas) Entities() []QuotaEntity {
	out := slices.Collect(maps.Keys(q.byEntity))
	cmpPart := func(a, b QuotaPart) int {
		return cmp.Or(cmp.Compare(b2i(b.Set), b2i(a.Set)), cmp.Compare(b2i(b.Default), b2i(a.Default)), strings.Compare(a.Name, b.Name))
	}
	slices.SortFunc(out, func(a, b QuotaEntity) int {
		return cmp.Or(cmpPart(a.User, b.User), cmpPart(a.ClientID, b.ClientID), cmpPart(a.IP, b.IP))
	})
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ClientQuotas returns the image's client quotas (never nil).
func (im *Image) ClientQuotas() *ClientQuotas {
	if im.sec.quotas == nil {
		return emptyQuotas
	}
	return im.sec.quotas
}

// applyQuota applies a ClientQuotaRecord: the whole quota set is copied once per batch
// (quotas are few).
func (b *builder) applyQuota(r *ClientQuotaRecord) error {
	if err := r.Entity.Validate(); err != nil {
		return err
	}
	cur := b.im.ClientQuotas()
	if r.Remove {
		if _, ok := cur.byEntity[r.Entity][r.Key]; !ok {
			return fmt.Errorf("%w: remove quota %s of %s: none", ErrInvalidRecord, r.Key, r.Entity)
		}
	} else if err := ValidQuotaKey(r.Entity, r.Key, r.Value); err != nil {
		return err
	}
	if !b.secOwn.quotasCopied {
		c := &ClientQuotas{byEntity: make(map[QuotaEntity]map[string]float64, len(cur.byEntity)+1)}
		maps.Copy(c.byEntity, cur.byEntity)
		b.im.sec.quotas = c
		b.secOwn.quotasCopied = true
		b.secOwn.quotaMaps = map[QuotaEntity]bool{}
	}
	q := b.im.sec.quotas
	if !b.secOwn.quotaMaps[r.Entity] {
		q.byEntity[r.Entity] = maps.Clone(q.byEntity[r.Entity])
		if q.byEntity[r.Entity] == nil {
			q.byEntity[r.Entity] = map[string]float64{}
		}
		b.secOwn.quotaMaps[r.Entity] = true
	}
	if r.Remove {
		delete(q.byEntity[r.Entity], r.Key)
		if len(q.byEntity[r.Entity]) == 0 {
			delete(q.byEntity, r.Entity)
			delete(b.secOwn.quotaMaps, r.Entity)
		}
		return nil
	}
	q.byEntity[r.Entity][r.Key] = r.Value
	return nil
}

// quotaRecords returns the records that rebuild the quotas, by entity and key.
func (im *Image) quotaRecords() []Record {
	q := im.ClientQuotas()
	var out []Record
	for _, e := range q.Entities() {
		keys := slices.Sorted(maps.Keys(q.byEntity[e]))
		for _, k := range keys {
			out = append(out, &ClientQuotaRecord{Entity: e, Key: k, Value: q.byEntity[e][k]})
		}
	}
	return out
}

func appendQuotaPart(dst []byte, p QuotaPart) []byte {
	var flags byte
	if p.Set {
		flags |= 1
	}
	if p.Default {
		flags |= 2
	}
	dst = append(dst, flags)
	return appendString(dst, p.Name)
}

func (d *decoder) quotaPart() QuotaPart {
	flags := d.int8()
	if flags&^3 != 0 || flags == 2 {
		d.fail("quota entity part flags")
	}
	return QuotaPart{Set: flags&1 != 0, Default: flags&2 != 0, Name: d.string()}
}

func appendQuota(dst []byte, r *ClientQuotaRecord) []byte {
	dst = appendQuotaPart(dst, r.Entity.User)
	dst = appendQuotaPart(dst, r.Entity.ClientID)
	dst = appendQuotaPart(dst, r.Entity.IP)
	dst = appendString(dst, r.Key)
	dst = appendUint64(dst, math.Float64bits(r.Value))
	if r.Remove {
		return append(dst, 1)
	}
	return append(dst, 0)
}

func decodeQuota(d *decoder) Record {
	r := &ClientQuotaRecord{}
	r.Entity.User, r.Entity.ClientID, r.Entity.IP = d.quotaPart(), d.quotaPart(), d.quotaPart()
	r.Key = d.string()
	r.Value = math.Float64frombits(uint64(d.int64()))
	switch d.int8() {
	case 0:
	case 1:
		r.Remove = true
	default:
		d.fail("quota remove flag")
	}
	return r
}

func appendUint64(dst []byte, v uint64) []byte {
	return append(dst, byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}
