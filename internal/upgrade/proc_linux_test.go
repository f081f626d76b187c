package upgrade

import (
	"errors"
	"syscall"
)

// sysProcAttr has the kernel kill a started process if the test binary
// dies without its cleanups.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// processGone reports that no process has the id pid.
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
