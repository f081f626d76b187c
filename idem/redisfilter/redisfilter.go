// Package redisfilter keeps a key store's completed responses in Redis,
// so that replays are answered without PostgreSQL: the replay filter of
// pgstore.Options.ReplayCache.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
//	cache, err := redisfilter.New(rdb, redisfilter.Options{})
//	...
//	store := pgstore.New(pool, pgstore.Options{ReplayCache: cache})
//
// Redis is a filter, never the arbiter: it only ever answers a replay of
// a response PostgreSQL committed, and each call is bounded by
// Options.Timeout. A Redis that is down, slow or evicting costs the
// filter's help, never a wrong answer or an error to the client; after a
// failure the filter leaves Redis alone for Options.Backoff, so that an
// outage costs one timeout per Backoff, not one per request.
package redisfilter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options configure a Filter. The zero value works.
type Options struct {
	// Prefix starts every key the filter writes; "idemgen:replay:" when
	// empty. Give each key store of a shared Redis its own.
	Prefix string
	// Timeout bounds each call to Redis; 25ms when zero. A call that
	// takes longer is a failure, and the store answers instead.
	Timeout time.Duration
	// Backoff is how long the filter leaves Redis alone after a failure;
	// 1s when zero.
	Backoff time.Duration
	// Logger is told when Redis fails and when it answers again; nil uses
	// slog.Default().
	Logger *slog.Logger
	// MaxEntryBytes bounds the entries the filter adds, each a response
	// with its headers: a larger one is not added, and its replays read
	// PostgreSQL, so that no value is too large to move within Timeout
	// or crowds Redis's memory. 64 KiB when zero; negative, no bound.
	MaxEntryBytes int
}

// DefaultMaxEntryBytes is Options.MaxEntryBytes when zero.
const DefaultMaxEntryBytes = 64 << 10

// ErrUnavailable is returned, wrapped, by every call that Redis did not
// answer in time, or that the filter did not send while it backs off.
var ErrUnavailable = errors.New("redisfilter: Redis is unavailable")

// ErrNoContextTimeout is returned by New for a client that does not honour
// context deadlines: the filter could not bound its calls.
var ErrNoContextTimeout = errors.New("redisfilter: the Redis client ignores context deadlines; set ContextTimeoutEnabled: true in its options")

// Filter is a pgstore.ReplayCache on Redis.
type Filter struct {
	rdb     redis.UniversalClient
	prefix  string
	timeout time.Duration
	backoff time.Duration
	max     int // 0: no bound
	log     *slog.Logger
	// until is when the filter may call Redis again after a failure, in
	// UnixNano; 0 while Redis answers.
	until atomic.Int64
}

// New returns a filter on rdb. rdb must honour context deadlines
// (ContextTimeoutEnabled in go-redis's options), which is how each call
// is bounded.
func New(rdb redis.UniversalClient, opts Options) (*Filter, error) {
	switch c := rdb.(type) {
	case *redis.Client:
		if !c.Options().ContextTimeoutEnabled {
			return nil, ErrNoContextTimeout
		}
	case *redis.ClusterClient:
		if !c.Options().ContextTimeoutEnabled {
			return nil, ErrNoContextTimeout
		}
	}
	f := &Filter{rdb: rdb, prefix: opts.Prefix, timeout: opts.Timeout, backoff: opts.Backoff, log: opts.Logger}
	if f.prefix == "" {
		f.prefix = "idemgen:replay:"
	}
	if f.timeout <= 0 {
		f.timeout = 25 * time.Millisecond
	}
	if f.backoff <= 0 {
		f.backoff = time.Second
	}
	if f.log == nil {
		f.log = slog.Default()
	}
	switch {
	case opts.MaxEntryBytes == 0:
		f.max = DefaultMaxEntryBytes
	case opts.MaxEntryBytes > 0:
		f.max = opts.MaxEntryBytes
	}
	return f, nil
}

// Get returns the value under key, nil when there is none.
func (f *Filter) Get(ctx context.Context, key string) ([]byte, error) {
	c, cancel, err := f.call(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	v, err := f.rdb.Get(c, f.prefix+key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, f.answered(c, nil)
	}
	return v, f.answered(c, err)
}

// Add stores value under key for ttl, unless key holds a value or value
// is larger than Options.MaxEntryBytes.
func (f *Filter) Add(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if f.max > 0 && len(value) > f.max {
		return nil
	}
	c, cancel, err := f.call(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	err = f.rdb.SetArgs(c, f.prefix+key, value, redis.SetArgs{Mode: "NX", TTL: ttl}).Err()
	if errors.Is(err, redis.Nil) { // NX: a value was there
		err = nil
	}
	return f.answered(c, err)
}

// Set stores value under key for ttl.
func (f *Filter) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	c, cancel, err := f.call(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	return f.answered(c, f.rdb.Set(c, f.prefix+key, value, ttl).Err())
}

// call returns the context of one call, bounded by the timeout, or
// ErrUnavailable while the filter backs off.
func (f *Filter) call(parent context.Context) (*callContext, context.CancelFunc, error) {
	if until := f.until.Load(); until != 0 && time.Now().UnixNano() < until {
		return nil, nil, fmt.Errorf("%w: backing off after a failure", ErrUnavailable)
	}
	ctx, cancel := context.WithTimeout(parent, f.timeout)
	return &callContext{ctx, parent}, cancel, nil
}

// callContext is a call's context, which knows its caller's: a call that
// ends because its caller went away says nothing of Redis.
type callContext struct {
	context.Context
	parent context.Context
}

// answered notes how a call went: a failure of Redis or of the network
// starts a backoff, and the first answer after one ends it. Redis's
// refusals (out of memory, say) are errors of the call only.
func (f *Filter) answered(ctx *callContext, err error) error {
	if err != nil && ctx.parent.Err() != nil {
		return err
	}
	var refused redis.Error
	if err == nil || errors.As(err, &refused) {
		if f.until.Swap(0) != 0 {
			f.log.Info("redisfilter: Redis answers again; replays of completed keys are answered from it")
		}
		if err != nil {
			return fmt.Errorf("redisfilter: %w", err)
		}
		return nil
	}
	if f.until.Swap(time.Now().Add(f.backoff).UnixNano()) == 0 {
		f.log.Warn("redisfilter: Redis failed; replays read PostgreSQL until it answers again",
			"error", err.Error(), "retry_in", f.backoff.String())
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}
