package kafka

import (
	"context"
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestApiVersionsRaw(t *testing.T) {
	tb := startTestBroker(t)
	rc := tb.raw(t)
	for _, v := range []int16{0, 1, 2, 3, 4, 5} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName, req.ClientSoftwareVersion = "samsa-test", "1.0"
		resp := rc.roundTrip(req).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("v%d: error %d", v, resp.ErrorCode)
		}
		// Share groups are on by default: every API of the table is advertised.
		if want := len(buildApiVersions()); len(resp.ApiKeys) != want {
			t.Fatalf("v%d: %d keys advertised, table has %d", v, len(resp.ApiKeys), want)
		}
		for _, k := range resp.ApiKeys {
			a := lookupAPI(k.ApiKey)
			if a == nil || a.MinVersion != k.MinVersion || a.MaxVersion != k.MaxVersion {
				t.Fatalf("v%d: advertised %+v, table %+v", v, k, a)
			}
			if max := kmsg.RequestForKey(k.ApiKey).MaxVersion(); k.MaxVersion > max {
				t.Fatalf("key %d advertised up to v%d, kmsg knows v%d", k.ApiKey, k.MaxVersion, max)
			}
			// GetTelemetrySubscriptions and PushTelemetry (KIP-714): a Kafka broker
			// without a client metrics receiver does not advertise them, and clients
			// then do not ask.
			if k.ApiKey == 71 || k.ApiKey == 72 {
				t.Fatalf("v%d: client telemetry API %d advertised", v, k.ApiKey)
			}
		}
		// Feature flags (v3+), of a log without feature records (the test node writes
		// none: configs.LegacyFeatureLevels): metadata.version 4.2-IV1, the consumer
		// protocol finalized at group.version 1, transaction.version 0-2 finalized at
		// samsa.transaction.version's default (2), share groups on (share.version 1,
		// group.share.enable's default), streams groups on (streams.version 1,
		// group.coordinator.rebalance.protocols' default).
		if v < 3 {
			continue
		}
		sup := map[string]int16{}
		for _, f := range resp.SupportedFeatures {
			sup[f.Name] = f.MaxVersion
		}
		fin := map[string]int16{}
		for _, f := range resp.FinalizedFeatures {
			fin[f.Name] = f.MaxVersionLevel
		}
		if sup["group.version"] != 1 || sup["transaction.version"] != 2 || fin["group.version"] != 1 || fin["transaction.version"] != 2 ||
			sup["share.version"] != 1 || fin["share.version"] != 1 || sup["streams.version"] != 1 || fin["streams.version"] != 1 ||
			fin["metadata.version"] != 29 || len(fin) != 5 || resp.FinalizedFeaturesEpoch < 0 {
			t.Fatalf("v%d features: supported %v, finalized %v at epoch %d", v, sup, fin, resp.FinalizedFeaturesEpoch)
		}
	}
}

func TestApiVersionsValidation(t *testing.T) {
	tb := startTestBroker(t)
	rc := tb.raw(t)
	cases := []struct {
		name    string
		v       int16
		sw      string
		cluster *string
		node    int32
		want    int16
	}{
		{"bad software name", 3, "-bad", nil, -1, kerr.InvalidRequest.Code},
		{"only cluster id", 5, "ok", kmsg.StringPtr("test-cluster"), -1, kerr.InvalidRequest.Code},
		{"other cluster", 5, "ok", kmsg.StringPtr("other"), 1, kerr.RebootstrapRequired.Code},
		{"other node", 5, "ok", kmsg.StringPtr("test-cluster"), 7, kerr.RebootstrapRequired.Code},
		{"ours", 5, "ok", kmsg.StringPtr("test-cluster"), 1, 0},
	}
	for _, c := range cases {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = c.v, c.sw, "1"
		req.ClusterID, req.NodeID = c.cluster, c.node
		if got := rc.roundTrip(req).(*kmsg.ApiVersionsResponse).ErrorCode; got != c.want {
			t.Errorf("%s: error %d, want %d", c.name, got, c.want)
		}
	}
}

func TestApiVersionsUnsupportedVersion(t *testing.T) {
	tb := startTestBroker(t)
	rc := tb.raw(t)
	// A future version: header v2, body unknown. Answer: v0 body, UNSUPPORTED_VERSION.
	frame := []byte{0, 0, 0, 0, 0, 18, 0, 99, 0, 0, 0, 42, 0xff, 0xff, 0, 1, 2, 3}
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	rc.write(frame)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	resp := rc.recv(req, 42).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) == 0 {
		t.Fatalf("got error %d with %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
	// The connection stays usable.
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "a", "b"
	if r := rc.roundTrip(req).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
		t.Fatalf("retry: error %d", r.ErrorCode)
	}
}

func TestUnknownKeyAndVersionClose(t *testing.T) {
	tb := startTestBroker(t)
	for _, frame := range [][]byte{
		{0, 99, 0, 0, 0, 0, 0, 1, 0xff, 0xff},   // key 99: not a Kafka API
		{0x7f, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff}, // key 32512
		{0, 7, 0, 1, 0, 0, 0, 1, 0xff, 0xff},    // ControlledShutdown: known to kmsg, not served
		{0, 3},                                  // short header
		{0, 3, 0, 99, 0, 0, 0, 1, 0xff, 0xff},   // Metadata v99: served key, unsupported version
	} {
		rc := tb.raw(t)
		rc.write(binary.BigEndian.AppendUint32(nil, uint32(len(frame))))
		rc.write(frame)
		rc.expectClosed()
	}
	// Earlier answers still leave before the close.
	rc := tb.raw(t)
	req := kmsg.NewPtrApiVersionsRequest()
	corr := rc.send(req)
	rc.write([]byte{0, 0, 0, 8, 0, 99, 0, 0, 0, 0, 0, 9})
	if r := rc.recv(req, corr).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}
	rc.expectClosed()
}

func TestKgoConnects(t *testing.T) {
	tb := startTestBroker(t)
	cl := tb.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrApiVersionsRequest()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 || resp.GetVersion() != 5 {
		t.Fatalf("error %d at v%d", resp.ErrorCode, resp.GetVersion())
	}
}

func TestBadFramesKeepServing(t *testing.T) {
	tb := startTestBroker(t)
	before := runtime.NumGoroutine()
	frames := [][]byte{
		{0xde, 0xad, 0xbe, 0xef}, // huge size
		{0x80, 0, 0, 0},          // negative size
		{0, 0, 0, 3, 1, 2, 3},    // garbage, short header
		{0, 0, 0, 12, 0, 18, 0, 3, 0, 0, 0, 1, 0, 50, 0, 0}, // client id longer than frame
		{0, 0, 0, 100, 0, 18, 0},                            // truncated, then close
	}
	for _, f := range frames {
		rc := tb.raw(t)
		rc.write(f)
		if f[3] == 100 {
			rc.c.Close()
			continue
		}
		rc.expectClosed()
	}
	good := tb.raw(t)
	req := kmsg.NewPtrApiVersionsRequest()
	if r := good.roundTrip(req).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}
	good.c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("goroutines: %d before, %d after", before, runtime.NumGoroutine())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
