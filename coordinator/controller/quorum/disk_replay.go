package quorum

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/samsa-broker/samsa/engine/vfs"
)

// replaySegment reads the segment at base: its header (given to onHeader), then each
// frame in order (given to onFrame). In the last segment a torn tail — what a crash
// left of the one write that had not been synced — is truncated and logged; any
// other bad frame is ErrCorrupt. It returns the header and the valid length. Memory
// is bounded by the largest frame whatever the file holds.
func (d *DiskStorage) replaySegment(base uint64, last bool, onHeader func(segHeader) error,
	onFrame func(*raftpb.HardState, []*raftpb.Entry) error) (segHeader, int64, error) {
	name := d.path(segName(base))
	f, err := d.fs.OpenFile(name, readWriteIf(last), 0)
	if err != nil {
		return segHeader{}, 0, fmt.Errorf("quorum: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return segHeader{}, 0, fmt.Errorf("quorum: %w", err)
	}
	size := fi.Size()
	hb := make([]byte, segHeaderSize)
	if _, err := f.ReadAt(hb, 0); err != nil && err != io.EOF {
		if size >= segHeaderSize {
			return segHeader{}, 0, fmt.Errorf("quorum: %s: %w", name, err)
		}
	}
	h, err := decodeSegHeader(hb[:min(int64(segHeaderSize), size)])
	if err != nil {
		return segHeader{}, 0, fmt.Errorf("%s: %w", name, err)
	}
	if h.base != base {
		return segHeader{}, 0, fmt.Errorf("%w: %s has the header of segment %d", ErrCorrupt, name, h.base)
	}
	if err := onHeader(h); err != nil {
		return segHeader{}, 0, fmt.Errorf("%s: %w", name, err)
	}

	r := bufio.NewReaderSize(io.NewSectionReader(f, segHeaderSize, size-segHeaderSize), 256<<10)
	off := int64(segHeaderSize)
	var fh [frameHeaderSize]byte
	for off < size {
		// bad reports a frame that does not check at off: torn (truncate) or corrupt.
		bad := func(why string, torn bool) (segHeader, int64, error) {
			if !last || !torn {
				return segHeader{}, 0, fmt.Errorf("%w: %s at byte %d: %s", ErrCorrupt, name, off, why)
			}
			d.log.Warn("raft storage: truncating a torn write at the end of the log", "file", name,
				"valid_bytes", off, "dropped_bytes", size-off, "why", why)
			if err := f.Truncate(off); err != nil {
				return segHeader{}, 0, fmt.Errorf("quorum: truncating the torn tail of %s: %w", name, err)
			}
			if !d.noSync {
				if err := f.Datasync(); err != nil {
					return segHeader{}, 0, fmt.Errorf("quorum: %s: %w", name, err)
				}
			}
			return h, off, nil
		}
		remaining := size - off
		if remaining < frameHeaderSize {
			return bad("short frame header", true)
		}
		if _, err := io.ReadFull(r, fh[:]); err != nil {
			return segHeader{}, 0, fmt.Errorf("quorum: %s: %w", name, err)
		}
		n32, lenOK := frameLength(fh[:])
		n := int64(n32)
		switch {
		case !lenOK:
			// A write keeps a prefix of its bytes when torn, so a whole header that
			// does not check is damage, unless it and all after it are zeros (a
			// file extended but never written).
			zero, err := allZero(f, off, size)
			if err != nil {
				return segHeader{}, 0, err
			}
			return bad("frame length checksum", zero)
		case n == 0 || n > maxFrameSize:
			return bad(fmt.Sprintf("frame length %d", n), false)
		case n > remaining-frameHeaderSize:
			return bad(fmt.Sprintf("frame of %d bytes passes the end of the file", n), true)
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return segHeader{}, 0, fmt.Errorf("quorum: %s: %w", name, err)
		}
		end := off + frameHeaderSize + n
		if !frameBodyOK(fh[:], body) {
			// The last frame's body may be torn (sectors of one write reach the disk
			// in any order); a bad frame with anything but zeros after it is damage.
			torn := end == size
			if !torn {
				zero, err := allZero(f, end, size)
				if err != nil {
					return segHeader{}, 0, err
				}
				torn = zero
			}
			return bad("frame checksum", torn)
		}
		hs, ents, err := decodeWriteBody(body)
		if err != nil {
			return segHeader{}, 0, fmt.Errorf("%s at byte %d: %w", name, off, err)
		}
		if err := onFrame(hs, ents); err != nil {
			return segHeader{}, 0, fmt.Errorf("%s at byte %d: %w", name, off, err)
		}
		off = end
	}
	return h, off, nil
}

func readWriteIf(last bool) int {
	if last {
		return os.O_RDWR // the torn tail may be truncated
	}
	return os.O_RDONLY
}

// allZero reports whether f holds only zero bytes in [from, to).
func allZero(f vfs.File, from, to int64) (bool, error) {
	buf := make([]byte, 64<<10)
	for from < to {
		n := min(int64(len(buf)), to-from)
		if _, err := f.ReadAt(buf[:n], from); err != nil && err != io.EOF {
			return false, fmt.Errorf("quorum: %s: %w", f.Name(), err)
		}
		for _, c := range buf[:n] {
			if c != 0 {
				return false, nil
			}
		}
		from += n
	}
	return true, nil
}
