package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// serve (share groups are on by default): a kgo share consumer reads through the
// node's wiring, and `samsa groups list` and `describe` show its group as a share group.
func TestGroupsShowShareGroups(t *testing.T) {
	s := startTestServer(t, t.TempDir(), "--set", "share.auto.offset.reset=earliest",
		"--set", "offsets.topic.num.partitions=1", "--set", "share.coordinator.state.topic.num.partitions=1",
		"--set", "group.share.heartbeat.interval.ms=200")
	defer stopTestServer(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "gs"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "gs", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	sc, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()), kgo.ShareGroup("gs-share"), kgo.ConsumeTopics("gs"), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	var got []*kgo.Record
	for len(got) == 0 && ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		sc.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got = append(got, r) })
		pcancel()
	}
	if len(got) != 1 || string(got[0].Value) != "v" {
		t.Fatalf("share consumer got %d records", len(got))
	}
	got[0].Ack(kgo.AckAccept)
	if err := sc.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	if err := groupsList(ctx, adm, &out, nil); err != nil {
		t.Fatal(err)
	}
	line := ""
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "gs-share ") {
			line = l
		}
	}
	if f := strings.Fields(line); len(f) < 4 || f[1] != "share" || f[3] != "share" {
		t.Fatalf("groups list:\n%s", out.String())
	}
	out.Reset()
	if err := groupsDescribe(ctx, adm, &out, "gs-share"); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "type share, state Stable") || !strings.Contains(s, "gs:0") {
		t.Fatalf("groups describe:\n%s", s)
	}
}
