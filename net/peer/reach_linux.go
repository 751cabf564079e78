package peer

import (
	"crypto/tls"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// closedByPeer reports whether the kernel already holds the peer's close of nc (its
// TCP state is CLOSE_WAIT or LAST_ACK after a FIN, or CLOSE after a reset), before
// the reader has read it: a killed process's sockets are closed while it exits,
// before any goroutine of this node has run.
func closedByPeer(nc net.Conn) bool {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var state uint8
	if raw.Control(func(fd uintptr) {
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			state = info.State
		}
	}) != nil {
		return false
	}
	switch state {
	case unix.BPF_TCP_CLOSE_WAIT, unix.BPF_TCP_LAST_ACK, unix.BPF_TCP_CLOSE:
		return true
	}
	return false
}
