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
		CallTimeout: time.Minute, AttemptTimeout: 2 * time.Second, ChunkSize: 4 << 20,
		ChunkCache: ChunkCacheConfig{Class: CacheDisk, Path: "/var/cache/kafka", Size: 1 << 30, Retention: 10 * time.Minute, PrefetchMaxSize: 8 << 20}}
	if cfg != want {
		t.Fatalf("config:\n got %+v\nwant %+v", cfg, want)
	}
	var keys []string
	for _, n := range notices {
		keys = append(keys, n.Key)
	}
	wantKeys := []string{
		"remote.log.storage.manager.class.name", "remote.log.storage.manager.class.path",
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
	if len(notices) != 0 || cfg.ChunkCache != (ChunkCacheConfig{Retention: defaultCacheRetention}) {
		t.Fatalf("notices %v, chunk cache %+v", notices, cfg.ChunkCache)
	}
}

// TestParseChunkCache: the chunk cache's keys, as Aiven's plugin reads them:
// its class names (either package) or the bare names, size required with a
// class and -1 unbounded, path required with DiskChunkCache, retention.ms -1
// for none; without a class the other keys are reported as without effect.
func TestParseChunkCache(t *testing.T) {
	base := map[string]string{"rsm.config.storage.s3.bucket.name": "b", "rsm.config.storage.s3.region": "r", "rsm.config.chunk.size": "1048576"}
	parse := func(kv ...string) (ChunkCacheConfig, []Notice, error) {
		props := map[string]string{}
		for k, v := range base {
			props[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			props["rsm.config.fetch.chunk.cache."+kv[i]] = kv[i+1]
		}
		cfg, notices, err := ParseConfig(props, env(nil))
		return cfg.ChunkCache, notices, err
	}
	for _, class := range []string{"io.aiven.kafka.tieredstorage.fetch.cache.MemoryChunkCache", "io.aiven.kafka.tieredstorage.chunkmanager.cache.MemoryChunkCache", "MemoryChunkCache"} {
		c, notices, err := parse("class", class, "size", "-1", "retention.ms", "-1")
		if err != nil || len(notices) != 0 || c != (ChunkCacheConfig{Class: CacheMemory, Size: -1}) {
			t.Fatalf("%s: %+v %v %v", class, c, notices, err)
		}
	}
	if c, _, err := parse("class", "DiskChunkCache", "size", "100", "path", "/p", "prefetch.max.size", "5"); err != nil ||
		c != (ChunkCacheConfig{Class: CacheDisk, Path: "/p", Size: 100, Retention: defaultCacheRetention, PrefetchMaxSize: 5}) {
		t.Fatalf("disk: %+v %v", c, err)
	}
	for _, kv := range [][]string{{"class", "DirectMemoryChunkCache", "size", "1"}, {"class", "MemoryChunkCache"}, {"class", "DiskChunkCache", "size", "1"},
		{"class", "MemoryChunkCache", "size", "-2"}, {"class", "MemoryChunkCache", "size", "1", "retention.ms", "x"}} {
		if _, _, err := parse(kv...); !errors.Is(err, ErrConfig) {
			t.Fatalf("%v: err = %v", kv, err)
		}
	}
	c, notices, err := parse("size", "100", "other", "x")
	if err != nil || c.Class != "" || c.Size != 0 || len(notices) != 2 {
		t.Fatalf("without a class: %+v %v %v", c, notices, err)
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
