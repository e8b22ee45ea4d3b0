package nginxtest

import (
	"os/exec"
	"syscall"
)

// dieWithTest has the kernel end nginx when the test binary dies (a
// test's timeout panics before any Cleanup runs).
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
