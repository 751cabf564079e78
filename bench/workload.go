package bench

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// ErrWorkload is wrapped by every workload parsing or validation error.
var ErrWorkload = errors.New("bench: invalid workload")

//go:embed workloads/*.yaml
var builtinWorkloads embed.FS

// Workload is one benchmark scenario, in OpenMessaging Benchmark's vocabulary. The
// YAML keys are OMB's (camelCase) where OMB has one; the client settings that OMB keeps
// in its driver file live here under producer: and consumer:.
//
// Rates are totals over all producers: producerRate 20000 with 2 producers is 10,000
// msg/s each. A zero producerRate means as fast as possible.
type Workload struct {
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description" json:"description,omitempty"`

	Topics             int `yaml:"topics" json:"topics"`
	PartitionsPerTopic int `yaml:"partitionsPerTopic" json:"partitionsPerTopic"`
	ReplicationFactor  int `yaml:"replicationFactor" json:"replicationFactor"`
	// MinInsyncReplicas, when positive, is the created topics' min.insync.replicas,
	// set only on topics whose replication factor is at least that large (a topic of
	// replication factor 1 beside one of 3 in a comparison keeps the broker's
	// default); 0 leaves the broker's default.
	MinInsyncReplicas int `yaml:"minInsyncReplicas" json:"minInsyncReplicas,omitempty"`
	// TopicConfigs are Kafka topic configs of the created topics (retention.bytes,
	// segment.bytes, ...), set at creation beside minInsyncReplicas.
	TopicConfigs map[string]string `yaml:"topicConfigs" json:"topicConfigs,omitempty"`
	// BrokerConfigs are static broker configs the workload needs (the retention
	// check's interval for retention-reached): passed as `serve --set key=value` to a
	// samsa that samsa-bench starts, and as `cluster start --set key=value` to every
	// node of a samsa-cluster. Any other broker runs as it is, and a note says that
	// they were not applied.
	BrokerConfigs map[string]string `yaml:"brokerConfigs" json:"brokerConfigs,omitempty"`

	MessageSize int `yaml:"messageSize" json:"messageSize"`
	// RandomBytesRatio is the share (0..1) of each payload that is random; the rest
	// is zeros, so compression has something to do.
	RandomBytesRatio float64 `yaml:"randomBytesRatio" json:"randomBytesRatio"`
	// RandomizedPayloadPoolSize is how many distinct payloads are pre-generated.
	RandomizedPayloadPoolSize int `yaml:"randomizedPayloadPoolSize" json:"randomizedPayloadPoolSize"`

	// KeyDistributor is none, round-robin, random or zipf (OMB's NO_KEY,
	// KEY_ROUND_ROBIN and RANDOM_NANO are accepted too).
	KeyDistributor string  `yaml:"keyDistributor" json:"keyDistributor"`
	KeySpace       int     `yaml:"keySpace" json:"keySpace"`
	ZipfExponent   float64 `yaml:"zipfExponent" json:"zipfExponent,omitempty"`

	SubscriptionsPerTopic   int `yaml:"subscriptionsPerTopic" json:"subscriptionsPerTopic"`
	ConsumerPerSubscription int `yaml:"consumerPerSubscription" json:"consumerPerSubscription"`
	ProducersPerTopic       int `yaml:"producersPerTopic" json:"producersPerTopic"`
	ProducerRate            int `yaml:"producerRate" json:"producerRate"`

	// ConsumerBacklogSizeGB, when positive, makes a backlog run: producers fill this
	// many GiB with consumers stopped, then stop, and consumers drain from the start.
	ConsumerBacklogSizeGB float64 `yaml:"consumerBacklogSizeGB" json:"consumerBacklogSizeGB,omitempty"`
	// ReadBack, on a tiered catch-up, makes every record of the backlog identifiable
	// and, after the remote read, reads the backlog from offset 0 through a franz-go
	// consumer and through kcat, each checked against every acknowledged record:
	// each once, in order, nothing missing, nothing extra (readback.go).
	ReadBack bool `yaml:"readBack" json:"readBack,omitempty"`

	Warmup   Duration `yaml:"warmup" json:"warmup"`
	Duration Duration `yaml:"duration" json:"duration"`
	// OMB's minute-based spellings; used when warmup/duration are not set.
	WarmupDurationMinutes float64 `yaml:"warmupDurationMinutes" json:"-"`
	TestDurationMinutes   float64 `yaml:"testDurationMinutes" json:"-"`

	Producer ProducerConfig `yaml:"producer" json:"producer"`
	Consumer ConsumerConfig `yaml:"consumer" json:"consumer"`
}

// ProducerConfig holds the client producer settings.
type ProducerConfig struct {
	Acks        Acks     `yaml:"acks" json:"acks"`
	Compression string   `yaml:"compression" json:"compression"` // none, gzip, snappy, lz4, zstd
	Linger      Duration `yaml:"linger" json:"linger"`
	BatchSize   int      `yaml:"batchSize" json:"batchSize"` // bytes per partition batch
	MaxInFlight int      `yaml:"maxInFlight" json:"maxInFlight"`
	// MaxBufferedRecords bounds records waiting in the client (and the record pool).
	MaxBufferedRecords int  `yaml:"maxBufferedRecords" json:"maxBufferedRecords"`
	Idempotent         bool `yaml:"idempotent" json:"idempotent"`
}

// ConsumerConfig holds the client consumer settings.
type ConsumerConfig struct {
	// Mode is group (one consumer group per subscription, the default) or assign
	// (partitions split among a subscription's consumers by the loader, no group).
	Mode          string   `yaml:"mode" json:"mode"`
	FetchMaxBytes int      `yaml:"fetchMaxBytes" json:"fetchMaxBytes"`
	FetchMaxWait  Duration `yaml:"fetchMaxWait" json:"fetchMaxWait"`
}

// Duration is a time.Duration that reads "10s", "2m" or a bare number of seconds.
type Duration time.Duration

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f < 0 || f > 1e7 {
			return fmt.Errorf("%w: duration %q out of range", ErrWorkload, s)
		}
		*d = Duration(f * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("%w: duration %q: want e.g. 10s, 2m or seconds", ErrWorkload, s)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, time.Duration(d).String()), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return fmt.Errorf("%w: duration %s", ErrWorkload, b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%w: duration %q", ErrWorkload, s)
	}
	*d = Duration(v)
	return nil
}

// D returns the duration as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Acks is the producer acknowledgement level: -1 (all), 0 or 1.
type Acks int

// UnmarshalYAML reads all, -1, 0 or 1.
func (a *Acks) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	switch strings.ToLower(s) {
	case "all", "-1":
		*a = -1
	case "1", "leader":
		*a = 1
	case "0", "none":
		*a = 0
	default:
		return fmt.Errorf("%w: acks %q: want all, 1 or 0", ErrWorkload, s)
	}
	return nil
}

// String returns all, 1 or 0.
func (a Acks) String() string {
	if a == -1 {
		return "all"
	}
	return strconv.Itoa(int(a))
}

// MarshalJSON writes the acks level as a string.
func (a Acks) MarshalJSON() ([]byte, error) { return strconv.AppendQuote(nil, a.String()), nil }

// UnmarshalJSON reads what MarshalJSON writes.
func (a *Acks) UnmarshalJSON(b []byte) error {
	s, err := strconv.Unquote(string(b))
	if err != nil {
		s = string(b)
	}
	switch s {
	case "all", "-1":
		*a = -1
	case "1":
		*a = 1
	case "0":
		*a = 0
	default:
		return fmt.Errorf("%w: acks %q", ErrWorkload, s)
	}
	return nil
}

// Key distributions.
const (
	KeyNone       = "none"
	KeyRoundRobin = "round-robin"
	KeyRandom     = "random"
	KeyZipf       = "zipf"
)

// Limits that keep a workload file from asking for unbounded resources.
const (
	minMessageSize   = 16 // two timestamps
	maxMessageSize   = 64 << 20
	maxClients       = 1024
	maxPartitions    = 100000
	maxPayloadPoolMB = 256
)

// ParseWorkload reads one workload from YAML. Unknown keys are errors (a typo must not
// silently change a benchmark). Defaults are filled and the result validated.
func ParseWorkload(r io.Reader) (*Workload, error) {
	dec := yaml.NewDecoder(io.LimitReader(r, 1<<20))
	dec.KnownFields(true)
	// Keys that are absent keep these defaults; a key that is present, even 0, wins
	// (subscriptionsPerTopic: 0 is a producer-only workload).
	w := &Workload{SubscriptionsPerTopic: 1}
	if err := dec.Decode(w); err != nil {
		if errors.Is(err, ErrWorkload) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", ErrWorkload, err)
	}
	w.applyDefaults()
	if err := w.Validate(); err != nil {
		return nil, err
	}
	return w, nil
}

// LoadWorkload reads a workload by file path, or by the name of a built-in workload
// (a file of bench/workloads without .yaml).
func LoadWorkload(nameOrPath string) (*Workload, error) {
	if strings.ContainsAny(nameOrPath, "/.") {
		f, err := os.Open(nameOrPath)
		if err != nil {
			return nil, fmt.Errorf("bench: workload: %w", err)
		}
		defer f.Close()
		return ParseWorkload(f)
	}
	b, err := builtinWorkloads.ReadFile("workloads/" + nameOrPath + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("%w: no built-in workload %q (have %s)", ErrWorkload, nameOrPath,
			strings.Join(BuiltinWorkloads(), ", "))
	}
	return ParseWorkload(bytes.NewReader(b))
}

// BuiltinWorkloads lists the names of the workloads shipped in bench/workloads.
func BuiltinWorkloads() []string {
	ents, _ := builtinWorkloads.ReadDir("workloads")
	var names []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

func (w *Workload) applyDefaults() {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&w.Topics, 1)
	def(&w.PartitionsPerTopic, 1)
	def(&w.ReplicationFactor, 1)
	def(&w.MessageSize, 100)
	def(&w.RandomizedPayloadPoolSize, 1000)
	def(&w.KeySpace, 10000)
	def(&w.ConsumerPerSubscription, 1)
	def(&w.ProducersPerTopic, 1)
	def(&w.Producer.BatchSize, 1<<20)
	def(&w.Producer.MaxInFlight, 5)
	def(&w.Producer.MaxBufferedRecords, 100000)
	def(&w.Consumer.FetchMaxBytes, 50<<20)
	if w.ZipfExponent == 0 {
		w.ZipfExponent = 1.1
	}
	if w.Warmup == 0 && w.WarmupDurationMinutes > 0 {
		w.Warmup = Duration(w.WarmupDurationMinutes * float64(time.Minute))
	}
	if w.Duration == 0 {
		w.Duration = Duration(w.TestDurationMinutes * float64(time.Minute))
		if w.Duration == 0 {
			w.Duration = Duration(time.Minute)
		}
	}
	if w.Consumer.FetchMaxWait == 0 {
		w.Consumer.FetchMaxWait = Duration(500 * time.Millisecond)
	}
	if w.Consumer.Mode == "" {
		w.Consumer.Mode = "group"
	}
	if w.Producer.Compression == "" {
		w.Producer.Compression = "none"
	}
	switch strings.ToUpper(w.KeyDistributor) {
	case "", "NONE", "NO_KEY":
		w.KeyDistributor = KeyNone
	case "ROUND-ROBIN", "KEY_ROUND_ROBIN", "ROUND_ROBIN":
		w.KeyDistributor = KeyRoundRobin
	case "RANDOM", "RANDOM_NANO":
		w.KeyDistributor = KeyRandom
	case "ZIPF":
		w.KeyDistributor = KeyZipf
	}
	if w.Name == "" {
		w.Name = "unnamed"
	}
}

// Validate checks that every field is in range.
func (w *Workload) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrWorkload, w.Name, fmt.Sprintf(format, args...))
	}
	switch {
	case w.Topics < 1 || w.Topics > 10000:
		return bad("topics %d not in 1..10000", w.Topics)
	case w.PartitionsPerTopic < 1 || w.Topics*w.PartitionsPerTopic > maxPartitions:
		return bad("partitionsPerTopic %d: total partitions must be in 1..%d", w.PartitionsPerTopic, maxPartitions)
	case w.ReplicationFactor < 1 || w.ReplicationFactor > 32:
		return bad("replicationFactor %d not in 1..32", w.ReplicationFactor)
	case w.MinInsyncReplicas < 0 || w.MinInsyncReplicas > 32:
		return bad("minInsyncReplicas %d not in 0..32", w.MinInsyncReplicas)
	case w.MessageSize < minMessageSize || w.MessageSize > maxMessageSize:
		return bad("messageSize %d not in %d..%d (the first 16 bytes carry timestamps)", w.MessageSize, minMessageSize, maxMessageSize)
	case w.RandomBytesRatio < 0 || w.RandomBytesRatio > 1 || math.IsNaN(w.RandomBytesRatio):
		return bad("randomBytesRatio %v not in 0..1", w.RandomBytesRatio)
	case w.RandomizedPayloadPoolSize < 1 || int64(w.RandomizedPayloadPoolSize)*int64(w.MessageSize) > maxPayloadPoolMB<<20:
		return bad("randomizedPayloadPoolSize %d: must be ≥1 and hold at most %d MiB", w.RandomizedPayloadPoolSize, maxPayloadPoolMB)
	case w.KeySpace < 1 || w.KeySpace > 10_000_000:
		return bad("keySpace %d not in 1..10000000", w.KeySpace)
	case w.KeyDistributor != KeyNone && w.KeyDistributor != KeyRoundRobin && w.KeyDistributor != KeyRandom && w.KeyDistributor != KeyZipf:
		return bad("keyDistributor %q: want none, round-robin, random or zipf", w.KeyDistributor)
	case w.KeyDistributor == KeyZipf && !(w.ZipfExponent > 1):
		return bad("zipfExponent %v must be > 1", w.ZipfExponent)
	case w.SubscriptionsPerTopic < 0 || w.ConsumerPerSubscription < 1 || w.ProducersPerTopic < 1:
		return bad("subscriptionsPerTopic ≥0, consumerPerSubscription ≥1, producersPerTopic ≥1")
	case w.Topics*(w.SubscriptionsPerTopic*w.ConsumerPerSubscription+w.ProducersPerTopic) > maxClients:
		return bad("more than %d clients", maxClients)
	case w.ProducerRate < 0 || w.ProducerRate > 100_000_000:
		return bad("producerRate %d not in 0..100000000", w.ProducerRate)
	case w.ConsumerBacklogSizeGB < 0 || w.ConsumerBacklogSizeGB > 1024:
		return bad("consumerBacklogSizeGB %v not in 0..1024", w.ConsumerBacklogSizeGB)
	case w.ConsumerBacklogSizeGB > 0 && w.SubscriptionsPerTopic == 0:
		return bad("a backlog run needs subscriptions")
	case w.Duration <= 0 || w.Duration.D() > 24*time.Hour || w.Warmup.D() > 24*time.Hour:
		return bad("duration must be in (0, 24h], warmup ≤ 24h")
	case w.Producer.Linger.D() > time.Minute:
		return bad("linger %v > 1m", w.Producer.Linger.D())
	case w.Producer.BatchSize < 1024 || w.Producer.BatchSize > 64<<20:
		return bad("batchSize %d not in 1KiB..64MiB", w.Producer.BatchSize)
	case w.Producer.MaxInFlight < 1 || w.Producer.MaxInFlight > 1024:
		return bad("maxInFlight %d not in 1..1024", w.Producer.MaxInFlight)
	case w.Producer.Idempotent && w.Producer.MaxInFlight > 5:
		return bad("idempotent producers allow maxInFlight ≤ 5")
	case w.Producer.Idempotent && w.Producer.Acks != -1:
		return bad("idempotent producers need acks all")
	case w.Producer.MaxBufferedRecords < 1 || w.Producer.MaxBufferedRecords > 10_000_000:
		return bad("maxBufferedRecords %d not in 1..10000000", w.Producer.MaxBufferedRecords)
	case int64(w.Producer.MaxBufferedRecords)*int64(w.MessageSize)*int64(w.Topics*w.ProducersPerTopic) > 8<<30:
		return bad("maxBufferedRecords × messageSize × producers exceeds 8 GiB")
	case w.Consumer.Mode != "group" && w.Consumer.Mode != "assign":
		return bad("consumer mode %q: want group or assign", w.Consumer.Mode)
	case w.Consumer.FetchMaxBytes < 1024 || w.Consumer.FetchMaxBytes > 1<<30:
		return bad("fetchMaxBytes %d not in 1KiB..1GiB", w.Consumer.FetchMaxBytes)
	}
	for _, m := range []struct {
		what string
		kv   map[string]string
	}{{"topicConfigs", w.TopicConfigs}, {"brokerConfigs", w.BrokerConfigs}} {
		if len(m.kv) > 64 {
			return bad("%s: %d keys, at most 64", m.what, len(m.kv))
		}
		for k, v := range m.kv {
			if k == "" || strings.ContainsAny(k, "= \t\n") || strings.ContainsAny(v, "\n") || len(k)+len(v) > 1024 {
				return bad("%s: key %q: want a config name (no '=', no spaces) and a one-line value", m.what, k)
			}
		}
	}
	if w.TieredCatchup() {
		if v, err := strconv.ParseInt(w.TopicConfigs["local.retention.bytes"], 10, 64); err != nil || v < 0 {
			return bad("a tiered catch-up (remote.storage.enable on a backlog) needs topicConfigs local.retention.bytes ≥ 0, not %q", w.TopicConfigs["local.retention.bytes"])
		}
	}
	if w.ReadBack && (!w.TieredCatchup() || w.Producer.Acks != -1 || w.PartitionsPerTopic > readBackPartMax) {
		return bad("readBack needs a tiered catch-up (remote.storage.enable on a backlog) with acks all and at most %d partitions", readBackPartMax)
	}
	if _, ok := w.TopicConfigs["min.insync.replicas"]; ok && w.MinInsyncReplicas > 0 {
		return bad("topicConfigs: min.insync.replicas and minInsyncReplicas both set")
	}
	switch w.Producer.Compression {
	case "none", "gzip", "snappy", "lz4", "zstd":
	default:
		return bad("compression %q: want none, gzip, snappy, lz4 or zstd", w.Producer.Compression)
	}
	return nil
}

// Producers is the number of producer clients.
func (w *Workload) Producers() int { return w.Topics * w.ProducersPerTopic }

// BrokerArgs are the `samsa serve` flags that set BrokerConfigs, in key order.
func (w *Workload) BrokerArgs() []string {
	keys := make([]string, 0, len(w.BrokerConfigs))
	for k := range w.BrokerConfigs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var args []string
	for _, k := range keys {
		args = append(args, "--set", k+"="+w.BrokerConfigs[k])
	}
	return args
}

// Consumers is the number of consumer clients.
func (w *Workload) Consumers() int {
	return w.Topics * w.SubscriptionsPerTopic * w.ConsumerPerSubscription
}

// Tiered says the workload's topics keep their older segments in remote storage
// (topicConfigs remote.storage.enable: true): a samsa that samsa-bench starts then
// gets an object store (tiered.go).
func (w *Workload) Tiered() bool {
	return strings.EqualFold(strings.TrimSpace(w.TopicConfigs["remote.storage.enable"]), "true")
}

// TieredCatchup says the workload is a tiered catch-up (tiered-catchup): a backlog on
// a tiered topic, read back from remote storage beside its local drain (tiered.go).
func (w *Workload) TieredCatchup() bool { return w.Tiered() && w.ConsumerBacklogSizeGB > 0 }

// BacklogBytes is the backlog to build before consumers start, or 0.
func (w *Workload) BacklogBytes() int64 { return int64(w.ConsumerBacklogSizeGB * (1 << 30)) }
