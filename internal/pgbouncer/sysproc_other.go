//go:build !linux

package pgbouncer

import "syscall"

// sysProcAttr runs PgBouncer as cred, when set.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}
