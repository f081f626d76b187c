package idemtest

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// Recorder is a TB that records failures instead of failing the test it
// wraps, for a test of a check itself: that the checks fail an API with a
// given mistake, and say so. Logs, cleanups and the context are the
// wrapped test's. Fatal and FailNow end the goroutine, as in a subtest.
type Recorder struct {
	*testing.T
	name     string
	failures *failures
	failed   bool
}

type failures struct {
	mu   sync.Mutex
	msgs []string
}

// NewRecorder returns a Recorder wrapping t.
func NewRecorder(t *testing.T) *Recorder {
	return &Recorder{T: t, name: t.Name(), failures: &failures{}}
}

// Run runs fn as a subtest named name, on a Recorder of its own that
// records into r's failures, and reports whether it passed.
func (r *Recorder) Run(name string, fn func(*Recorder)) bool {
	sub := &Recorder{T: r.T, name: r.name + "/" + name, failures: r.failures}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(sub) // Fatal ends this goroutine, as it ends a subtest's
	}()
	<-done
	if sub.failed {
		r.failed = true
	}
	return !sub.failed
}

func (r *Recorder) Error(args ...any)                 { r.fail(fmt.Sprint(args...)) }
func (r *Recorder) Errorf(format string, args ...any) { r.fail(fmt.Sprintf(format, args...)) }
func (r *Recorder) Fatal(args ...any)                 { r.fail(fmt.Sprint(args...)); runtime.Goexit() }
func (r *Recorder) Fatalf(format string, args ...any) {
	r.fail(fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (r *Recorder) Fail()        { r.fail("Fail") }
func (r *Recorder) FailNow()     { r.fail("FailNow"); runtime.Goexit() }
func (r *Recorder) Failed() bool { return r.failed }
func (r *Recorder) Name() string { return r.name }

// Failures are the failures recorded so far, by this Recorder and its
// subtests, each led by the (sub)test's name.
func (r *Recorder) Failures() []string {
	r.failures.mu.Lock()
	defer r.failures.mu.Unlock()
	return slices.Clone(r.failures.msgs)
}

func (r *Recorder) fail(m string) {
	r.failed = true
	r.failures.mu.Lock()
	defer r.failures.mu.Unlock()
	r.failures.msgs = append(r.failures.msgs, r.name+": "+m)
}
