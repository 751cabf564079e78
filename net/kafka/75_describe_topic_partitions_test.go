package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeTopicPartitions pages through topics in name order with a partition limit
// and a cursor, as Kafka's admin client walks it, and answers unknown topics and a
// cursor outside the request with Kafka's codes.
func TestDescribeTopicPartitions(t *testing.T) {
	tb := startTestBroker(t)
	adm := tb.admin(t)
	mustCreate(t, adm, "dtp-b", 3, nil)
	mustCreate(t, adm, "dtp-a", 2, nil)
	cl := tb.client(t)
	ctx := testCtx(t)
	describe := func(limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor, topics ...string) *kmsg.DescribeTopicPartitionsResponse {
		t.Helper()
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		req.ResponsePartitionLimit, req.Cursor = limit, cursor
		for _, n := range topics {
			rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
			rt.Topic = n
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// Pages of two partitions over dtp-a (2) and dtp-b (3), asked in the wrong order.
	type seen struct {
		topic string
		p     int32
	}
	var got []seen
	var cursor *kmsg.DescribeTopicPartitionsRequestCursor
	pages := 0
	for {
		resp := describe(2, cursor, "dtp-b", "dtp-a")
		pages++
		for _, rt := range resp.Topics {
			if rt.ErrorCode != 0 || rt.TopicID == ([16]byte{}) {
				t.Fatalf("topic %v: %v", *rt.Topic, kerr.ErrorForCode(rt.ErrorCode))
			}
			for _, p := range rt.Partitions {
				if p.LeaderID != 1 || len(p.Replicas) != 1 || len(p.ISR) != 1 || p.EligibleLeaderReplicas == nil {
					t.Fatalf("%s/%d: %+v", *rt.Topic, p.Partition, p)
				}
				got = append(got, seen{*rt.Topic, p.Partition})
			}
		}
		if resp.NextCursor == nil {
			break
		}
		cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
		if pages > 5 {
			t.Fatal("the cursor does not end")
		}
	}
	want := []seen{{"dtp-a", 0}, {"dtp-a", 1}, {"dtp-b", 0}, {"dtp-b", 1}, {"dtp-b", 2}}
	if pages != 3 || len(got) != len(want) {
		t.Fatalf("%d pages: %v", pages, got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%d pages: %v, want %v", pages, got, want)
		}
	}
	// Every topic, one page.
	all := describe(0, nil)
	names := map[string]int{}
	for _, rt := range all.Topics {
		names[*rt.Topic] = len(rt.Partitions)
	}
	if names["dtp-a"] != 2 || names["dtp-b"] != 3 || all.NextCursor != nil {
		t.Fatalf("all topics: %v, cursor %v", names, all.NextCursor)
	}
	// An unknown topic; a cursor outside the request.
	if r := describe(0, nil, "dtp-nope"); len(r.Topics) != 1 || r.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown: %+v", r.Topics)
	}
	if r := describe(0, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "dtp-a"}, "dtp-b"); len(r.Topics) != 1 || r.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("cursor outside the request: %+v", r.Topics)
	}
}
