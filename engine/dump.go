package engine

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"strings"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// DumpOptions controls DumpSegment.
type DumpOptions struct {
	// Records prints every record of uncompressed batches (offset,
	// timestamp, key and value sizes).
	Records bool
	// IndexSanityOnly checks an index file and prints only a summary and the
	// problems found.
	IndexSanityOnly bool
}

// ErrDumpMismatch is returned by DumpSegment when the file has problems
// (bad CRCs, invalid bytes, index entries that disagree with the log). It
// wraps ErrCorrupt.
var ErrDumpMismatch error = corruptError("engine: segment check found problems")

var codecNames = [...]string{"none", "gzip", "snappy", "lz4", "zstd", "unknown(5)", "unknown(6)", "unknown(7)"}

// DumpSegment prints a segment file in the manner of Kafka's kafka-dump-log:
// the batches of a .log (verifying each CRC), the entries of a .index or
// .timeindex (verifying them against the .log beside it), the producers
// of a .snapshot, or the aborted transactions of a .txnindex. It returns an error wrapping ErrDumpMismatch when it found
// problems, after printing everything.
func DumpSegment(w io.Writer, path string, opts DumpOptions) error {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	fmt.Fprintf(bw, "Dumping %s\n", path)
	name := strings.TrimSuffix(filepath.Base(path), deletedSuffix)
	var problems int
	var err error
	switch {
	case strings.HasSuffix(name, logSuffix):
		problems, err = dumpLog(bw, path, opts)
	case strings.HasSuffix(name, timeIndexSuffix):
		problems, err = dumpIndex(bw, path, timeIndexSuffix, opts)
	case strings.HasSuffix(name, indexSuffix):
		problems, err = dumpIndex(bw, path, indexSuffix, opts)
	case strings.HasSuffix(name, snapshotSuffix):
		problems, err = dumpSnapshot(bw, path)
	case strings.HasSuffix(name, txnIndexSuffix):
		problems, err = dumpTxnIndex(bw, path)
	default:
		return fmt.Errorf("%w: %s is not a .log, .index, .timeindex, .txnindex or .snapshot file", ErrInvalidConfig, path)
	}
	if err != nil {
		return err
	}
	if problems > 0 {
		fmt.Fprintf(bw, "Found %d problem(s) in %s\n", problems, path)
		return fmt.Errorf("%w: %d in %s", ErrDumpMismatch, problems, path)
	}
	return nil
}

func baseOf(path, suffix string) (int64, bool) {
	return parseBase(strings.TrimSuffix(filepath.Base(path), deletedSuffix), suffix)
}

// forEachBatch walks the batches of a log file, verifying CRCs when full is
// set. It returns the end of the last whole, parseable batch.
func forEachBatch(f vfs.File, size int64, full bool, fn func(pos int64, h *BatchHeader, batch []byte, crcOK bool)) (int64, error) {
	win := &window{f: f, buf: make([]byte, recoverBufSize), limit: size}
	var pos int64
	for pos < size {
		hb, err := win.at(pos, BatchHeaderSize)
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				break
			}
			return pos, err
		}
		h, err := ParseBatchHeader(hb)
		if err != nil || pos+h.Size() > size {
			break
		}
		var batch []byte
		ok := true
		if full {
			if h.Size() <= int64(len(win.buf)) {
				batch, err = win.at(pos, int(h.Size()))
				if err != nil {
					return pos, err
				}
				ok = crc32.Checksum(batch[offAttributes:], castagnoli) == h.CRC
			} else {
				ok, err = batchIntact(win, pos, &h)
				if err != nil {
					return pos, err
				}
			}
		}
		fn(pos, &h, batch, ok)
		pos += h.Size()
	}
	return pos, nil
}

func dumpLog(w io.Writer, path string, opts DumpOptions) (int, error) {
	f, err := vfs.Open(vfs.Default, path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if base, ok := baseOf(path, logSuffix); ok {
		fmt.Fprintf(w, "Starting offset: %d\n", base)
	}
	problems := 0
	next := int64(-1)
	end, err := forEachBatch(f, fi.Size(), true, func(pos int64, h *BatchHeader, batch []byte, ok bool) {
		tsType := "CreateTime"
		if h.LogAppendTimeType() {
			tsType = "LogAppendTime"
		}
		lastSeq := int32(-1)
		if h.BaseSequence >= 0 {
			lastSeq = h.LastSequence()
		}
		fmt.Fprintf(w, "baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d producerId: %d producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %t isControl: %t position: %d %s: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %t\n",
			h.BaseOffset, h.LastOffset(), h.NumRecords, h.BaseSequence, lastSeq, h.ProducerID, h.ProducerEpoch,
			h.PartitionLeaderEpoch, h.Transactional(), h.Control(), pos, tsType, h.MaxTimestamp, h.Size(), h.Magic,
			codecNames[h.Compression()], h.CRC, ok)
		if !ok {
			problems++
		}
		if h.BaseOffset < next {
			fmt.Fprintf(w, "Out of order offset: batch at %d starts at %d, after %d\n", pos, h.BaseOffset, next-1)
			problems++
		}
		next = h.LastOffset() + 1
		if ok && batch != nil {
			if err := checkStoredBatchContent(h, batch[BatchHeaderSize:]); err != nil {
				fmt.Fprintf(w, "Invalid batch content at %d: %v\n", pos, err)
				problems++
			} else if opts.Records && h.Compression() == 0 {
				dumpRecords(w, batch)
			}
		}
	})
	if err != nil {
		return problems, err
	}
	if end < fi.Size() {
		zeros, err := zeroTail(&window{f: f, buf: make([]byte, 64<<10), limit: fi.Size()}, end, fi.Size())
		if err != nil {
			return problems, err
		}
		if zeros {
			// An active segment allocated ahead of its appends (prealloc.go).
			fmt.Fprintf(w, "%d bytes of zeros (allocated ahead of the appends) at the end of %s (position %d)\n", fi.Size()-end, filepath.Base(path), end)
		} else {
			fmt.Fprintf(w, "Found %d invalid bytes at the end of %s (position %d)\n", fi.Size()-end, filepath.Base(path), end)
			problems++
		}
	}
	return problems, nil
}

// dumpRecords prints the records of an uncompressed, CRC-checked batch.
func dumpRecords(w io.Writer, b []byte) {
	h := parseHeaderUnchecked(b)
	recs := b[BatchHeaderSize:]
	for p, i := 0, int32(0); i < h.NumRecords; i++ {
		n, k := binary.Varint(recs[p:])
		r := recs[p+k : p+k+int(n)]
		p += k + int(n)
		q := 1
		tsd, k1 := binary.Varint(r[q:])
		q += k1
		od, k2 := binary.Varint(r[q:])
		q += k2
		kl, k3 := binary.Varint(r[q:])
		if k1 <= 0 || k2 <= 0 || k3 <= 0 {
			fmt.Fprintf(w, "| record %d: undecodable\n", i)
			return
		}
		q += k3
		if kl > 0 {
			q += int(kl)
		}
		vl := int64(-1)
		if q < len(r) {
			vl, _ = binary.Varint(r[q:])
		}
		fmt.Fprintf(w, "| offset: %d CreateTime: %d keySize: %d valueSize: %d\n", h.BaseOffset+od, h.BaseTimestamp+tsd, kl, vl)
	}
}

// dumpIndex prints and checks an offset or time index against its log.
func dumpIndex(w io.Writer, path, suffix string, opts DumpOptions) (int, error) {
	data, err := vfs.ReadFile(vfs.Default, path)
	if err != nil {
		return 0, err
	}
	base, ok := baseOf(path, suffix)
	if !ok {
		return 0, fmt.Errorf("%w: %s: no base offset in the name", ErrInvalidConfig, path)
	}
	// The batches of the log beside it, by position and by last offset.
	byPos := map[int64]BatchHeader{}
	byLast := map[int64]BatchHeader{}
	logPath := strings.TrimSuffix(strings.TrimSuffix(path, deletedSuffix), suffix) + logSuffix
	var logSize int64 = -1
	if lf, err := vfs.Open(vfs.Default, logPath); err == nil {
		fi, _ := lf.Stat()
		logSize = fi.Size()
		forEachBatch(lf, logSize, false, func(pos int64, h *BatchHeader, _ []byte, _ bool) {
			byPos[pos] = *h
			byLast[h.LastOffset()] = *h
		})
		lf.Close()
	} else {
		fmt.Fprintf(w, "No log file %s: entries are not checked\n", filepath.Base(logPath))
	}
	esz := offsetEntrySize
	if suffix == timeIndexSuffix {
		esz = timeEntrySize
	}
	problems := 0
	if len(data)%esz != 0 {
		fmt.Fprintf(w, "Index size %d is not a multiple of the entry size %d\n", len(data), esz)
		problems++
	}
	n := len(data) / esz
	zeros := 0
	prevKey, prevOff := int64(-1<<63), int64(-1)
	for i := 0; i < n; i++ {
		e := data[i*esz : (i+1)*esz]
		var off, key int64
		var pos int64 = -1
		if suffix == indexSuffix {
			off = base + int64(binary.BigEndian.Uint32(e))
			pos = int64(binary.BigEndian.Uint32(e[4:]))
			key = pos
		} else {
			key = int64(binary.BigEndian.Uint64(e))
			off = base + int64(binary.BigEndian.Uint32(e[8:]))
		}
		if i > 0 && allZero(e) {
			zeros++ // preallocated, never written
			continue
		}
		if !opts.IndexSanityOnly {
			if suffix == indexSuffix {
				fmt.Fprintf(w, "offset: %d position: %d\n", off, pos)
			} else {
				fmt.Fprintf(w, "timestamp: %d offset: %d\n", key, off)
			}
		}
		if zeros > 0 {
			fmt.Fprintf(w, "Entry %d follows %d empty entries\n", i, zeros)
			problems++
			zeros = 0
		}
		if off <= prevOff || key <= prevKey {
			fmt.Fprintf(w, "Entry %d (offset %d, %d) does not increase\n", i, off, key)
			problems++
		}
		prevKey, prevOff = key, off
		if logSize < 0 {
			continue
		}
		if suffix == indexSuffix {
			if h, ok := byPos[pos]; !ok {
				fmt.Fprintf(w, "Index entry %d: position %d is not the start of a batch\n", i, pos)
				problems++
			} else if h.LastOffset() != off {
				fmt.Fprintf(w, "Index entry %d: offset %d, but the batch at %d ends at %d\n", i, off, pos, h.LastOffset())
				problems++
			}
		} else if h, ok := byLast[off]; !ok {
			fmt.Fprintf(w, "Time index entry %d: no batch ends at offset %d\n", i, off)
			problems++
		} else if h.MaxTimestamp != key {
			fmt.Fprintf(w, "Time index entry %d: timestamp %d, but the batch ending at %d has max timestamp %d\n", i, key, off, h.MaxTimestamp)
			problems++
		}
	}
	fmt.Fprintf(w, "%d entries", n-zeros)
	if zeros > 0 {
		fmt.Fprintf(w, ", %d preallocated (empty)", zeros)
	}
	fmt.Fprintln(w)
	return problems, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func dumpSnapshot(w io.Writer, path string) (int, error) {
	data, err := vfs.ReadFile(vfs.Default, path)
	if err != nil {
		return 0, err
	}
	ps, err := decodeSnapshot(data)
	if err != nil {
		fmt.Fprintf(w, "Unreadable snapshot: %v\n", err)
		return 1, nil
	}
	for p := 10; p+snapshotEntrySize <= len(data); p += snapshotEntrySize {
		pid := int64(binary.BigEndian.Uint64(data[p:]))
		e := ps.m[pid]
		lb := batchMeta{firstSeq: -1, lastSeq: -1, firstOffset: -1, lastOffs: -1, timestamp: e.lastTs}
		if b := e.last(); b != nil {
			lb = *b
		}
		fmt.Fprintf(w, "producerId: %d producerEpoch: %d coordinatorEpoch: %d currentTxnFirstOffset: %d firstSequence: %d lastSequence: %d firstOffset: %d lastOffset: %d lastTimestamp: %d\n",
			pid, e.epoch, e.coordEpoch, e.txnFirst, lb.firstSeq, lb.lastSeq, lb.firstOffset, lb.lastOffs, lb.timestamp)
	}
	return 0, nil
}

// dumpTxnIndex prints the entries of a .txnindex (Kafka's dump prints
// "version: 0 producerId: ..." per aborted transaction).
func dumpTxnIndex(w io.Writer, path string) (int, error) {
	data, err := vfs.ReadFile(vfs.Default, path)
	if err != nil {
		return 0, err
	}
	base, _ := baseOf(path, txnIndexSuffix)
	entries, derr := decodeTxnIndex(data, base, -1)
	for _, a := range entries {
		fmt.Fprintf(w, "version: 0 producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d\n",
			a.ProducerID, a.FirstOffset, a.LastOffset, a.LastStableOffset)
	}
	problems := 0
	if derr != nil {
		fmt.Fprintf(w, "Unreadable entry: %v\n", derr)
		problems++
	}
	if r := len(data) % txnEntrySize; r != 0 {
		fmt.Fprintf(w, "Ragged tail of %d bytes\n", r)
		problems++
	}
	return problems, nil
}
