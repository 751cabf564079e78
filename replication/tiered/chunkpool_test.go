package tiered

import (
	"bytes"
	"testing"
)

// The pool hands a chunk's buffer out again once its last reference is
// released, as it was (not zeroed: the next chunk is read over it); a
// chunk short of the pool's size by at most a quarter gets a pooled buffer
// (whole again once back), a shorter one a buffer of its own; a reference released twice, or
// taken after the last release, is a broken invariant and panics.
func TestChunkPool(t *testing.T) {
	p := newChunkPool(16)
	a := p.get(16)
	copy(a.b, "0123456789abcdef")
	a.Retain() // a second holder
	a.Release()
	if c := p.get(16); &c.b[0] == &a.b[0] || p.reused.Load() != 0 {
		t.Fatal("a buffer still held was handed out again")
	}
	a.Release()
	b := p.get(16)
	if &b.b[0] != &a.b[0] || p.reused.Load() != 1 || !bytes.Equal(b.b, []byte("0123456789abcdef")) {
		t.Fatalf("released: reused %d, bytes %q: want the same buffer, as it was", p.reused.Load(), b.b)
	}
	short := p.get(5)
	short.Release()
	if len(p.mu.free) != 0 {
		t.Fatalf("a buffer of 5 bytes pooled (%d free)", len(p.mu.free))
	}
	last := p.get(13) // a segment's last chunk, nearly whole
	if &last.b[0] == &a.b[0] || cap(last.b) != 16 || len(last.b) != 13 {
		t.Fatalf("a chunk of 13 bytes: %d bytes of %d, want a new pooled buffer cut to 13", len(last.b), cap(last.b))
	}
	b.Release()
	last.Release()
	if again := p.get(16); len(p.mu.free) != 1 || len(again.b) != 16 || &again.b[0] != &last.b[0] {
		t.Fatalf("the 13-byte chunk's buffer released: %d free, handed out again as %d bytes", len(p.mu.free), len(again.b))
	}
	for _, c := range []struct {
		name string
		f    func()
	}{{"released twice", a.Release}, {"retained after its last release", p.get(16).retainReleased}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", c.name)
				}
			}()
			c.f()
		}()
	}
}

// retainReleased releases c's last reference and takes one again.
func (c *chunkBuf) retainReleased() {
	c.Release()
	c.Retain()
}
