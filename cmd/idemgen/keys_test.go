package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemriver"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/idem/redisfilter"
	"github.com/idemgen/idemgen/internal/redistest"
)

// keysJSON parses keys list -json's lines.
func keysJSON(t *testing.T, stdout string) []map[string]any {
	t.Helper()
	var keys []map[string]any
	for line := range strings.Lines(stdout) {
		var k map[string]any
		if err := json.Unmarshal([]byte(line), &k); err != nil {
			t.Fatalf("a line of -json output is not JSON (%v): %s", err, line)
		}
		keys = append(keys, k)
	}
	return keys
}

// keyNames are the keys of a listing, sorted.
func keyNames(keys []map[string]any) []string {
	var names []string
	for _, k := range keys {
		names = append(names, k["key"].(string))
	}
	slices.Sort(names)
	return names
}

// TestKeysCLI makes keys through the engine on the Postgres store, then
// lists, shows and forgets them with idemgen keys: a forgotten key's next
// request runs as new.
func TestKeysCLI(t *testing.T) {
	ctx := context.Background()
	url, pool := keyStore(t)
	store := pgstore.New(pool, pgstore.Options{Logger: slog.New(slog.DiscardHandler)})
	engine := idem.NewEngine(store, idem.Options{
		Scope:  func(_ context.Context, r *http.Request) (string, error) { return r.Header.Get("X-Tenant"), nil },
		Logger: slog.New(slog.DiscardHandler),
	})
	// Orders are scoped by tenant and account, joined by the unit separator.
	orders := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Minute, ScopeHeader: "X-Account"}
	refunds := &idem.Operation{Name: "createRefund", TTL: time.Hour, Lease: time.Minute}
	runs := map[string]int{}
	charges := map[string][]string{} // an order's derived keys, by run
	handler := func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
		runs[at.Key()]++
		body := fmt.Sprintf(`{"key":%q,"note":"café","padding":%q}`, at.Key(), strings.Repeat("x", 64))
		if strings.HasPrefix(at.Key(), "order") {
			charges[at.Key()] = append(charges[at.Key()], at.DerivedKey("charge"))
		}
		return func(w http.ResponseWriter) error {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Location", "/things/"+at.Key())
			w.WriteHeader(201)
			_, err := w.Write([]byte(body))
			return err
		}, nil
	}
	serve := func(op *idem.Operation, tenant, account, key string) *idem.Response {
		t.Helper()
		r := httptest.NewRequest("POST", "/", nil)
		r.Header.Set(idem.HeaderKey, key)
		r.Header.Set("X-Tenant", tenant)
		r.Header.Set("X-Account", account)
		resp, err := engine.Serve(idem.WithRequest(ctx, r), op, []byte("fp"), handler)
		if err != nil || resp.Status != 201 {
			t.Fatalf("%s %s: %+v, %v", op.Name, key, resp, err)
		}
		return resp
	}
	serve(orders, "acme", "acct_42", "order-1")
	serve(orders, "acme", "acct_43", "order-2")
	serve(refunds, "", "", "refund-1")
	serve(refunds, "other", "", "refund-2")
	order1 := idem.ID{Scope: "acme\x1facct_42", Operation: "createOrder", Key: "order-1"}
	wantBody := fmt.Sprintf(`{"key":"order-1","note":"café","padding":%q}`, strings.Repeat("x", 64))

	keys := func(t *testing.T, args ...string) (stdout, stderr string) {
		t.Helper()
		code, stdout, stderr := idemgen(t, append([]string{"keys"}, args...)...)
		if code != 0 {
			t.Fatalf("idemgen keys %q: exit %d\n%s", args, code, stderr)
		}
		return stdout, stderr
	}

	t.Run("list", func(t *testing.T) {
		t.Setenv("DATABASE_URL", url)
		stdout, _ := keys(t, "list")
		lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
		if !regexp.MustCompile(`^HASH +OPERATION +SCOPE +KEY +STATUS +RESPONSE +GEN +AGE +LEFT +RECOVERY POINT +HELD$`).MatchString(lines[0]) || len(lines) != 5 {
			t.Fatalf("keys list printed\n%s\nwant a header and 4 keys", stdout)
		}
		row := regexp.MustCompile(`(?m)^` + idem.KeyHash(order1) + ` +createOrder +acme\\x1facct_42 +order-1 +completed +201 +1 +\d+s +(59m\d+s|1h0m) +- +no$`)
		if !row.MatchString(stdout) {
			t.Errorf("keys list printed\n%s\nwant a line matching %s", stdout, row)
		}
		if !regexp.MustCompile(`(?m) createRefund +"" +refund-1 `).MatchString(stdout) {
			t.Errorf("keys list does not print the empty scope as \"\":\n%s", stdout)
		}

		stdout, _ = keys(t, "list", "-json")
		all := keysJSON(t, stdout)
		if got := keyNames(all); !slices.Equal(got, []string{"order-1", "order-2", "refund-1", "refund-2"}) {
			t.Fatalf("keys list -json listed %v", got)
		}
		for _, k := range all {
			if k["key"] != "order-1" {
				continue
			}
			want := map[string]any{"hash": idem.KeyHash(order1), "operation": "createOrder", "scope": "acme\x1facct_42", "status": "completed",
				"held": false, "generation": 1.0, "attempt": 1.0, "derived": true, "recovery_point": "", "response_status": 201.0, "lease_ends": nil}
			for field, v := range want {
				if k[field] != v {
					t.Errorf("keys list -json: order-1's %s is %v, want %v", field, k[field], v)
				}
			}
			for _, field := range []string{"created_at", "expires_at", "now", "age_seconds", "ttl_left_seconds", "lease_left_seconds"} {
				if _, ok := k[field]; !ok {
					t.Errorf("keys list -json: order-1 has no %s: %v", field, k)
				}
			}
		}

		for _, tt := range []struct {
			args []string
			want []string
		}{
			{[]string{"-scope", `acme\x1facct_42`}, []string{"order-1"}},
			{[]string{"-operation", "createRefund"}, []string{"refund-1", "refund-2"}},
			{[]string{"-operation", "createRefund", "-scope", ""}, []string{"refund-1"}},
			{[]string{"-scope", `""`}, []string{"refund-1"}},
			{[]string{"-operation", "createOrder", "-status", "completed"}, []string{"order-1", "order-2"}},
		} {
			stdout, _ := keys(t, append([]string{"list", "-json"}, tt.args...)...)
			if got := keyNames(keysJSON(t, stdout)); !slices.Equal(got, tt.want) {
				t.Errorf("keys list -json %q listed %v, want %v", tt.args, got, tt.want)
			}
		}
		if stdout, stderr := keys(t, "list", "-status", "in_flight"); stdout != "" || stderr != "idemgen keys list: no keys match\n" {
			t.Errorf("keys list -status in_flight: stdout %q, stderr %q", stdout, stderr)
		}
		// Flags may also come before the subcommand.
		stdout, stderr := keys(t, "-limit", "1", "list", "-json")
		if got := keyNames(keysJSON(t, stdout)); !slices.Equal(got, []string{"refund-2"}) || !strings.Contains(stderr, "listed the newest 1 key; more may match") {
			t.Errorf("keys -limit 1 list -json listed %v, stderr %q; want the newest key and a note", got, stderr)
		}
	})

	show := []string{"show", "-database-url", url, "-operation", "createOrder", "-scope", `acme\x1facct_42`, "-key", "order-1"}
	t.Run("show", func(t *testing.T) {
		stdout, _ := keys(t, show...)
		for _, want := range []string{
			"hash:            " + idem.KeyHash(order1) + "\n",
			"scope:           acme\\x1facct_42\n",
			"status:          completed\n",
			"generation:      1\n",
			"derived keys:    yes\n",
			"response:        201 Created\n\nContent-Type: application/json\nLocation: /things/order-1\n\n" + wantBody + "\n",
		} {
			if !strings.Contains(stdout, want) {
				t.Errorf("keys show printed\n%s\nwant it to contain\n%s", stdout, want)
			}
		}
		stdout, _ = keys(t, append(show, "-max-body", "16")...)
		want := fmt.Sprintf("\n\n%s\n[the first 16 of %d bytes; -max-body %d shows them all]\n", wantBody[:16], len(wantBody), len(wantBody))
		if !strings.HasSuffix(stdout, want) {
			t.Errorf("keys show -max-body 16 printed\n%s\nwant it to end with\n%s", stdout, want)
		}
		// A cut inside a character leaves it out.
		cut := `{"key":"order-1","note":"caf`
		stdout, _ = keys(t, append(show, "-max-body", fmt.Sprint(len(cut)+1))...)
		if want := fmt.Sprintf("\n\n%s\n[the first %d of ", cut, len(cut)); !strings.Contains(stdout, want) {
			t.Errorf("keys show -max-body %d printed\n%s\nwant it to contain\n%s", len(cut)+1, stdout, want)
		}
		stdout, _ = keys(t, append(show, "-max-body", "16", "-json")...)
		var shown struct {
			Status        string
			Headers       http.Header
			Body          string
			BodyLength    int  `json:"body_length"`
			BodyTruncated bool `json:"body_truncated"`
		}
		if err := json.Unmarshal([]byte(stdout), &shown); err != nil {
			t.Fatal(err)
		}
		if shown.Status != "completed" || shown.Headers.Get("Location") != "/things/order-1" || shown.Body != wantBody[:16] ||
			shown.BodyLength != len(wantBody) || !shown.BodyTruncated {
			t.Errorf("keys show -json printed %s", stdout)
		}
	})

	t.Run("forget", func(t *testing.T) {
		stdout, stderr := keys(t, "forget", "-database-url", url, "-operation", "createOrder", "-scope", `acme\x1facct_42`, "-key", "order-1")
		want := fmt.Sprintf("forgot key order-1 of createOrder in scope acme\\x1facct_42 (hash %s), completed (201) in generation 1: "+
			"the next request with it runs as new, in generation 2\n", idem.KeyHash(order1))
		if stdout != want {
			t.Errorf("keys forget printed\n%s\nwant\n%s", stdout, want)
		}
		logged := `level=INFO msg="idem: forgot key" operation=createOrder scope="acme\x1facct_42" key_hash=` + idem.KeyHash(order1) +
			" status=completed generation=1 held=false forced=false action=emptied\n"
		// Forgotten within its TTL without -redis-url: a replay filter
		// may replay it for a moment, the previous release's until its
		// entry expires, and the command says so.
		warned := regexp.MustCompile(`(?m)^idemgen keys forget: a service with a Redis replay filter may go on replaying the key for up to 2s, ` +
			`and one of the previous release until \S+Z; to hold the key until none does, forget with -redis-url \(and -redis-prefix, if the service sets one\)\n\z`)
		if !strings.Contains(stderr, logged) || !warned.MatchString(stderr) || strings.Contains(stderr, "order-1") {
			t.Errorf("keys forget logged\n%s\nwant\n%s and the replay filter's warning", stderr, logged)
		}
		// Its row stays, emptied, for its generation.
		stdout, _ = keys(t, "list", "-database-url", url, "-json", "-scope", `acme\x1facct_42`)
		if k := keysJSON(t, stdout); len(k) != 1 || k[0]["status"] != "expired" || k[0]["generation"] != 1.0 || k[0]["response_status"] != 0.0 {
			t.Errorf("after the forget, keys list -json printed %s", stdout)
		}
		if stdout, _ := keys(t, show...); !strings.Contains(stdout, "status:          expired\n") || !strings.HasSuffix(stdout, "response:        none\n") {
			t.Errorf("keys show of the forgotten key printed\n%s", stdout)
		}

		// The next request runs as new, in the next generation, and derives
		// another key; the one after is a replay.
		if resp := serve(orders, "acme", "acct_42", "order-1"); resp.Replayed {
			t.Fatal("the request after the forget was replayed")
		}
		if resp := serve(orders, "acme", "acct_42", "order-1"); !resp.Replayed {
			t.Fatal("the request after that was not replayed")
		}
		if runs["order-1"] != 2 || len(charges["order-1"]) != 2 || charges["order-1"][0] == charges["order-1"][1] {
			t.Errorf("order-1 ran %d times, deriving %q; want twice, with two keys", runs["order-1"], charges["order-1"])
		}

		// A key whose attempts derived none is deleted; its next use is
		// generation 1 again.
		stdout, _ = keys(t, "forget", "-database-url", url, "-operation", "createRefund", "-key", "refund-1", "-json")
		var forgotten map[string]any
		if err := json.Unmarshal([]byte(stdout), &forgotten); err != nil {
			t.Fatal(err)
		}
		if forgotten["action"] != "deleted" || forgotten["next_generation"] != 1.0 || forgotten["status"] != "completed" || forgotten["fenced"] != false {
			t.Errorf("keys forget -json printed %s", stdout)
		}
		if resp := serve(refunds, "", "", "refund-1"); resp.Replayed || runs["refund-1"] != 2 {
			t.Errorf("refund-1 after the forget: replayed %v, %d runs; want it run again", resp.Replayed, runs["refund-1"])
		}
	})

	t.Run("not found", func(t *testing.T) {
		for _, sub := range []string{"show", "forget"} {
			code, stdout, stderr := idemgen(t, "keys", sub, "-database-url", url, "-operation", "createOrder", "-key", "order-1")
			want := fmt.Sprintf(`idemgen keys %s: no key order-1 of createOrder in scope "" (hash %s); without -scope, the key is looked for in the empty scope; `+
				"'idemgen keys list -operation createOrder' lists its keys\n", sub, idem.KeyHash(idem.ID{Operation: "createOrder", Key: "order-1"}))
			if code != 1 || stdout != "" || stderr != want {
				t.Errorf("keys %s of a missing key: exit %d, stdout %q, stderr\n%s\nwant 1 and\n%s", sub, code, stdout, stderr, want)
			}
		}
	})

	t.Run("held", func(t *testing.T) {
		id := idem.ID{Operation: "createPayment", Key: "pay-1"}
		lease, err := store.Lease(ctx, id, idem.Claim{Fingerprint: []byte("fp"), TTL: time.Hour, Lease: time.Minute, Generation: 1})
		if err != nil {
			t.Fatal(err)
		}
		stdout, _ := keys(t, "list", "-database-url", url, "-operation", "createPayment")
		if !regexp.MustCompile(`(?m) pay-1 +in_flight +- +1 +\d+s +lease (\d+s|1m0s) +- +yes$`).MatchString(stdout) {
			t.Errorf("keys list printed\n%s\nwant pay-1 in flight, held, with its lease", stdout)
		}
		forget := []string{"keys", "forget", "-database-url", url, "-operation", "createPayment", "-key", "pay-1"}
		code, _, stderr := idemgen(t, forget...)
		held := regexp.MustCompile(`^idemgen keys forget: key pay-1 of createPayment in scope "" \(hash [0-9a-f]{12}\) is held by a live attempt ` +
			`\(lease ends in (\d+s|1m0s)\); wait for it, or pass -force to fence it off\n$`)
		if code != 1 || !held.MatchString(stderr) {
			t.Errorf("keys forget of a held key: exit %d\n%s\nwant 1 and a message matching %s", code, stderr, held)
		}
		code, stdout, stderr = idemgen(t, append(forget, "-force")...)
		if code != 0 || !strings.Contains(stdout, ", in flight in generation 1: the next request with it runs as new, in generation 2\n"+
			"the attempt that held it was fenced off: its later phases fail with lease lost") {
			t.Errorf("keys forget -force: exit %d, stdout\n%s\nstderr\n%s", code, stdout, stderr)
		}
		if _, err := lease.Phase(ctx); !errors.Is(err, idem.ErrLeaseLost) {
			t.Errorf("the fenced attempt's next phase = %v, want ErrLeaseLost", err)
		}
	})

	// A running atomic attempt has no row to fence: forget refuses even
	// with -force, and show says the attempt runs.
	t.Run("held by an atomic attempt", func(t *testing.T) {
		started, release, done := make(chan struct{}), make(chan struct{}), make(chan error)
		go func() {
			r := httptest.NewRequest("POST", "/", nil)
			r.Header.Set(idem.HeaderKey, "refund-9")
			_, err := engine.Serve(idem.WithRequest(ctx, r), refunds, []byte("fp"), func(context.Context, *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
				close(started)
				<-release
				return func(w http.ResponseWriter) error { w.WriteHeader(201); return nil }, nil
			})
			done <- err
		}()
		<-started
		code, _, stderr := idemgen(t, "keys", "forget", "-database-url", url, "-operation", "createRefund", "-key", "refund-9", "-force")
		if want := "is held by a running atomic attempt, which commits its response or rolls back on its own, within its lease; " +
			"-force cannot fence it off: wait for it, then forget the key\n"; code != 1 || !strings.HasSuffix(stderr, want) {
			t.Errorf("keys forget -force of a key an atomic attempt holds: exit %d\n%s\nwant 1 and a message ending\n%s", code, stderr, want)
		}
		code, stdout, stderr := idemgen(t, "keys", "show", "-database-url", url, "-operation", "createRefund", "-key", "refund-9")
		if code != 0 || !strings.Contains(stdout, "held:       yes\nrow:        none yet: an atomic attempt is running") {
			t.Errorf("keys show of a key an atomic attempt holds: exit %d, stdout\n%s\nstderr\n%s", code, stdout, stderr)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})

	t.Run("usage", func(t *testing.T) {
		for _, tt := range []struct {
			args []string
			want string
		}{
			{[]string{"keys"}, "idemgen keys: missing subcommand: list, show or forget\n"},
			{[]string{"keys", "lst"}, `idemgen keys: unknown subcommand "lst": want list, show or forget` + "\n"},
			{[]string{"keys", "list", "-force"}, "idemgen keys: -force is not a flag of list, only of forget\n"},
			{[]string{"keys", "forget", "-max-body", "1", "-operation", "o", "-key", "k"}, "idemgen keys: -max-body is not a flag of forget, only of show\n"},
			{[]string{"keys", "show", "-operation", "createOrder"}, "idemgen keys: show needs -key\n"},
			{[]string{"keys", "forget", "-key", "k"}, "idemgen keys: forget needs -operation\n"},
			{[]string{"keys", "list", "-scope", `bad\q`}, `idemgen keys: invalid value "bad\\q" for -scope: not a valid escaped string: write \x1f for the unit separator, \\ for a backslash, \" for a quote` + "\n"},
			{[]string{"keys", "list", "-status", "done"}, `idemgen keys: invalid value "done" for -status: expected one of in_flight, completed, expired` + "\n"},
			{[]string{"keys", "list", "-limit", "0"}, "idemgen keys: -limit must be 1 to 1000\n"},
			{[]string{"keys", "list", "now"}, `idemgen keys: unexpected arguments ["now"]` + "\n"},
			{[]string{"keys", "list", "-nosuch"}, "idemgen keys: flag provided but not defined: -nosuch\n"},
		} {
			code, stdout, stderr := idemgen(t, tt.args...)
			if want := tt.want + "Run 'idemgen keys -h' for usage.\n"; code != 2 || stdout != "" || stderr != want {
				t.Errorf("%q: exit %d, stdout %q, stderr\n%s\nwant 2 and\n%s", tt.args, code, stdout, stderr, want)
			}
		}
		t.Setenv("DATABASE_URL", "")
		if code, _, stderr := idemgen(t, "keys", "list"); code != 2 || stderr != "idemgen keys list: no database; set DATABASE_URL or pass -database-url\n" {
			t.Errorf("keys list without a database: exit %d\n%s", code, stderr)
		}
		for _, args := range [][]string{{"keys", "-h"}, {"help", "keys"}, {"keys", "list", "-h"}} {
			code, stdout, _ := idemgen(t, args...)
			for _, want := range []string{"list ", "show ", "forget ", "fenced off", "lease lost", "stays done", `-scope 'acme\x1facct_42'`} {
				if code != 0 || !strings.Contains(stdout, want) {
					t.Errorf("%q: exit %d; the help does not contain %q:\n%s", args, code, want, stdout)
				}
			}
		}
	})
}

// TestKeysForgetRedis: with -redis-url, keys forget also forgets the key
// in the replay filter, so that the service's next request runs anew; with
// that Redis down it forgets nothing and says so.
func TestKeysForgetRedis(t *testing.T) {
	ctx := context.Background()
	url, pool := keyStore(t)
	t.Setenv("DATABASE_URL", url)
	srv := redistest.Start(t)
	// newEngine is a service's engine with the filter; a fresh one has no
	// backoff from Redis's failures.
	newEngine := func() *idem.Engine[pgx.Tx] {
		// A long timeout, so that a loaded machine makes no lookup fail.
		cache, err := redisfilter.New(srv.Client(t), redisfilter.Options{Prefix: "svc:", Timeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return idem.NewEngine(pgstore.New(pool, pgstore.Options{ReplayCache: cache, Logger: slog.New(slog.DiscardHandler)}), idem.Options{Logger: slog.New(slog.DiscardHandler)})
	}
	engine := newEngine()
	op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Minute}
	runs := 0
	serve := func() *idem.Response {
		t.Helper()
		r := httptest.NewRequest("POST", "/", nil)
		r.Header.Set(idem.HeaderKey, "k1")
		resp, err := engine.Serve(idem.WithRequest(ctx, r), op, []byte("fp"), func(context.Context, *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
			runs++
			return func(w http.ResponseWriter) error { w.WriteHeader(201); return nil }, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	serve()
	serve() // fills the filter
	// The previous release's slot, where forget leaves a tombstone; this
	// release's entries are that and the epoch they were written under.
	slot := "svc:" + pgstore.FilterKey(idem.ID{Operation: "createOrder", Key: "k1"})
	entries := func() []string {
		t.Helper()
		keys, err := srv.Client(t).Keys(ctx, slot+".*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	if len(entries()) != 1 {
		t.Fatalf("the filter holds %q, want one entry for k1", entries())
	}
	args := []string{"keys", "forget", "-operation", "createOrder", "-key", "k1", "-redis-url", "redis://" + srv.Addr, "-redis-prefix", "svc:"}

	srv.Stop()
	code, _, stderr := idemgen(t, args...)
	if code != 1 || !strings.Contains(stderr, "was not forgotten") {
		t.Fatalf("with Redis down: exit %d\n%s", code, stderr)
	}
	if resp := serve(); !resp.Replayed || runs != 1 {
		t.Fatalf("a failed forget forgot the key: replayed %v, runs %d", resp.Replayed, runs)
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// The restarted Redis is empty: fill it again through a fresh client.
	if err := srv.Client(t).Set(ctx, slot, "stale", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := idemgen(t, args...)
	if code != 0 || !strings.Contains(stdout, "forgot key") {
		t.Fatalf("keys forget: exit %d\n%s%s", code, stdout, stderr)
	}
	if v, err := srv.Client(t).Get(ctx, slot).Result(); err != nil || v == "stale" {
		t.Fatalf("after forget, k1's slot holds %q (%v), want the tombstone", v, err)
	}

	// Forgotten without -redis-url: the command says the filter may go on
	// replaying the key for a moment, and it does; run again with
	// -redis-url, it finds no row and holds the key until no server can,
	// and the next use runs anew.
	engine = newEngine()
	serve()
	if keys := entries(); len(keys) > 0 {
		if err := srv.Client(t).Del(ctx, keys...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	serve() // fills
	code, _, stderr = idemgen(t, args[:6]...)
	if code != 0 || !strings.Contains(stderr, "may go on replaying the key for up to 2s") || !strings.Contains(stderr, "-redis-url") {
		t.Fatalf("keys forget without -redis-url: exit %d\n%s", code, stderr)
	}
	if resp := serve(); !resp.Replayed || runs != 2 {
		t.Fatalf("forgotten without -redis-url: replayed %v, runs %d; want the filter's replay", resp.Replayed, runs)
	}
	code, _, stderr = idemgen(t, args...)
	if code != 1 || !strings.Contains(stderr, "no key") || !strings.Contains(stderr, "was removed") {
		t.Fatalf("keys forget -redis-url of a forgotten key: exit %d\n%s", code, stderr)
	}
	if resp := serve(); resp.Replayed || runs != 3 {
		t.Fatalf("after the entry was dropped: replayed %v, runs %d; want a first execution", resp.Replayed, runs)
	}
}

// keys show names an async request's River job, and says so in -json.
func TestKeysShowNamesJob(t *testing.T) {
	url, pool := keyStore(t)
	if err := idemriver.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	engine := idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{Logger: slog.New(slog.DiscardHandler)})
	insert, err := idemriver.NewInsertClient()
	if err != nil {
		t.Fatal(err)
	}
	op := &idem.Operation{Name: "createExport", TTL: time.Hour, Lease: time.Minute, Async: true, StatusPath: "/exports/{key}"}
	r := httptest.NewRequest("POST", "/exports", nil)
	r.Header.Set(idem.HeaderKey, "export-1")
	resp, err := engine.ServeAsync(idem.WithRequest(context.Background(), r), op, []byte("fp"), map[string]string{"format": "csv"},
		idemriver.Enqueue[pgx.Tx](insert, func(a idem.Accepted) exportJob { return exportJob{idemriver.ArgsOf(a)} }))
	if err != nil || resp.Status != http.StatusAccepted {
		t.Fatalf("accept: %v %+v", err, resp)
	}
	code, stdout, stderr := idemgen(t, "keys", "show", "-database-url", url, "-operation", "createExport", "-key", "export-1")
	if code != 0 || !regexp.MustCompile(`(?m)^job: +River job \d+ \(idem\.createExport\), available, attempt 0 of 25$`).MatchString(stdout) {
		t.Fatalf("keys show: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = idemgen(t, "keys", "show", "-json", "-database-url", url, "-operation", "createExport", "-key", "export-1")
	var shown struct {
		Job *struct{ Kind, State string }
	}
	if err := json.Unmarshal([]byte(stdout), &shown); code != 0 || err != nil || shown.Job == nil || shown.Job.Kind != "idem.createExport" {
		t.Errorf("keys show -json: exit %d, %v: %s", code, err, stdout)
	}
}

// exportJob is an async operation's job type, as the generated code
// declares it.
type exportJob struct{ idemriver.Args }

func (exportJob) Kind() string { return idemriver.JobKind("createExport") }
