package engine

import "slices"

// Buffers is bytes held in several slices, in order, read as their
// concatenation: record batches read from remote storage and answered as
// the chunks they were read in (tiered storage), a batch maybe spanning two
// of them. No slice is empty.
//
// The memory the slices lie in may be lent: tiered storage's chunk buffers
// go back to a pool, for the next chunk read, once no one reads them. A
// Buffers then holds one reference to each lender (Hold), which Release
// gives back; its slices must not be read after. The holder of a Buffers is
// whoever it was handed to last (a Fetch answer's frame, until the answer is
// written): a copy of the value shares the references, so only one copy is
// released. A Buffers never released leaves its memory to the garbage
// collector, which is safe, only not reused.
type Buffers struct {
	Bufs [][]byte
	refs []BufferRef
}

// A BufferRef is a counted reference to memory lent to a Buffers.
type BufferRef interface {
	Retain()  // one more reference
	Release() // one fewer: the memory may be reused once none is left
}

// BuffersOf is bufs, lent by no one.
func BuffersOf(bufs ...[]byte) Buffers { return Buffers{Bufs: bufs} }

// Len is the number of bytes of b.
func (b Buffers) Len() int {
	n := 0
	for _, p := range b.Bufs {
		n += len(p)
	}
	return n
}

// Bytes returns b's bytes as one slice: its only slice, else a copy. The
// slice is b's memory when b has one slice: not to be read once b is
// released.
func (b Buffers) Bytes() []byte {
	switch len(b.Bufs) {
	case 0:
		return nil
	case 1:
		return b.Bufs[0]
	}
	out := make([]byte, 0, b.Len())
	for _, p := range b.Bufs {
		out = append(out, p...)
	}
	return out
}

// CopyAt copies b's bytes from off into dst and returns how many it copied
// (fewer than len(dst) at b's end).
func (b Buffers) CopyAt(dst []byte, off int) int {
	n := 0
	for _, p := range b.Bufs {
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

// Slice returns bytes [from, to) of b: sub-slices of its slices, nothing
// copied. The result holds b's references (all of them): b is given up.
func (b Buffers) Slice(from, to int) Buffers {
	out := Buffers{refs: b.refs}
	for _, p := range b.Bufs {
		if to <= 0 {
			break
		}
		lo, hi := max(from, 0), min(to, len(p))
		if lo < hi {
			out.Bufs = append(out.Bufs, p[lo:hi:hi])
		}
		from -= len(p)
		to -= len(p)
	}
	return out
}

// Append adds p's bytes after b's (none when p is empty); the caller's
// reference to their memory, if any, goes to b with Hold.
func (b *Buffers) Append(p []byte) {
	if len(p) > 0 {
		b.Bufs = append(b.Bufs, p)
	}
}

// Grow makes room for n more slices and references, lent by n lenders.
func (b *Buffers) Grow(n int) {
	b.Bufs = slices.Grow(b.Bufs, n)
	b.refs = slices.Grow(b.refs, n)
}

// Hold gives b a reference the caller took to memory b's slices lie in.
func (b *Buffers) Hold(r BufferRef) { b.refs = append(b.refs, r) }

// Retain returns b with references of its own to b's lenders, for a second
// holder: each of the two is released on its own.
func (b Buffers) Retain() Buffers {
	if len(b.refs) == 0 {
		return b
	}
	out := Buffers{Bufs: b.Bufs, refs: make([]BufferRef, len(b.refs))}
	for i, r := range b.refs {
		r.Retain()
		out.refs[i] = r
	}
	return out
}

// Release gives b's references back and empties b: its slices must not be
// read after. Releasing an empty Buffers does nothing.
func (b *Buffers) Release() {
	for _, r := range b.refs {
		r.Release()
	}
	*b = Buffers{}
}
