package bench

import "syscall"

// childAttr makes a spawned broker die with the loader, so a crashed benchmark never
// leaves a broker running.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
