package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/idemgen/idemgen/bench/realistic"
)

// memoryResult is the server's resident memory under concurrent
// maximum-size bodies: what a body costs beyond its own size.
type memoryResult struct {
	Path      string `json:"path"`
	Bodies    int    `json:"bodies"`
	BodyBytes int64  `json:"body_bytes"`
	// IdleRSS is the server's resident memory before, PeakRSS its peak
	// while the bodies were served (VmHWM, reset before), in bytes.
	IdleRSS int64 `json:"idle_rss_bytes"`
	PeakRSS int64 `json:"peak_rss_bytes"`
	// Ratio is (PeakRSS - IdleRSS) over the bodies' total.
	Ratio    float64          `json:"ratio_to_bodies"`
	Outcomes map[string]int64 `json:"outcomes"`
	// Baseline is the same measurement on the unannotated endpoint: what
	// decoding the bodies and the business work cost without the layer.
	Baseline *memoryResult `json:"baseline,omitempty"`
}

// The endpoints the memory measurement sends its bodies to: the same
// order, with and without the layer.
const (
	memoryPath         = "/realistic/orders"
	memoryBaselinePath = "/realistic/baseline/orders"
)

// measureMemory sends n requests of size bytes each at once to path, and
// reads the server's resident memory around them.
func measureMemory(ctx context.Context, srv *serverProc, path string, n int, size int64) (memoryResult, error) {
	res := memoryResult{Path: path, Bodies: n, BodyBytes: size, Outcomes: map[string]int64{}}
	pid := srv.pid()
	// Writing 5 to clear_refs resets the peak (VmHWM) to the current size.
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return res, fmt.Errorf("reset the server's peak memory: %w", err)
	}
	var err error
	if res.IdleRSS, err = procStatusBytes(pid, "VmRSS"); err != nil {
		return res, err
	}
	// A realistic order (bench/realistic) whose one line item's SKU fills
	// the body: decoded, fingerprinted and stored whole, and answered 201.
	prefix, suffix := `{"customer_id":"`+realistic.Customer+`","items":[{"quantity":1,"price_cents":1,"sku":"`, `"}]}`
	fill := size - int64(len(prefix)+len(suffix))
	if fill < 1 {
		return res, errors.New("the body size is too small for an order")
	}
	body := make([]byte, 0, size)
	body = append(append(append(body, prefix...), bytes.Repeat([]byte("x"), int(fill))...), suffix...)

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.url+path, bytes.NewReader(body))
			if err == nil {
				request{key: "big-" + strconv.Itoa(i)}.setHeaders(req)
				var resp *http.Response
				if resp, err = http.DefaultClient.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					mu.Lock()
					res.Outcomes[strconv.Itoa(resp.StatusCode)]++
					mu.Unlock()
				}
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	if res.PeakRSS, err = procStatusBytes(pid, "VmHWM"); err != nil {
		return res, err
	}
	res.Ratio = float64(res.PeakRSS-res.IdleRSS) / float64(int64(n)*size)
	return res, nil
}

// procStatusBytes reads a "kB" field of /proc/pid/status, in bytes.
func procStatusBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}
