package remote

import "syscall"

// setRcvLowat sets a socket's SO_RCVLOWAT: its reader is woken once n bytes
// are there (or the connection ends).
func setRcvLowat(fd, n int) error {
	return syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, n)
}
