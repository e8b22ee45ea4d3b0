//go:build !linux

package nginxtest

import "os/exec"

// dieWithTest does nothing here: only Linux can tie nginx's life to the
// test binary's.
func dieWithTest(*exec.Cmd) {}
