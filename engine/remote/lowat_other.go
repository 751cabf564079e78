//go:build !linux

package remote

// setRcvLowat does nothing where SO_RCVLOWAT does not wake epoll's readers
// by it: reads wake on every byte, as without it.
func setRcvLowat(fd, n int) error { return nil }
