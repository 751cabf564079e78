package main

import "syscall"

// childSysProcAttr puts a node in its own process group (a Ctrl-C of the terminal
// reaches only `samsa cluster start`, which stops the nodes in order) and kills it if
// the parent dies.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
