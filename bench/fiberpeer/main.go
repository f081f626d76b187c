// Command fiberpeer serves the example's createOrder work (one INSERT into
// orders, answered 201 with the order) behind Fiber v3's idempotency
// middleware and its Redis storage: a third-party design for go run
// ./bench to measure next to the generated layer. It is a module of its
// own so that the idemgen module does not carry Fiber.
//
//	DATABASE_URL=... go run . [-addr 127.0.0.1:0] [-redis 127.0.0.1:6379] [-key-prefix p:]
//	go run . -check   (the correctness facts, see check.go)
//
// POST /baseline/orders runs the insert alone; POST /orders runs it behind
// the middleware, keyed by the Idempotency-Key header. A replayed answer
// carries Idempotent-Replayed: true, set from idempotency.IsFromCache, so
// that the bench can tell it from a first execution. The orders table must
// exist (the orders-api's migrations, or the check, create it).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/gofiber/fiber/v3/middleware/idempotency"
	"github.com/gofiber/storage/redis/v3"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The headers the bench sends and reads, as the generated layer names them.
const (
	headerKey      = "Idempotency-Key"
	headerReplayed = "Idempotent-Replayed"
	headerAccount  = "X-Account-Id"
)

type config struct {
	addr      string
	redisAddr string
	keyPrefix string
	clear     bool
	dbURL     string
	dbStats   bool
	// crashAfterInsert makes the idempotent route kill the process once
	// its insert committed, before the middleware stores the response.
	crashAfterInsert bool
}

func main() {
	var cfg config
	check := flag.Bool("check", false, "instead of serving, measure the middleware's behaviour from outside (see check.go) and print the facts")
	pairs := flag.Int("pairs", 40, "with -check: concurrent pairs of one key sent to two instances")
	flag.StringVar(&cfg.addr, "addr", "127.0.0.1:0", "listen address (port 0 picks a free port)")
	flag.StringVar(&cfg.redisAddr, "redis", "127.0.0.1:6379", "the Redis the middleware stores responses in")
	flag.StringVar(&cfg.keyPrefix, "key-prefix", keyBase+strconv.Itoa(os.Getpid())+":", "prefix of this server's keys in Redis, "+keyBase+"PID: of the process that owns them")
	flag.BoolVar(&cfg.clear, "clear", true, "delete the keys under -key-prefix at start and at exit, and those of owners no longer running")
	flag.BoolVar(&cfg.dbStats, "db-stats", false, "count statements and serve them at GET /debug/db-stats, as the orders-api does (for go run ./bench)")
	flag.BoolVar(&cfg.crashAfterInsert, "crash-after-insert", false, "die (SIGKILL) in POST /orders after the insert committed, before the response is stored (for -check)")
	flag.Parse()
	cfg.dbURL = os.Getenv("DATABASE_URL")
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if *check {
		err = runCheck(ctx, cfg, *pairs, os.Stdout)
	} else {
		err = serve(ctx, cfg, log)
	}
	if err != nil {
		log.Error("fiberpeer", "error", err)
		os.Exit(1)
	}
}

// serve runs the server until ctx ends.
func serve(ctx context.Context, cfg config, log *slog.Logger) error {
	if cfg.dbURL == "" {
		return errors.New("set DATABASE_URL")
	}
	poolCfg, err := pgxpool.ParseConfig(cfg.dbURL)
	if err != nil {
		return err
	}
	var stats *dbStats
	if cfg.dbStats {
		stats = newDBStats()
		poolCfg.ConnConfig.Tracer = stats
	}
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return err
	}
	defer pool.Close()

	host, port, err := net.SplitHostPort(cfg.redisAddr)
	if err != nil {
		return fmt.Errorf("-redis: %w", err)
	}
	portN, _ := strconv.Atoi(port)
	store := redis.New(redis.Config{Host: host, Port: portN})
	defer store.Close()
	keys := prefixed{store: store, prefix: cfg.keyPrefix}
	if err := store.Conn().Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis at %s: %w", cfg.redisAddr, err)
	}
	if cfg.clear {
		// Only the bench's own keys: this run's, and those of runs
		// that died before they could clear theirs.
		if err := keys.clear(ctx); err != nil {
			return fmt.Errorf("redis at %s: %w", cfg.redisAddr, err)
		}
		if err := clearStale(ctx, store); err != nil {
			return fmt.Errorf("redis at %s: %w", cfg.redisAddr, err)
		}
		defer func() {
			c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := keys.clear(c); err != nil {
				log.Warn("fiberpeer: clear the keys", "error", err)
			}
		}()
	}

	app := fiber.New()
	if stats != nil {
		app.Get("/debug/db-stats", func(c fiber.Ctx) error { return c.JSON(stats.snapshot()) })
		app.Post("/debug/db-stats/flush", func(c fiber.Ctx) error {
			if err := flushPGStats(pool); err != nil {
				return c.Status(fiber.StatusServiceUnavailable).SendString(err.Error())
			}
			return c.JSON(stats.snapshot())
		})
	}
	app.Post("/baseline/orders", createOrder(pool, false))
	app.Post("/orders",
		markReplays,
		idempotency.New(idempotency.Config{
			Storage:   keys,
			KeyHeader: headerKey,
			// The default wants a 36-character UUID; the bench's keys
			// are shorter.
			KeyHeaderValidate: func(k string) error {
				if len(k) > 255 {
					return errors.New("idempotency key longer than 255 characters")
				}
				return nil
			},
			// The same retention as the generated layer's default.
			Lifetime: 24 * time.Hour,
		}),
		createOrder(pool, cfg.crashAfterInsert))

	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- app.Listener(ln, fiber.ListenConfig{DisableStartupMessage: true}) }()
	log.Info("fiberpeer: listening", "url", "http://"+ln.Addr().String())
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	if err := app.ShutdownWithTimeout(10 * time.Second); err != nil {
		return err
	}
	log.Info("fiberpeer: stopped")
	return nil
}

// markReplays sets Idempotent-Replayed on answers the middleware took
// from Redis.
func markReplays(c fiber.Ctx) error {
	err := c.Next()
	if idempotency.IsFromCache(c) {
		c.Set(headerReplayed, "true")
	}
	return err
}

type newOrder struct {
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
	CustomerID  string `json:"customer_id"`
}

type order struct {
	ID          string    `json:"id"`
	AccountID   string    `json:"account_id"`
	AmountCents int64     `json:"amount_cents"`
	Currency    string    `json:"currency"`
	CustomerID  string    `json:"customer_id"`
	CreatedAt   time.Time `json:"created_at"`
}

type requestMark struct{}

// createOrder is the example's createOrder work: check, insert, 201.
func createOrder(pool *pgxpool.Pool, crash bool) fiber.Handler {
	return func(c fiber.Ctx) error {
		account := c.Get(headerAccount)
		var in newOrder
		if err := json.Unmarshal(c.Body(), &in); err != nil || account == "" || in.Currency == "" || in.CustomerID == "" {
			return c.Status(fiber.StatusBadRequest).SendString("a JSON order and X-Account-Id are required")
		}
		if in.AmountCents <= 0 {
			return c.Status(fiber.StatusBadRequest).SendString("amount_cents must be positive")
		}
		ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), requestMark{}, true), 30*time.Second)
		defer cancel()
		var o order
		err := pool.QueryRow(ctx,
			`INSERT INTO orders (account_id, amount_cents, currency, customer_id) VALUES ($1, $2, $3, $4)
			RETURNING id, account_id, amount_cents, currency, customer_id, created_at`,
			account, in.AmountCents, in.Currency, in.CustomerID).
			Scan(&o.ID, &o.AccountID, &o.AmountCents, &o.Currency, &o.CustomerID, &o.CreatedAt)
		if err != nil {
			// An error, not a response: the middleware stores no answer
			// for it, so that a retry runs again.
			return fiber.NewError(fiber.StatusInternalServerError, "insert order: "+err.Error())
		}
		if crash {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		o.CreatedAt = o.CreatedAt.UTC()
		c.Location("/orders/" + o.ID)
		return c.Status(fiber.StatusCreated).JSON(o)
	}
}

// prefixed is the Redis storage with this server's keys under a prefix,
// so that they can be told from others' in a shared Redis.
type prefixed struct {
	store  *redis.Storage
	prefix string
}

func (p prefixed) GetWithContext(ctx context.Context, key string) ([]byte, error) {
	return p.store.GetWithContext(ctx, p.prefix+key)
}
func (p prefixed) Get(key string) ([]byte, error) { return p.store.Get(p.prefix + key) }
func (p prefixed) SetWithContext(ctx context.Context, key string, val []byte, exp time.Duration) error {
	return p.store.SetWithContext(ctx, p.prefix+key, val, exp)
}
func (p prefixed) Set(key string, val []byte, exp time.Duration) error {
	return p.store.Set(p.prefix+key, val, exp)
}
func (p prefixed) DeleteWithContext(ctx context.Context, key string) error {
	return p.store.DeleteWithContext(ctx, p.prefix+key)
}
func (p prefixed) Delete(key string) error { return p.store.Delete(p.prefix + key) }

// Reset and ResetWithContext clear this server's keys only.
func (p prefixed) ResetWithContext(ctx context.Context) error { return p.clear(ctx) }
func (p prefixed) Reset() error                               { return p.clear(context.Background()) }
func (p prefixed) Close() error                               { return nil }

// keyBase starts the keys of every fiberpeer; the owner's PID follows.
const keyBase = "idemgen-bench:fiber:"

// clear deletes the keys under the prefix, and no others.
func (p prefixed) clear(ctx context.Context) error {
	if !strings.HasPrefix(p.prefix, keyBase) || strings.ContainsAny(p.prefix, "*?[]\\") {
		return fmt.Errorf("refusing to clear keys under %q: not a prefix of the bench's own", p.prefix)
	}
	return unlinkMatching(ctx, p.store, p.prefix+"*", func(string) bool { return true })
}

// clearStale deletes the keys of owners that no longer run on this
// machine: bench runs that were killed before they cleared theirs.
func clearStale(ctx context.Context, store *redis.Storage) error {
	return unlinkMatching(ctx, store, keyBase+"*", func(key string) bool {
		pid, _, ok := strings.Cut(strings.TrimPrefix(key, keyBase), ":")
		if _, err := strconv.Atoi(pid); !ok || err != nil {
			return false
		}
		_, err := os.Stat("/proc/" + pid)
		return errors.Is(err, os.ErrNotExist)
	})
}

// unlinkMatching deletes the keys that match pattern and that del accepts.
func unlinkMatching(ctx context.Context, store *redis.Storage, pattern string, del func(string) bool) error {
	conn := store.Conn()
	iter := conn.Scan(ctx, 0, pattern, 1000).Iterator()
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := conn.Unlink(ctx, batch...).Err()
		batch = batch[:0]
		return err
	}
	for iter.Next(ctx) {
		if !del(iter.Val()) {
			continue
		}
		if batch = append(batch, iter.Val()); len(batch) == 1000 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	return flush()
}

var _ fiber.Storage = prefixed{}
