package controller

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestErrorResponseEveryAPI: for every API the controller serves, the NOT_CONTROLLER
// answer is recognised by NotController, a success is not, and the answer's version
// is the request's.
func TestErrorResponseEveryAPI(t *testing.T) {
	name := "t"
	reqs := []kmsg.Request{
		registration(1, 1, ""), heartbeat(1, 1, 0), kmsg.NewPtrAlterPartitionRequest(), kmsg.NewPtrAllocateProducerIDsRequest(),
		createTopic("t", 1, 1),
		&kmsg.DeleteTopicsRequest{Version: 6, Topics: []kmsg.DeleteTopicsRequestTopic{{Topic: &name}}},
		&kmsg.DeleteTopicsRequest{Version: 3, TopicNames: []string{"t"}},
		&kmsg.CreatePartitionsRequest{Topics: []kmsg.CreatePartitionsRequestTopic{{Topic: "t", Count: 2}}},
		&kmsg.AlterConfigsRequest{Resources: []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "t"}}},
		incremental(kmsg.ConfigResourceTypeTopic, "t", "retention.ms", kmsg.IncrementalAlterConfigOpSet, "1"),
		&kmsg.ElectLeadersRequest{Version: 2, Topics: []kmsg.ElectLeadersRequestTopic{{Topic: "t", Partitions: []int32{0}}}},
		&kmsg.ElectLeadersRequest{Version: 0, Topics: []kmsg.ElectLeadersRequestTopic{{Topic: "t", Partitions: []int32{0}}}},
		kmsg.NewPtrAlterPartitionAssignmentsRequest(), kmsg.NewPtrListPartitionReassignmentsRequest(),
		&kmsg.DescribeQuorumRequest{Version: 2},
		&kmsg.UpdateFeaturesRequest{Version: 2}, &kmsg.UpdateFeaturesRequest{Version: 0},
	}
	for _, req := range reqs {
		if !Serves(req) {
			t.Fatalf("%T not served", req)
		}
		r := ErrorResponse(req, kerr.NotController.Code, "moved")
		if !NotController(r) {
			t.Errorf("%T v%d: NotController false for its NOT_CONTROLLER answer", req, req.GetVersion())
		}
		if r.GetVersion() != req.GetVersion() {
			t.Errorf("%T: version %d, request %d", req, r.GetVersion(), req.GetVersion())
		}
		if NotController(ErrorResponse(req, 0, "")) {
			t.Errorf("%T: a success counts as NOT_CONTROLLER", req)
		}
	}
	if Serves(kmsg.NewPtrProduceRequest()) {
		t.Fatal("serves produce")
	}
}

// TestLocalChannelFindsTheActiveController: the channel skips a voter that is not
// active and remembers the one that answered.
func TestLocalChannelFindsTheActiveController(t *testing.T) {
	log := NewMemLog(1, 2)
	log.SetAuto(true)
	log.Elect(2, 0)
	c1, _ := New(Config{NodeID: 1}, log.Voter(1))
	c2, _ := New(Config{NodeID: 2}, log.Voter(2))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan struct{}, 2)
	for _, c := range []*Controller{c1, c2} {
		go func() { _ = c.Run(ctx); done <- struct{}{} }()
	}
	ch := NewLocalChannel(c1, c2)
	for i := range 2 {
		r, err := ch.Request(ctx, registration(int32(10+i), 1, ""))
		if err != nil {
			t.Fatal(err)
		}
		if rr := r.(*kmsg.BrokerRegistrationResponse); rr.ErrorCode != 0 || rr.BrokerEpoch <= 0 {
			t.Fatalf("answer %+v", rr)
		}
	}
	if ch.last != 1 {
		t.Fatalf("the channel did not keep the active controller: %d", ch.last)
	}
	cancel()
	<-done
	<-done
}
