package node

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/samsa-broker/samsa/engine"
)

// three is a valid node 1 of a three-voter combined cluster.
func three() map[string]string {
	return map[string]string{
		"process.roles":             "broker,controller",
		"node.id":                   "1",
		"controller.quorum.voters":  "1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293",
		"listeners":                 "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
		"controller.listener.names": "CONTROLLER",
	}
}

func with(m map[string]string, kv ...string) map[string]string {
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "<unset>" {
			delete(m, kv[i])
			continue
		}
		m[kv[i]] = kv[i+1]
	}
	return m
}

func TestFromKeysCluster(t *testing.T) {
	c, err := FromKeys(with(three(), "broker.rack", "r1", "advertised.listeners", "PLAINTEXT://h1:9092,CONTROLLER://h1:9093",
		"log.dirs", "/d/a,/d/b", "sync", "replicated", "broker.heartbeat.interval.ms", "500", "broker.session.timeout.ms", "3000"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Combined() || c.SoleVoter() || len(c.Voters) != 3 || c.Voters[2].ID != 3 || c.Voters[2].Port != 9293 {
		t.Errorf("roles/voters: %+v %+v", c.Roles, c.Voters)
	}
	if ctl, ok := c.ControllerListener(); !ok || ctl.Port != 9093 {
		t.Errorf("controller listener %+v", ctl)
	}
	if bl := c.BrokerListeners(); len(bl) != 1 || bl[0].Name != "PLAINTEXT" || c.InterBrokerListener != "PLAINTEXT" {
		t.Errorf("broker listeners %+v, inter-broker %q", bl, c.InterBrokerListener)
	}
	if a := c.Advertised; len(a) != 1 || a["PLAINTEXT"].Host != "h1" {
		t.Errorf("advertised %+v (the controller listener is never advertised)", a)
	}
	if c.Rack == nil || *c.Rack != "r1" || c.MetadataDir != "/d/meta" || len(c.Dirs()) != 3 {
		t.Errorf("rack %v, metadata dir %q, dirs %v", c.Rack, c.MetadataDir, c.Dirs())
	}
	if c.Sync.Engine != engine.SyncInterval || c.Sync.DurableEnd || c.HeartbeatInterval != 500*time.Millisecond || c.SessionTimeout != 3*time.Second {
		t.Errorf("sync %+v, heartbeat %v, session %v", c.Sync, c.HeartbeatInterval, c.SessionTimeout)
	}
	if c.Replication.LagTimeMax != 30*time.Second || c.Replication.NumFetchers != 1 || c.Replication.FetchMaxBytes != 1<<20 {
		t.Errorf("replication defaults %+v", c.Replication)
	}

	b, err := FromKeys(map[string]string{"process.roles": "broker", "node.id": "4", "controller.listener.names": "CONTROLLER",
		"controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293", "listeners": "PLAINTEXT://127.0.0.1:9392"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Roles.Controller || !b.Roles.Broker || len(b.Voters) != 3 {
		t.Errorf("broker-only: %+v", b)
	}
	b, err = FromKeys(map[string]string{"process.roles": "broker", "node.id": "4", "controller.listener.names": "CONTROLLER",
		"controller.quorum.bootstrap.servers": "127.0.0.1:9093,127.0.0.1:9193", "listeners": "PLAINTEXT://127.0.0.1:9392"})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Voters) != 2 || b.Voters[0].ID != -1 {
		t.Errorf("bootstrap servers: %+v", b.Voters)
	}
}

// TestFromKeysRefuses: every refused configuration names what to fix.
func TestFromKeysRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys map[string]string
		want string
	}{
		{"controller outside voters", with(three(), "node.id", "4", "controller.quorum.voters", "1@127.0.0.1:9193,2@127.0.0.1:9293,3@127.0.0.1:9393"),
			"node.id 4 is not in controller.quorum.voters (1, 2, 3)"},
		{"controller without listener", with(three(), "listeners", "PLAINTEXT://127.0.0.1:9092"), "has no CONTROLLER listener"},
		{"voter at another port", with(three(), "listeners", "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9095"),
			"names node 1 at 127.0.0.1:9093, but its controller listener CONTROLLER binds 127.0.0.1:9095"},
		{"voter at another address", with(three(), "listeners", "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.2:9093"),
			"names node 1 at 127.0.0.1:9093"},
		{"duplicate voter", with(three(), "controller.quorum.voters", "1@127.0.0.1:9093,2@127.0.0.1:9193,2@127.0.0.1:9293"), "lists node 2 twice"},
		{"broker that is a voter", with(three(), "process.roles", "broker", "listeners", "PLAINTEXT://127.0.0.1:9092"), "must not be in controller.quorum.voters"},
		{"broker binding the controller listener", with(three(), "process.roles", "broker", "node.id", "4"), "must not include the controller listener"},
		{"no voters", with(three(), "controller.quorum.voters", "<unset>"), "controller.quorum.voters is required"},
		{"no controller.listener.names", with(three(), "controller.listener.names", "<unset>"), "controller.listener.names is required"},
		{"bad voter", with(three(), "controller.quorum.voters", "1@127.0.0.1"), "controller.quorum.voters entry"},
		{"bad voter id", with(three(), "controller.quorum.voters", "x@127.0.0.1:9093"), "bad node id"},
		{"unknown protocol in the map", with(three(), "listener.security.protocol.map", "PLAINTEXT:TLS,CONTROLLER:PLAINTEXT"), "unknown security protocol TLS"},
		{"unmapped name", with(three(), "listeners", "INTERNAL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"), "add INTERNAL:PLAINTEXT to listener.security.protocol.map"},
		{"duplicate listener", with(three(), "listeners", "PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093"), "given twice"},
		{"same port", with(three(), "listeners", "PLAINTEXT://127.0.0.1:9093,CONTROLLER://127.0.0.1:9093"), "bind the same port"},
		{"inter-broker missing", with(three(), "inter.broker.listener.name", "INTERNAL"), "inter.broker.listener.name=INTERNAL is not among listeners"},
		{"inter-broker is controller", with(three(), "inter.broker.listener.name", "CONTROLLER"), "is a controller listener"},
		{"advertised unknown", with(three(), "advertised.listeners", "EXTERNAL://h:1"), "advertised.listeners names EXTERNAL"},
		{"heartbeat vs session", with(three(), "broker.heartbeat.interval.ms", "9000"), "must be less than broker.session.timeout.ms"},
		{"several voters without roles", with(three(), "process.roles", "<unset>"), "process.roles is unset"},
		{"controller port 0 in a quorum", with(three(), "listeners", "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:0"), "binds 127.0.0.1:0"},
		{"roles", with(three(), "process.roles", ","), "process.roles"},
		{"empty listeners", with(three(), "listeners", " "), "listeners is empty"},
	} {
		_, err := FromKeys(tc.keys)
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
}

func TestFromKeysSingleNode(t *testing.T) {
	c, err := FromKeys(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Combined() || !c.SoleVoter() || c.RolesSet || c.MetadataDir != "data/meta" || c.LogDirs[0] != "data/logs" {
		t.Errorf("defaults %+v", c)
	}
	// Kafka's KRaft sample: a combined node, bootstrap servers naming itself.
	c, err = FromKeys(map[string]string{"process.roles": "broker,controller", "node.id": "1", "controller.quorum.bootstrap.servers": "localhost:9093",
		"listeners": "CONTROLLER://:9093,PLAINTEXT://:9092", "controller.listener.names": "CONTROLLER", "log.dirs": "/tmp/kraft-combined-logs"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.SoleVoter() || c.MetadataDir != "/tmp/meta" {
		t.Errorf("sample: voters %+v, metadata dir %q", c.Voters, c.MetadataDir)
	}
	// A process.roles-less node with a CONTROLLER listener: it is the voter there.
	c, err = FromKeys(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "data.dir": "/x"})
	if err != nil {
		t.Fatal(err)
	}
	if ctl, ok := c.ControllerListener(); !ok || ctl.Name != "CONTROLLER" || len(c.BrokerListeners()) != 1 || c.MetadataDir != "/x/meta" {
		t.Errorf("roles unset with a controller listener: %+v", c)
	}
}
