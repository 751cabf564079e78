package transport

import (
	"fmt"
	"io"
	"math"
	"sync"
	"time"
)

// tlsWriteBuf is the size of the buffer a TLS connection's writer gathers answers in:
// four full TLS records (16 KiB of plaintext each).
const tlsWriteBuf = 64 << 10

var tlsBufPool = sync.Pool{New: func() any { b := make([]byte, 0, tlsWriteBuf); return &b }}

// tlsWriter gathers bytes and file ranges into a pooled buffer and writes it to the TLS
// connection whenever it fills: one Write per 64 KiB, so the pieces of a response do
// not each become a TLS record (writev and sendfile do not exist for TLS).
type tlsWriter struct {
	c   *stdConn
	buf []byte
}

func (w *tlsWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	_, err := w.c.tls.Write(w.buf)
	w.buf = w.buf[:0]
	return err
}

func (w *tlsWriter) write(b []byte) error {
	for len(b) > 0 {
		if len(w.buf) == 0 && len(b) >= tlsWriteBuf {
			// Large pieces go straight through; tls.Conn cuts them into records.
			_, err := w.c.tls.Write(b)
			return err
		}
		n := copy(w.buf[len(w.buf):cap(w.buf)], b)
		w.buf = w.buf[:len(w.buf)+n]
		b = b[n:]
		if len(w.buf) == cap(w.buf) {
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// file copies n bytes of ch's file at its offset through the buffer (pread; the file's
// own position is never used).
func (w *tlsWriter) file(ch Chunk) error {
	off, n := ch.Offset, ch.Length
	for n > 0 {
		if len(w.buf) == cap(w.buf) {
			if err := w.flush(); err != nil {
				return err
			}
		}
		room := w.buf[len(w.buf):cap(w.buf)]
		if int64(len(room)) > n {
			room = room[:n]
		}
		m, err := ch.File.ReadAt(room, off)
		w.buf = w.buf[:len(w.buf)+m]
		off += int64(m)
		n -= int64(m)
		if err != nil && n > 0 {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("transport: file shorter than the response promised: %w", err)
		}
	}
	return nil
}

// writeBatchTLS is writeBatch for TLS connections.
func (c *stdConn) writeBatchTLS(start, end uint64) (closeAfter bool, err error) {
	L := uint64(len(c.slots))
	c.nc.SetWriteDeadline(time.Now().Add(c.srv.cfg.WriteTimeout))
	bp := tlsBufPool.Get().(*[]byte)
	w := tlsWriter{c: c, buf: (*bp)[:0]}
	defer func() {
		*bp = w.buf[:0]
		tlsBufPool.Put(bp)
	}()
	for seq := start; seq < end; seq++ {
		s := &c.slots[seq%L]
		switch s.how {
		case NoResponse:
			continue
		case CloseConn:
			return true, w.flush()
		}
		size := s.resp.Size()
		if size > math.MaxInt32 {
			return true, w.flush()
		}
		s.prefix = [4]byte{byte(size >> 24), byte(size >> 16), byte(size >> 8), byte(size)}
		if err := w.write(s.prefix[:]); err != nil {
			return false, err
		}
		for _, ch := range s.resp.Chunks {
			if ch.File != nil {
				err = w.file(ch)
			} else {
				err = w.write(ch.Bytes)
			}
			if err != nil {
				return false, err
			}
		}
	}
	return false, w.flush()
}
