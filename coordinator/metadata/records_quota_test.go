package metadata

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
)

func quotaRecs() []Record {
	return []Record{
		&ClientQuotaRecord{Entity: QuotaEntity{User: QuotaName("alice")}, Key: QuotaProducerByteRate, Value: 1 << 20},
		&ClientQuotaRecord{Entity: QuotaEntity{User: QuotaDefault, ClientID: QuotaName("app")}, Key: QuotaConsumerByteRate, Value: 4096},
		&ClientQuotaRecord{Entity: QuotaEntity{ClientID: QuotaDefault}, Key: QuotaRequestPercentage, Value: 12.5},
		&ClientQuotaRecord{Entity: QuotaEntity{IP: QuotaName("10.0.0.1")}, Key: QuotaConnectionCreationRate, Value: 5},
		&ClientQuotaRecord{Entity: QuotaEntity{IP: QuotaDefault}, Key: QuotaConnectionCreationRate, Value: 50},
		&ClientQuotaRecord{Entity: QuotaEntity{User: QuotaName("alice")}, Key: QuotaProducerByteRate, Remove: true},
	}
}

func TestClientQuotaRecordsRoundTrip(t *testing.T) {
	for _, r := range quotaRecs() {
		buf := Encode(nil, r)
		got, n, err := Decode(buf)
		if err != nil || n != len(buf) || !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip of %+v: %+v, %d, %v", r, got, n, err)
		}
		for i := 0; i < len(buf); i++ {
			if _, _, err := Decode(buf[:i]); !errors.Is(err, ErrCorrupt) || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("cut at %d: %v", i, err)
			}
		}
	}
	bad := Encode(nil, quotaRecs()[0])
	bad[10] = 2 // a part that is a default but not present
	if _, _, err := Decode(finishFrame(bytes.Clone(bad), 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bad part flags: %v", err)
	}
}

func TestApplyClientQuotas(t *testing.T) {
	recs := quotaRecs()
	im := mustApply(t, &Image{}, recs[:5]...)
	q := im.ClientQuotas()
	if q.Len() != 5 || q.Of(QuotaEntity{User: QuotaName("alice")})[QuotaProducerByteRate] != 1<<20 {
		t.Fatalf("quotas %+v", q.byEntity)
	}
	after := mustApply(t, im, recs[5])
	if after.ClientQuotas().Len() != 4 || im.ClientQuotas().Len() != 5 {
		t.Fatal("removing the last key of an entity removes the entity, in the new image only")
	}
	ents := im.ClientQuotas().Entities()
	if ents[0].User != QuotaDefault || !ents[len(ents)-1].IP.Set {
		t.Fatalf("entity order %v", ents)
	}
	for name, r := range map[string]*ClientQuotaRecord{
		"empty entity":      {Key: QuotaProducerByteRate, Value: 1},
		"ip with user":      {Entity: QuotaEntity{User: QuotaName("a"), IP: QuotaDefault}, Key: QuotaConnectionCreationRate, Value: 1},
		"bad ip":            {Entity: QuotaEntity{IP: QuotaName("not-an-ip")}, Key: QuotaConnectionCreationRate, Value: 1},
		"ip key on user":    {Entity: QuotaEntity{User: QuotaName("a")}, Key: QuotaConnectionCreationRate, Value: 1},
		"byte rate on ip":   {Entity: QuotaEntity{IP: QuotaDefault}, Key: QuotaProducerByteRate, Value: 1},
		"unknown key":       {Entity: QuotaEntity{User: QuotaName("a")}, Key: "bytes", Value: 1},
		"negative":          {Entity: QuotaEntity{User: QuotaName("a")}, Key: QuotaProducerByteRate, Value: -1},
		"fraction of bytes": {Entity: QuotaEntity{User: QuotaName("a")}, Key: QuotaProducerByteRate, Value: 1.5},
		"remove missing":    {Entity: QuotaEntity{User: QuotaName("b")}, Key: QuotaProducerByteRate, Remove: true},
	} {
		if _, err := im.Apply(r); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Quotas survive a snapshot.
	snap, err := EncodeSnapshot(nil, im)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeSnapshot(snap)
	if err != nil || !sameImage(back, im) || back.ClientQuotas().Len() != 5 {
		t.Fatalf("snapshot round trip: %v", err)
	}
}
