package pgbouncer

import "syscall"

// sysProcAttr runs PgBouncer as cred, when set, and has the kernel end it
// if the test binary dies without its cleanups.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGTERM}
}
