//go:build !linux

package upgrade

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }

// processGone cannot tell here: stale binaries stay until the system
// empties its temporary directory.
func processGone(pid int) bool { return false }
