package peer

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/samsa-broker/samsa/coordinator/controller"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// MetadataTopic is the name of the metadata log's topic; its id is
// metadata.MetadataTopicID and its one partition is 0.
const MetadataTopic = "__cluster_metadata"

// ErrMalformedEntries: metadata entries in a Fetch response that do not parse (see the
// package doc for the framing).
var ErrMalformedEntries = errors.New("peer: malformed metadata entries")

// metaEntryHeader is the size of an entry's framing: offset u64, length u32.
const metaEntryHeader = 12

// AppendMetadataEntry appends one framed entry to dst:
//
//	offset u64 | length u32 | frame (length bytes)
func AppendMetadataEntry(dst []byte, offset uint64, frame []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, offset)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(frame)))
	return append(dst, frame...)
}

// MetadataEntrySize is the bytes AppendMetadataEntry adds for a frame of n bytes.
func MetadataEntrySize(n int) int { return metaEntryHeader + n }

// DecodeMetadataEntries parses framed entries from b, appending them to dst; the
// entries' Data alias b (nil for an entry without records). from is the fetch offset: entries must start at it and be
// consecutive (the metadata log is dense). A frame longer than metadata.MaxEntrySize,
// a truncated entry or a gap is ErrMalformedEntries. The entry frames themselves are
// not decoded (metadata.DecodeEntry checks them when they are applied).
func DecodeMetadataEntries(dst []controller.MetadataEntry, b []byte, from uint64) ([]controller.MetadataEntry, error) {
	next := from
	for len(b) > 0 {
		if len(b) < metaEntryHeader {
			return dst, fmt.Errorf("%w: %d bytes left, want a %d-byte entry header", ErrMalformedEntries, len(b), metaEntryHeader)
		}
		off := binary.BigEndian.Uint64(b)
		n := binary.BigEndian.Uint32(b[8:])
		if off != next {
			return dst, fmt.Errorf("%w: entry at offset %d, want %d", ErrMalformedEntries, off, next)
		}
		if n > metadata.MaxEntrySize || uint64(n) > uint64(len(b)-metaEntryHeader) {
			return dst, fmt.Errorf("%w: entry %d of %d bytes, %d left", ErrMalformedEntries, off, n, len(b)-metaEntryHeader)
		}
		e := controller.MetadataEntry{Offset: off}
		if n > 0 {
			e.Data = b[metaEntryHeader : metaEntryHeader+int(n) : metaEntryHeader+int(n)]
		}
		dst = append(dst, e)
		b = b[metaEntryHeader+int(n):]
		next++
	}
	return dst, nil
}
