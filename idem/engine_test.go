package idem_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func serve(t *testing.T, e *idem.Engine[memstore.NoTx], op *idem.Operation, hdr http.Header, h idem.Handler[memstore.NoTx]) (*idem.Response, error) {
	t.Helper()
	r := httptest.NewRequest("POST", "/things", nil)
	r.Header = hdr
	return e.Serve(idem.WithRequest(context.Background(), r), op, []byte("fp"), h)
}

func created(calls *int) idem.Handler[memstore.NoTx] {
	return func(ctx context.Context, at *idem.Attempt[memstore.NoTx]) (idem.Writer, error) {
		*calls++
		return func(w http.ResponseWriter) error {
			w.WriteHeader(http.StatusCreated)
			return nil
		}, nil
	}
}

func TestOptionalKeyRunsWithoutIdempotency(t *testing.T) {
	store := memstore.New(memstore.Options{})
	e := idem.NewEngine(store, idem.Options{Logger: quiet})
	op := &idem.Operation{Name: "op", KeyOptional: true, TTL: time.Hour, Lease: time.Minute}
	calls := 0
	for range 2 {
		resp, err := serve(t, e, op, http.Header{}, created(&calls))
		if err != nil || resp.Status != 201 || resp.Replayed {
			t.Fatalf("keyless request: %+v, %v", resp, err)
		}
	}
	if calls != 2 || store.Len() != 0 {
		t.Fatalf("calls = %d, stored keys = %d; want 2 runs and nothing stored", calls, store.Len())
	}
}

func TestScopeErrors(t *testing.T) {
	op := &idem.Operation{Name: "op", TTL: time.Hour, Lease: time.Minute}
	hdr := http.Header{idem.HeaderKey: {"k"}}
	calls := 0

	var logs bytes.Buffer
	e := idem.NewEngine(memstore.New(memstore.Options{}), idem.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Scope: func(context.Context, *http.Request) (string, error) {
			return "", errors.New("tenants: dial tcp 10.0.3.7:5432: connection refused")
		}})
	resp, _ := serve(t, e, op, hdr, created(&calls))
	if resp.Status != 400 || resp.Header.Get("Content-Type") != idem.ContentTypeProblem {
		t.Fatalf("scope error: %d %s", resp.Status, resp.Body)
	}
	// The error's text may hold internals: logged, never sent.
	if bytes.Contains(resp.Body, []byte("10.0.3.7")) || !strings.Contains(logs.String(), "10.0.3.7") {
		t.Errorf("scope error: the answer %s, the log %q; want the error in the log only", resp.Body, logs.String())
	}

	e = idem.NewEngine(memstore.New(memstore.Options{}), idem.Options{Logger: quiet,
		Scope: func(context.Context, *http.Request) (string, error) {
			return "", &idem.Problem{Type: "https://example.com/unauthenticated", Title: "Unauthenticated", Status: 401, Detail: "log in"}
		}})
	resp, _ = serve(t, e, op, hdr, created(&calls))
	if resp.Status != 401 {
		t.Fatalf("scope problem: %d %s", resp.Status, resp.Body)
	}
	if calls != 0 {
		t.Fatalf("handler ran %d times without a scope", calls)
	}
}

func TestNoResponseIsAnError(t *testing.T) {
	store := memstore.New(memstore.Options{})
	e := idem.NewEngine(store, idem.Options{Logger: quiet})
	op := &idem.Operation{Name: "op", TTL: time.Hour, Lease: time.Minute}
	_, err := serve(t, e, op, http.Header{idem.HeaderKey: {"k"}}, func(context.Context, *idem.Attempt[memstore.NoTx]) (idem.Writer, error) {
		return nil, nil
	})
	if err == nil || store.Len() != 0 {
		t.Fatalf("nil response: err %v, %d keys stored; want an error and the key released", err, store.Len())
	}
}

func TestPanicIsReturnedAndReleases(t *testing.T) {
	store := memstore.New(memstore.Options{})
	e := idem.NewEngine(store, idem.Options{Logger: quiet})
	op := &idem.Operation{Name: "op", TTL: time.Hour, Lease: time.Minute}
	_, err := serve(t, e, op, http.Header{idem.HeaderKey: {"k"}}, func(context.Context, *idem.Attempt[memstore.NoTx]) (idem.Writer, error) {
		panic("boom")
	})
	var pe *idem.PanicError
	if !errors.As(err, &pe) || pe.Value != "boom" || len(pe.Stack) == 0 {
		t.Fatalf("err = %v, want a PanicError with a stack", err)
	}
	if store.Len() != 0 {
		t.Fatal("the panicking attempt kept its key")
	}
}

func TestServeWithoutRequestInContext(t *testing.T) {
	e := idem.NewEngine(memstore.New(memstore.Options{}), idem.Options{})
	calls := 0
	_, err := e.Serve(context.Background(), &idem.Operation{Name: "op", TTL: time.Hour, Lease: time.Minute}, nil, created(&calls))
	if err == nil || calls != 0 {
		t.Fatalf("Serve without a request: %v, %d calls", err, calls)
	}
}

// A scope is checked before the store sees it, and the spec's scope header
// joins the Go scope.
func TestScopeValidation(t *testing.T) {
	store := memstore.New(memstore.Options{})
	goScope := func(ctx context.Context, r *http.Request) (string, error) { return r.Header.Get("X-Principal"), nil }
	e := idem.NewEngine(store, idem.Options{Logger: quiet, Scope: goScope})
	op := &idem.Operation{Name: "op", TTL: time.Hour, Lease: time.Minute, ScopeHeader: "X-Tenant-Id"}
	calls := 0
	for name, hdr := range map[string]http.Header{
		"NUL in the Go scope":    {idem.HeaderKey: {"k"}, "X-Principal": {"a\x00b"}, "X-Tenant-Id": {"t1"}},
		"Go scope too long":      {idem.HeaderKey: {"k"}, "X-Principal": {strings.Repeat("p", idem.MaxScopeLen+1)}, "X-Tenant-Id": {"t1"}},
		"scope header missing":   {idem.HeaderKey: {"k"}, "X-Principal": {"alice"}},
		"scope header twice":     {idem.HeaderKey: {"k"}, "X-Principal": {"alice"}, "X-Tenant-Id": {"t1", "t2"}},
		"scope header not UTF-8": {idem.HeaderKey: {"k"}, "X-Principal": {"alice"}, "X-Tenant-Id": {"t\xff"}},
		"joined scope too long":  {idem.HeaderKey: {"k"}, "X-Principal": {strings.Repeat("p", idem.MaxScopeLen-2)}, "X-Tenant-Id": {"t1"}},
	} {
		resp, err := serve(t, e, op, hdr, created(&calls))
		if err != nil || resp.Status != 400 || !strings.Contains(string(resp.Body), idem.TypeInvalidScope) {
			t.Errorf("%s: %v %+v, want a 400 invalid-scope problem", name, err, resp)
		}
	}
	if calls != 0 || store.Len() != 0 {
		t.Fatalf("%d runs, %d keys stored for invalid scopes", calls, store.Len())
	}
	// Same principal, two tenants: two keys; the same tenant again: a replay.
	for _, tenant := range []string{"t1", "t2", "t1"} {
		if _, err := serve(t, e, op, http.Header{idem.HeaderKey: {"k"}, "X-Principal": {"alice"}, "X-Tenant-Id": {tenant}}, created(&calls)); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 2 || store.Len() != 2 {
		t.Fatalf("%d runs and %d keys for two tenants, want 2 and 2", calls, store.Len())
	}
}

// failingStore fails its lookups with err, to check the engine's answer to
// each class of store error.
type failingStore struct {
	*memstore.Store
	err error
}

func (s failingStore) Lookup(context.Context, idem.ID) (idem.Record, error) {
	return idem.Record{}, s.err
}

// The engine answers a store error by its class alone.
func TestStoreErrorAnswers(t *testing.T) {
	op := &idem.Operation{Name: "op", TTL: time.Hour, Lease: time.Minute}
	for _, tc := range []struct {
		err        error
		status     int
		typ        string
		retryAfter bool
	}{
		{fmt.Errorf("lookup: %w: connection refused", idem.ErrStoreUnavailable), 503, idem.TypeStoreUnavailable, true},
		{fmt.Errorf("lookup: %w: invalid byte sequence", idem.ErrStoreRejectedInput), 400, idem.TypeInvalidRequest, false},
		{fmt.Errorf("lookup: %w: relation \"idempotency_keys\" does not exist", idem.ErrStoreMisconfigured), 500, idem.TypeStoreMisconfigured, false},
		{fmt.Errorf("lookup: %w: %w: no connection came free", idem.ErrStoreUnavailable, idem.ErrStoreBusy), 503, idem.TypeStoreBusy, true},
		{fmt.Errorf("lookup: %w: could not serialize access", idem.ErrTransactionConflict), 500, idem.TypeTransactionConflict, true},
		// An error no class names is the store's failure, not a misconfiguration.
		{errors.New("lookup: something unforeseen"), 500, idem.TypeInternal, false},
	} {
		e := idem.NewEngine(failingStore{memstore.New(memstore.Options{}), tc.err}, idem.Options{Logger: quiet})
		calls := 0
		resp, err := serve(t, e, op, http.Header{idem.HeaderKey: {"k"}}, created(&calls))
		if err != nil || resp.Status != tc.status || !strings.Contains(string(resp.Body), tc.typ) || (resp.Header.Get("Retry-After") != "") != tc.retryAfter || calls != 0 {
			t.Errorf("%v: %v %d %s %v, %d runs; want %d %s", tc.err, err, resp.Status, resp.Body, resp.Header, calls, tc.status, tc.typ)
		}
	}
}

// The answers to a store's failures name the key as the operation takes
// it: a webhook's Webhook-Id header, never an Idempotency-Key it was not
// sent.
func TestStoreErrorsNameTheKeyPlacement(t *testing.T) {
	op := &idem.Operation{Name: "receiveEvent", TTL: time.Hour, Lease: time.Minute,
		KeyFrom: []idem.KeySource{{In: idem.KeyInHeader, Name: "Webhook-Id"}}}
	for _, storeErr := range []error{
		fmt.Errorf("lookup: %w: connection refused", idem.ErrStoreUnavailable),
		fmt.Errorf("lookup: %w: %w: no connection came free", idem.ErrStoreUnavailable, idem.ErrStoreBusy),
		fmt.Errorf("lookup: %w: invalid byte sequence", idem.ErrStoreRejectedInput),
		fmt.Errorf("lookup: %w: relation \"idempotency_keys\" does not exist", idem.ErrStoreMisconfigured),
		fmt.Errorf("lookup: %w: could not serialize access", idem.ErrTransactionConflict),
		errors.New("lookup: something unforeseen"),
	} {
		e := idem.NewEngine(failingStore{memstore.New(memstore.Options{}), storeErr}, idem.Options{Logger: quiet})
		r := httptest.NewRequest("POST", "/webhooks", nil)
		ctx := idem.WithKey(idem.WithRequest(context.Background(), r), idem.KeyValue{Value: "evt_1", Present: true})
		calls := 0
		resp, err := e.Serve(ctx, op, []byte("fp"), created(&calls))
		if err != nil || calls != 0 {
			t.Fatalf("%v: %v, %d runs", storeErr, err, calls)
		}
		if body := string(resp.Body); !strings.Contains(body, "Webhook-Id") || strings.Contains(body, idem.HeaderKey) {
			t.Errorf("%v: %d %s, want its detail to name the Webhook-Id and no %s", storeErr, resp.Status, body, idem.HeaderKey)
		}
	}
}

// An operation whose zero fields would switch idempotency off is refused
// on every request, with an error naming the field; its handler never
// runs.
func TestZeroOperationRefused(t *testing.T) {
	e := idem.NewEngine(memstore.New(memstore.Options{}), idem.Options{Logger: quiet})
	for _, tc := range []struct {
		op    idem.Operation
		field string
	}{
		{idem.Operation{TTL: time.Hour, Lease: time.Minute}, "Name"},
		{idem.Operation{Name: "op", Lease: time.Minute}, "TTL"},
		{idem.Operation{Name: "op", TTL: -time.Hour, Lease: time.Minute}, "TTL"},
		{idem.Operation{Name: "op", TTL: time.Hour}, "Lease"},
		{idem.Operation{Name: "op", TTL: time.Hour, Lease: time.Minute, RecoveryPoints: nil}, "RecoveryPoints"}, // phased only
	} {
		calls := 0
		var err error
		if tc.field == "RecoveryPoints" {
			r := httptest.NewRequest("POST", "/", nil)
			r.Header.Set(idem.HeaderKey, "k")
			_, err = e.ServePhased(idem.WithRequest(context.Background(), r), &tc.op, nil, func(context.Context, *idem.Attempt[memstore.NoTx]) (string, idem.Writer, error) {
				calls++
				return "", nil, nil
			})
		} else {
			_, err = serve(t, e, &tc.op, http.Header{idem.HeaderKey: {"k"}}, created(&calls))
		}
		if !errors.Is(err, idem.ErrInvalidOperation) || !strings.Contains(err.Error(), tc.field+" is") || calls != 0 {
			t.Errorf("%+v: %v (%d runs), want ErrInvalidOperation naming %s and no run", tc.op, err, calls, tc.field)
		}
		if tc.field != "RecoveryPoints" && !errors.Is(tc.op.Validate(), idem.ErrInvalidOperation) {
			t.Errorf("Validate(%+v) = nil", tc.op)
		}
	}
}
