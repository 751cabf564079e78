package main

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/samsa-broker/samsa/engine"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigPrecedence(t *testing.T) {
	file := writeFile(t, `# a comment
log.retention.ms=1000
num.partitions = 2
node.id: 3
auto.create.topics.enable=false
log.segment.bytes 1048576
connections.max.idle.ms=5000
`)
	env := []string{
		"SAMSA_LOG_RETENTION_MS=2000",
		"SAMSA_NUM_PARTITIONS=4",
		"PATH=/bin",
	}
	args := []string{"--config", file, "--set", "num.partitions=5", "--node-id", "7", "--sync", "interval", "--listen", "127.0.0.1:0"}
	var logs bytes.Buffer
	c, err := loadConfig(args, env, slog.New(slog.NewTextHandler(&logs, nil)), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"log.retention.ms":          "2000",    // env > file
		"num.partitions":            "5",       // flag > env > file
		"node.id":                   "7",       // flag > file
		"auto.create.topics.enable": "false",   // file > default
		"log.segment.bytes":         "1048576", // file, space separator
		"sync":                      "interval",
	} {
		if got := c.set[key]; got != want {
			t.Errorf("%s = %q, want %q (from %s)", key, got, want, c.source[key])
		}
	}
	if l, _ := c.ClientListener(); c.NodeID != 7 || c.NumPartitions != 5 || c.AutoCreateTopics || c.Sync.Engine != engine.SyncInterval ||
		c.IdleTimeout != 5*time.Second || l.Addr() != "127.0.0.1:0" {
		t.Errorf("derived: %+v", c)
	}
	if got := c.get("default.replication.factor"); got != "1" {
		t.Errorf("default: %q", got)
	}
}

func TestConfigDefaults(t *testing.T) {
	c, err := loadConfig(nil, nil, slog.New(slog.DiscardHandler), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if l, _ := c.ClientListener(); c.NodeID != 1 || c.DataDir != "./data" || l.Addr() != "127.0.0.1:9092" || c.AdminListen != "127.0.0.1:9644" ||
		c.Sync.Engine != engine.SyncFsync || !c.Sync.DurableEnd || !c.SoleVoter() || !c.Combined() || c.Transport != "std" || c.MaxRequestBytes != 100<<20 ||
		!c.AutoCreateTopics || c.NumPartitions != 1 || len(c.LogDirs) != 1 || c.LogDirs[0] != filepath.Join("data", "logs") ||
		c.MetadataDir != filepath.Join("data", "meta") {
		t.Errorf("defaults: %+v", c)
	}
}

func TestConfigRejectsBadValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  []string
		file string
		want string
	}{
		{env: []string{"SAMSA_NUM_PARTITIONS=abc"}, want: "num.partitions"},
		{args: []string{"--sync", "sometimes"}, want: "sync"},
		{file: "log.segment.bytes=10\n", want: "log.segment.bytes"},
		{file: "auto.create.topics.enable=yes\n", want: "auto.create.topics.enable"},
		{args: []string{"--listen", "nonsense"}, want: "listeners"},
		{args: []string{"--set", "log.retention.ms"}, want: "key=value"},
		{file: "listener.security.protocol.map=PLAINTEXT:TLS\n", want: "unknown security protocol TLS"},
	} {
		args := tc.args
		if tc.file != "" {
			args = append(args, "--config", writeFile(t, tc.file))
		}
		_, err := loadConfig(args, tc.env, slog.New(slog.DiscardHandler), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v %q: err %v, want mention of %q", tc.args, tc.env, tc.file, err, tc.want)
		}
	}
}

// TestConfigKafkaSample loads the KRaft sample server.properties of Apache Kafka.
func TestConfigKafkaSample(t *testing.T) {
	file := writeFile(t, `process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=CONTROLLER://:9093,PLAINTEXT://:9092
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
group.initial.rebalance.delay.ms=0
`)
	var logs bytes.Buffer
	c, err := loadConfig([]string{"--config", file}, nil, slog.New(slog.NewTextHandler(&logs, nil)), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := c.ClientListener()
	if adv := c.Advertised[l.Name]; l.Addr() != ":9092" || adv.Host != "localhost" || adv.Port != 9092 || c.LogDirs[0] != "/tmp/kraft-combined-logs" ||
		!c.SoleVoter() || c.Voters[0].Port != 9093 {
		t.Errorf("derived %+v", c)
	}
	if got := strings.Count(logs.String(), "unknown config key"); got != 0 { // every key of Kafka's sample is known
		t.Errorf("%d warnings:\n%s", got, logs.String())
	}
	for _, key := range []string{"num.recovery.threads.per.data.dir", "socket.send.buffer.bytes"} {
		if !strings.Contains(logs.String(), "without effect in Samsa (docs/CONFIG.md)\" key="+key) {
			t.Errorf("%s not said to have no effect:\n%s", key, logs.String())
		}
	}
	// The transaction coordinator creates __transaction_state with these: they act.
	for _, key := range []string{"transaction.state.log.min.isr", "transaction.state.log.replication.factor", "offsets.topic.replication.factor"} {
		if strings.Contains(logs.String(), "without effect in Samsa (docs/CONFIG.md)\" key="+key) {
			t.Errorf("%s said to have no effect:\n%s", key, logs.String())
		}
	}
}

// TestConfigWarnsUnknownKeys: an unknown key from any source (file, environment,
// --set) is warned about once and ignored, as the README says; the known keys beside it
// still apply.
func TestConfigWarnsUnknownKeys(t *testing.T) {
	var logs bytes.Buffer
	file := writeFile(t, "no.such.key=1\nnum.partitions=2\n")
	args := []string{"--config", file, "--set", "foo.bar=1", "--set", "log.retention.mss=1", "--set", "log.retention.ms=5000"}
	c, err := loadConfig(args, []string{"SAMSA_NO_SUCH=1"}, slog.New(slog.NewTextHandler(&logs, nil)), io.Discard)
	if err != nil {
		t.Fatalf("unknown keys stopped the configuration: %v", err)
	}
	for _, name := range []string{"no.such.key", "SAMSA_NO_SUCH", "foo.bar", "log.retention.mss"} {
		if n := strings.Count(logs.String(), name); n != 1 {
			t.Errorf("%s warned about %d times, want once:\n%s", name, n, logs.String())
		}
	}
	for _, key := range []string{"no.such.key", "foo.bar", "log.retention.mss"} {
		if v, ok := c.set[key]; ok {
			t.Errorf("unknown key %s kept as %q", key, v)
		}
	}
	if c.set["num.partitions"] != "2" || c.set["log.retention.ms"] != "5000" || c.NumPartitions != 2 {
		t.Errorf("known keys beside the unknown ones: %v", c.set)
	}
}

// TestEnvKey: a variable maps back to its key, a listener's override too (the
// listener's name may hold underscores: the shortest prefix that leaves a key a
// listener may override).
func TestEnvKey(t *testing.T) {
	for _, c := range []struct {
		name, key string
	}{
		{"SAMSA_LOG_RETENTION_MS", "log.retention.ms"},
		{"SAMSA_SSL_KEYSTORE_LOCATION", "ssl.keystore.location"},
		{"SAMSA_LISTENER_NAME_SASL_SSL_PLAIN_SASL_JAAS_CONFIG", "listener.name.sasl_ssl.plain.sasl.jaas.config"},
		{"SAMSA_LISTENER_NAME_CONTROLLER_SCRAM_SHA_512_SASL_JAAS_CONFIG", "listener.name.controller.scram-sha-512.sasl.jaas.config"},
		{"SAMSA_LISTENER_NAME_SASL_SSL_SASL_ENABLED_MECHANISMS", "listener.name.sasl_ssl.sasl.enabled.mechanisms"},
		{"SAMSA_LISTENER_NAME_EXTERNAL_SSL_KEYSTORE_LOCATION", "listener.name.external.ssl.keystore.location"},
		{"SAMSA_LISTENER_NAME_SSL_SSL_CLIENT_AUTH", "listener.name.ssl.ssl.client.auth"},
		{"SAMSA_LISTENER_NAME_EXTERNAL_LOG_RETENTION_MS", ""}, // not a listener's key
		{"SAMSA_LISTENER_NAME_EXTERNAL", ""},
		{"SAMSA_NO_SUCH", ""},
	} {
		key, known := envKey(c.name)
		if key != c.key || known != (c.key != "") {
			t.Errorf("envKey(%s) = %q, %v; want %q", c.name, key, known, c.key)
		}
	}
	c, err := loadConfig(nil, []string{
		"SAMSA_LISTENERS=SASL_SSL://127.0.0.1:0",
		"SAMSA_LISTENER_NAME_SASL_SSL_PLAIN_SASL_JAAS_CONFIG=org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b\";",
	}, slog.New(slog.DiscardHandler), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.set["listener.name.sasl_ssl.plain.sasl.jaas.config"]; !ok {
		t.Errorf("the listener's JAAS entry from the environment not set: %v", c.set)
	}
}

func TestReadProperties(t *testing.T) {
	file := writeFile(t, "! bang comment\n  a=1\nb : two words \nc\\:d=e\\tf\nlong=x,\\\n    y\nuni=\\u0041\nempty=\n")
	props, err := readProperties(file)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range props {
		got[kv[0]] = kv[1]
	}
	want := map[string]string{"a": "1", "b": "two words", "c:d": "e\tf", "long": "x,y", "uni": "A", "empty": ""}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%q = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %v", got)
	}
}

// Tiered storage's plugin keys (rsm.config.*, rlmm.config.*) are kept as they
// are, unvalidated and without a warning, as Kafka hands them to its plugins.
func TestConfigKeepsPluginKeys(t *testing.T) {
	var logs bytes.Buffer
	file := writeFile(t, "remote.log.storage.system.enable=true\nrsm.config.storage.s3.bucket.name=b\nrlmm.config.remote.log.metadata.topic.num.partitions=7\n")
	c, err := loadConfig([]string{"--config", file}, nil, slog.New(slog.NewTextHandler(&logs, nil)), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.set["rsm.config.storage.s3.bucket.name"] != "b" || c.set["rlmm.config.remote.log.metadata.topic.num.partitions"] != "7" || c.set["remote.log.storage.system.enable"] != "true" {
		t.Fatalf("plugin keys: %v", c.set)
	}
	if strings.Contains(logs.String(), "rsm.config") {
		t.Fatalf("warned about a plugin key:\n%s", logs.String())
	}
}
