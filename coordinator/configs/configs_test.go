package configs

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		key, value, want string
		ok               bool
	}{
		{"num.partitions", " 3 ", "3", true},
		{"num.partitions", "0", "", false},
		{"auto.create.topics.enable", "TRUE", "true", true},
		{"sync", "replicated", "replicated", true},
		{"sync", "sometimes", "", false},
		{"process.roles", "broker, controller", "broker,controller", true},
		{"process.roles", "observer", "", false},
		{"broker.session.timeout.ms", "9000", "9000", true},
	} {
		got, known, err := ValidateBroker(c.key, c.value)
		if !known || (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ValidateBroker(%q, %q) = %q, %v, %v", c.key, c.value, got, known, err)
		}
		if err != nil && !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: error %v does not wrap ErrInvalidConfig", c.key, err)
		}
	}
	if _, known, _ := ValidateBroker("no.such.key", "1"); known {
		t.Error("unknown key reported known")
	}
	if _, err := ValidateTopic("min.insync.replicas", nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("null topic value: %v", err)
	}
}

func TestLayersPrecedence(t *testing.T) {
	im, err := (&metadata.Image{}).Apply(
		&metadata.TopicRecord{Name: "t", ID: metadata.UUID{1}},
		&metadata.PartitionRecord{TopicID: metadata.UUID{1}, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
		&metadata.ConfigRecord{Resource: metadata.ResourceBroker, Name: "", Key: "min.insync.replicas", Value: metadata.StringPtr("2")},
		&metadata.ConfigRecord{Resource: metadata.ResourceBroker, Name: "7", Key: "log.retention.hours", Value: metadata.StringPtr("1")},
	)
	if err != nil {
		t.Fatal(err)
	}
	static := map[string]string{"min.insync.replicas": "3", "num.partitions": "4"}
	l := ForImage(im, 7, static, "t")
	// Dynamic cluster default beats static.
	if got := l.TopicValue("min.insync.replicas"); got != "2" {
		t.Errorf("min.insync.replicas = %q", got)
	}
	// A node's dynamic key reaches its topic synonym, scaled.
	if got := l.TopicValue("retention.ms"); got != "3600000" {
		t.Errorf("retention.ms = %q", got)
	}
	if got := l.BrokerInt("num.partitions"); got != 4 {
		t.Errorf("num.partitions = %d", got)
	}
	if got := l.BrokerValue("broker.heartbeat.interval.ms"); got != "2000" {
		t.Errorf("default heartbeat = %q", got)
	}
	// Another node does not see node 7's key.
	if got := ForImage(im, 8, nil, "t").TopicValue("retention.ms"); got != "604800000" {
		t.Errorf("node 8 retention.ms = %q", got)
	}
	if c := l.LogConfig(); c.RetentionMs != 3600000 {
		t.Errorf("LogConfig retention = %d", c.RetentionMs)
	}
}

// TestSecurityKeys: the security keys validate as Kafka's do, their defaults included.
func TestSecurityKeys(t *testing.T) {
	for _, d := range BrokerDefs {
		if d.Default == nil {
			continue
		}
		if _, err := d.Validate(*d.Default); err != nil {
			t.Errorf("%s: default %q does not validate: %v", d.Name, *d.Default, err)
		}
	}
	for _, c := range []struct {
		key, value, want string
		ok               bool
	}{
		{"ssl.client.auth", "REQUIRED", "required", true},
		{"ssl.client.auth", "always", "", false},
		{"ssl.keystore.type", "pem", "PEM", true},
		{"ssl.keystore.type", "BKS", "", false},
		{"ssl.enabled.protocols", "TLSv1.2, TLSv1.3", "TLSv1.2,TLSv1.3", true},
		{"ssl.enabled.protocols", "SSLv3", "", false},
		{"sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-512", "PLAIN,SCRAM-SHA-512", true},
		{"sasl.enabled.mechanisms", "GSSAPI", "", false},
		{"sasl.mechanism.inter.broker.protocol", "scram-sha-256", "SCRAM-SHA-256", true},
		{"security.inter.broker.protocol", "sasl_ssl", "SASL_SSL", true},
		{"connections.max.reauth.ms", "3600000", "3600000", true},
		{"connections.max.reauth.ms", "-1", "", false},
		{"connection.failed.authentication.delay.ms", "0", "0", true},
		{"allow.everyone.if.no.acl.found", "TRUE", "true", true},
		{"super.users", "User:admin;User:broker", "User:admin;User:broker", true},
		{"ssl.key.password", "s3cret", "s3cret", true},
		{"max.connections.per.ip", "100", "100", true},
		{"quota.window.num", "0", "", false},
		{"samsa.ssl.reload.interval.ms", "0", "0", true},
	} {
		got, known, err := ValidateBroker(c.key, c.value)
		if !known || (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ValidateBroker(%q, %q) = %q, %v, %v", c.key, c.value, got, known, err)
		}
	}
	for _, k := range []string{"ssl.keystore.password", "ssl.key.password", "ssl.keystore.key", "ssl.truststore.password", "sasl.jaas.config"} {
		if d := Broker(k); d == nil || d.Kind != KindPassword || d.Kind.Wire() != kmsg.ConfigTypePassword {
			t.Errorf("%s is not a password", k)
		}
	}
}
