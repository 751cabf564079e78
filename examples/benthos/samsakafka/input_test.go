package samsakafka

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestInputCommitsAcknowledgedPrefix: the input commits a partition's offsets only
// over batches acknowledged in order. Batch A (offsets 0-9) is read and left
// unacknowledged, batch B (10-19) is read and acknowledged, the input closes: nothing
// may be committed past A. A second input of the group re-reads from offset 0;
// acknowledging both then commits 20.
func TestInputCommitsAcknowledgedPrefix(t *testing.T) {
	addr := startBroker(t)
	ctx := ctxFor(t, time.Minute)
	const topic, group = "acks", "acks-g"
	cl := newClient(t, addr, kgo.DefaultProduceTopic(topic))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	produce := func(from, to int) { // one record batch
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Value: []byte(strconv.Itoa(i))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	open := func() service.BatchInput {
		t.Helper()
		conf, err := inputSpec().ParseYAML(fmt.Sprintf(`
seed_brokers: [ %q ]
topics: [ %s ]
consumer_group: %s
commit_period: 1h
`, addr, topic, group), nil)
		if err != nil {
			t.Fatal(err)
		}
		in, err := newInput(conf, service.MockResources())
		if err != nil {
			t.Fatal(err)
		}
		if err := in.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		return in
	}
	// read returns the next batch, which must hold offsets [from, to).
	read := func(in service.BatchInput, from, to int) service.AckFunc {
		t.Helper()
		b, ack, err := in.ReadBatch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range b {
			off, _ := m.MetaGetMut("kafka_offset")
			v, _ := m.AsBytes()
			if off != from+i || string(v) != strconv.Itoa(from+i) {
				t.Fatalf("batch [%d, %d): message %d is offset %v, value %q", from, to, i, off, v)
			}
		}
		if len(b) != to-from {
			t.Fatalf("batch [%d, %d): %d messages", from, to, len(b))
		}
		return ack
	}
	committed := func() int64 {
		t.Helper()
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := offs.Lookup(topic, 0); ok {
			return o.At
		}
		return -1
	}

	produce(0, 10)
	in := open()
	ackA := read(in, 0, 10)
	produce(10, 20)
	ackB := read(in, 10, 20)
	if err := ackB(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := in.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if c := committed(); c > 0 {
		t.Fatalf("committed %d with offsets 0-9 unacknowledged", c)
	}
	_ = ackA(ctx, nil) // too late: that input is closed

	in = open()
	ackA = read(in, 0, 20) // everything again, in one batch
	if err := ackA(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := in.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if c := committed(); c != 20 {
		t.Fatalf("committed %d after every record was acknowledged, want 20", c)
	}
}
