package configs

import "testing"

// TestUpdateModesAreKafkas: a broker key of Kafka's is alterable at run time exactly
// when Kafka's documentation (kafka_keys_gen.go, the table docs/CONFIG.md is generated
// from) gives it a dynamic update mode, but for StaticInSamsa; before, Kafka's dynamic
// log.cleaner.* keys were refused ("cannot be updated dynamically") and Kafka's
// read-only num.partitions was accepted.
func TestUpdateModesAreKafkas(t *testing.T) {
	for _, d := range BrokerDefs {
		k := KafkaBroker(d.Name)
		if k == nil {
			continue
		}
		_, static := StaticInSamsa[d.Name]
		dynamic := k.Mode == ModePerBroker || k.Mode == ModeClusterWide
		if static && !dynamic {
			t.Errorf("%s is in StaticInSamsa but Kafka's update mode is %s", d.Name, k.Mode)
		}
		if want := !dynamic || static; d.ReadOnly != want {
			t.Errorf("%s: read-only %v; Kafka's update mode is %s (in StaticInSamsa: %v)", d.Name, d.ReadOnly, k.Mode, static)
		}
	}
	for k := range StaticInSamsa {
		if Broker(k) == nil {
			t.Errorf("StaticInSamsa names %s, which is not a broker key", k)
		}
	}
}
