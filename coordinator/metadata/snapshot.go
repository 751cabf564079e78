package metadata

import "fmt"

// EncodeSnapshot appends the portable form of im to dst: the records of Image.Records
// as entry frames of at most 1,000 records each. It is what a raft snapshot of the
// metadata log holds; DecodeSnapshot rebuilds the image from it. It fails only if a
// record exceeds the frame limits (no image built by Apply has one).
//
//	+----------------------+----------------------+-----+
//	| entry frame          | entry frame          | ... |
//	| (records 0..999)     | (records 1000..1999) |     |
//	+----------------------+----------------------+-----+
func EncodeSnapshot(dst []byte, im *Image) ([]byte, error) {
	recs := im.Records()
	for len(recs) > 0 {
		n := min(len(recs), snapshotChunk)
		var err error
		if dst, err = encodeEntryChecked(dst, recs[:n]); err != nil {
			return nil, err
		}
		recs = recs[n:]
	}
	return dst, nil
}

// DecodeSnapshot rebuilds an image from EncodeSnapshot's bytes (empty bytes: the empty
// image). Errors wrap ErrCorrupt: frames that do not parse, or records that do not apply
// to the empty image in order.
func DecodeSnapshot(b []byte) (*Image, error) {
	bld := newBuilder(&Image{})
	for len(b) > 0 {
		recs, n, err := DecodeEntry(b)
		if err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
		for _, r := range recs {
			if err := bld.apply(r); err != nil {
				return nil, fmt.Errorf("%w: snapshot does not apply: %v", ErrCorrupt, err)
			}
		}
		b = b[n:]
	}
	return bld.im, nil
}
