//go:build !linux

package main

import "syscall"

// childSysProcAttr puts a node in its own process group.
func childSysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
