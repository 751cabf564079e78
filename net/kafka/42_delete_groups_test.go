package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

// TestDeleteGroupsV3Messages: DeleteGroups v3 by hand. A group not deleted carries
// Kafka's message for its code (Errors.java), a deleted one none; v2 has no message.
func TestDeleteGroupsV3Messages(t *testing.T) {
	tb := groupTestBroker(t, engine.SyncNone)
	adm := tb.admin(t)
	ctx := testCtx(t)
	mustCreate(t, adm, "dg", 1, nil)
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "dg", Partition: 0, At: 1, LeaderEpoch: -1})
	for _, g := range []string{"empty", "empty2"} {
		if err := adm.CommitAllOffsets(ctx, g, os); err != nil {
			t.Fatal(err)
		}
	}
	member := tb.client(t, kgo.ConsumerGroup("busy"), kgo.ConsumeTopics("dg"), kgo.FetchMaxWait(100*time.Millisecond))
	rc := tb.raw(t)
	deleteGroups := func(version int16, groups ...string) map[string]kmsg.DeleteGroupsResponseGroup {
		t.Helper()
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Version, req.Groups = version, groups
		resp := rc.roundTrip(req).(*kmsg.DeleteGroupsResponse)
		out := map[string]kmsg.DeleteGroupsResponseGroup{}
		for _, g := range resp.Groups {
			out[g.Group] = g
		}
		return out
	}
	eventually(t, 15*time.Second, "the member in group busy", func() bool {
		pctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		member.PollFetches(pctx)
		cancel()
		return deleteGroups(3, "busy")["busy"].ErrorCode == kerr.NonEmptyGroup.Code
	})

	got := deleteGroups(3, "empty", "busy", "nope", "")
	for g, want := range map[string]struct {
		code int16
		msg  string
	}{
		"empty": {0, ""},
		"busy":  {kerr.NonEmptyGroup.Code, "The group is not empty."},
		"nope":  {kerr.GroupIDNotFound.Code, "The group id does not exist."},
		"":      {kerr.InvalidGroupID.Code, "The configured groupId is invalid."},
	} {
		r, ok := got[g]
		msg := ""
		if ok && r.ErrorMessage != nil {
			msg = *r.ErrorMessage
		}
		if !ok || r.ErrorCode != want.code || msg != want.msg || (want.code == 0) != (r.ErrorMessage == nil) {
			t.Errorf("DeleteGroups v3 of %q: %v %q, want %v %q", g, kerr.ErrorForCode(r.ErrorCode), msg, kerr.ErrorForCode(want.code), want.msg)
		}
	}
	got = deleteGroups(2, "empty2", "busy")
	if r := got["empty2"]; r.ErrorCode != 0 || r.ErrorMessage != nil {
		t.Errorf("DeleteGroups v2 of an empty group: %+v", r)
	}
	if r := got["busy"]; r.ErrorCode != kerr.NonEmptyGroup.Code || r.ErrorMessage != nil {
		t.Errorf("DeleteGroups v2 of a group with a member: %+v (v2 has no message)", r)
	}
}
