package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// With -hop, the servers reach PostgreSQL (and Redis) through a delay
// proxy: a child process (this binary again) that forwards each TCP
// connection and holds every chunk it reads for the hop's delay before it
// writes it on, in each direction, so that a round trip costs twice the
// delay, as across a network. The clients still reach the servers over
// loopback. A kernel delay (netem in a network namespace) would cost no
// CPU, but it is not in every kernel; the proxy works everywhere, and
// its CPU time is reported apart.

// hopInfo says, in the report, what stood between the servers and their
// data stores.
type hopInfo struct {
	// Mode is "none" (loopback) or "proxy".
	Mode string `json:"mode"`
	// Delay is added in each direction: a round trip costs twice it.
	Delay    string  `json:"delay,omitempty"`
	OneWayMS float64 `json:"one_way_ms,omitempty"`
	// Redis is true when the servers' Redis is behind the hop too.
	Redis bool `json:"redis,omitempty"`
	// LeadUS is how much earlier than the delay the proxy writes a chunk
	// on, to make up for its own latency (see hopProxy.calibrate).
	LeadUS float64 `json:"proxy_lead_us,omitempty"`
	// The round trip of SELECT 1 (and Redis PING) measured directly and
	// across the hop, medians, after calibrating the lead.
	PGRTTDirectMS    float64 `json:"pg_rtt_direct_ms,omitempty"`
	PGRTTMS          float64 `json:"pg_rtt_ms,omitempty"`
	RedisRTTDirectMS float64 `json:"redis_rtt_direct_ms,omitempty"`
	RedisRTTMS       float64 `json:"redis_rtt_ms,omitempty"`
	Note             string  `json:"note,omitempty"`
	// Netem says whether the kernel could have delayed the packets
	// itself, in a network namespace, instead of the proxy.
	Netem string `json:"netem,omitempty"`
}

// proxyEnv, set, makes this binary a delay proxy (see main).
const proxyEnv = "IDEMGEN_BENCH_DELAY_PROXY"

// hopProxy is the running delay proxy.
type hopProxy struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	// addrs are where it listens, one per target, in order.
	addrs []string
	done  chan struct{}
}

// startHop starts the delay proxy in front of targets, each "tcp:HOST:PORT"
// or "unix:PATH".
func startHop(ctx context.Context, delay time.Duration, targets []string) (*hopProxy, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	h := &hopProxy{cmd: exec.Command(self, targets...), done: make(chan struct{})}
	h.cmd.Env = append(os.Environ(), proxyEnv+"="+delay.String())
	h.cmd.Stderr = os.Stderr
	stdin, err := h.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	h.stdin = stdin
	stdout, err := h.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := h.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the delay proxy: %w", err)
	}
	lines := make(chan string)
	go func() {
		defer close(h.done)
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	timeout := time.After(30 * time.Second)
	for len(h.addrs) < len(targets) {
		select {
		case line, ok := <-lines:
			addr, found := strings.CutPrefix(line, "listening ")
			if !ok || !found {
				h.stop()
				return nil, fmt.Errorf("the delay proxy said %q", line)
			}
			h.addrs = append(h.addrs, addr)
		case <-timeout:
			h.stop()
			return nil, errors.New("the delay proxy did not listen within 30 s")
		case <-ctx.Done():
			h.stop()
			return nil, ctx.Err()
		}
	}
	go func() {
		for range lines {
		}
	}()
	return h, nil
}

func (h *hopProxy) pid() int { return h.cmd.Process.Pid }

// setLead makes the proxy write chunks d before their delay has passed.
func (h *hopProxy) setLead(d time.Duration) error {
	_, err := fmt.Fprintf(h.stdin, "lead %s\n", d)
	return err
}

// calibrate sets the proxy's lead so that a round trip across it, on an
// idle machine, costs what it costs direct plus twice the delay, within a
// few microseconds: the proxy's own latency (a reader woken up, a chunk
// handed to a sleeping writer, that writer woken up) is not the network's.
// rtt measures a round trip across the proxy; direct is the one without.
func (h *hopProxy) calibrate(delay, direct time.Duration, rtt func() (time.Duration, error)) (time.Duration, time.Duration, error) {
	var l time.Duration
	for range 4 {
		via, err := rtt()
		if err != nil {
			return l, 0, err
		}
		excess := via - direct - 2*delay
		if excess.Abs() < 10*time.Microsecond || (l == 0 && excess < 0) {
			return l, via, nil
		}
		l = min(max(l+excess/2, 0), delay)
		if err := h.setLead(l); err != nil {
			return l, via, err
		}
	}
	via, err := rtt()
	return l, via, err
}

// stop ends the proxy: it exits when its standard input closes, which
// also happens when this process dies.
func (h *hopProxy) stop() {
	_ = h.stdin.Close()
	select {
	case <-h.done:
	case <-time.After(5 * time.Second):
		_ = h.cmd.Process.Kill()
	}
	_ = h.cmd.Wait()
}

// pgTarget is the proxy target of the PostgreSQL that connString names.
func pgTarget(connString string) (string, error) {
	cfg, err := pgconn.ParseConfig(connString)
	if err != nil {
		return "", err
	}
	port := strconv.Itoa(int(cfg.Port))
	if strings.HasPrefix(cfg.Host, "/") {
		return "unix:" + filepath.Join(cfg.Host, ".s.PGSQL."+port), nil
	}
	return "tcp:" + net.JoinHostPort(cfg.Host, port), nil
}

// viaHop is connString, a URL or a keyword/value string, pointed at the
// proxy's addr instead.
func viaHop(connString, addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		u, err := url.Parse(connString)
		if err != nil {
			return "", err
		}
		u.Host = addr
		q := u.Query()
		q.Del("host") // a socket directory given as a parameter
		q.Del("port")
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	// A later keyword overrides an earlier one.
	return connString + " host=" + host + " port=" + port, nil
}

// rttConn measures round trips of SELECT 1 on a connection of its own.
type rttConn struct {
	ctx  context.Context
	conn *pgx.Conn
}

func pgRTTer(ctx context.Context, connString string) (*rttConn, error) {
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return nil, err
	}
	return &rttConn{ctx: ctx, conn: conn}, nil
}

// rtt is the median of 200 round trips.
func (r *rttConn) rtt() (time.Duration, error) {
	return medianOf(200, func() error {
		_, err := r.conn.Exec(r.ctx, "SELECT 1", pgx.QueryExecModeSimpleProtocol)
		return err
	})
}

func (r *rttConn) close() { _ = r.conn.Close(context.Background()) }

// redisRTT is the median round trip of PING.
func redisRTT(ctx context.Context, addr string) (time.Duration, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	buf := make([]byte, 7)
	return medianOf(200, func() error {
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			return err
		}
		_, err := io.ReadFull(c, buf)
		return err
	})
}

func medianOf(n int, do func() error) (time.Duration, error) {
	var ds []time.Duration
	for range n {
		t := time.Now()
		if err := do(); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(t))
	}
	slices.Sort(ds)
	return ds[len(ds)/2], nil
}

// delayProxyMain is the proxy process: it listens on a loopback port per
// target given in args, prints "listening ADDR" for each, forwards, and
// exits when its standard input closes.
func delayProxyMain(delaySpec string, args []string) int {
	delay, err := time.ParseDuration(delaySpec)
	if err != nil || delay < 0 || len(args) == 0 {
		fmt.Fprintf(os.Stderr, "delay proxy: want %s=DURATION and targets, got %q %q\n", proxyEnv, delaySpec, args)
		return 2
	}
	// A Ctrl-C reaches the whole process group: the proxy stays until the
	// bench, having stopped the servers, closes its standard input.
	signal.Ignore(os.Interrupt, syscall.SIGTERM)
	queue := make(chan chunk, 4096)
	for _, target := range args {
		network, addr, ok := strings.Cut(target, ":")
		if !ok || (network != "tcp" && network != "unix") {
			fmt.Fprintf(os.Stderr, "delay proxy: target %q is not tcp:HOST:PORT or unix:PATH\n", target)
			return 2
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, "delay proxy:", err)
			return 1
		}
		fmt.Printf("listening %s\n", ln.Addr())
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go forward(c, network, addr, delay, queue)
			}
		}()
	}
	go writeDelayed(queue)
	// Standard input: "lead DURATION" lines, until it closes.
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "lead "); ok {
			if d, err := time.ParseDuration(v); err == nil && d >= 0 && d <= delay {
				lead.Store(int64(d))
			}
		}
	}
	return 0
}

// lead is how much earlier than the delay the proxy writes a chunk on:
// what its own latency adds (waking up, handing the chunk over), as the
// bench measured it.
var lead atomic.Int64

// chunk is what one read got, where it goes, and when it may be written
// on; or, with end set, that its source closed.
type chunk struct {
	due  time.Time
	data []byte
	dst  net.Conn
	pair *pair
	end  bool
}

// pair is a forwarded connection: the client's and the target's.
type pair struct {
	c, t   net.Conn
	failed atomic.Bool
	ends   sync.WaitGroup
}

func (p *pair) fail() {
	p.failed.Store(true)
	_ = p.c.Close()
	_ = p.t.Close()
}

var chunkBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// forward joins c to a new connection to the target, through queue in
// each direction.
func forward(c net.Conn, network, addr string, delay time.Duration, queue chan<- chunk) {
	t, err := net.Dial(network, addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "delay proxy:", err)
		_ = c.Close()
		return
	}
	p := &pair{c: c, t: t}
	p.ends.Add(2)
	go readInto(queue, p, c, t, delay)
	go readInto(queue, p, t, c, delay)
	p.ends.Wait()
	_ = c.Close()
	_ = t.Close()
}

// readInto reads src and queues what it reads for dst, stamped with when
// it may be written: the reads go on meanwhile, so that, as on a wire, a
// stream is delayed, not slowed.
func readInto(queue chan<- chunk, p *pair, src, dst net.Conn, delay time.Duration) {
	for {
		bp := chunkBufs.Get().(*[]byte)
		n, err := src.Read(*bp)
		if n > 0 {
			queue <- chunk{due: time.Now().Add(delay), data: (*bp)[:n], dst: dst, pair: p}
		} else {
			chunkBufs.Put(bp)
		}
		if err != nil {
			queue <- chunk{due: time.Now().Add(delay), dst: dst, pair: p, end: true}
			return
		}
	}
}

// writeDelayed writes the chunks of all connections on, each when due.
// Every chunk waits the same delay, so the order they were read in is
// the order they fall due: one queue and one writer serve all. Go's
// timers wake up to a millisecond late when the process is idle, so the
// writer waits on a thread of its own, in the kernel, with the timer
// slack off (see sleep_linux.go).
func writeDelayed(queue <-chan chunk) {
	lockForSleeping()
	defer unlockForSleeping()
	for ch := range queue {
		p := ch.pair
		if !p.failed.Load() {
			sleepUntil(ch.due.Add(-time.Duration(lead.Load())))
		}
		switch {
		case ch.end:
			// Pass the end on: a half-close, so that the other
			// direction drains.
			if tc, ok := ch.dst.(interface{ CloseWrite() error }); ok && !p.failed.Load() {
				_ = tc.CloseWrite()
			} else {
				p.fail()
			}
			p.ends.Done()
		case !p.failed.Load():
			if _, err := ch.dst.Write(ch.data); err != nil {
				p.fail()
			}
		}
		if ch.data != nil {
			b := ch.data[:cap(ch.data)]
			chunkBufs.Put(&b)
		}
	}
}

// netemNote says whether this kernel could have delayed the packets
// itself (netem), from its build configuration.
func netemNote() string {
	f, err := os.Open("/proc/config.gz")
	if err != nil {
		return "Whether the kernel has netem is unknown (no /proc/config.gz)."
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return "Whether the kernel has netem is unknown: " + err.Error()
	}
	sc := bufio.NewScanner(z)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CONFIG_NET_SCH_NETEM="); ok {
			return "The kernel has netem (CONFIG_NET_SCH_NETEM=" + v + "), which the bench does not use."
		}
	}
	return "The kernel has no netem (CONFIG_NET_SCH_NETEM is not set): a network namespace could not delay the packets."
}
