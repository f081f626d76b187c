package pgtest

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Proxy is a loopback TCP proxy to PostgreSQL that can be black-holed: it
// then stops forwarding in both directions without closing anything, as a
// network partition or a frozen host does. What was sent meanwhile
// arrives once the hole ends, as TCP delivers it when a partition heals.
type Proxy struct {
	ln       net.Listener
	upstream func() (net.Conn, error)
	// holeAfter, when set, black-holes the proxy right after it forwards
	// a client message that contains it.
	holeAfter atomic.Pointer[string]
	once      sync.Once
	wg        sync.WaitGroup

	mu     sync.Mutex
	healed *sync.Cond // signalled when holed turns false or the proxy closes
	holed  bool
	closed bool
	conns  []net.Conn
}

// Hole starts (true) or ends (false) the partition.
func (p *Proxy) Hole(holed bool) {
	p.mu.Lock()
	p.holed = holed
	p.mu.Unlock()
	p.healed.Broadcast()
}

// open waits until the proxy forwards, and reports false once it closed.
func (p *Proxy) open() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.holed && !p.closed {
		p.healed.Wait()
	}
	return !p.closed
}

// HoleAfter black-holes the proxy right after it forwards a client
// message that contains marker, such as the text of a COMMIT.
func (p *Proxy) HoleAfter(marker string) { p.holeAfter.Store(&marker) }

// Proxied returns a pool on the same database as direct that connects
// through a Proxy, and the proxy. The proxy and the pool close with t.
func Proxied(t testing.TB, direct *pgxpool.Pool, configure ...func(*pgxpool.Config)) (*Proxy, *pgxpool.Pool) {
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, upstream: func() (net.Conn, error) { return net.Dial(network, target) }}
	p.healed = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.serve()
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = "127.0.0.1", uint16(ln.Addr().(*net.TCPAddr).Port), nil
	cfg.ConnConfig.TLSConfig = nil
	for _, f := range configure {
		f(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		p.Close()
		t.Fatal(err)
	}
	// The partition ends before the pool closes, so that closing does not
	// wait on silent connections.
	t.Cleanup(func() { p.Close(); pool.Close() })
	return p, pool
}

func (p *Proxy) serve() {
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

// pipe copies src to dst until either closes, holding what it reads
// while the proxy is black-holed.
func (p *Proxy) pipe(dst, src net.Conn, fromClient bool) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			// A message with the marker starts the hole before it is
			// forwarded, so that the server's answer to it cannot slip
			// back to the client first; the message itself goes through.
			if marker := p.holeAfter.Load(); fromClient && marker != nil && bytes.Contains(bytes.ToLower(buf[:n]), []byte(*marker)) {
				p.Hole(true)
			} else if !p.open() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			// The close reaches the other end too, once the hole lets it.
			if p.open() {
				dst.Close()
			}
			return
		}
	}
}

// Close closes the proxy and every connection through it.
func (p *Proxy) Close() {
	p.once.Do(func() {
		p.ln.Close()
		p.mu.Lock()
		p.closed = true
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.healed.Broadcast()
		p.wg.Wait()
	})
}
