package bench

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
)

// readRecord is one record as a reader of the backlog saw it: its partition,
// offset, key and value length, and its value where the reader has it (nil: kcat,
// which prints only the length).
type readRecord struct {
	partition int32
	offset    int64
	key       []byte
	valueLen  int
	value     []byte
}

// readBackCheck checks one read of a backlog, record by record as it streams in,
// against what the broker acknowledged: on every partition the offsets from 0 to
// the end, each once and in order, and at each offset the acknowledged record
// (its key, its value's length, and its value where the reader has it). It keeps
// a cursor per partition, not the records. One goroutine feeds it.
type readBackCheck struct {
	acked map[int32][]ackedBatch // every partition's, in offset order, from 0
	value []byte                 // what every record's value was
	parts map[int32]*readCursor

	records, bytes atomic.Int64 // read, whether right or not (read while it runs)
	problems       int64
	first          string // the first discrepancy
}

// readCursor is where a partition's read is: the offset expected next and the
// acknowledged batch that holds it.
type readCursor struct {
	next  int64
	batch int
	end   int64
}

func newReadBackCheck(acked map[int32][]ackedBatch, value []byte) *readBackCheck {
	c := &readBackCheck{acked: acked, value: value, parts: make(map[int32]*readCursor, len(acked))}
	for p, bs := range acked {
		cur := &readCursor{}
		if len(bs) > 0 {
			last := bs[len(bs)-1]
			cur.end = last.base + last.n
		}
		c.parts[p] = cur
	}
	return c
}

// fail counts a discrepancy and keeps the first.
func (c *readBackCheck) fail(format string, args ...any) {
	c.problems++
	if c.first == "" {
		c.first = fmt.Sprintf(format, args...)
	}
}

// record checks the next record of a partition.
func (c *readBackCheck) record(r readRecord) {
	c.records.Add(1)
	c.bytes.Add(int64(max(r.valueLen, 0)))
	p, off := r.partition, r.offset
	cur, ok := c.parts[p]
	switch {
	case !ok:
		c.fail("partition %d offset %d: a partition nothing was acknowledged on", p, off)
		return
	case off < cur.next:
		c.fail("partition %d: offset %d read again after offset %d (a duplicate, or out of order)", p, off, cur.next-1)
		return
	case off >= cur.end:
		c.fail("partition %d: offset %d read, past the acknowledged end %d (a record not acknowledged)", p, off, cur.end)
		cur.next = off + 1
		return
	case off > cur.next:
		c.fail("partition %d: offsets %d to %d missing (offset %d read next)", p, cur.next, off-1, off)
	}
	cur.next = off + 1
	bs := c.acked[p]
	for cur.batch < len(bs) && off >= bs[cur.batch].base+bs[cur.batch].n {
		cur.batch++ // offsets only move forward here: the cursor does too
	}
	b := bs[cur.batch]
	want := b.seq0 + off - b.base
	if kp, seq, ok := parseReadBackKey(r.key); !ok || kp != p || seq != want {
		c.fail("partition %d offset %d: key %q, the acknowledged record there is %q", p, off, r.key, appendReadBackKey(nil, p, want))
		return
	}
	if r.valueLen != len(c.value) {
		c.fail("partition %d offset %d: a value of %d bytes, %d were sent", p, off, r.valueLen, len(c.value))
		return
	}
	if r.value != nil && !bytes.Equal(r.value, c.value) {
		c.fail("partition %d offset %d: the value differs from what was sent", p, off)
	}
}

// done says every partition has been read to its acknowledged end.
func (c *readBackCheck) done() bool {
	for _, cur := range c.parts {
		if cur.next < cur.end {
			return false
		}
	}
	return true
}

// verdict ends the check: every partition short of its acknowledged end is a
// discrepancy too. It returns whether the read passed and its first discrepancy.
func (c *readBackCheck) verdict() (bool, string) {
	for _, p := range slices.Sorted(maps.Keys(c.parts)) {
		if cur := c.parts[p]; cur.next < cur.end {
			c.fail("partition %d: read to offset %d of the %d acknowledged (%d records missing at the end)", p, cur.next, cur.end, cur.end-cur.next)
		}
	}
	return c.problems == 0, c.first
}

// errKcatLine is a line of kcat's output that is not "partition offset key length".
var errKcatLine = errors.New("not a line of kcat -f '%p %o %k %S\\n'")

// kcatFormat is kcat's -f format for a read-back: partition, offset, key and the
// value's length, one record a line (a read-back key has no space and no newline).
const kcatFormat = `%p %o %k %S\n`

// parseKcatLine reads a line kcatFormat printed (its newline cut); the key is a
// slice of line.
func parseKcatLine(line []byte) (readRecord, error) {
	var f [4][]byte
	rest := line
	for i := range f {
		j := bytes.IndexByte(rest, ' ')
		if i == len(f)-1 {
			j = len(rest)
		}
		if j < 0 {
			return readRecord{}, fmt.Errorf("%w: %q", errKcatLine, line)
		}
		f[i], rest = rest[:j], rest[min(j+1, len(rest)):]
	}
	p, ok1 := parseDigits(f[0])
	off, ok2 := parseDigits(f[1])
	n, ok3 := parseDigits(f[3])
	if bytes.Equal(f[3], []byte("-1")) { // a null value
		n, ok3 = -1, true
	}
	if !ok1 || !ok2 || !ok3 || p > readBackPartMax {
		return readRecord{}, fmt.Errorf("%w: %q", errKcatLine, line)
	}
	return readRecord{partition: int32(p), offset: off, key: f[2], valueLen: int(n)}, nil
}
