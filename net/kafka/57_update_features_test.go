package kafka

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/controller"
)

// finalizedAt asks the broker at addr for its finalized feature levels (ApiVersions
// v3) and the API keys it advertises.
func finalizedAt(t *testing.T, addr string) (map[string]int16, map[int16]bool, int64) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	rc := &rawConn{t: t, c: c}
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = 3, "samsa-test", "1"
	resp := rc.roundTrip(req).(*kmsg.ApiVersionsResponse)
	fin := map[string]int16{}
	for _, f := range resp.FinalizedFeatures {
		fin[f.Name] = f.MaxVersionLevel
	}
	keys := map[int16]bool{}
	for _, k := range resp.ApiKeys {
		keys[k.ApiKey] = true
	}
	return fin, keys, resp.FinalizedFeaturesEpoch
}

// TestUpdateFeaturesCluster: three combined nodes over real TCP whose metadata log
// holds no feature levels (read at the keys' levels: transaction.version 1 here).
// kadm's UpdateFeatures through a broker (forwarded to the active controller):
// validate-only changes nothing; transaction.version 1 -> 2 writes every level and
// reaches every broker's ApiVersions and transaction coordinator; metadata.version
// 4.2-IV1 -> 4.4-IV2; a downgrade across 4.3-IV0 is INVALID_UPDATE_VERSION with
// Kafka's message (on the active controller's listener); streams.version 0 stops
// streams groups on every broker and 1 brings them back.
func TestUpdateFeaturesCluster(t *testing.T) {
	c := startCluster(t, map[string]string{"samsa.transaction.version": "1"})
	ctx := testCtx(t)
	adm := kadm.NewClient(clusterClient(t, c))
	for _, b := range c.brokers {
		fin, _, epoch := finalizedAt(t, b.addr)
		if fin["transaction.version"] != 1 || fin["metadata.version"] != 29 || epoch < 0 {
			t.Fatalf("broker %d before: %v at %d", b.id, fin, epoch)
		}
	}
	res, err := adm.UpdateFeatures(ctx, true, kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: 2, UpgradeType: 1})
	if err != nil || res.Error() != nil {
		t.Fatalf("validate only: %v %v", res, err)
	}
	if fin, _, _ := finalizedAt(t, c.brokers[2].addr); fin["transaction.version"] != 1 {
		t.Fatalf("validate only changed the level: %v", fin)
	}
	res, err = adm.UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: 2, UpgradeType: 1})
	if err != nil || res.Error() != nil {
		t.Fatalf("upgrade: %v %v", res, err)
	}
	for _, b := range c.brokers {
		eventually(t, 10*time.Second, "transaction.version 2 on every broker", func() bool {
			fin, _, _ := finalizedAt(t, b.addr)
			tc := b.b.coord.Txn()
			return fin["transaction.version"] == 2 && fin["metadata.version"] == 29 && fin["streams.version"] == 1 && tc != nil && tc.TransactionVersion() == 2
		})
		if _, im := b.b.Image(); !im.FeaturesRecorded() {
			t.Fatalf("broker %d: the levels are not in the log", b.id)
		}
	}
	if res, err := adm.UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: "metadata.version", MaxVersionLevel: 33, UpgradeType: 1}); err != nil || res.Error() != nil {
		t.Fatalf("metadata.version 33: %v %v", res, err)
	}
	res, err = adm.UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: "metadata.version", MaxVersionLevel: 29, UpgradeType: 2})
	if err != nil || !errorIs(res.Error(), kerr.InvalidUpdateVersion) {
		t.Fatalf("downgrade across 4.3-IV0: %v %v", res, err)
	}
	// The same on the controller listener of the active controller, with the message.
	down := kmsg.NewPtrUpdateFeaturesRequest()
	down.Version = 2
	fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	fu.Feature, fu.MaxVersionLevel, fu.UpgradeType = "metadata.version", 29, controller.UpgradeTypeSafeDowngrade
	down.FeatureUpdates = []kmsg.UpdateFeaturesRequestFeatureUpdate{fu}
	var answered *kmsg.UpdateFeaturesResponse
	for _, v := range c.voters {
		conn, err := net.Dial("tcp", v.addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		r := (&rawConn{t: t, c: conn}).roundTrip(down).(*kmsg.UpdateFeaturesResponse)
		conn.Close()
		if r.ErrorCode != kerr.NotController.Code {
			answered = r
		}
	}
	if answered == nil || answered.ErrorCode != kerr.InvalidUpdateVersion.Code || answered.ErrorMessage == nil ||
		!strings.HasSuffix(*answered.ErrorMessage, "Unsupported metadata.version downgrade from 33 to 29. Refusing to perform the requested downgrade because it might delete metadata information.") {
		t.Fatalf("controller listener: %+v", answered)
	}
	// streams.version 0: no broker serves streams groups; 1: all do again.
	if res, err := adm.UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: "streams.version", MaxVersionLevel: 0, UpgradeType: 2}); err != nil || res.Error() != nil {
		t.Fatalf("disable streams.version: %v %v", res, err)
	}
	for _, b := range c.brokers {
		eventually(t, 10*time.Second, "streams groups off on every broker", func() bool {
			fin, keys, _ := finalizedAt(t, b.addr)
			_, on := fin["streams.version"]
			return !on && !keys[streamsGroupHeartbeatKey] && !keys[streamsGroupDescribeKey] && keys[consumerGroupHeartbeatKey]
		})
		conn, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		m := newStreamsMember(t, nil, "g", "m", "p", wordCountTopology("x", "x-changelog"))
		if r := (&rawConn{t: t, c: conn}).roundTrip(m.request(0)).(*kmsg.StreamsGroupHeartbeatResponse); r.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Fatalf("broker %d: streams heartbeat at streams.version 0: %v", b.id, kerr.ErrorForCode(r.ErrorCode))
		}
		conn.Close()
	}
	if res, err := adm.UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: "streams.version", MaxVersionLevel: 1, UpgradeType: 1}); err != nil || res.Error() != nil {
		t.Fatalf("enable streams.version: %v %v", res, err)
	}
	for _, b := range c.brokers {
		eventually(t, 10*time.Second, "streams groups on again on every broker", func() bool {
			fin, keys, _ := finalizedAt(t, b.addr)
			return fin["streams.version"] == 1 && keys[streamsGroupHeartbeatKey]
		})
	}
}

// TestUpdateFeaturesVersions: versions 0 and 1 through a broker's forward path: v1
// lists each feature in Results, v0's AllowDowngrade is a safe downgrade, a refusal
// carries Kafka's message; share.version 0 stops share groups on the broker.
func TestUpdateFeaturesVersions(t *testing.T) {
	tb := startTestBroker(t)
	rc := tb.raw(t)
	upd := func(version int16, name string, level int16, allowDowngrade bool) *kmsg.UpdateFeaturesResponse {
		r := kmsg.NewPtrUpdateFeaturesRequest()
		r.Version = version
		fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		fu.Feature, fu.MaxVersionLevel, fu.AllowDowngrade = name, level, allowDowngrade
		fu.UpgradeType = controller.UpgradeTypeUpgrade // kmsg's zero is Kafka's UNKNOWN
		if allowDowngrade {
			fu.UpgradeType = controller.UpgradeTypeSafeDowngrade
		}
		r.FeatureUpdates = []kmsg.UpdateFeaturesRequestFeatureUpdate{fu}
		return rc.roundTrip(r).(*kmsg.UpdateFeaturesResponse)
	}
	if r := upd(1, "metadata.version", 33, false); r.ErrorCode != 0 || len(r.Results) != 1 || r.Results[0].Feature != "metadata.version" || r.Results[0].ErrorCode != 0 {
		t.Fatalf("v1: %+v", r)
	}
	if r := upd(0, "share.version", 0, true); r.ErrorCode != 0 || len(r.Results) != 1 {
		t.Fatalf("v0 downgrade: %+v", r)
	}
	// The broker answers once its image has the change.
	if fin, keys, _ := finalizedAt(t, tb.addr); fin["share.version"] != 0 || fin["metadata.version"] != 33 || keys[76] || keys[78] {
		t.Fatalf("after share.version 0: %v, share APIs advertised %v", fin, keys[76])
	}
	if tb.b.features().share {
		t.Fatal("share groups still served")
	}
	r := upd(0, "transaction.version", 1, false)
	if r.ErrorCode != kerr.InvalidUpdateVersion.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage,
		"Invalid update version 1 for feature transaction.version. Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.") {
		t.Fatalf("v0 downgrade without AllowDowngrade: %+v", r)
	}
	if r := upd(2, "eligible.leader.replicas.version", 2, false); r.ErrorCode != kerr.InvalidUpdateVersion.Code || r.ErrorMessage == nil ||
		!strings.HasSuffix(*r.ErrorMessage, "Local controller 1 only supports versions 0-1") || len(r.Results) != 0 {
		t.Fatalf("ELR: %+v", r)
	}
}

func errorIs(err error, want *kerr.Error) bool {
	ke, ok := err.(*kerr.Error)
	return ok && ke.Code == want.Code
}
