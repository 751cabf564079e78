package remote

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Kafka's broker keys that place the storage manager's own keys.
const (
	// PrefixKey is Kafka's remote.log.storage.manager.impl.prefix: the
	// storage manager's keys are the broker's keys under this prefix.
	PrefixKey = "remote.log.storage.manager.impl.prefix"
	// DefaultPrefix is its default.
	DefaultPrefix = "rsm.config."
)

// The storage manager's keys, below the prefix, as Aiven's
// tiered-storage-for-apache-kafka names them, so that a Kafka properties file
// written for that plugin reads the same.
const (
	keyBucket         = "storage.s3.bucket.name"
	keyRegion         = "storage.s3.region"
	keyEndpoint       = "storage.s3.endpoint.url"
	keyPathStyle      = "storage.s3.path.style.access.enabled"
	keyPartSize       = "storage.s3.multipart.upload.part.size"
	keyCallTimeout    = "storage.s3.api.call.timeout"
	keyAttemptTimeout = "storage.s3.api.call.attempt.timeout"
	keyAccessKey      = "storage.aws.access.key.id"
	keySecretKey      = "storage.aws.secret.access.key"
	keyKeyPrefix      = "key.prefix"
	keyChunkSize      = "chunk.size"
	keyCompression    = "compression.enabled"
	keyEncryption     = "encryption.enabled"
	keyCache          = "fetch.chunk.cache."
)

// The chunk cache's keys, below keyCache (Aiven's DiskChunkCache and
// MemoryChunkCache).
const (
	keyCacheClass     = "class"
	keyCachePath      = "path"
	keyCacheSize      = "size"
	keyCacheRetention = "retention.ms"
	keyCachePrefetch  = "prefetch.max.size"
)

// The chunk cache's classes: Aiven's class names (of the package they have
// now and of the one before, chunkmanager.cache) or the bare names.
const (
	CacheMemory = "MemoryChunkCache"
	CacheDisk   = "DiskChunkCache"
)

// defaultCacheRetention is fetch.chunk.cache.retention.ms's default, the
// plugin's.
const defaultCacheRetention = 10 * time.Minute

// Defaults, as the plugin's (part size) or chosen here (timeouts: the
// plugin leaves them to the SDK, whose defaults wait for ever).
const (
	minPartSize           = 5 << 20
	defaultPartSize       = minPartSize
	defaultCallTimeout    = 5 * time.Minute
	defaultAttemptTimeout = 30 * time.Second
)

// Config is the storage manager's configuration.
type Config struct {
	Bucket    string
	Region    string
	Endpoint  string // scheme://host[:port]; "" is AWS's endpoint for Region
	PathStyle bool   // bucket in the path (http://host/bucket/key), as most S3-compatible servers want
	// Credentials: the keys, else AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY
	// (and AWS_SESSION_TOKEN) from the environment.
	AccessKeyID, SecretAccessKey, SessionToken string
	// KeyPrefix is put before every object key (key.prefix).
	KeyPrefix string
	// PartSize is the part of a multipart upload; a file up to it is one PUT.
	PartSize int64
	// CallTimeout bounds a whole call (an upload, a delete, the opening of a
	// read); AttemptTimeout bounds each wait of a read or a delete: a dial,
	// the answer's headers, the next bytes of a read's body. A server that
	// stops answering mid-read fails the read after AttemptTimeout. An
	// upload waits for its answer up to CallTimeout: a store answers it only
	// once the object is stored.
	CallTimeout, AttemptTimeout time.Duration
	// ChunkSize (chunk.size) is the unit of the plugin's transforms and of
	// its chunk cache: here, of the chunk cache when fetch.chunk.cache.class
	// is set (segments are stored untransformed).
	ChunkSize int
	// ChunkCache is fetch.chunk.cache.*.
	ChunkCache ChunkCacheConfig
}

// ChunkCacheConfig is the chunk cache's keys (fetch.chunk.cache.*): the
// remote log manager keeps the segment bytes it reads from the store, in
// chunks of chunk.size, in memory or in files on local disk.
type ChunkCacheConfig struct {
	// Class is CacheMemory, CacheDisk, or "" when fetch.chunk.cache.class
	// is not set: the remote log manager's built-in cache (the last 8
	// chunks of 4 MiB in memory); the other keys are then without effect.
	Class string
	// Path (path) is DiskChunkCache's directory, which must exist: the
	// cache keeps its files under Path/cache and Path/temp, emptied when
	// the broker starts (a cache does not outlive its process).
	Path string
	// Size (size, required with a class) bounds the bytes held; -1 is
	// unbounded. The least recently read chunks go first.
	Size int64
	// Retention (retention.ms, 10 minutes) drops a chunk not read for as
	// long; 0 (-1 in the key) keeps chunks until Size evicts them.
	Retention time.Duration
	// PrefetchMaxSize (prefetch.max.size, 0) is how far past a read the
	// chunks are read ahead into the cache.
	PrefetchMaxSize int64
}

// Notice is a key that was read but has no effect, and why.
type Notice struct{ Key, Reason string }

func (n Notice) String() string { return n.Key + ": " + n.Reason }

// ErrConfig: a missing or invalid key.
var ErrConfig = errors.New("remote: invalid configuration")

// ParseConfig reads the storage manager's keys from a broker's properties:
// PrefixKey's prefix (default "rsm.config.") followed by the plugin's names.
// getenv (os.Getenv, or a test's) supplies the AWS environment variables
// when no keys are set. Keys read but not acted on come back as notices,
// never dropped silently: the Java class-name keys of Kafka and the plugin,
// the chunk cache's keys without fetch.chunk.cache.class, and unknown keys
// under the prefix.
func ParseConfig(props map[string]string, getenv func(string) string) (Config, []Notice, error) {
	prefix := DefaultPrefix
	if p, ok := props[PrefixKey]; ok {
		prefix = p
	}
	cfg := Config{PartSize: defaultPartSize, CallTimeout: defaultCallTimeout, AttemptTimeout: defaultAttemptTimeout,
		ChunkCache: ChunkCacheConfig{Size: -2, Retention: defaultCacheRetention}}
	var notices []Notice
	for _, k := range []string{"remote.log.storage.manager.class.name", "remote.log.storage.manager.class.path", "remote.log.metadata.manager.class.name", "remote.log.metadata.manager.class.path"} {
		if v, ok := props[k]; ok && v != "" {
			notices = append(notices, Notice{k, "a Java class: without effect, the S3 storage manager is built in"})
		}
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var errs []error
	bad := func(k, v, why string) { errs = append(errs, fmt.Errorf("%w: %s=%q: %s", ErrConfig, k, v, why)) }
	haveChunk := false
	for _, full := range keys {
		k, v := strings.TrimPrefix(full, prefix), strings.TrimSpace(props[full])
		switch {
		case k == keyBucket:
			cfg.Bucket = v
		case k == keyRegion:
			cfg.Region = v
		case k == keyEndpoint:
			u, err := url.Parse(v)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(full, v, "must be an http or https URL")
			}
			cfg.Endpoint = v
		case k == keyPathStyle:
			b, err := strconv.ParseBool(v)
			if err != nil {
				bad(full, v, "must be true or false")
			}
			cfg.PathStyle = b
		case k == keyPartSize:
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < minPartSize {
				bad(full, v, "must be an int of at least 5 MiB (5242880)")
			}
			cfg.PartSize = n
		case k == keyCallTimeout || k == keyAttemptTimeout:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				bad(full, v, "must be a positive number of milliseconds")
			}
			d := time.Duration(n) * time.Millisecond
			if k == keyCallTimeout {
				cfg.CallTimeout = d
			} else {
				cfg.AttemptTimeout = d
			}
		case k == keyAccessKey:
			cfg.AccessKeyID = v
		case k == keySecretKey:
			cfg.SecretAccessKey = v
		case k == keyKeyPrefix:
			cfg.KeyPrefix = v
		case k == keyChunkSize:
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < 1 || n > (1<<31-1)/2 {
				bad(full, v, "must be an int between 1 and 1073741823")
			}
			cfg.ChunkSize = int(n)
			haveChunk = true
		case k == keyCompression || k == keyEncryption:
			if b, err := strconv.ParseBool(v); err != nil || b {
				bad(full, v, "not supported: segments are stored as they are on disk")
			}
		case strings.HasPrefix(k, keyCache):
			if known, err := parseCacheKey(&cfg.ChunkCache, strings.TrimPrefix(k, keyCache), v); err != nil {
				bad(full, v, err.Error())
			} else if !known {
				notices = append(notices, Notice{full, "unknown key: without effect"})
			}
		case strings.HasSuffix(k, ".class") || strings.HasSuffix(k, ".class.name"):
			notices = append(notices, Notice{full, "a Java class: without effect"})
		default:
			notices = append(notices, Notice{full, "unknown key: without effect"})
		}
	}
	errs = append(errs, cfg.complete(prefix, haveChunk, getenv)...)
	errs = append(errs, checkCache(&cfg.ChunkCache, prefix+keyCache, &notices)...)
	return cfg, notices, errors.Join(errs...)
}

// complete checks the keys ParseConfig read together and fills in the
// region and credentials from the environment when no key gives them.
func (cfg *Config) complete(prefix string, haveChunk bool, getenv func(string) string) []error {
	var errs []error
	if cfg.Bucket == "" {
		errs = append(errs, fmt.Errorf("%w: %s%s is required", ErrConfig, prefix, keyBucket))
	}
	if cfg.Region == "" {
		cfg.Region = getenv("AWS_REGION")
	}
	if cfg.Region == "" {
		errs = append(errs, fmt.Errorf("%w: %s%s (or AWS_REGION) is required", ErrConfig, prefix, keyRegion))
	}
	if !haveChunk {
		errs = append(errs, fmt.Errorf("%w: %s%s is required", ErrConfig, prefix, keyChunkSize))
	}
	switch {
	case (cfg.AccessKeyID == "") != (cfg.SecretAccessKey == ""):
		errs = append(errs, fmt.Errorf("%w: %s%s and %s%s must be set together", ErrConfig, prefix, keyAccessKey, prefix, keySecretKey))
	case cfg.AccessKeyID == "":
		cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken = getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY"), getenv("AWS_SESSION_TOKEN")
	}
	if cfg.AttemptTimeout > cfg.CallTimeout {
		cfg.AttemptTimeout = cfg.CallTimeout
	}
	return errs
}

// parseCacheKey reads one of the chunk cache's keys (k below
// fetch.chunk.cache.) into c; known false for a key it does not know.
func parseCacheKey(c *ChunkCacheConfig, k, v string) (known bool, err error) {
	num := func(lo int64) (int64, error) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo {
			return 0, fmt.Errorf("must be a long of at least %d", lo)
		}
		return n, nil
	}
	switch k {
	case keyCacheClass:
		switch v[strings.LastIndex(v, ".")+1:] {
		case CacheMemory:
			c.Class = CacheMemory
		case CacheDisk:
			c.Class = CacheDisk
		default:
			return true, fmt.Errorf("must be %s or %s (io.aiven.kafka.tieredstorage.fetch.cache.)", CacheDisk, CacheMemory)
		}
	case keyCachePath:
		c.Path = v
	case keyCacheSize:
		c.Size, err = num(-1)
	case keyCacheRetention:
		var ms int64
		ms, err = num(-1)
		c.Retention = time.Duration(max(ms, 0)) * time.Millisecond
	case keyCachePrefetch:
		c.PrefetchMaxSize, err = num(0)
	default:
		return false, nil
	}
	return true, err
}

// checkCache checks the chunk cache's keys together: size with a class,
// path with DiskChunkCache; keys without a class are without effect.
func checkCache(c *ChunkCacheConfig, prefix string, notices *[]Notice) []error {
	var errs []error
	switch {
	case c.Class == "":
		if c.Size != -2 || c.Path != "" {
			*notices = append(*notices, Notice{prefix + keyCacheClass, "not set: the other fetch.chunk.cache keys are without effect (the built-in cache: 32 chunks of 4 MiB in memory, 2 read ahead)"})
		}
		c.Size, c.Path = 0, ""
	case c.Size == -2:
		errs = append(errs, fmt.Errorf("%w: %s%s is required with %s%s", ErrConfig, prefix, keyCacheSize, prefix, keyCacheClass))
	case c.Class == CacheDisk && c.Path == "":
		errs = append(errs, fmt.Errorf("%w: %s%s is required with %s", ErrConfig, prefix, keyCachePath, CacheDisk))
	}
	if c.Class != CacheDisk {
		c.Path = ""
	}
	return errs
}
