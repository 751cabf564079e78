package remote

// newStore is the object-store client the storage manager uses:
// aws-sdk-go-v2's, chosen over minio-go by BenchmarkClient (BENCHMARKS.md,
// "Object storage client for tiered storage").
func newStore(cfg *Config) (objectStore, error) { return newAWSStore(cfg) }
