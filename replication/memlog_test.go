package replication

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"

	"github.com/samsa-broker/samsa/engine"
)

// memLog is the simulation's partition log: engine.Log's semantics (offsets, epochs,
// truncation, the HW, OnDurable) in memory, with a durable end that a power cut falls
// back to. Under fsync, OnDurable waiters complete when the node's flusher runs
// (flush); otherwise inline, as the engine's interval policy does.
//
// It is used from one goroutine in the simulation; the mutex makes it safe for the
// goroutine-driven tests too.
type memLog struct {
	mu      sync.Mutex
	tp      engine.TopicPartition
	fsync   bool
	batches []memBatch // sorted, dense in [start, leo)
	start   int64
	leo     int64
	hw      int64
	durable int64 // everything below is durable (the engine's recovery point)
	ckptHW  int64 // the HW as last checkpointed (what a restart starts from)
	epochs  []epochEntry
	waiters []memWaiter
	// onTruncate is told of every partial truncation (the simulation checks none goes
	// below the HW); gen counts truncations and crashes.
	onTruncate func(l *memLog, to, hw int64)
	gen        int
	ver        int    // counts changes of the batches or the HW
	simVer     *int64 // the simulation's global change count, bumped with ver
	// kick asks the node to run its flusher soon (fsync: a waiter is queued).
	kick func()
	// damagedAt is the first offset recorded as damaged (as the engine's scrubber or
	// open does) when hasDamage; truncation to it or below clears it.
	damagedAt int64
	hasDamage bool
}

// FirstDamagedOffset is engine.Log's: the first offset recorded as damaged.
func (l *memLog) FirstDamagedOffset() (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.damagedAt, l.hasDamage
}

type memBatch struct {
	base, last int64
	epoch      int32
	data       []byte
}

type epochEntry struct {
	epoch int32
	start int64
}

type memWaiter struct {
	offset int64
	done   func(error)
}

func newMemLog(tp engine.TopicPartition, fsync bool) *memLog {
	return &memLog{tp: tp, fsync: fsync}
}

func (l *memLog) bumpLocked() {
	l.ver++
	if l.simVer != nil {
		*l.simVer++
	}
}

func (l *memLog) TopicPartition() engine.TopicPartition { return l.tp }

func (l *memLog) LogStartOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.start
}

func (l *memLog) LogEndOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leo
}

func (l *memLog) HighWatermark() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hw
}

func (l *memLog) SetHighWatermark(off int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	off = max(min(off, l.leo), l.start)
	if off > l.hw {
		l.hw = off
		l.bumpLocked()
	}
}

func (l *memLog) Append(b []byte, o engine.AppendOptions) (engine.AppendResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var hs []engine.BatchHeader
	for p := 0; p < len(b); {
		h, err := engine.ValidateBatch(b[p:])
		if err != nil {
			return engine.AppendResult{}, err
		}
		hs = append(hs, h)
		p += int(h.Size())
	}
	if len(hs) == 0 {
		return engine.AppendResult{}, fmt.Errorf("%w: no batch", engine.ErrCorruptBatch)
	}
	next := l.leo
	first := next
	if o.Follower {
		if hs[0].BaseOffset < next {
			return engine.AppendResult{}, fmt.Errorf("%w: batch at %d, log end %d", engine.ErrUnexpectedAppendOffset, hs[0].BaseOffset, next)
		}
		first = hs[0].BaseOffset
	}
	pos := 0
	for _, h := range hs {
		data := slices.Clone(b[pos : pos+int(h.Size())])
		pos += int(h.Size())
		if !o.Follower {
			binary.BigEndian.PutUint64(data[0:], uint64(next))
			binary.BigEndian.PutUint32(data[12:], uint32(o.LeaderEpoch))
			h.BaseOffset, h.PartitionLeaderEpoch = next, o.LeaderEpoch
		} else if h.BaseOffset < next {
			return engine.AppendResult{}, fmt.Errorf("%w: batch at %d, log end %d", engine.ErrUnexpectedAppendOffset, h.BaseOffset, next)
		}
		mb := memBatch{base: h.BaseOffset, last: h.LastOffset(), epoch: h.PartitionLeaderEpoch, data: data}
		l.batches = append(l.batches, mb)
		next = mb.last + 1
		if latest := l.latestLocked(); mb.epoch > latest {
			l.assignLocked(mb.epoch, mb.base)
		}
	}
	l.leo = next
	l.bumpLocked()
	return engine.AppendResult{BaseOffset: first, LastOffset: next - 1, LogAppendTime: -1, LogStartOffset: l.start}, nil
}

func (l *memLog) OnDurable(offset int64, done func(error)) {
	l.mu.Lock()
	if !l.fsync || l.durable > offset {
		l.mu.Unlock()
		done(nil)
		return
	}
	l.waiters = append(l.waiters, memWaiter{offset: offset, done: done})
	kick := l.kick
	l.mu.Unlock()
	if kick != nil {
		kick()
	}
}

// OnDurableHeld ignores the hold: the simulation's flush is an event on its own
// clock (kick schedules it), which a hold of the real flusher's wake-up does not move.
func (l *memLog) OnDurableHeld(offset int64, _ *engine.FlushHold, done func(error)) {
	l.OnDurable(offset, done)
}

// flush makes everything appended durable (one group commit) and completes the
// waiters it satisfies; a waiter above the log end (truncated away) fails.
func (l *memLog) flush() {
	l.mu.Lock()
	l.durable = l.leo
	l.ckptHW = l.hw
	var done []func(error)
	var errs []error
	kept := l.waiters[:0]
	for _, w := range l.waiters {
		switch {
		case l.durable > w.offset:
			done, errs = append(done, w.done), append(errs, nil)
		case w.offset >= l.leo:
			done, errs = append(done, w.done), append(errs, engine.ErrOffsetOutOfRange)
		default:
			kept = append(kept, w)
		}
	}
	l.waiters = kept
	l.mu.Unlock()
	for i, d := range done {
		d(errs[i])
	}
}

// crash is what the log looks like after its node dies: a power cut keeps only the
// durable part; a process kill keeps everything (the page cache survives). Waiters are
// dropped (their process is gone). The HW restarts from the last checkpoint.
func (l *memLog) crash(powerCut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waiters = nil
	if powerCut {
		l.cutLocked(l.durable)
	}
	l.hw = max(min(l.ckptHW, l.leo), l.start)
	l.gen++
	l.bumpLocked()
}

// cutLocked drops every batch at or after off (whole batches).
func (l *memLog) cutLocked(off int64) {
	i := len(l.batches)
	for i > 0 && l.batches[i-1].last >= off {
		i--
	}
	newEnd := off
	if i < len(l.batches) {
		newEnd = min(off, l.batches[i].base)
	}
	if newEnd >= l.leo {
		return
	}
	l.batches = l.batches[:i]
	l.leo = max(newEnd, l.start)
	l.hw = min(l.hw, l.leo)
	l.durable = min(l.durable, l.leo)
	l.ckptHW = min(l.ckptHW, l.leo)
	n := len(l.epochs)
	for n > 0 && l.epochs[n-1].start >= l.leo {
		n--
	}
	l.epochs = l.epochs[:n]
	l.gen++
	l.bumpLocked()
}

func (l *memLog) TruncateTo(off int64) error {
	if off < 0 {
		return engine.ErrOffsetOutOfRange
	}
	l.mu.Lock()
	if l.hasDamage && off <= l.damagedAt {
		l.hasDamage = false
	}
	if off >= l.leo {
		l.mu.Unlock()
		return nil // as the engine: the epoch cache is left as it is
	}
	if off < l.start {
		l.mu.Unlock()
		return l.TruncateFullyAndStartAt(off)
	}
	hw, cb := l.hw, l.onTruncate
	l.cutLocked(off)
	l.mu.Unlock()
	if cb != nil {
		cb(l, off, hw)
	}
	return nil
}

func (l *memLog) TruncateFullyAndStartAt(off int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.batches = nil
	l.start, l.leo, l.hw, l.durable, l.ckptHW = off, off, off, off, off
	l.epochs = nil
	l.gen++
	l.bumpLocked()
	return nil
}

func (l *memLog) DeleteRecordsBefore(off int64) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if off > l.hw || off < 0 {
		return l.start, engine.ErrOffsetOutOfRange
	}
	if off <= l.start {
		return l.start, nil
	}
	l.start = off
	l.bumpLocked()
	i := 0
	for i < len(l.batches) && l.batches[i].last < off {
		i++
	}
	l.batches = slices.Clone(l.batches[i:])
	// truncateFromStart: entries wholly below off go, the last of them moved up to off.
	j := 0
	for j < len(l.epochs) && l.epochs[j].start <= off {
		j++
	}
	if j > 0 {
		kept := l.epochs[j-1]
		kept.start = off
		l.epochs = append([]epochEntry{kept}, l.epochs[j:]...)
	}
	return off, nil
}

func (l *memLog) latestLocked() int32 {
	if len(l.epochs) == 0 {
		return -1
	}
	return l.epochs[len(l.epochs)-1].epoch
}

func (l *memLog) LatestEpoch() int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.latestLocked()
}

// EndOffsetForEpoch is the engine's (Kafka's LeaderEpochFileCache.endOffsetFor).
func (l *memLog) EndOffsetForEpoch(epoch int32) (int32, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.epochs)
	if epoch < 0 || n == 0 {
		return -1, -1
	}
	if l.epochs[n-1].epoch == epoch {
		return epoch, l.leo
	}
	hi := -1
	for i, e := range l.epochs {
		if e.epoch > epoch {
			hi = i
			break
		}
	}
	if hi < 0 {
		return -1, -1
	}
	if hi == 0 {
		return epoch, l.epochs[0].start
	}
	return l.epochs[hi-1].epoch, l.epochs[hi].start
}

func (l *memLog) AssignEpochStartOffset(epoch int32, off int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if off < 0 || off > l.leo {
		return engine.ErrOffsetOutOfRange
	}
	l.assignLocked(epoch, off)
	return nil
}

// assignLocked is the engine's epochCache.assign.
func (l *memLog) assignLocked(epoch int32, start int64) {
	if epoch < 0 {
		return
	}
	if n := len(l.epochs); n > 0 && l.epochs[n-1].epoch == epoch && start >= l.epochs[n-1].start {
		return
	}
	n := len(l.epochs)
	for n > 0 && (l.epochs[n-1].epoch >= epoch || l.epochs[n-1].start >= start) {
		n--
	}
	l.epochs = append(l.epochs[:n], epochEntry{epoch, start})
}

// read returns whole batches from the one holding off, each ending below upTo, within
// max bytes (at least one). Like the engine's Read.
func (l *memLog) read(off, upTo int64, maxBytes int) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if off < l.start || off > l.leo {
		return nil, engine.ErrOffsetOutOfRange
	}
	var out []byte
	for _, b := range l.batches {
		if b.last < off {
			continue
		}
		if b.last >= upTo || len(out) > 0 && len(out)+len(b.data) > maxBytes {
			break
		}
		out = append(out, b.data...)
	}
	return out, nil
}

// valueAt returns the value of the record at off ("" when absent) and its epoch.
func (l *memLog) valueAt(off int64) (string, int32, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, found := slices.BinarySearchFunc(l.batches, off, func(b memBatch, off int64) int {
		switch {
		case b.last < off:
			return -1
		case b.base > off:
			return 1
		}
		return 0
	})
	if !found {
		return "", -1, false
	}
	b := l.batches[i]
	return batchValue(b.data), b.epoch, true
}

// stat returns the log's bounds, HW, truncation generation and version.
func (l *memLog) stat() (start, leo, hw int64, gen, ver int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.start, l.leo, l.hw, l.gen, l.ver
}

// agree compares two logs' batches over [from, upTo) in place; false and the first
// differing offset when they differ.
func agree(a, b *memLog, from, upTo int64) (int64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	return firstDifference(a.batches, b.batches, from, upTo)
}

// snapshot copies the batches (for comparisons).
func (l *memLog) snapshot() (start, leo, hw int64, batches []memBatch, gen int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.start, l.leo, l.hw, slices.Clone(l.batches), l.gen
}

// memStore is a node's disk: its logs survive the node's crashes.
type memStore struct {
	mu    sync.Mutex
	fsync bool
	logs  map[engine.TopicPartition]*memLog
	order []*memLog
	hook  func(*memLog) // a new log was created
}

func newMemStore(fsync bool) *memStore {
	return &memStore{fsync: fsync, logs: map[engine.TopicPartition]*memLog{}}
}

func (s *memStore) OpenLog(tp engine.TopicPartition, _ engine.LogConfig) (Log, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.logs[tp]; l != nil {
		return l, nil
	}
	l := newMemLog(tp, s.fsync)
	s.logs[tp] = l
	s.order = append(s.order, l)
	if s.hook != nil {
		s.hook(l)
	}
	return l, nil
}

func (s *memStore) DeleteLog(tp engine.TopicPartition) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.logs[tp]; l != nil {
		delete(s.logs, tp)
		s.order = slices.DeleteFunc(s.order, func(x *memLog) bool { return x == l })
	}
	return nil
}

func (s *memStore) log(tp engine.TopicPartition) *memLog {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs[tp]
}

func (s *memStore) all() []*memLog {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.order)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// makeBatch returns a record batch v2 of one uncompressed record whose value is v
// (base offset 0, leader epoch -1: the leader stamps both).
func makeBatch(v string) []byte {
	var rec []byte
	rec = append(rec, 0)               // attributes
	rec = binary.AppendVarint(rec, 0)  // timestamp delta
	rec = binary.AppendVarint(rec, 0)  // offset delta
	rec = binary.AppendVarint(rec, -1) // key: null
	rec = binary.AppendVarint(rec, int64(len(v)))
	rec = append(rec, v...)
	rec = binary.AppendVarint(rec, 0) // headers
	body := binary.AppendVarint(nil, int64(len(rec)))
	body = append(body, rec...)

	b := make([]byte, 61, 61+len(body))
	binary.BigEndian.PutUint64(b[0:], 0)
	binary.BigEndian.PutUint32(b[8:], uint32(61-12+len(body)))
	binary.BigEndian.PutUint32(b[12:], ^uint32(0)) // leader epoch -1
	b[16] = 2                                      // magic
	binary.BigEndian.PutUint16(b[21:], 0)          // attributes
	binary.BigEndian.PutUint32(b[23:], 0)          // last offset delta
	binary.BigEndian.PutUint64(b[27:], 1)          // base timestamp
	binary.BigEndian.PutUint64(b[35:], 1)          // max timestamp
	binary.BigEndian.PutUint64(b[43:], ^uint64(0)) // producer id -1
	binary.BigEndian.PutUint16(b[51:], ^uint16(0)) // producer epoch -1
	binary.BigEndian.PutUint32(b[53:], ^uint32(0)) // base sequence -1
	binary.BigEndian.PutUint32(b[57:], 1)          // records
	b = append(b, body...)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

// batchValue decodes the value of a makeBatch batch ("" if it is not one).
func batchValue(b []byte) string {
	if len(b) < 62 {
		return ""
	}
	r := b[61:]
	_, n := binary.Varint(r) // record length
	if n <= 0 {
		return ""
	}
	r = r[n:]
	if len(r) < 1 {
		return ""
	}
	r = r[1:]     // attributes
	for range 3 { // timestamp delta, offset delta, key length (-1)
		_, n = binary.Varint(r)
		if n <= 0 {
			return ""
		}
		r = r[n:]
	}
	vl, n := binary.Varint(r)
	if n <= 0 || vl < 0 || int(vl) > len(r)-n {
		return ""
	}
	return string(r[n : n+int(vl)])
}
