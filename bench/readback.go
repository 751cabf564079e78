package bench

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The read-back of a tiered catch-up (workload readBack: tiered-readback, issue 34's
// goal "every acknowledged record exactly once"): the backlog's records are made
// identifiable, what the broker acknowledged is kept, and after the remote read a
// franz-go consumer and kcat each read the backlog from offset 0 while a
// readBackCheck (readback_check.go) compares every record with what was
// acknowledged at its offset (readback_read.go).
//
// Every record of the fill carries a key of readBackKeyLen ASCII bytes, the
// partition it was sent to and its sequence number there, numbered by the producers
// from 0 (kcat prints it as it is):
//
//	0       6   7                          20
//	+-------+---+--------------------------+
//	| PPPPPP | : | SSSSSSSSSSSSS           |
//	+-------+---+--------------------------+
//	partition, 6 digits; sequence, 13 digits
//
// The raw producers keep sending one frame per connection: before each write the
// keys of each partition's batch are stamped with the next sequence numbers of that
// partition and the batch's CRC is computed again (readBackStamp); the answer's
// base offset of each partition then goes into the ackLedger with the batch's first
// sequence number. The record at offset o of partition p must be the one whose
// acknowledged batch covers o: sequence seq0 + (o - base).
const (
	readBackKeyLen  = 20
	readBackPartMax = 999_999 // the partitions a key can name
)

// appendReadBackKey appends the key of record seq of partition p.
func appendReadBackKey(dst []byte, p int32, seq int64) []byte {
	return fmt.Appendf(dst, "%06d:%013d", p, seq)
}

// parseReadBackKey reads a key appendReadBackKey wrote.
func parseReadBackKey(k []byte) (p int32, seq int64, ok bool) {
	if len(k) != readBackKeyLen || k[6] != ':' {
		return 0, 0, false
	}
	pp, ok1 := parseDigits(k[:6])
	s, ok2 := parseDigits(k[7:])
	return int32(pp), s, ok1 && ok2
}

// parseDigits reads a decimal number of ASCII digits only (no sign), at most 18.
func parseDigits(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

// putDigits writes v into b as len(b) decimal digits (the high ones dropped).
func putDigits(b []byte, v int64) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
}

// appendReadBackBatch appends a v2 record batch of n records of value keyed for
// partition p from sequence 0, as AppendRecordBatch lays them out, and returns the
// offset of each record's key in the batch.
func appendReadBackBatch(dst []byte, p int32, n int, value []byte, tsMillis int64) ([]byte, []int) {
	start := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, 0) // length, patched
	dst = binary.BigEndian.AppendUint32(dst, 0xFFFFFFFF)
	dst = append(dst, 2)
	dst = binary.BigEndian.AppendUint32(dst, 0) // crc, patched
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(n-1))
	dst = binary.BigEndian.AppendUint64(dst, uint64(tsMillis))
	dst = binary.BigEndian.AppendUint64(dst, uint64(tsMillis))
	dst = binary.BigEndian.AppendUint64(dst, 0xFFFFFFFFFFFFFFFF)
	dst = binary.BigEndian.AppendUint16(dst, 0xFFFF)
	dst = binary.BigEndian.AppendUint32(dst, 0xFFFFFFFF)
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	keys := make([]int, n)
	for i := 0; i < n; i++ {
		bodyLen := 1 + 1 + varintLen(int64(i)) + varintLen(readBackKeyLen) + readBackKeyLen + varintLen(int64(len(value))) + len(value) + 1
		dst = binary.AppendVarint(dst, int64(bodyLen))
		dst = append(dst, 0)
		dst = binary.AppendVarint(dst, 0)
		dst = binary.AppendVarint(dst, int64(i))
		dst = binary.AppendVarint(dst, readBackKeyLen)
		keys[i] = len(dst) - start
		dst = appendReadBackKey(dst, p, 0)
		dst = binary.AppendVarint(dst, int64(len(value)))
		dst = append(dst, value...)
		dst = binary.AppendVarint(dst, 0)
	}
	binary.BigEndian.PutUint32(dst[start+8:], uint32(len(dst)-start-12))
	stampBatch(dst[start:], keys, 0)
	return dst, keys
}

// stampBatch numbers the records of the batch at the start of batch (their keys at
// keys) from seq0 and computes its CRC again.
func stampBatch(batch []byte, keys []int, seq0 int64) {
	batch = batch[:12+binary.BigEndian.Uint32(batch[8:])]
	for i, at := range keys {
		putDigits(batch[at+7:at+readBackKeyLen], seq0+int64(i))
	}
	binary.BigEndian.PutUint32(batch[17:], crc32.Checksum(batch[21:], crc32c))
}

// ackedBatch is one acknowledged batch of a partition: its base offset, the
// sequence number of its first record and its records.
type ackedBatch struct {
	base, seq0 int64
	n          int64
}

// ackLedger numbers the records of a read-back fill per partition and keeps what
// the broker acknowledged. Safe for concurrent use.
type ackLedger struct {
	mu struct {
		sync.Mutex
		next  map[int32]int64        // the next sequence number of each partition
		acked map[int32][]ackedBatch // in the order the answers came
	}
}

func newAckLedger() *ackLedger {
	l := &ackLedger{}
	l.mu.next, l.mu.acked = map[int32]int64{}, map[int32][]ackedBatch{}
	return l
}

// claim takes n sequence numbers for each of parts and returns the first of each.
func (l *ackLedger) claim(parts []int32, n int64, out []int64) []int64 {
	out = out[:0]
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range parts {
		out = append(out, l.mu.next[p])
		l.mu.next[p] += n
	}
	return out
}

func (l *ackLedger) ack(p int32, b ackedBatch) {
	l.mu.Lock()
	l.mu.acked[p] = append(l.mu.acked[p], b)
	l.mu.Unlock()
}

// acked is every partition's acknowledged batches in offset order, and the
// records acknowledged. It is an error if a partition's batches do not cover its
// offsets from 0 to end[p] once each: the broker acknowledged two batches at one
// offset, or wrote records that were not acknowledged.
func (l *ackLedger) acked(end map[int32]int64) (map[int32][]ackedBatch, int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[int32][]ackedBatch, len(l.mu.acked))
	var n int64
	for p, bs := range l.mu.acked {
		bs = slices.Clone(bs)
		slices.SortFunc(bs, func(a, b ackedBatch) int { return cmp.Compare(a.base, b.base) })
		var next int64
		for _, b := range bs {
			if b.base != next {
				return nil, 0, fmt.Errorf("partition %d: a batch acknowledged at offset %d where %d was next", p, b.base, next)
			}
			next += b.n
		}
		if next != end[p] {
			return nil, 0, fmt.Errorf("partition %d: %d records acknowledged, its end offset is %d", p, next, end[p])
		}
		out[p] = bs
		n += next
	}
	for p, e := range end {
		if _, ok := out[p]; !ok && e != 0 {
			return nil, 0, fmt.Errorf("partition %d: nothing acknowledged, its end offset is %d", p, e)
		}
	}
	return out, n, nil
}

// readBackStamp stamps one producer connection's frame: parts are the partitions of
// its request in order, at the offset of each one's batch in the frame.
type readBackStamp struct {
	l     *ackLedger
	parts []int32
	at    []int
	keys  []int // of each record in a batch (every batch has the same layout)
	n     int64 // records a batch
}

// newReadBackStamp finds the batch of each partition of req in frame.
func newReadBackStamp(l *ackLedger, frame []byte, req *kmsg.ProduceRequest, keys []int) (*readBackStamp, error) {
	s := &readBackStamp{l: l, keys: keys, n: int64(len(keys))}
	for _, rp := range req.Topics[0].Partitions {
		i := bytes.Index(frame, rp.Records)
		if i < 0 {
			return nil, fmt.Errorf("raw read-back: the batch of partition %d is not in its frame", rp.Partition)
		}
		s.parts, s.at = append(s.parts, rp.Partition), append(s.at, i)
	}
	return s, nil
}

// stamp numbers the next records of every batch of frame and returns the first
// sequence number of each (in out's space).
func (s *readBackStamp) stamp(frame []byte, out []int64) []int64 {
	out = s.l.claim(s.parts, s.n, out)
	for i, at := range s.at {
		stampBatch(frame[at:], s.keys, out[i])
	}
	return out
}

// acked records the answer resp to a request stamped with seqs.
func (s *readBackStamp) acked(resp *kmsg.ProduceResponse, seqs []int64) {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if i := slices.Index(s.parts, p.Partition); i >= 0 && p.ErrorCode == 0 {
				s.l.ack(p.Partition, ackedBatch{base: p.BaseOffset, seq0: seqs[i], n: s.n})
			}
		}
	}
}
