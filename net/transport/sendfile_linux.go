package transport

import (
	"fmt"
	"io"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxSendfile bounds one sendfile call (Linux moves at most ~2 GiB per call).
const maxSendfile = 1 << 30

// sendFile writes n bytes of f from offset off to nc with sendfile(2), passing the
// offset explicitly so the file's shared position is neither used nor moved. A socket
// that is not a syscall.Conn (a TLS conn, a pipe in tests) gets the portable copy.
func sendFile(nc net.Conn, f *os.File, off, n int64) error {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return copyFileRange(nc, f, off, n)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return copyFileRange(nc, f, off, n)
	}
	infd := int(f.Fd())
	var werr error
	err = rc.Write(func(fd uintptr) bool {
		for n > 0 {
			m, e := unix.Sendfile(int(fd), infd, &off, int(min(n, maxSendfile)))
			if m > 0 {
				n -= int64(m)
			}
			switch {
			case e == unix.EAGAIN:
				return false // wait until the socket is writable
			case e == unix.EINTR:
				continue
			case e != nil:
				werr = fmt.Errorf("transport: sendfile: %w", e)
				return true
			case m == 0:
				werr = fmt.Errorf("transport: sendfile: file shorter than the response promised: %w", io.ErrUnexpectedEOF)
				return true
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	return werr
}
