package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgen/idemgen/bench/peers"
	"github.com/idemgen/idemgen/bench/realistic"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemriver"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// scenarioNames are the scenarios, in the order they run by default.
var scenarioNames = []string{"baseline", "atomic-first", "atomic-first-redis", "peer-insert-update", "peer-upsert", "phased-first",
	"async-accept", "realistic-baseline", "realistic-first",
	"read-by-id", "async-status", "replay", "replay-redis", "peer-insert-update-replay", "peer-upsert-replay", "422", "409", "storm",
	"fiber-baseline", "fiber-first", "fiber-replay"}

// realisticBody is an order of two line items for bench/realistic.
var realisticBody = []byte(`{"customer_id":"` + realistic.Customer + `","items":[{"sku":"sku-1","quantity":1,"price_cents":500},{"sku":"sku-2","quantity":2,"price_cents":250}]}`)

// peerPaths are the hand-written designs' createOrder (see bench/peers).
var peerPaths = map[string]string{"peer-insert-update": peers.InsertUpdatePath, "peer-upsert": peers.UpsertPath}

func knownScenario(name string) bool { return slices.Contains(scenarioNames, name) }

// The bodies of createOrder; otherOrderBody has another fingerprint.
var (
	orderBody      = []byte(`{"amount_cents":1250,"currency":"EUR","customer_id":"cus_bench"}`)
	otherOrderBody = []byte(`{"amount_cents":1251,"currency":"EUR","customer_id":"cus_bench"}`)
)

// exportBody is createExport's body.
var exportBody = []byte(`{"format":"csv"}`)

// scenario is one row of the table: a kind of request all clients send.
type scenario struct {
	name  string
	about string
	// server is the backend the requests go to: backendOrders when
	// empty.
	server string
	// expect are the outcomes that are not errors.
	expect []outcome
	// prepare, if set, runs before the warm-up, outside every measurement.
	prepare func(ctx context.Context) error
	// next is what client c sends next.
	next func(c *client) request
	// cleanup, if set, runs after the measurement.
	cleanup func(ctx context.Context) error
}

// fixtures are what scenarios set up beforehand, shared by those that
// need the same.
type fixtures struct {
	// clients are the orders-api's.
	clients []*client
	// backend returns a started backend, for fixtures on other servers.
	backend func(name string) *backend
	// dbURL is the run's database, where the 409 scenario holds keys.
	dbURL      string
	conns      int
	replayKeys int
	heldKeys   int
	stormKeys  int

	replayOnce sync.Once
	replayErr  error
	fiberOnce  sync.Once
	fiberErr   error
	redisOnce  sync.Once
	redisErr   error
	exportOnce sync.Once
	exportErr  error
	// statusPaths are the status resources of the exports accepted for
	// async-status.
	statusPaths []string
	// p prints the run's progress.
	p progress
	// runID is unique to the run.
	runID string

	peerOnce map[string]*sync.Once
	peerErr  map[string]error
}

func (f *fixtures) scenario(name string) *scenario {
	switch name {
	case "baseline":
		return &scenario{
			name:   name,
			about:  "POST /baseline/orders without a key: the same insert, committed on its own",
			expect: []outcome{outFirst},
			next:   func(*client) request { return request{path: "/baseline/orders", body: orderBody} },
		}
	case "atomic-first":
		return &scenario{
			name:   name,
			about:  "POST /orders with a fresh key: the lookup, which claims; BEGIN with the insert; the key row, which hands the claim over, with COMMIT",
			expect: []outcome{outFirst},
			next: func(c *client) request {
				return request{path: "/orders", key: c.freshKey("a"), body: orderBody}
			},
		}
	case "atomic-first-redis":
		return &scenario{
			name:   name,
			about:  "POST /orders with a fresh key on the orders-api with its Redis replay filter (-redis-url): a Redis GET that misses, then atomic-first's statements",
			server: backendOrdersRedis,
			expect: []outcome{outFirst},
			next: func(c *client) request {
				return request{path: "/orders", key: c.freshKey("ar"), body: orderBody}
			},
		}
	case "phased-first":
		return &scenario{
			name: name,
			about: "POST /payments with a fresh key: the claim, then three phases; each request also makes " +
				"one loopback HTTP call to the payment provider (a fake inside the server process)",
			expect:  []outcome{outFirst},
			prepare: f.createOrders,
			next: func(c *client) request {
				return request{path: "/payments", key: c.freshKey("p"), body: c.payment}
			},
		}
	case "async-accept":
		return &scenario{
			name: name,
			about: "POST /exports (mode: async) with a fresh key, for an account without orders: the lookup; BEGIN with the claim, " +
				"which writes the key's row with the request; River's insert of the job; COMMIT; answered 202. The orders-api's River " +
				"workers run exports meanwhile on the same cores, as the service would, at their own pace (4 workers, a fetch at most " +
				"every 100 ms), far fewer than are accepted; their statements are the server's background, their CPU is in the row's. " +
				"The jobs still waiting are deleted after the row",
			expect: []outcome{outAccepted},
			next: func(c *client) request {
				return request{path: "/exports", key: c.freshKey("xa"), body: exportBody, account: exportAccount}
			},
			cleanup: func(ctx context.Context) error { return f.dropExportJobs(ctx, name) },
		}
	case "peer-insert-update", "peer-upsert":
		path := peerPaths[name]
		return &scenario{
			name:   name,
			about:  "POST " + path + " with a fresh key: the same insert behind the hand-written design (bench/peers)",
			expect: []outcome{outFirst},
			next: func(c *client) request {
				return request{path: path, key: c.freshKey(name[5:8]), body: orderBody}
			},
		}
	case "peer-insert-update-replay", "peer-upsert-replay":
		peer := name[:len(name)-len("-replay")]
		path := peerPaths[peer]
		return &scenario{
			name:    name,
			about:   fmt.Sprintf("POST %s replaying %d keys completed beforehand", path, f.replayKeys),
			expect:  []outcome{outReplay},
			prepare: func(ctx context.Context) error { return f.completePeerKeys(ctx, peer) },
			next: func(c *client) request {
				return request{path: path, key: peer + "-" + f.replayKey(c), body: orderBody}
			},
		}
	case "realistic-baseline":
		return &scenario{
			name:   name,
			about:  "POST /realistic/baseline/orders without a key: read the customer, insert the order, its two line items and an outbox event, in one transaction",
			expect: []outcome{outFirst},
			next:   func(*client) request { return request{path: "/realistic/baseline/orders", body: realisticBody} },
		}
	case "realistic-first":
		return &scenario{
			name:   name,
			about:  "POST /realistic/orders with a fresh key: the same four statements behind the generated layer",
			expect: []outcome{outFirst},
			next: func(c *client) request {
				return request{path: "/realistic/orders", key: c.freshKey("re"), body: realisticBody}
			},
		}
	case "read-by-id":
		return &scenario{
			name:    name,
			about:   "GET /orders/{id} of an order each client created beforehand: one indexed read, the floor a replay should meet",
			expect:  []outcome{outRead},
			prepare: f.createOrders,
			next: func(c *client) request {
				return request{get: true, path: "/orders/" + c.orderID}
			},
		}
	case "async-status":
		return &scenario{
			name: name,
			about: fmt.Sprintf("GET /exports/requests/{key}, the 202's Location, of %d exports accepted beforehand: one read-only statement, "+
				"200 whether the export is done or not yet (pending: with Retry-After). The River workers run those exports meanwhile, "+
				"as in async-accept; the jobs still waiting are deleted after the row", f.replayKeys),
			expect:  []outcome{outRead, outPending},
			prepare: f.acceptExports,
			next: func(c *client) request {
				c.seq++
				n := len(f.statusPaths)
				return request{get: true, path: f.statusPaths[(c.id*n/len(f.clients)+c.seq)%n], account: exportAccount}
			},
			cleanup: func(ctx context.Context) error { return f.dropExportJobs(ctx, name) },
		}
	case "replay":
		return &scenario{
			name:    name,
			about:   fmt.Sprintf("POST /orders replaying %d keys completed beforehand", f.replayKeys),
			expect:  []outcome{outReplay},
			prepare: f.completeReplayKeys,
			next: func(c *client) request {
				return request{path: "/orders", key: f.replayKey(c), body: orderBody}
			},
		}
	case "replay-redis":
		return &scenario{
			name: name,
			about: fmt.Sprintf("POST /orders replaying %d keys completed beforehand on the orders-api with its Redis replay filter "+
				"(-redis-url): a Redis GET; the warm-up's replays fill the filter from PostgreSQL", f.replayKeys),
			server:  backendOrdersRedis,
			expect:  []outcome{outReplay},
			prepare: f.completeRedisKeys,
			next: func(c *client) request {
				return request{path: "/orders", key: f.redisKeyPrefix() + f.replayKey(c), body: orderBody}
			},
		}
	case "422":
		return &scenario{
			name:    name,
			about:   fmt.Sprintf("POST /orders reusing the %d completed keys with another body", f.replayKeys),
			expect:  []outcome{outMismatch},
			prepare: f.completeReplayKeys,
			next: func(c *client) request {
				return request{path: "/orders", key: f.replayKey(c), body: otherOrderBody}
			},
		}
	case "409":
		held := &heldKeys{}
		return &scenario{
			name: name,
			about: fmt.Sprintf("POST /orders on %d keys whose first attempt is in flight: claimed by this process "+
				"in transactions kept open, as a running attempt keeps its own", f.heldKeys),
			expect:  []outcome{outConflict},
			prepare: func(ctx context.Context) error { return held.hold(ctx, f.dbURL, f.heldKeys) },
			next: func(c *client) request {
				c.seq++
				return request{path: "/orders", key: "held-" + strconv.Itoa((c.id+c.seq)%f.heldKeys), body: orderBody}
			},
			cleanup: held.release,
		}
	case "storm":
		var sent atomic.Int64
		round := int64(f.conns * f.stormKeys)
		return &scenario{
			name: name,
			about: fmt.Sprintf("all %d clients on %d keys at a time, new keys every %d requests: "+
				"the first of each key runs, the others get 409 while it runs and replays after", f.conns, f.stormKeys, round),
			expect: []outcome{outFirst, outReplay, outConflict},
			next: func(*client) request {
				n := sent.Add(1) - 1
				key := "s-" + strconv.FormatInt(n/round, 10) + "-" + strconv.FormatInt(n%int64(f.stormKeys), 10)
				return request{path: "/orders", key: key, body: orderBody}
			},
		}
	case "fiber-baseline":
		return &scenario{
			name:   name,
			about:  "POST /baseline/orders on bench/fiberpeer (Fiber v3) without a key: the same insert",
			server: backendFiber,
			expect: []outcome{outFirst},
			next:   func(*client) request { return request{path: "/baseline/orders", body: orderBody} },
		}
	case "fiber-first":
		return &scenario{
			name: name,
			about: "POST /orders on bench/fiberpeer with a fresh key: Fiber's idempotency middleware (a Redis GET, " +
				"a lock in the process, a second GET), the insert, and a Redis SET of the response",
			server: backendFiber,
			expect: []outcome{outFirst},
			next: func(c *client) request {
				return request{path: "/orders", key: c.freshKey("f"), body: orderBody}
			},
		}
	case "fiber-replay":
		return &scenario{
			name:    name,
			about:   fmt.Sprintf("POST /orders on bench/fiberpeer replaying %d keys completed beforehand: one Redis GET", f.replayKeys),
			server:  backendFiber,
			expect:  []outcome{outReplay},
			prepare: f.completeFiberKeys,
			next: func(c *client) request {
				return request{path: "/orders", key: "fiber-" + f.replayKey(c), body: orderBody}
			},
		}
	}
	panic("unknown scenario " + name)
}

// replayKey is the next completed key for c, the clients spread over them.
func (f *fixtures) replayKey(c *client) string {
	c.seq++
	return "r-" + strconv.Itoa((c.id*f.replayKeys/len(f.clients)+c.seq)%f.replayKeys)
}

// completeReplayKeys runs the first execution of each replay key, once.
func (f *fixtures) completeReplayKeys(ctx context.Context) error {
	f.replayOnce.Do(func() {
		f.replayErr = each(ctx, f.clients, f.replayKeys, func(c *client, i int) error {
			return c.post(ctx, request{path: "/orders", key: "r-" + strconv.Itoa(i), body: orderBody}, nil)
		})
	})
	return f.replayErr
}

// acceptExports accepts the exports of async-status, once, and keeps the
// paths of their status resources.
func (f *fixtures) acceptExports(ctx context.Context) error {
	f.exportOnce.Do(func() {
		paths := make([]string, f.replayKeys)
		f.exportErr = each(ctx, f.clients, f.replayKeys, func(c *client, i int) error {
			var err error
			paths[i], err = c.accept(ctx, request{path: "/exports", key: "xs-" + strconv.Itoa(i), body: exportBody, account: exportAccount})
			return err
		})
		f.statusPaths = paths
	})
	return f.exportErr
}

// dropExportJobs deletes the export jobs no worker has started. The
// workers run far fewer than a row accepts: left in the queue, the rest
// would run during the rows after it. Their keys stay accepted, pending.
func (f *fixtures) dropExportJobs(ctx context.Context, name string) error {
	cfg, err := pgxpool.ParseConfig(f.dbURL)
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tag, err := conn.Exec(ctx, `DELETE FROM river_job WHERE kind = $1 AND state IN ('available', 'scheduled', 'retryable', 'pending')`,
		idemriver.JobKind("createExport"))
	if err != nil {
		return fmt.Errorf("delete the export jobs not run: %w", err)
	}
	var done int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND state = 'completed'`,
		idemriver.JobKind("createExport")).Scan(&done); err != nil {
		return err
	}
	f.p.printf("%s: deleted %d export jobs no worker had started; %d exports run so far in the run", name, tag.RowsAffected(), done)
	return nil
}

// completePeerKeys runs the first execution of each replay key on a peer
// design, once.
func (f *fixtures) completePeerKeys(ctx context.Context, peer string) error {
	if f.peerOnce == nil {
		f.peerOnce, f.peerErr = map[string]*sync.Once{}, map[string]error{}
	}
	once, ok := f.peerOnce[peer]
	if !ok {
		once = &sync.Once{}
		f.peerOnce[peer] = once
	}
	once.Do(func() {
		f.peerErr[peer] = each(ctx, f.clients, f.replayKeys, func(c *client, i int) error {
			return c.post(ctx, request{path: peerPaths[peer], key: peer + "-r-" + strconv.Itoa(i), body: orderBody}, nil)
		})
	})
	return f.peerErr[peer]
}

// redisKeyPrefix starts the keys of replay-redis: the run's own, so that
// the replay filter's entries of other runs, which Redis keeps, are not
// theirs (an entry is only added where none is).
func (f *fixtures) redisKeyPrefix() string { return "rr-" + f.runID + "-" }

// completeRedisKeys runs the first execution of each replay-redis key,
// once.
func (f *fixtures) completeRedisKeys(ctx context.Context) error {
	f.redisOnce.Do(func() {
		f.redisErr = each(ctx, f.backend(backendOrdersRedis).clients, f.replayKeys, func(c *client, i int) error {
			return c.post(ctx, request{path: "/orders", key: f.redisKeyPrefix() + "r-" + strconv.Itoa(i), body: orderBody}, nil)
		})
	})
	return f.redisErr
}

// redisFilterKeys are the Redis keys of the replay filter's entries for
// the replay-redis keys: redisfilter's default prefix, which the
// orders-api uses, then the entry's name (pgstore.FilterKey) and its
// epoch, 1 in the run's new database, where nothing is forgotten.
func (f *fixtures) redisFilterKeys() []string {
	var keys []string
	for i := range f.replayKeys {
		id := idem.ID{Scope: account, Operation: "createOrder", Key: f.redisKeyPrefix() + "r-" + strconv.Itoa(i)}
		keys = append(keys, "idemgen:replay:"+pgstore.FilterKey(id)+".1")
	}
	return keys
}

// completeFiberKeys runs the first execution of each replay key on the
// Fiber server, once.
func (f *fixtures) completeFiberKeys(ctx context.Context) error {
	f.fiberOnce.Do(func() {
		f.fiberErr = each(ctx, f.backend(backendFiber).clients, f.replayKeys, func(c *client, i int) error {
			return c.post(ctx, request{path: "/orders", key: "fiber-r-" + strconv.Itoa(i), body: orderBody}, nil)
		})
	})
	return f.fiberErr
}

// createOrders gives each client an order of its own to pay for.
func (f *fixtures) createOrders(ctx context.Context) error {
	return each(ctx, f.clients, len(f.clients), func(c *client, _ int) error {
		var o struct {
			ID string `json:"id"`
		}
		if err := c.post(ctx, request{path: "/baseline/orders", body: orderBody}, &o); err != nil {
			return err
		}
		c.orderID = o.ID
		var err error
		c.payment, err = json.Marshal(map[string]any{"order_id": o.ID, "amount_cents": 1250})
		return err
	})
}

// each runs do for i in [0, n), spread over the clients, concurrently.
func each(ctx context.Context, clients []*client, n int, do func(c *client, i int) error) error {
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for ci, c := range clients {
		wg.Go(func() {
			for i := ci; i < n && errs[ci] == nil && ctx.Err() == nil; i += len(clients) {
				errs[ci] = do(c, i)
			}
		})
	}
	wg.Wait()
	return errors.Join(append(errs, ctx.Err())...)
}

// heldKeys are keys this process claims, in transactions it keeps open,
// the way an attempt in flight holds its key.
type heldKeys struct {
	pool *pgxpool.Pool
	txns []idem.Txn[pgx.Tx]
}

func (h *heldKeys) hold(ctx context.Context, dbURL string, n int) error {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return err
	}
	cfg.MaxConns = int32(n + 1)
	if h.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return err
	}
	store := pgstore.New(h.pool, pgstore.Options{})
	for i := range n {
		id := idem.ID{Scope: account, Operation: "createOrder", Key: "held-" + strconv.Itoa(i)}
		txn, err := store.Claim(ctx, id, idem.Claim{Fingerprint: []byte("held by bench"), TTL: time.Hour, Lease: time.Hour})
		if err != nil {
			return fmt.Errorf("hold key %s: %w", id.Key, err)
		}
		h.txns = append(h.txns, txn)
	}
	return nil
}

func (h *heldKeys) release(ctx context.Context) error {
	var errs []error
	for _, t := range h.txns {
		errs = append(errs, t.Abort(ctx))
	}
	h.txns = nil
	if h.pool != nil {
		h.pool.Close()
	}
	return errors.Join(errs...)
}
