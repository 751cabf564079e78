//go:build !linux

package transport

import (
	"net"
	"os"
)

// sendFile writes n bytes of f from offset off to nc (portable path: ReadAt + Write).
func sendFile(nc net.Conn, f *os.File, off, n int64) error {
	return copyFileRange(nc, f, off, n)
}
