package remote

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestParseConfig reads a Kafka properties file written for Aiven's plugin.
func TestParseConfig(t *testing.T) {
	props := map[string]string{
		"remote.log.storage.system.enable":                     "true",
		"remote.log.storage.manager.class.name":                "io.aiven.kafka.tieredstorage.RemoteStorageManager",
		"remote.log.storage.manager.class.path":                "/opt/tiered-storage/*",
		"rsm.config.storage.backend.class":                     "io.aiven.kafka.tieredstorage.storage.s3.S3Storage",
		"rsm.config.storage.s3.bucket.name":                    "kafka-tiered",
		"rsm.config.storage.s3.region":                         "eu-west-1",
		"rsm.config.storage.s3.endpoint.url":                   "http://127.0.0.1:7070",
		"rsm.config.storage.s3.path.style.access.enabled":      "true",
		"rsm.config.storage.s3.multipart.upload.part.size":     "8388608",
		"rsm.config.storage.s3.api.call.timeout":               "60000",
		"rsm.config.storage.s3.api.call.attempt.timeout":       "2000",
		"rsm.config.storage.aws.access.key.id":                 "AK",
		"rsm.config.storage.aws.secret.access.key":             "SK",
		"rsm.config.key.prefix":                                "prod/",
		"rsm.config.chunk.size":                                "4194304",
		"rsm.config.compression.enabled":                       "false",
		"rsm.config.fetch.chunk.cache.class":                   "io.aiven.kafka.tieredstorage.fetch.cache.DiskChunkCache",
		"rsm.config.fetch.chunk.cache.path":                    "/var/cache/kafka",
		"rsm.config.fetch.chunk.cache.size":                    "1073741824",
		"rsm.config.fetch.chunk.cache.prefetch.max.size":       "8388608",
		"rsm.config.storage.s3.some.future.key":                "x",
		"remote.log.metadata.manager.listener.name":            "PLAINTEXT",
		"rsm.config.fetch.chunk.cache.retention.ms":            "600000",
		"remote.log.storage.manager.impl.prefix.unrelated.key": "ignored: not under the prefix",
	}
	cfg, notices, err := ParseConfig(props, env(map[string]string{"AWS_ACCESS_KEY_ID": "from-env"}))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Bucket: "kafka-tiered", Region: "eu-west-1", Endpoint: "http://127.0.0.1:7070", PathStyle: true,
		AccessKeyID: "AK", SecretAccessKey: "SK", KeyPrefix: "prod/", PartSize: 8 << 20,
		CallTimeout: time.Minute, AttemptTimeout: 2 * time.Second, ChunkSize: 4 << 20}
	if cfg != want {
		t.Fatalf("config:\n got %+v\nwant %+v", cfg, want)
	}
	var keys []string
	for _, n := range notices {
		keys = append(keys, n.Key)
	}
	wantKeys := []string{
		"remote.log.storage.manager.class.name", "remote.log.storage.manager.class.path",
		"rsm.config.chunk.size",
		"rsm.config.fetch.chunk.cache.class", "rsm.config.fetch.chunk.cache.path", "rsm.config.fetch.chunk.cache.prefetch.max.size",
		"rsm.config.fetch.chunk.cache.retention.ms", "rsm.config.fetch.chunk.cache.size",
		"rsm.config.storage.backend.class", "rsm.config.storage.s3.some.future.key",
	}
	if strings.Join(keys, " ") != strings.Join(wantKeys, " ") {
		t.Fatalf("notices:\n got %v\nwant %v", notices, wantKeys)
	}
}

// TestParseConfigEnvAndPrefix: another prefix, the AWS environment
// variables for credentials and region, the defaults.
func TestParseConfigEnvAndPrefix(t *testing.T) {
	props := map[string]string{
		PrefixKey:                       "tiered.",
		"tiered.storage.s3.bucket.name": "b",
		"tiered.chunk.size":             "1048576",
		"rsm.config.storage.s3.region":  "not read: other prefix",
	}
	cfg, notices, err := ParseConfig(props, env(map[string]string{
		"AWS_ACCESS_KEY_ID": "ek", "AWS_SECRET_ACCESS_KEY": "es", "AWS_SESSION_TOKEN": "tok", "AWS_REGION": "us-west-2",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AccessKeyID != "ek" || cfg.SecretAccessKey != "es" || cfg.SessionToken != "tok" || cfg.Region != "us-west-2" {
		t.Fatalf("from the environment: %+v", cfg)
	}
	if cfg.PartSize != 5<<20 || cfg.CallTimeout != defaultCallTimeout || cfg.AttemptTimeout != defaultAttemptTimeout || cfg.PathStyle || cfg.Endpoint != "" {
		t.Fatalf("defaults: %+v", cfg)
	}
	if len(notices) != 1 || notices[0].Key != "tiered.chunk.size" {
		t.Fatalf("notices: %v", notices)
	}
}

// TestParseConfigErrors: every missing or invalid key is named at once.
func TestParseConfigErrors(t *testing.T) {
	_, _, err := ParseConfig(map[string]string{
		"rsm.config.storage.s3.endpoint.url":               "localhost:7070",
		"rsm.config.storage.s3.path.style.access.enabled":  "yes please",
		"rsm.config.storage.s3.multipart.upload.part.size": "1024",
		"rsm.config.storage.aws.access.key.id":             "AK",
		"rsm.config.chunk.size":                            "0",
		"rsm.config.encryption.enabled":                    "true",
		"rsm.config.storage.s3.api.call.timeout":           "-1",
	}, env(nil))
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("err = %v", err)
	}
	for _, k := range []string{"endpoint.url", "path.style.access.enabled", "part.size", "chunk.size", "encryption.enabled",
		"api.call.timeout", "bucket.name is required", "s3.region (or AWS_REGION) is required", "must be set together"} {
		if !strings.Contains(err.Error(), k) {
			t.Errorf("the error does not name %q:\n%v", k, err)
		}
	}
}
