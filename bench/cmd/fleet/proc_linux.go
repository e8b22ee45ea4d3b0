package main

import (
	"os/exec"
	"syscall"
)

// detach puts cmd in a process group of its own, so that stopping it stops
// whatever it started too, and has the kernel kill it if the coordinator
// dies without stopping it (redis-server does not watch its stdin).
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return killGroup(cmd) }
}

// killGroup sends SIGKILL to cmd's process group.
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
