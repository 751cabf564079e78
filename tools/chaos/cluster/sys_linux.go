package cluster

import "syscall"

// childAttr makes a node die with the harness, so a crashed run leaves no broker
// running.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
