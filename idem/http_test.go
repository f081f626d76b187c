package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/idem"
)

// chunked returns a request whose body's length is not declared, as a
// chunked body arrives.
func chunked(body string) *http.Request {
	r := httptest.NewRequest("POST", "/orders", io.MultiReader(strings.NewReader(body)))
	r.ContentLength = -1
	return r
}

// BoundBody bounds a JSON body without reading it: a declared length over
// the limit is a 413 at once; a value that runs past the limit fails the
// decoder with what RequestError answers as a 413; what follows a value
// that fits is checked by EndBody.
func TestBoundBody(t *testing.T) {
	const limit = 32
	decode := func(r *http.Request) error {
		var v map[string]any
		return json.NewDecoder(r.Body).Decode(&v)
	}

	t.Run("declared length over the limit", func(t *testing.T) {
		r := httptest.NewRequest("POST", "/orders", strings.NewReader(`{"a": "`+strings.Repeat("x", limit)+`"}`))
		w := httptest.NewRecorder()
		if idem.BoundBody(w, r, limit) {
			t.Fatal("BoundBody let a body over the limit through")
		}
		if w.Code != 413 || !strings.Contains(w.Body.String(), idem.TypeBodyTooLarge) {
			t.Errorf("answered %d %s, want a 413 problem", w.Code, w.Body)
		}
	})

	t.Run("value over the limit", func(t *testing.T) {
		r := chunked(`{"a": "` + strings.Repeat("x", limit) + `"}`)
		w := httptest.NewRecorder()
		if !idem.BoundBody(w, r, limit) {
			t.Fatalf("BoundBody refused a body of unknown length: %d %s", w.Code, w.Body)
		}
		err := decode(r)
		if _, ok := errors.AsType[*http.MaxBytesError](err); !ok {
			t.Fatalf("decoding: %v, want *http.MaxBytesError", err)
		}
		(idem.ErrorHandlers{}).RequestError(w, r, err)
		if w.Code != 413 {
			t.Errorf("RequestError answered %d %s, want 413", w.Code, w.Body)
		}
	})

	t.Run("value within the limit, the body past it", func(t *testing.T) {
		r := chunked(`{"a": 1}` + strings.Repeat(" ", limit))
		if !idem.BoundBody(httptest.NewRecorder(), r, limit) {
			t.Fatal("BoundBody refused a body of unknown length")
		}
		if err := decode(r); err != nil {
			t.Fatal(err)
		}
		err := idem.EndBody(idem.WithRequest(context.Background(), r))
		if p, ok := errors.AsType[*idem.Problem](err); !ok || p.Status != 413 || p.Type != idem.TypeBodyTooLarge {
			t.Fatalf("EndBody: %v, want a 413 problem", err)
		}
	})

	t.Run("within the limit", func(t *testing.T) {
		r := chunked(`{"a": 1}` + "\n")
		if !idem.BoundBody(httptest.NewRecorder(), r, limit) {
			t.Fatal("BoundBody refused a body within the limit")
		}
		if err := decode(r); err != nil {
			t.Fatal(err)
		}
		if err := idem.EndBody(idem.WithRequest(context.Background(), r)); err != nil {
			t.Fatalf("EndBody: %v", err)
		}
		if r.Body != http.NoBody {
			t.Error("EndBody kept the body on the request")
		}
	})

	t.Run("body that breaks off", func(t *testing.T) {
		r := httptest.NewRequest("POST", "/orders", io.MultiReader(strings.NewReader(`{"a": 1} `), failingReader{}))
		r.ContentLength = -1
		if !idem.BoundBody(httptest.NewRecorder(), r, limit) {
			t.Fatal("BoundBody refused a body within the limit")
		}
		if err := decode(r); err != nil {
			t.Fatal(err)
		}
		err := idem.EndBody(idem.WithRequest(context.Background(), r))
		if p, ok := errors.AsType[*idem.Problem](err); !ok || p.Status != 400 || !strings.Contains(p.Detail, "could not be read") {
			t.Fatalf("EndBody: %v, want a 400 problem", err)
		}
	})

	t.Run("no limit", func(t *testing.T) {
		r := chunked(`{"a": 1}` + strings.Repeat(" ", limit))
		before := r.Body
		if !idem.BoundBody(httptest.NewRecorder(), r, -1) || r.Body != before {
			t.Fatal("BoundBody with no limit changed the request")
		}
		if err := decode(r); err != nil {
			t.Fatal(err)
		}
		if err := idem.EndBody(idem.WithRequest(context.Background(), r)); err != nil {
			t.Fatalf("EndBody: %v", err)
		}
	})
}

// A body ReadBody buffered is let go by EndBody, whatever follows its value.
func TestEndBodyReleasesTheBuffer(t *testing.T) {
	r := httptest.NewRequest("POST", "/orders", strings.NewReader(`{"a": 1}`+strings.Repeat(" ", 100)))
	if !idem.ReadBody(httptest.NewRecorder(), r, 200) {
		t.Fatal("ReadBody refused a body within the limit")
	}
	if err := idem.EndBody(idem.WithRequest(context.Background(), r)); err != nil || r.Body != http.NoBody {
		t.Fatalf("EndBody: %v, body %T", err, r.Body)
	}
	if err := idem.EndBody(context.Background()); err != nil {
		t.Fatalf("EndBody without a request: %v", err)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }
