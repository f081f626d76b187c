//go:build !linux

package main

import (
	"runtime"
	"time"
)

func lockForSleeping()   { runtime.LockOSThread() }
func unlockForSleeping() { runtime.UnlockOSThread() }

func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }
