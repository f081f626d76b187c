package pgstore

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A claim whose release reaches another session than the one that made
// it, as a pooler in transaction mode makes happen, turns the store's
// lookup claims off, with an error that names the option to set.
func TestPoolerNoticed(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	s := New(pool, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	c := idem.Claim{Fingerprint: []byte("fp"), TTL: time.Hour, Lease: time.Minute}
	id := idem.ID{Operation: "createOrder", Key: "k"}
	_, txn, err := s.LookupClaim(ctx, id, c)
	if err != nil || txn == nil {
		t.Fatalf("LookupClaim = %v, %v", txn, err)
	}
	at := txn.(*claimed)

	// The pooler hands the attempt's next transaction to another session.
	other, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	stranded, giveBack := at.c.conn, at.c.release
	at.tx.conn, at.c.conn, at.c.release = other, other, func() {}
	if err := txn.Complete(ctx, &idem.Response{Status: 201}); err != nil {
		t.Fatalf("Complete = %v; the row is stored all the same", err)
	}
	if !other.IsClosed() {
		t.Error("the session that could not release the claim was kept open")
	}
	if !strings.Contains(logs.String(), "TransactionPooling") || !strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("logged %q, want an error naming Options.TransactionPooling", logs.String())
	}
	if _, err := stranded.Exec(ctx, `SELECT idemgen_release_claim($1)`, at.lock); err != nil {
		t.Fatal(err)
	}
	giveBack()

	if rec, err := s.Lookup(ctx, id); err != nil || !rec.Completed {
		t.Fatalf("Lookup = %+v, %v; want the stored response", rec, err)
	}
	rec, next, err := s.LookupClaim(ctx, idem.ID{Operation: "createOrder", Key: "k2"}, c)
	if err != nil || next != nil || rec.Found || rec.Held {
		t.Fatalf("LookupClaim after the pooler was noticed = %+v, %v, %v; want a free key and no claim", rec, next, err)
	}
	claimed, err := s.Claim(ctx, idem.ID{Operation: "createOrder", Key: "k2"}, c)
	if err != nil {
		t.Fatalf("a transaction claim after the pooler was noticed: %v", err)
	}
	_ = claimed.Abort(ctx)
}
