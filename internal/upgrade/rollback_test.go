package upgrade

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The current release serves a new database (migrated to 0009) and
// stores answers of every kind; then it is rolled back: its binaries
// stopped, its migrations undone with its own `idemgen migrate down`, the
// previous release started. That release replays every stored answer
// byte for byte, and keeps serving while the current release's
// migrations are applied again.
func TestRollbackToPreviousRelease(t *testing.T) {
	prev, cur := releases(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dbURL := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	client := newClient(t)
	c := newCluster(t, dbURL)
	if err := c.startPSP(ctx, cur); err != nil {
		t.Fatal(err)
	}
	server, err := c.startServer(ctx, cur)
	if err != nil {
		t.Fatal(err)
	}
	if pending := pendingMigrations(ctx, t, cur, dbURL); len(pending) != 0 {
		t.Fatalf("after the current release's start, migrations %v are pending", pending)
	}

	type call struct {
		path, account, key, body string
		want                     int // the first answer's status
	}
	type stored struct {
		call
		first answer
	}
	var all []stored
	send := func(p *proc, cl call) answer {
		t.Helper()
		a, err := post(ctx, client, p, cl.path, cl.account, cl.key, cl.body)
		if err != nil {
			t.Fatalf("%s %s key %s: %v", cl.account, cl.path, cl.key, err)
		}
		return a
	}
	first := func(cl call) answer {
		t.Helper()
		a := send(server, cl)
		if a.status != cl.want || a.replayed {
			t.Fatalf("%s %s key %s: the first answer is %v, want a new %d", cl.account, cl.path, cl.key, a, cl.want)
		}
		all = append(all, stored{cl, a})
		return a
	}
	for _, account := range []string{"acct_1", "acct_2"} {
		var orders []string
		for i := range 3 {
			a := first(call{"/orders", account, fmt.Sprintf("order-%d", i), orderBody(1000+100*i, "cus_"+account), 201})
			orders = append(orders, idOf(a.body))
		}
		// A typed 400 is stored like a success.
		first(call{"/orders", account, "order-invalid", orderBody(0, "cus_"+account), 400})
		first(call{"/payments", account, "pay-0", paymentBody(orders[0], 1000), 201})
		// The fake provider declines 40.00: a stored 402.
		first(call{"/payments", account, "pay-declined", paymentBody(orders[1], 4000), 402})
	}
	before, err := c.pspStats(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	if before.Charges != 2 || before.Declines != 2 {
		t.Fatalf("the provider saw %+v, want 2 charges and 2 declines", before)
	}
	if err := server.stop(30 * time.Second); err != nil {
		t.Fatalf("the current release's server did not drain and exit 0: %v\n%s", err, server.log())
	}

	newer := newerMigrations(t)
	out, _, err := tool(ctx, cur, dbURL, "migrate", "down", "-to", strconv.Itoa(PreviousMigration))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range newer {
		if !strings.Contains(out, "rolled back "+name) {
			t.Fatalf("migrate down -to %d printed:\n%s\nwant it to roll back %s", PreviousMigration, out, name)
		}
	}
	if pending := pendingMigrations(ctx, t, cur, dbURL); !slices.Equal(pending, newer) {
		t.Fatalf("after migrate down -to %d, the pending migrations are %v, want %v", PreviousMigration, pending, newer)
	}

	old, err := c.startServer(ctx, prev)
	if err != nil {
		t.Fatalf("the previous release does not start on the rolled-back database: %v", err)
	}
	replayAll := func(when string) {
		t.Helper()
		for _, s := range all {
			a := send(old, s.call)
			if a.status != s.first.status || a.body != s.first.body || a.location != s.first.location || !a.replayed {
				t.Errorf("%s, %s %s key %s: %s answered\n\t%d replayed=%v Location %q %s\nwant the stored answer of %s, replayed:\n\t%d Location %q %s",
					when, s.account, s.path, s.key, old.name, a.status, a.replayed, a.location, strings.TrimSpace(a.body),
					s.first.server, s.first.status, s.first.location, strings.TrimSpace(s.first.body))
			}
		}
	}
	replayAll("after the rollback")

	out, _, err = tool(ctx, cur, dbURL, "migrate", "up")
	if err != nil {
		t.Fatalf("migrate up with %s serving: %v", old.name, err)
	}
	if !strings.Contains(out, "applied 0009_derived_by_default") {
		t.Fatalf("migrate up printed:\n%s\nwant it to apply 0009_derived_by_default", out)
	}
	if pending := pendingMigrations(ctx, t, cur, dbURL); len(pending) != 0 {
		t.Fatalf("after migrate up, migrations %v are still pending", pending)
	}
	replayAll("after migrating up again")

	after, err := c.pspStats(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("the replays reached the provider: it saw %+v before them and %+v after", before, after)
	}
	var orders, payments int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM payments)`).Scan(&orders, &payments); err != nil {
		t.Fatal(err)
	}
	if orders != 6 || payments != 4 {
		t.Errorf("%d orders and %d payments, want 6 and 4: a replay ran its handler", orders, payments)
	}
}

// pendingMigrations lists the migrations `idemgen migrate status` of rel
// reports as pending on dbURL.
func pendingMigrations(ctx context.Context, t *testing.T, rel release, dbURL string) []string {
	t.Helper()
	out, _, err := tool(ctx, rel, dbURL, "migrate", "status")
	if err != nil {
		t.Fatal(err)
	}
	var pending []string
	rows := 0
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] == "MIGRATION" {
			continue
		}
		rows++
		if f[1] == "pending" {
			pending = append(pending, f[0])
		}
	}
	if rows < 9 {
		t.Fatalf("%s idemgen migrate status lists %d migrations, want at least 9:\n%s", rel.name, rows, out)
	}
	return pending
}
