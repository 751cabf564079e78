//go:build !linux

package bench

import "fmt"

// MeasureLimits needs Linux (fdatasync, sendfile).
func MeasureLimits(dir string, size int64) (*Limits, error) {
	return nil, fmt.Errorf("%w: only measured on Linux", ErrLimits)
}
