package broker

import (
	"encoding/binary"
	"errors"
	"strings"
	"time"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/coordinator/share"
	"github.com/samsa-broker/samsa/engine"
)

// shareReader is kafka.ShareReader over the share partitions this node leads
// (share.Manager): the reading and acquisition of their records for ShareFetch, as
// Kafka's SharePartitionManager reads for its SharePartitions.
type shareReader struct{ s *shareState }

// Acquire implements kafka.ShareReader.
func (r shareReader) Acquire(k share.Key, epoch int32, l *engine.Log, member string, maxRecords int, maxBytes int32, first bool) ([]byte, []share.Range, error) {
	mgr := r.s.mgr
	readCommitted, initial := r.groupReads(k.Group, l)
	if _, err := mgr.NextFetchOffset(k, epoch, initial); err != nil {
		return nil, nil, nil // loading: a later answer
	}
	mgr.MoveStart(k, epoch, l.LogStartOffset())
	from, err := mgr.NextFetchOffset(k, epoch, initial)
	hw := readEnd(l, readCommitted)
	if err != nil || from < 0 || from >= hw {
		return nil, nil, nil
	}
	buf, err := l.ReadCopy(from, maxBytes, hw, first, nil)
	if err != nil {
		if errors.Is(err, engine.ErrOffsetOutOfRange) {
			return nil, nil, nil // the log start moved past it meanwhile: the next fetch
		}
		return nil, nil, err
	}
	to := engine.BatchesEnd(buf)
	if to <= from {
		return nil, nil, nil
	}
	got, err := mgr.Acquire(k, epoch, member, from, to, maxRecords)
	if err != nil || len(got) == 0 {
		return nil, nil, nil
	}
	if readCommitted {
		got = r.dropAborted(k, epoch, l, member, buf, got)
		if len(got) == 0 {
			return nil, nil, nil
		}
	}
	return trimBatches(buf, got[len(got)-1].Last), got, nil
}

// Acquirable implements kafka.ShareReader: the next acquirable offset is below the
// read end (a parked share fetch may complete).
func (r shareReader) Acquirable(k share.Key, epoch int32, l *engine.Log) bool {
	readCommitted, initial := r.groupReads(k.Group, l)
	from, err := r.s.mgr.NextFetchOffset(k, epoch, initial)
	return err == nil && from >= 0 && from < readEnd(l, readCommitted)
}

// groupReads is how group reads l, by its own configs (GROUP resources) as the image
// holds them at each fetch: whether up to the last stable offset
// (share.isolation.level=read_committed), and where a share partition without state
// starts (initialStart).
func (r shareReader) groupReads(group string, l *engine.Log) (readCommitted bool, initial func() (int64, error)) {
	im := r.s.b.meta.Image()
	own := im.Configs(metadata.ResourceGroup, group)
	readCommitted = own != nil && strings.EqualFold(own["share.isolation.level"], "read_committed")
	return readCommitted, func() (int64, error) { return r.InitialStart(group, l) }
}

// InitialStart is where a share partition of group without state starts, by the
// group's share.auto.offset.reset as it is when the state is first written (else the
// broker key of that name, else latest): the log's end (the high watermark) under
// latest, its start under earliest, and under by_duration:<d> the first record whose
// timestamp is at most d old (the high watermark when there is none).
func (r shareReader) InitialStart(group string, l *engine.Log) (int64, error) {
	b := r.s.b
	v := b.groupLayers(b.meta.Image(), group).GroupValue("share.auto.offset.reset")
	strategy, back, err := configs.ParseShareAutoOffsetReset(v)
	if err != nil {
		b.log.Warn("unusable share.auto.offset.reset: starting at latest", "group", group, "value", v, "err", err)
		strategy = configs.ResetLatest
	}
	hw := l.HighWatermark()
	switch strategy {
	case configs.ResetEarliest:
		return l.LogStartOffset(), nil
	case configs.ResetByDuration:
		off, _, ok, err := l.OffsetForTimestamp(time.Now().Add(-back).UnixMilli())
		if err != nil {
			return 0, err
		}
		if ok && off < hw {
			return max(off, l.LogStartOffset()), nil
		}
	}
	return hw, nil
}

// readEnd is where a share fetch reads up to: the high watermark, or under
// share.isolation.level=read_committed the last stable offset.
func readEnd(l *engine.Log, readCommitted bool) int64 {
	if readCommitted {
		return l.LastStableOffset()
	}
	return l.HighWatermark()
}

// dropAborted archives, for a read_committed group, the records of got that belong to
// aborted transactions (the data batches of buf whose producer aborted the
// transaction holding them) instead of delivering them, as Kafka's SharePartition
// does, and returns the rest of got.
func (r shareReader) dropAborted(k share.Key, epoch int32, l *engine.Log, member string, buf []byte, got []share.Range) []share.Range {
	last := got[len(got)-1].Last
	aborted := l.AbortedTransactions(got[0].First, last+1, nil)
	if len(aborted) == 0 {
		return got
	}
	var drop []share.Range
	for off := 0; off+61 <= len(buf); {
		n := int(int32(binary.BigEndian.Uint32(buf[off+8:]))) + 12
		if n < 61 || off+n > len(buf) {
			break
		}
		base := int64(binary.BigEndian.Uint64(buf[off:]))
		attrs := binary.BigEndian.Uint16(buf[off+21:])
		batchLast := base + int64(int32(binary.BigEndian.Uint32(buf[off+23:])))
		pid := int64(binary.BigEndian.Uint64(buf[off+43:]))
		off += n
		if attrs&0x10 == 0 || attrs&0x20 != 0 || base > last {
			continue // not transactional data
		}
		for _, a := range aborted {
			if a.ProducerID == pid && base >= a.FirstOffset && base < a.LastOffset {
				if first, l := max(base, got[0].First), min(batchLast, last); first <= l {
					drop = append(drop, share.Range{First: first, Last: l})
				}
				break
			}
		}
	}
	if len(drop) == 0 {
		return got
	}
	r.s.mgr.ArchiveAcquired(k, epoch, member, drop)
	var out []share.Range
	for _, g := range got {
		out = append(out, subtractRanges(g, drop)...)
	}
	return out
}

// subtractRanges is g without the offsets of drop (sorted by First, not overlapping).
func subtractRanges(g share.Range, drop []share.Range) []share.Range {
	var out []share.Range
	cur := g.First
	for _, d := range drop {
		if d.Last < cur || d.First > g.Last {
			continue
		}
		if d.First > cur {
			out = append(out, share.Range{First: cur, Last: d.First - 1, DeliveryCount: g.DeliveryCount})
		}
		cur = d.Last + 1
	}
	if cur <= g.Last {
		out = append(out, share.Range{First: cur, Last: g.Last, DeliveryCount: g.DeliveryCount})
	}
	return out
}

// trimBatches drops the whole batches of b that start after last.
func trimBatches(b []byte, last int64) []byte {
	off := 0
	for off+61 <= len(b) {
		if int64(binary.BigEndian.Uint64(b[off:])) > last {
			break
		}
		n := int(int32(binary.BigEndian.Uint32(b[off+8:]))) + 12
		if n < 61 || off+n > len(b) {
			break
		}
		off += n
	}
	return b[:off]
}
