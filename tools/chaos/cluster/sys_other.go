//go:build !linux

package cluster

import (
	"errors"
	"syscall"
	"time"
)

// The harness's namespaces, mounts and parent-death signal are Linux's; elsewhere
// only loopback clusters without disk faults run.

var errLinuxOnly = errors.New("cluster: needs Linux")

// ErrNoNetns: network namespaces cannot be made here.
var ErrNoNetns = errors.New("cluster: network namespaces unavailable")

func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// Network is Linux-only.
type Network struct{}

// LinkSpec is a slow or lossy link (Linux only).
type LinkSpec struct {
	Delay, Jitter time.Duration
	Loss          float64
	Rate          string
}

func NewNetwork(int) (*Network, error)              { return nil, ErrNoNetns }
func (*Network) IP(int) string                      { return "" }
func (*Network) HostIP() string                     { return "" }
func (*Network) Namespace(int) string               { return "" }
func (*Network) ExecPrefix(int) []string            { return nil }
func (*Network) Netem() bool                        { return false }
func (*Network) Cut(int, int) error                 { return errLinuxOnly }
func (*Network) Partition([][]int, int) error       { return errLinuxOnly }
func (*Network) Cuts() [][2]int                     { return nil }
func (*Network) HealCuts() error                    { return nil }
func (*Network) Slow(int, LinkSpec) (string, error) { return "", errLinuxOnly }
func (*Network) Unslow() error                      { return nil }
func (*Network) Close() error                       { return nil }
func CleanupNetworks() ([]string, error)            { return nil, nil }
func MountTmpfs(string, int64) error                { return errLinuxOnly }
func Unmount(string) error                          { return nil }
func Fill(string) (int64, error)                    { return 0, errLinuxOnly }
func Free(string) error                             { return nil }
func CleanupMounts() ([]string, error)              { return nil, nil }

// BallastName is the file in a node's disk directory that fills it.
const BallastName = "ballast"
