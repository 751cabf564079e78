package engine

// Buffers is bytes held in several slices, in order, read as their
// concatenation: record batches read from remote storage and answered as
// the chunks they were read in (tiered storage), a batch maybe spanning two
// of them. No slice is empty.
type Buffers [][]byte

// Len is the number of bytes of b.
func (b Buffers) Len() int {
	n := 0
	for _, p := range b {
		n += len(p)
	}
	return n
}

// Bytes returns b's bytes as one slice: its only slice, else a copy.
func (b Buffers) Bytes() []byte {
	switch len(b) {
	case 0:
		return nil
	case 1:
		return b[0]
	}
	out := make([]byte, 0, b.Len())
	for _, p := range b {
		out = append(out, p...)
	}
	return out
}

// CopyAt copies b's bytes from off into dst and returns how many it copied
// (fewer than len(dst) at b's end).
func (b Buffers) CopyAt(dst []byte, off int) int {
	n := 0
	for _, p := range b {
		if off >= len(p) {
			off -= len(p)
			continue
		}
		c := copy(dst[n:], p[off:])
		n += c
		off = 0
		if n == len(dst) {
			break
		}
	}
	return n
}

// Slice returns bytes [from, to) of b: sub-slices of its slices, nothing copied.
func (b Buffers) Slice(from, to int) Buffers {
	var out Buffers
	for _, p := range b {
		if to <= 0 {
			break
		}
		lo, hi := max(from, 0), min(to, len(p))
		if lo < hi {
			out = append(out, p[lo:hi:hi])
		}
		from -= len(p)
		to -= len(p)
	}
	return out
}
