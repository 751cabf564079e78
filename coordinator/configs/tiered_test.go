package configs

import "testing"

// remote.storage.enable tiers a topic's log only on a broker with
// remote.log.storage.system.enable; local.retention.* reach the engine, from
// the topic or the broker's log.local.retention.*.
func TestRemoteStorageKeys(t *testing.T) {
	topic := map[string]string{"remote.storage.enable": "true", "local.retention.bytes": "1048576"}
	if c := (Layers{Topic: topic}).LogConfig(); c.RemoteStorage {
		t.Fatal("a topic tiered on a broker without remote.log.storage.system.enable")
	}
	static := map[string]string{RemoteStorageSystemKey: "true", "log.local.retention.ms": "60000"}
	c := Layers{Topic: topic, Static: static}.LogConfig()
	if !c.RemoteStorage || c.LocalRetentionBytes != 1<<20 || c.LocalRetentionMs != 60000 {
		t.Fatalf("tiered topic: %+v", c)
	}
	if c := (Layers{Static: static}).LogConfig(); c.RemoteStorage || c.LocalRetentionBytes != -2 {
		t.Fatalf("a topic without remote.storage.enable: %+v", c)
	}
	compacted := map[string]string{"remote.storage.enable": "true", "cleanup.policy": "compact"}
	if c := (Layers{Topic: compacted, Static: static}).LogConfig(); c.RemoteStorage {
		t.Fatal("a compacted topic tiered")
	}
}
