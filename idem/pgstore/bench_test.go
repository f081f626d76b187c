package pgstore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
)

// BenchmarkStore measures the protocol on PostgreSQL from the client's
// side, without HTTP: an atomic first execution whose handler inserts one
// row, and a replay. go test -bench Store -cpuprofile shows where the
// server's CPU goes; the bench command measures PostgreSQL's.
func BenchmarkStore(b *testing.B) {
	ctx := context.Background()
	pool := newConfiguredPool(b, func(cfg *pgxpool.Config) { cfg.MaxConns = 8 })
	if _, err := pool.Exec(ctx, `CREATE TABLE orders (id bigserial PRIMARY KEY, key text)`); err != nil {
		b.Fatal(err)
	}
	engine := idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{})
	op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Minute}
	handler := func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
		var id int64
		if err := at.Tx().QueryRow(ctx, `INSERT INTO orders (key) VALUES ($1) RETURNING id`, at.Key()).Scan(&id); err != nil {
			return nil, err
		}
		return func(w http.ResponseWriter) error {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(201)
			_, err := fmt.Fprintf(w, `{"id":%d}`, id)
			return err
		}, nil
	}
	serve := func(key string) *idem.Response {
		r := httptest.NewRequest("POST", "/orders", nil)
		r.Header.Set(idem.HeaderKey, key)
		resp, err := engine.Serve(idem.WithRequest(ctx, r), op, []byte("fp"), handler)
		if err != nil || resp.Status != 201 {
			b.Fatalf("%v, %v", resp, err)
		}
		return resp
	}
	var seq atomic.Int64
	b.Run("first", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				serve(fmt.Sprint("first-", seq.Add(1)))
			}
		})
	})
	for i := range 100 {
		serve(fmt.Sprint("replay-", i))
	}
	b.Run("replay", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				if resp := serve(fmt.Sprint("replay-", i%100)); !resp.Replayed {
					b.Fatal("not a replay")
				}
			}
		})
	})
}
