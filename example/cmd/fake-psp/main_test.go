package main_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/idemgen/idemgen/example/psp"
)

var listening = regexp.MustCompile(`msg="fake-psp: listening" url=(http://\S+)$`)

// The binary, on a free port, says where it listens, charges through the
// client, and on SIGINT or SIGTERM exits cleanly, logging its counts.
func TestListenChargeAndStop(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fake-psp")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(bin, "-addr", "127.0.0.1:0")
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				cmd.Process.Kill()
				cmd.Wait()
			})

			// Reading stderr to the end keeps the process from blocking on
			// a full pipe; logs gets all of it once the process closes it.
			found := make(chan string, 1)
			logs := make(chan string, 1)
			go func() {
				var all strings.Builder
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					all.WriteString(sc.Text() + "\n")
					if m := listening.FindStringSubmatch(sc.Text()); m != nil {
						found <- m[1]
					}
				}
				close(found)
				logs <- all.String()
			}()
			url, ok := <-found
			if !ok {
				t.Fatalf("fake-psp exited before listening:\n%s", <-logs)
			}

			c := &psp.Client{BaseURL: url}
			ch, err := c.Charge(t.Context(), "k1", psp.ChargeRequest{AmountCents: 1250, Reference: "pay_1"})
			if err != nil || ch.Status != psp.StatusSucceeded {
				t.Fatalf("charge: %+v, %v", ch, err)
			}
			if s, err := c.Stats(t.Context()); err != nil || s != (psp.Stats{Requests: 1, Charges: 1}) {
				t.Fatalf("stats: %+v, %v", s, err)
			}

			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			out := <-logs
			if err := cmd.Wait(); err != nil {
				t.Fatalf("fake-psp ended with %v after %v, want exit 0:\n%s", err, sig, out)
			}
			if !strings.Contains(out, `msg="fake-psp: stopped" requests=1 charges=1 declines=0`) {
				t.Fatalf("no stopped line with the counts:\n%s", out)
			}
		})
	}
}
