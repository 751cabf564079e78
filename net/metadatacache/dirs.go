package metadatacache

import (
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/samsa-broker/samsa/engine"
)

// DirHealth caches the failed log directories. The engine reports them only with
// per-log statistics (DirStats, O(logs)), so the answer is kept for a second rather
// than computed per request (Metadata, DescribeTopicPartitions).
type DirHealth struct {
	eng *engine.Manager
	mu  sync.Mutex
	at  time.Time
	out []string
}

// NewDirHealth returns the failed log directories of eng.
func NewDirHealth(eng *engine.Manager) *DirHealth { return &DirHealth{eng: eng} }

// Offline lists the log directories that failed (usually none). The slice is shared.
func (d *DirHealth) Offline() []string {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.at.IsZero() && now.Sub(d.at) < time.Second {
		return d.out
	}
	var out []string
	for _, ds := range d.eng.DirStats() {
		if ds.Err != nil {
			out = append(out, ds.Path)
		}
	}
	d.at, d.out = now, out
	return out
}

// LogOffline reports whether the partition's log lives in one of the offline dirs.
func (d *DirHealth) LogOffline(topic string, partition int32, offline []string) bool {
	l := d.eng.Log(engine.TopicPartition{Topic: topic, Partition: partition})
	if l == nil {
		return false
	}
	for _, d := range offline {
		if isUnder(l.Dir(), d) {
			return true
		}
	}
	return false
}

// isUnder reports whether path is dir or inside it.
func isUnder(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
