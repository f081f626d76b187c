package pgstore_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// proxy is a loopback TCP proxy to PostgreSQL that can be black-holed: it
// then stops forwarding in both directions without closing anything, as a
// network partition does.
type proxy struct {
	ln       net.Listener
	upstream func() (net.Conn, error)
	holed    atomic.Bool
	// holeAfter, when set, black-holes the proxy right after it forwards
	// a client message that contains it.
	holeAfter atomic.Pointer[string]
	once      sync.Once
	mu        sync.Mutex
	conns     []net.Conn
	wg        sync.WaitGroup
}

func startProxy(t *testing.T, upstream func() (net.Conn, error)) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, upstream: upstream}
	p.wg.Add(1)
	go p.serve()
	return p
}

func (p *proxy) addr() *net.TCPAddr { return p.ln.Addr().(*net.TCPAddr) }

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := p.upstream()
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(server, client, true)
		go p.pipe(client, server, false)
	}
}

// pipe copies src to dst until either closes, dropping what it reads
// while the proxy is black-holed.
func (p *proxy) pipe(dst, src net.Conn, fromClient bool) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.holed.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			if marker := p.holeAfter.Load(); fromClient && marker != nil && bytes.Contains(bytes.ToLower(buf[:n]), []byte(*marker)) {
				p.holed.Store(true)
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *proxy) close() {
	p.once.Do(p.shutdown)
}

func (p *proxy) shutdown() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// A server that loses its database mid-attempt, to a partition that closes
// nothing, holds the key no longer than the operation's lease: the
// attempt's transaction may sit idle no longer than that, so PostgreSQL
// ends it, and a retry through another connection runs the request, once.
// The lost attempt's own goroutine returns too, within the same bound.
func TestBlackholedConnectionReleasesKey(t *testing.T) {
	ctx := context.Background()
	direct := newPool(t, nil)
	if _, err := direct.Exec(ctx, `CREATE TABLE orders (id serial PRIMARY KEY, key text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	p, partitioned := proxied(t, direct)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	const lease = 2 * time.Second
	op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: lease}
	var runs atomic.Int64
	serve := func(e *idem.Engine[pgx.Tx], inserted chan struct{}) (*idem.Response, error) {
		r, _ := http.NewRequest("POST", "/orders", nil)
		r.Header.Set(idem.HeaderKey, "k1")
		return e.Serve(idem.WithRequest(ctx, r), op, []byte("fp"), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
			runs.Add(1)
			if _, err := at.Tx().Exec(ctx, `INSERT INTO orders (key) VALUES ('k1')`); err != nil {
				return nil, err
			}
			if inserted != nil {
				inserted <- struct{}{}
				<-inserted // the partition is in place
			}
			return func(w http.ResponseWriter) error { w.WriteHeader(201); return nil }, nil
		})
	}

	// The first attempt inserts, then the network between it and
	// PostgreSQL goes silent before it can commit.
	inserted := make(chan struct{})
	first := make(chan *idem.Response, 1)
	go func() {
		resp, _ := serve(idem.NewEngine(pgstore.New(partitioned, pgstore.Options{}), idem.Options{Logger: quiet}), inserted)
		first <- resp
	}()
	<-inserted
	p.holed.Store(true)
	inserted <- struct{}{}

	// A retry on a healthy connection gets 409 while the lost attempt's
	// transaction lives, then runs.
	retry := idem.NewEngine(pgstore.New(direct, pgstore.Options{}), idem.Options{Logger: quiet})
	start := time.Now()
	deadline := start.Add(time.Minute) // far past the bound; without it, the key would be held for good
	var resp *idem.Response
	var err error
	for {
		resp, err = serve(retry, nil)
		if err != nil || resp.Status != 409 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // a client's Retry-After, shortened
	}
	if err != nil || resp.Status != 201 {
		t.Fatalf("retry after %v: %+v, %v; want 201 once the lost attempt's lease bound passed", time.Since(start), resp, err)
	}
	t.Logf("the retry ran %v after the partition (lease %v)", time.Since(start).Round(10*time.Millisecond), lease)

	select {
	case resp := <-first:
		if resp == nil || resp.Status != 503 {
			t.Errorf("the partitioned attempt answered %+v, want 503", resp)
		}
	case <-time.After(time.Minute):
		t.Fatal("the partitioned attempt never returned: ending it has no deadline")
	}
	var orders int
	if err := direct.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&orders); err != nil {
		t.Fatal(err)
	}
	if orders != 1 || runs.Load() != 2 {
		t.Fatalf("%d orders after %d runs; want the lost attempt's insert rolled back and the retry's committed", orders, runs.Load())
	}
}

// proxied returns a pool on the same database as direct that connects
// through a proxy, and the proxy.
func proxied(t *testing.T, direct *pgxpool.Pool, configure ...func(*pgxpool.Config)) (*proxy, *pgxpool.Pool) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(direct.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	target := net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))
	network := "tcp"
	if len(cfg.ConnConfig.Host) > 0 && cfg.ConnConfig.Host[0] == '/' {
		network, target = "unix", cfg.ConnConfig.Host+"/.s.PGSQL."+strconv.Itoa(int(cfg.ConnConfig.Port))
	}
	p := startProxy(t, func() (net.Conn, error) { return net.Dial(network, target) })
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = "127.0.0.1", uint16(p.addr().Port), nil
	cfg.ConnConfig.TLSConfig = nil
	for _, f := range configure {
		f(cfg)
	}
	partitioned, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The partition ends before the pool closes, so that closing does not
	// wait on silent connections.
	t.Cleanup(func() { p.close(); partitioned.Close() })
	return p, partitioned
}

// When the acknowledgement of an attempt's COMMIT is lost, the attempt may
// have committed: the 503 says so, and the retry returns the stored
// result instead of running again.
func TestLostCommitAcknowledgement(t *testing.T) {
	ctx := context.Background()
	direct := newPool(t, nil)
	if _, err := direct.Exec(ctx, `CREATE TABLE orders (id serial PRIMARY KEY, key text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	// The attempt's COMMIT is sent with its last statement; in pgx's exec
	// mode its text is on the wire every time, for the proxy to find.
	p, partitioned := proxied(t, direct, func(cfg *pgxpool.Config) {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Second}
	var runs atomic.Int64
	serve := func(e *idem.Engine[pgx.Tx]) (*idem.Response, error) {
		r, _ := http.NewRequest("POST", "/orders", nil)
		r.Header.Set(idem.HeaderKey, "k1")
		return e.Serve(idem.WithRequest(ctx, r), op, []byte("fp"), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
			runs.Add(1)
			if _, err := at.Tx().Exec(ctx, `INSERT INTO orders (key) VALUES ('k1')`); err != nil {
				return nil, err
			}
			return func(w http.ResponseWriter) error { w.WriteHeader(201); return nil }, nil
		})
	}
	marker := "commit\x00" // the end of the COMMIT statement's text
	p.holeAfter.Store(&marker)
	resp, err := serve(idem.NewEngine(pgstore.New(partitioned, pgstore.Options{}), idem.Options{Logger: quiet}))
	if err != nil || resp.Status != 503 || !bytes.Contains(resp.Body, []byte("may have run")) {
		t.Fatalf("lost commit acknowledgement: %+v, %v; want a 503 saying the request may have run", resp, err)
	}
	retry, err := serve(idem.NewEngine(pgstore.New(direct, pgstore.Options{}), idem.Options{Logger: quiet}))
	if err != nil || retry.Status != 201 || !retry.Replayed {
		t.Fatalf("retry: %+v, %v; want the committed 201, replayed", retry, err)
	}
	var orders int
	if err := direct.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&orders); err != nil {
		t.Fatal(err)
	}
	if orders != 1 || runs.Load() != 1 {
		t.Fatalf("%d orders after %d runs, want 1 and 1", orders, runs.Load())
	}
}
