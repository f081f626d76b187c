package idem

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// Once a storm's window has passed, its next record says how many of it
// were not logged.
func TestLogTracerCountsSuppressed(t *testing.T) {
	var out strings.Builder
	tracer := NewLogTracer(slog.New(slog.NewTextHandler(&out, nil)), LogTracerOptions{Window: time.Minute}).(*logTracer)
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tracer.now = func() time.Time { return clock }
	busy := TraceRequestEndData{Operation: "createOrder", Outcome: OutcomeStoreBusy, Status: 503}
	for range 5 {
		tracer.TraceRequestEnd(context.Background(), busy)
		clock = clock.Add(time.Second)
	}
	clock = clock.Add(time.Minute)
	tracer.TraceRequestEnd(context.Background(), busy)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || strings.Contains(lines[0], "suppressed") || !strings.Contains(lines[1], "suppressed=4") {
		t.Fatalf("logged:\n%s\nwant the first record, then one with suppressed=4", out.String())
	}
}
