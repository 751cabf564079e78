//go:build !linux

package kafka

// diskSpace is unknown off Linux.
func diskSpace(string) (total, usable int64) { return -1, -1 }
