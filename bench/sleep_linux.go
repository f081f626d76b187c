package main

import (
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// prSetTimerSlack is PR_SET_TIMERSLACK: the kernel may defer a thread's
// timer by its slack, 50 µs by default, to batch wake-ups.
const prSetTimerSlack = 29

// lockForSleeping gives the goroutine a thread of its own whose sleeps
// end within microseconds of their deadline.
func lockForSleeping() {
	runtime.LockOSThread()
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0)
}

// unlockForSleeping keeps the thread locked: its slack changed, so it
// must not run other goroutines; it ends with this one.
func unlockForSleeping() {}

// sleepUntil sleeps in the kernel until t: time.Sleep would wait in the
// runtime's network poller, whose timeouts are whole milliseconds.
func sleepUntil(t time.Time) {
	for {
		d := time.Until(t)
		if d <= 0 {
			return
		}
		_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0)
		ts := syscall.NsecToTimespec(int64(d))
		const clockMonotonic = 1
		_, _, errno := syscall.Syscall6(syscall.SYS_CLOCK_NANOSLEEP, clockMonotonic, 0, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		if errno != syscall.EINTR {
			return
		}
	}
}
