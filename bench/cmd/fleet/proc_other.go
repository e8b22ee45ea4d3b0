//go:build !linux

package main

import "os/exec"

// detach: elsewhere than Linux, a child is stopped alone (no process
// group, no death signal); a client or server child still exits when its
// stdin closes.
func detach(cmd *exec.Cmd) {
	cmd.Cancel = func() error { return killGroup(cmd) }
}

func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return cmd.Process.Kill()
}
