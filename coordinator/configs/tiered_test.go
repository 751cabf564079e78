package configs

import (
	"errors"
	"testing"
)

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

// remote.storage.enable=true is refused, with Kafka's message, where the layers'
// node (the controller validating the change) has no
// remote.log.storage.system.enable; false, or the key unset, is not.
func TestCheckRemoteStorageNeedsTheSystem(t *testing.T) {
	const msg = "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."
	on := map[string]string{"remote.storage.enable": "true"}
	for _, static := range []map[string]string{nil, {RemoteStorageSystemKey: "false"}} {
		err := CheckRemoteStorage(Layers{}, Layers{Topic: on, Static: static})
		if !errors.Is(err, ErrInvalidConfig) || err.Error() != msg {
			t.Fatalf("system %v: %v", static, err)
		}
	}
	if err := CheckRemoteStorage(Layers{}, Layers{Topic: on, Static: map[string]string{RemoteStorageSystemKey: "true"}}); err != nil {
		t.Fatalf("with the system on: %v", err)
	}
	for _, topic := range []map[string]string{nil, {"remote.storage.enable": "false"}} {
		if err := CheckRemoteStorage(Layers{}, Layers{Topic: topic}); err != nil {
			t.Fatalf("topic %v without the system: %v", topic, err)
		}
	}
}
