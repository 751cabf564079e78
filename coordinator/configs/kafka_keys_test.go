package configs

import (
	"errors"
	"strings"
	"testing"
)

func strOrNull(p *string) string {
	if p == nil {
		return "null"
	}
	return "\"" + *p + "\""
}

// TestKafkaKeysAgree: no name is defined twice in one table, and a key both configs.go
// and Kafka's documentation define has Kafka's type and default unless
// brokerDifferences or topicDifferences says why not (and those lists hold no stale
// entry).
func TestKafkaKeysAgree(t *testing.T) {
	for _, tab := range []struct {
		topic bool
		hand  []*Def
		kafka []KafkaKey
		diffs map[string]string
	}{
		{true, TopicDefs, kafkaTopicKeys, topicDifferences},
		{false, BrokerDefs, kafkaBrokerKeys, brokerDifferences},
	} {
		seen := map[string]bool{}
		for _, d := range tab.hand {
			if seen[d.Name] {
				t.Errorf("topic=%v: %s defined twice", tab.topic, d.Name)
			}
			seen[d.Name] = true
		}
		seenKafka := map[string]bool{}
		for _, k := range tab.kafka {
			if seenKafka[k.Name] {
				t.Errorf("topic=%v: %s generated twice", tab.topic, k.Name)
			}
			seenKafka[k.Name] = true
		}
		for _, d := range tab.hand {
			if !HandWritten(tab.topic, d.Name) {
				continue
			}
			k := KafkaBroker(d.Name)
			if tab.topic {
				k = KafkaTopic(d.Name)
			}
			if k == nil {
				if !tab.topic && !strings.HasPrefix(d.Name, "samsa.") && tab.diffs[d.Name] != "" {
					t.Errorf("%s: listed as differing from Kafka, which does not define it", d.Name)
				}
				continue
			}
			differs := k.Kind != d.Kind || strOrNull(k.Default) != strOrNull(d.Default)
			why := tab.diffs[d.Name]
			switch {
			case differs && why == "":
				t.Errorf("topic=%v: %s is defined by hand as %s default %s, by Kafka %s as %s default %s: align it or say why in kafka_keys.go",
					tab.topic, d.Name, d.Kind.Wire(), strOrNull(d.Default), KafkaVersion, k.Kind.Wire(), strOrNull(k.Default))
			case !differs && why != "":
				t.Errorf("topic=%v: %s agrees with Kafka now: drop its entry from the differences", tab.topic, d.Name)
			}
		}
		for name := range tab.diffs {
			if !HandWritten(tab.topic, name) {
				t.Errorf("topic=%v: difference listed for %s, which configs.go does not define", tab.topic, name)
			}
		}
	}
}

// TestKafkaKeysMerged: every key of Kafka's tables is known, with the hand-written
// definition where there is one, and the generated ones say they have no effect.
func TestKafkaKeysMerged(t *testing.T) {
	if len(kafkaBrokerKeys) < 250 || len(kafkaTopicKeys) < 30 {
		t.Fatalf("only %d broker and %d topic keys generated", len(kafkaBrokerKeys), len(kafkaTopicKeys))
	}
	for _, tab := range []struct {
		topic bool
		kafka []KafkaKey
		def   func(string) *Def
	}{{true, kafkaTopicKeys, Topic}, {false, kafkaBrokerKeys, Broker}} {
		for i := range tab.kafka {
			k := &tab.kafka[i]
			d := tab.def(k.Name)
			if d == nil {
				t.Errorf("topic=%v: %s unknown", tab.topic, k.Name)
				continue
			}
			if HandWritten(tab.topic, k.Name) {
				continue
			}
			if !d.NoEffect || !strings.HasPrefix(d.Doc, NoEffectDoc) || d.Kind != k.Kind || d.ReadOnly != (k.Mode == ModeReadOnly) {
				t.Errorf("topic=%v: %s merged as %+v", tab.topic, k.Name, d)
			}
			if tab.topic && k.Synonym != "" && (len(d.Synonyms) != 1 || d.Synonyms[0].Name != k.Synonym) {
				t.Errorf("%s: synonyms %v, want %s", k.Name, d.Synonyms, k.Synonym)
			}
		}
	}
	for _, d := range TopicDefs {
		if d.ReadOnly {
			t.Errorf("topic key %s is read-only", d.Name)
		}
	}
	if d := Broker("socket.send.buffer.bytes"); d == nil || !d.NoEffect {
		t.Error("a hand-written compatibility key is not marked as having no effect")
	}
	if d := Topic("retention.ms"); d == nil || d.NoEffect || d.Apply == nil {
		t.Error("retention.ms lost its hand-written definition")
	}
}

// TestKafkaKeysValidate: every default validates, Kafka's stated bounds and values are
// enforced, the removed topic keys take what Kafka 3 took, and keys Kafka does not
// define stay unknown.
func TestKafkaKeysValidate(t *testing.T) {
	for _, d := range append(append([]*Def{}, TopicDefs...), BrokerDefs...) {
		if d.Default == nil {
			continue
		}
		if _, err := d.Validate(*d.Default); err != nil {
			t.Errorf("%s: default %q does not validate: %v", d.Name, *d.Default, err)
		}
	}
	for _, c := range []struct {
		topic      bool
		key, value string
		want       string // "" = refused
	}{
		{true, "compression.zstd.level", "22", "22"},
		{true, "compression.zstd.level", "23", ""},
		{true, "compression.lz4.level", "0", ""},
		{true, "local.retention.ms", "-2", "-2"},
		{true, "local.retention.ms", "-3", ""},
		{true, "remote.storage.enable", "TRUE", "true"},
		{true, "remote.storage.enable", "yes", ""},
		{true, "leader.replication.throttled.replicas", "0:1, 1:2", "0:1,1:2"},
		{true, "leader.replication.throttled.replicas", "*", "*"},
		{true, "leader.replication.throttled.replicas", "0-1", ""},
		{true, "compression.gzip.level", "-1", "-1"},
		{true, "compression.gzip.level", "9", "9"},
		{true, "compression.gzip.level", "0", ""},
		{true, "compression.gzip.level", "10", ""},
		{true, "message.format.version", "3.0-IV1", "3.0-IV1"},
		{true, "message.format.version", "2.8", "2.8"},
		{true, "message.format.version", "0.10.0", "0.10.0"},
		{true, "message.format.version", "9.9", ""},
		{true, "message.timestamp.difference.max.ms", "1000", "1000"},
		{true, "message.downconversion.enable", "false", "false"},
		{false, "background.threads", "0", ""},
		{false, "background.threads", "4", "4"},
		{false, "group.coordinator.threads", "2", "2"},
		{false, "log.message.format.version", "3.0", "3.0"},
		{false, "share.coordinator.state.topic.num.partitions", "0", ""},
		{false, "delegation.token.secret.key", "s3cret", "s3cret"},
		{false, "metric.reporters", "a.B, c.D", "a.B,c.D"},
	} {
		var got string
		var err error
		if c.topic {
			got, err = ValidateTopic(c.key, &c.value)
		} else {
			var known bool
			got, known, err = ValidateBroker(c.key, c.value)
			if !known {
				t.Errorf("broker key %s unknown", c.key)
				continue
			}
		}
		if c.want == "" {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("%s=%q: %q, %v; want refused", c.key, c.value, got, err)
			}
		} else if err != nil || got != c.want {
			t.Errorf("%s=%q: %q, %v; want %q", c.key, c.value, got, err, c.want)
		}
	}
	if _, err := ValidateTopic("no.such.key", new(string)); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("unknown topic key: %v", err)
	}
	if _, known, _ := ValidateBroker("zookeeper.connect", "localhost:2181"); known {
		t.Error("zookeeper.connect (Kafka 4 removed it) is known")
	}
	if d := Broker("password.encoder.secret"); d != nil {
		t.Error("a broker key Kafka 4 removed, and no topic key named, is known")
	}
}
