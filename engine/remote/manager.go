package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// Suffixes of a copy's objects, as Aiven's plugin names them
// (ObjectKeyFactory.Suffix), which are the engine's file suffixes.
const (
	suffixLog              = "log"
	suffixOffsetIndex      = "index"
	suffixTimeIndex        = "timeindex"
	suffixProducerSnapshot = "snapshot"
	suffixTxnIndex         = "txnindex"
	suffixLeaderEpoch      = "leader-epoch-checkpoint"
	suffixManifest         = "rsm-manifest"
)

func indexSuffix(t IndexType) (string, bool) {
	switch t {
	case IndexOffset:
		return suffixOffsetIndex, true
	case IndexTimestamp:
		return suffixTimeIndex, true
	case IndexProducerSnapshot:
		return suffixProducerSnapshot, true
	case IndexTransaction:
		return suffixTxnIndex, true
	case IndexLeaderEpoch:
		return suffixLeaderEpoch, true
	}
	return "", false
}

// StorageManager is Kafka's RemoteStorageManager for an S3-compatible object
// store: it copies a sealed segment with its indexes, reads them back (the
// segment by byte range) and deletes them. It keeps no state of its own
// between calls; what was copied is recorded by the caller (Kafka's
// RemoteLogMetadataManager). Safe for concurrent use.
//
// A copy is stored as seven objects or fewer, under keys that only its
// segment id makes unique:
//
//	<key.prefix><topic>-<topic id>/<partition>/<start offset, 20 digits>-<segment id>.<suffix>
//
//	suffix                    object
//	log                       the segment's .log file, byte for byte
//	index, timeindex          its offset and time indexes
//	txnindex                  its aborted-transaction index (only when it has one)
//	snapshot                  the producer snapshot at its end
//	leader-epoch-checkpoint   the leader-epoch checkpoint up to its end
//	rsm-manifest              JSON: the segment's metadata and each object's size; written last
//
// (topic id and segment id in Kafka's form: 22 characters of URL-safe
// base64.) The manifest is put last and deleted first, so a copy whose
// manifest is present is complete.
type StorageManager struct {
	cfg   Config
	store objectStore
}

// New returns a StorageManager for cfg (see ParseConfig). It makes no call:
// a missing bucket or wrong credentials show at the first copy or fetch.
func New(cfg Config) (*StorageManager, error) {
	if cfg.Bucket == "" {
		return nil, fmt.Errorf("%w: no bucket", ErrConfig)
	}
	if cfg.PartSize < minPartSize {
		cfg.PartSize = defaultPartSize
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = defaultCallTimeout
	}
	if cfg.AttemptTimeout <= 0 || cfg.AttemptTimeout > cfg.CallTimeout {
		cfg.AttemptTimeout = min(defaultAttemptTimeout, cfg.CallTimeout)
	}
	s, err := newStore(&cfg)
	if err != nil {
		return nil, err
	}
	return &StorageManager{cfg: cfg, store: s}, nil
}

// ObjectKey is the key of one of a copy's objects (suffix as in the table
// above).
func (m *StorageManager) ObjectKey(md *SegmentMetadata, suffix string) string {
	id := &md.ID
	return m.cfg.KeyPrefix + id.Topic + "-" + id.TopicID.String() + "/" + strconv.Itoa(int(id.Partition)) + "/" +
		fmt.Sprintf("%020d", md.StartOffset) + "-" + id.ID.String() + "." + suffix
}

// manifest is the rsm-manifest object.
type manifest struct {
	Version     string           `json:"version"`
	Compression bool             `json:"compression"`
	Encryption  *struct{}        `json:"encryption"`
	Sizes       map[string]int64 `json:"sizes"` // bytes of each object, by suffix
	Metadata    manifestMetadata `json:"remoteLogSegmentMetadata"`
}

type manifestMetadata struct {
	TopicID        string       `json:"topicId"`
	Topic          string       `json:"topic"`
	Partition      int32        `json:"partition"`
	SegmentID      string       `json:"segmentId"`
	StartOffset    int64        `json:"startOffset"`
	EndOffset      int64        `json:"endOffset"`
	MaxTimestamp   int64        `json:"maxTimestampMs"`
	BrokerID       int32        `json:"brokerId"`
	EventTimestamp int64        `json:"eventTimestampMs"`
	SegmentSize    int64        `json:"segmentSizeInBytes"`
	LeaderEpochs   []EpochEntry `json:"segmentLeaderEpochs"`
}

// CopyLogSegmentData is Kafka's copyLogSegmentData: it stores the segment's
// files and indexes under md's segment id (which the caller draws with
// NewSegmentID for every copy). The .log file's size must be
// md.SegmentSize. On an error some objects may be stored: the caller
// deletes the copy with DeleteLogSegmentData (as Kafka's remote log manager
// does for a copy that did not finish). No custom metadata is returned.
func (m *StorageManager) CopyLogSegmentData(ctx context.Context, md *SegmentMetadata, data *LogSegmentData) error {
	if err := md.Validate(); err != nil {
		return err
	}
	type part struct{ suffix, path string }
	parts := []part{{suffixLog, data.LogSegment}, {suffixOffsetIndex, data.OffsetIndex}, {suffixTimeIndex, data.TimeIndex}, {suffixProducerSnapshot, data.ProducerSnapshot}}
	if data.TransactionIndex != "" {
		parts = append(parts, part{suffixTxnIndex, data.TransactionIndex})
	}
	sizes := map[string]int64{}
	for _, p := range parts {
		want := int64(-1)
		if p.suffix == suffixLog {
			want = md.SegmentSize
		}
		n, err := m.putFile(ctx, md, p.suffix, p.path, want)
		if err != nil {
			return err
		}
		sizes[p.suffix] = n
	}
	if err := m.put(ctx, m.ObjectKey(md, suffixLeaderEpoch), bytes.NewReader(data.LeaderEpochIndex), int64(len(data.LeaderEpochIndex))); err != nil {
		return err
	}
	sizes[suffixLeaderEpoch] = int64(len(data.LeaderEpochIndex))
	b, err := json.Marshal(manifest{Version: "1", Sizes: sizes, Metadata: manifestMetadata{
		TopicID: md.ID.TopicID.String(), Topic: md.ID.Topic, Partition: md.ID.Partition, SegmentID: md.ID.ID.String(),
		StartOffset: md.StartOffset, EndOffset: md.EndOffset, MaxTimestamp: md.MaxTimestamp, BrokerID: md.BrokerID,
		EventTimestamp: md.EventTimestamp, SegmentSize: md.SegmentSize, LeaderEpochs: md.LeaderEpochs,
	}})
	if err != nil {
		return err
	}
	return m.put(ctx, m.ObjectKey(md, suffixManifest), bytes.NewReader(b), int64(len(b)))
}

// putFile stores the file at path, which must hold want bytes unless want
// is -1; it returns the file's size.
func (m *StorageManager) putFile(ctx context.Context, md *SegmentMetadata, suffix, path string, want int64) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("remote: copy %s: %w", md.ID, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("remote: copy %s: %w", md.ID, err)
	}
	if want >= 0 && st.Size() != want {
		return 0, fmt.Errorf("%w: %s holds %d bytes, the metadata says %d", ErrInvalidMetadata, path, st.Size(), want)
	}
	return st.Size(), m.put(ctx, m.ObjectKey(md, suffix), f, st.Size())
}

func (m *StorageManager) put(ctx context.Context, key string, r io.ReaderAt, size int64) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
	defer cancel()
	if err := m.store.put(ctx, key, r, size); err != nil {
		return storeError("copy", m.cfg.Bucket, key, m.store.codeOf(err), false, err)
	}
	return nil
}

// FetchLogSegment is Kafka's fetchLogSegment(metadata, startPosition): the
// segment's bytes from startPosition to its end. The caller closes the
// reader. A read that gets no byte for the attempt timeout fails with
// ErrTimeout.
func (m *StorageManager) FetchLogSegment(ctx context.Context, md *SegmentMetadata, startPosition int64) (io.ReadCloser, error) {
	return m.FetchLogSegmentRange(ctx, md, startPosition, md.SegmentSize-1)
}

// FetchLogSegmentRange is Kafka's fetchLogSegment(metadata, startPosition,
// endPosition): bytes [startPosition, endPosition] (inclusive), endPosition
// cut to the segment's last byte.
func (m *StorageManager) FetchLogSegmentRange(ctx context.Context, md *SegmentMetadata, startPosition, endPosition int64) (io.ReadCloser, error) {
	if startPosition < 0 || endPosition < startPosition || startPosition >= md.SegmentSize {
		return nil, fmt.Errorf("remote: fetch %s: positions [%d, %d] outside a segment of %d bytes", md.ID, startPosition, endPosition, md.SegmentSize)
	}
	return m.get(ctx, "fetch", m.ObjectKey(md, suffixLog), startPosition, min(endPosition, md.SegmentSize-1))
}

// FetchIndex is Kafka's fetchIndex: the whole index of the type. A segment
// copied without a transaction index has none: ErrRemoteResourceNotFound,
// which Kafka's callers take as an empty index.
func (m *StorageManager) FetchIndex(ctx context.Context, md *SegmentMetadata, t IndexType) (io.ReadCloser, error) {
	s, ok := indexSuffix(t)
	if !ok {
		return nil, fmt.Errorf("remote: fetch index %s: unknown index type %d", md.ID, t)
	}
	return m.get(ctx, "fetch index", m.ObjectKey(md, s), 0, -1)
}

func (m *StorageManager) get(ctx context.Context, op, key string, start, end int64) (io.ReadCloser, error) {
	ctx, cancel := context.WithCancel(ctx)
	b := &idleBody{m: m, op: op, key: key, cancel: cancel}
	b.timer = time.AfterFunc(m.cfg.CallTimeout, b.expire)
	rc, err := m.store.get(ctx, key, start, end)
	stopped := b.timer.Stop()
	if err != nil {
		cancel()
		return nil, storeError(op, m.cfg.Bucket, key, m.store.codeOf(err), !stopped, err)
	}
	b.rc = rc
	return b, nil
}

// DeleteLogSegmentData is Kafka's deleteLogSegmentData: it deletes every
// object of the copy, the manifest first. Objects already gone are no error,
// so a deletion that failed half-way is finished by calling it again.
func (m *StorageManager) DeleteLogSegmentData(ctx context.Context, md *SegmentMetadata) error {
	for _, s := range []string{suffixManifest, suffixLog, suffixOffsetIndex, suffixTimeIndex, suffixProducerSnapshot, suffixTxnIndex, suffixLeaderEpoch} {
		key := m.ObjectKey(md, s)
		cctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
		err := m.store.remove(cctx, key)
		cancel()
		if err != nil {
			return storeError("delete", m.cfg.Bucket, key, m.store.codeOf(err), false, err)
		}
	}
	return nil
}

// idleBody is a fetched object's body. The time a Read waits for the store
// is bounded by the attempt timeout: past it the request is cancelled and
// the Read fails with ErrTimeout, so a store that stops sending (stopped,
// partitioned) cannot hang a reader. Time spent by the caller between Reads
// is not counted.
type idleBody struct {
	m        *StorageManager
	op, key  string
	rc       io.ReadCloser
	cancel   context.CancelFunc
	timer    *time.Timer
	timedOut atomic.Bool
}

func (b *idleBody) expire() {
	b.timedOut.Store(true)
	b.cancel()
}

func (b *idleBody) Read(p []byte) (int, error) {
	b.timer.Reset(b.m.cfg.AttemptTimeout)
	n, err := b.rc.Read(p)
	b.timer.Stop()
	if err != nil && err != io.EOF {
		err = storeError(b.op, b.m.cfg.Bucket, b.key, b.m.store.codeOf(err), b.timedOut.Load(), err)
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	err := b.rc.Close()
	b.cancel()
	return err
}
