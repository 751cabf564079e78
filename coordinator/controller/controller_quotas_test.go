package controller

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

func quotaEntry(ops []kmsg.AlterClientQuotasRequestEntryOp, parts ...*string) kmsg.AlterClientQuotasRequestEntry {
	e := kmsg.NewAlterClientQuotasRequestEntry()
	for i := 0; i < len(parts); i += 2 {
		c := kmsg.NewAlterClientQuotasRequestEntryEntity()
		c.Type, c.Name = *parts[i], parts[i+1]
		e.Entity = append(e.Entity, c)
	}
	e.Ops = ops
	return e
}

func sptr(s string) *string { return &s }

func TestAlterQuotaRecords(t *testing.T) {
	set := func(k string, v float64) []kmsg.AlterClientQuotasRequestEntryOp {
		return []kmsg.AlterClientQuotasRequestEntryOp{{Key: k, Value: v}}
	}
	user, client, ip := sptr("user"), sptr("client-id"), sptr("ip")
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.Entries = []kmsg.AlterClientQuotasRequestEntry{
		quotaEntry(set("connection_creation_rate", 3), ip, sptr("0:0:0:0:0:0:0:1")), // stored as ::1
		quotaEntry(set("producer_byte_rate", 10), user, nil, client, sptr("app")),
		quotaEntry(set("producer_byte_rate", 10), user, sptr("a"), user, sptr("b")),                                                                       // a type twice
		quotaEntry(set("producer_byte_rate", 10), sptr("group"), sptr("g")),                                                                               // unknown type
		quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{{Key: "producer_byte_rate", Value: 1}, {Key: "producer_byte_rate", Value: 2}}, user, sptr("c")), // a key twice
		quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{{Key: "consumer_byte_rate", Remove: true}}, user, sptr("d")),                                    // nothing to remove: no record
	}
	errs, recs := AlterQuotaRecords(&metadata.Image{}, req)
	for i, want := range []bool{false, false, true, true, true, false} {
		if (errs[i] != nil) != want {
			t.Errorf("entry %d: %v", i, errs[i])
		}
	}
	if len(recs) != 2 || recs[0].(*metadata.ClientQuotaRecord).Entity.IP.Name != "::1" {
		t.Fatalf("records %+v", recs)
	}
	im, err := (&metadata.Image{}).Apply(recs...)
	if err != nil {
		t.Fatal(err)
	}
	// Setting a key to its current value writes nothing; validate-only writes nothing.
	if _, again := AlterQuotaRecords(im, req); len(again) != 0 {
		t.Fatalf("unchanged quotas rewritten: %+v", again)
	}
	req.ValidateOnly = true
	req.Entries[1].Ops[0].Value = 11
	if errs, recs := AlterQuotaRecords(im, req); len(recs) != 0 || errs[1] != nil {
		t.Fatalf("validate only: %v %+v", errs, recs)
	}

	d := kmsg.NewPtrDescribeClientQuotasRequest()
	d.Components = []kmsg.DescribeClientQuotasRequestComponent{{EntityType: "user", MatchType: kmsg.QuotasMatchTypeDefault}, {EntityType: "client-id", MatchType: kmsg.QuotasMatchTypeExact, Match: sptr("app")}}
	if r := DescribeQuotasResponse(im, d); r.ErrorCode != 0 || len(r.Entries) != 1 || r.Entries[0].Values[0].Value != 10 {
		t.Fatalf("describe <default>,app: %+v", r)
	}
	for name, comps := range map[string][]kmsg.DescribeClientQuotasRequestComponent{
		"exact without a name": {{EntityType: "user", MatchType: kmsg.QuotasMatchTypeExact}},
		"default with a name":  {{EntityType: "user", MatchType: kmsg.QuotasMatchTypeDefault, Match: sptr("x")}},
		"type twice":           {{EntityType: "user", MatchType: kmsg.QuotasMatchTypeAny}, {EntityType: "user", MatchType: kmsg.QuotasMatchTypeAny}},
		"ip with client-id":    {{EntityType: "ip", MatchType: kmsg.QuotasMatchTypeAny}, {EntityType: "client-id", MatchType: kmsg.QuotasMatchTypeAny}},
		"unknown type":         {{EntityType: "topic", MatchType: kmsg.QuotasMatchTypeAny}},
	} {
		d.Components = comps
		if r := DescribeQuotasResponse(im, d); r.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("%s: error %d", name, r.ErrorCode)
		}
	}
}
