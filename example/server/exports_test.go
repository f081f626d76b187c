package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/example/server"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// The status resource of an export accepted under a key of dots is where
// its Location says: "." and ".." are escaped there, so that neither the
// router nor the client takes them for the path's own segments.
func TestExportStatusOfDottedKeys(t *testing.T) {
	srv, err := server.Start(context.Background(), server.Config{DatabaseURL: pgtest.NewDatabase(t), AuthSecret: testSecret, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, url, key, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		authorize(req, "acct_1")
		if key != "" {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, key := range []string{".", ".."} {
		accepted := do("POST", srv.URL+"/exports", key, `{"format": "csv"}`)
		loc := accepted.Header.Get("Location")
		if accepted.StatusCode != 202 || loc == "" {
			t.Fatalf("key %q: %d, Location %q; want 202 with a Location", key, accepted.StatusCode, loc)
		}
		if st := do("GET", srv.URL+loc, "", ""); st.StatusCode != 200 {
			t.Errorf("key %q: GET %s: %d (Location %q), want its status, 200", key, loc, st.StatusCode, st.Header.Get("Location"))
		}
	}
}
