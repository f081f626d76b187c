package idem

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// LogTracerOptions configure NewLogTracer; the zero value works.
type LogTracerOptions struct {
	// Window bounds the warnings and errors of a storm: once one of an
	// operation and outcome is logged, more of the same in the next Window
	// are only counted, and the first one after it carries the count as
	// "suppressed". Zero means 10s; negative logs every one.
	Window time.Duration
}

// NewLogTracer returns the Tracer that logs each request's outcome as one
// record: the engine's default, on Options.Logger. Client mistakes (400,
// 413, 415, 422) are Info; first runs, replays, 409s and requests whose
// client went away are Debug; a takeover is Info; store trouble and lease
// overruns are Warn or Error, at most once per Window for each operation
// and outcome, since every request meets them until they are fixed. A
// commit that failed on the attempt's own writes is Error each time. A
// handler's error is Debug here: the generated server's ErrorHandlers log
// it at Error, with the stack of a panic.
//
// Records carry the operation, outcome, status, a short hash of the key
// (KeyHash; never the key), attempt, generation, recovery point and
// durations.
func NewLogTracer(log *slog.Logger, opts LogTracerOptions) Tracer {
	if opts.Window == 0 {
		opts.Window = 10 * time.Second
	}
	return &logTracer{log: log, window: opts.Window, now: time.Now, storms: make(map[stormKey]*storm)}
}

type logTracer struct {
	log    *slog.Logger
	window time.Duration
	now    func() time.Time

	mu     sync.Mutex
	storms map[stormKey]*storm
}

type stormKey struct {
	operation string
	outcome   Outcome
}

// storm counts the records of one operation and outcome not logged since
// the last one that was.
type storm struct {
	logged     time.Time
	suppressed int
}

func (t *logTracer) TraceRequestStart(ctx context.Context, _ TraceRequestStartData) context.Context {
	return ctx
}

func (t *logTracer) TraceRequestEnd(ctx context.Context, d TraceRequestEndData) {
	if d.Completer {
		return // the Completer logs what it did
	}
	level, msg := outcomeLog(d.Outcome)
	if d.Worker {
		level, msg = workerLog(d.Outcome, level, msg)
	}
	if d.LeaseLost > 0 && level < slog.LevelWarn {
		level, msg = slog.LevelWarn, msg+"; its attempt lost its lease to another attempt or the sweeper on the way"
	}
	if !t.log.Enabled(ctx, level) {
		return
	}
	var suppressed int
	if (d.Outcome.StoreTrouble() || d.Outcome == OutcomeLeaseOverrun) && t.window > 0 {
		var log bool
		if log, suppressed = t.admit(stormKey{d.Operation, d.Outcome}); !log {
			return
		}
	}
	attrs := make([]slog.Attr, 0, 15)
	attrs = append(attrs,
		slog.String("operation", d.Operation),
		slog.String("outcome", d.Outcome.String()),
		slog.Int("status", d.Status))
	if d.Worker {
		attrs = append(attrs, slog.Bool("worker", true))
	}
	if hash := d.KeyHash(); hash != "" {
		attrs = append(attrs, slog.String("key_hash", hash))
	}
	if d.Attempt > 0 {
		attrs = append(attrs, slog.Int64("attempt", d.Attempt), slog.Int64("generation", d.Generation))
	}
	if d.RecoveryPoint != "" {
		attrs = append(attrs, slog.String("recovery_point", d.RecoveryPoint))
	}
	if d.LeaseLost > 0 {
		attrs = append(attrs, slog.Int("lease_lost", d.LeaseLost))
	}
	attrs = append(attrs, slog.Duration("lookup", d.Lookup), slog.Duration("held", d.Held), slog.Duration("duration", d.Duration))
	if d.Err != nil {
		attrs = append(attrs, slog.String("error", d.Err.Error()))
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int("suppressed", suppressed))
	}
	t.log.LogAttrs(ctx, level, msg, attrs...)
}

// admit reports whether a warning or error of k is logged now, and how
// many of k were not logged since the last that was.
func (t *logTracer) admit(k stormKey) (bool, int) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.storms[k]
	if s == nil {
		t.storms[k] = &storm{logged: now}
		return true, 0
	}
	if now.Sub(s.logged) < t.window {
		s.suppressed++
		return false, 0
	}
	n := s.suppressed
	s.logged, s.suppressed = now, 0
	return true, n
}

// outcomeLog is the level and message of an outcome's record.
// workerLog is how a worker's run of an accepted request is logged: its
// client was answered 202 long ago, so what it came to is worth a line.
func workerLog(o Outcome, level slog.Level, msg string) (slog.Level, string) {
	switch o {
	case OutcomeFirst, OutcomeTakeover:
		return slog.LevelInfo, "idem: a worker ran an accepted request and stored its response"
	case OutcomeHandlerError:
		return slog.LevelWarn, "idem: a worker's run of an accepted request failed; its job is retried"
	}
	return level, msg
}

func outcomeLog(o Outcome) (slog.Level, string) {
	switch o {
	case OutcomeFirst:
		return slog.LevelDebug, "idem: ran the request and stored its response"
	case OutcomeTakeover:
		return slog.LevelInfo, "idem: took over an abandoned attempt and stored its response"
	case OutcomeReplay:
		return slog.LevelDebug, "idem: replayed the stored response"
	case OutcomeUnkeyed:
		return slog.LevelDebug, "idem: ran a request without an Idempotency-Key"
	case OutcomeConflict:
		return slog.LevelDebug, "idem: another attempt holds the key; answered 409"
	case OutcomeMismatch:
		return slog.LevelInfo, "idem: the key was used with a different request; answered 422"
	case OutcomeMissingKey, OutcomeInvalidKey, OutcomeInvalidScope, OutcomeInvalidRequest:
		return slog.LevelInfo, "idem: refused the request; answered 400"
	case OutcomeBodyTooLarge:
		return slog.LevelInfo, "idem: refused the request's body as too large; answered 413"
	case OutcomeUnsupportedMediaType:
		return slog.LevelInfo, "idem: refused the request's media type; answered 415"
	case OutcomeClientClosed:
		return slog.LevelDebug, "idem: the client canceled the request; its attempt was rolled back"
	case OutcomeRefused:
		return slog.LevelInfo, "idem: the application refused the request before the protocol ran"
	case OutcomeAccepted:
		return slog.LevelDebug, "idem: accepted the request and enqueued its job; answered 202"
	case OutcomeInProgress:
		return slog.LevelDebug, "idem: the accepted request is still pending or running; answered 202"
	case OutcomeStatus:
		return slog.LevelDebug, "idem: answered a read of an accepted request's status"
	case OutcomeHandlerError:
		return slog.LevelDebug, "idem: the handler failed; its attempt was undone"
	case OutcomeStoreBusy:
		return slog.LevelWarn, "idem: key store busy: no connection came free in time; answered 503"
	case OutcomeTransactionConflict:
		return slog.LevelWarn, "idem: the attempt's transaction conflicted with a concurrent one and was rolled back"
	case OutcomeStoreUnavailable:
		return slog.LevelError, "idem: key store unavailable; answered 503"
	case OutcomeStoreMisconfigured:
		return slog.LevelError, "idem: key store misconfigured; requests of annotated operations fail until it is fixed"
	case OutcomeCommitFailed:
		return slog.LevelError, "idem: the attempt's transaction failed at commit and was rolled back"
	case OutcomeLeaseOverrun:
		return slog.LevelError, "idem: attempt overran its lease, so the store ended its transaction; raise the operation's lease or bound the work inside it"
	}
	return slog.LevelError, "idem: key store failed"
}
