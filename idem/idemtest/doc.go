// Package idemtest tests a service's own handlers against the
// Idempotency-Key protocol, on a real PostgreSQL database.
//
// NewPool gives a test a fresh database with the key store migrated and
// the application's schema applied; Check drives one operation of a
// mounted handler through the protocol: first call, byte-identical
// replay, 422 for a changed request, concurrent duplicates that run once,
// and a failing run that leaves the key free and none of its writes
// behind: a table it changed (see ReadTables) was written outside the
// attempt's transaction, through the pool instead of at.Tx(). The keys
// go in the Idempotency-Key header, or where Request.Key says the
// operation reads them: a header, a query parameter, a member of a JSON
// body or a form field, or several for a composite key. With tests:
// true in idemgen.yaml, idemgen also writes a package <package>test whose
// Check does this for every annotated operation, counting runs by
// wrapping the implementation and reading the tables of the database its
// attempts run on (AttemptDB):
//
//	func TestMain(m *testing.M) { idemtest.Main(m) }
//
//	func TestProtocol(t *testing.T) {
//		pool := idemtest.NewPool(t, schemaSQL)
//		svc := &orders.Service{Pool: pool}
//		gentest.Check(t, svc, pgstore.New(pool, pgstore.Options{}), gen.IdempotentHandlerOptions{}, gentest.Requests{
//			// Operations whose spec has examples need no request here.
//			CreatePayment: &idemtest.Request{
//				Method: "POST",
//				Path:   "/payments",
//				Header: http.Header{"Content-Type": {"application/json"}, "X-Account-Id": {"acct_1"}},
//				Body:   []byte(`{"order_id": "ord_1", "amount_cents": 990}`),
//			},
//		})
//	}
//
// The database's server is DATABASE_URL's when set, else the one on
// 127.0.0.1:5432, else a throwaway cluster started with initdb and pg_ctl
// (Debian's postgresql package), which Main stops.
package idemtest
