//go:build unix

package transport

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// inlineInit prepares nc's inline writes (std_inline.go): a plain TCP or Unix
// socket's raw descriptor.
func (c *stdConn) inlineInit() {
	if c.tls != nil || !c.srv.cfg.InlineWrites {
		return
	}
	var sc syscall.Conn
	switch nc := c.nc.(type) {
	case *net.TCPConn:
		sc = nc
	case *net.UnixConn:
		sc = nc
	default:
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	c.iw.rc = rc
	c.iw.fn = c.writevOnce
}

// writevOnce is the RawConn.Write callback: one writev(2) of c.iw.bufs that never
// waits for room (true: done, whatever the result; c.iw.n is 0 on EAGAIN and on
// every other error).
func (c *stdConn) writevOnce(fd uintptr) bool {
	n, err := unix.Writev(int(fd), c.iw.bufs)
	for errors.Is(err, unix.EINTR) {
		n, err = unix.Writev(int(fd), c.iw.bufs)
	}
	c.iw.n = max(n, 0)
	return true
}
