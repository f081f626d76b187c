package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/storage/redis/v3"
	"github.com/jackc/pgx/v5"
)

// The check measures, from outside, what Fiber's idempotency middleware
// does where the Idempotency-Key protocol asks for more than a cache:
//
//	(a) a reused key with another body: the old answer, or a 422?
//	(b) two instances on one Redis and database, each sent one request of
//	    a pair with the same key at once: how many pairs insert twice?
//	(c) a crash after the insert, before the response is stored, then a
//	    retry with the same key: does the insert run again?
//
// It makes a database of its own on the PostgreSQL of DATABASE_URL (or
// 127.0.0.1:5432) and drops it after; its Redis keys are under a prefix
// of its own, deleted after.

const defaultAdminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

const ordersTable = `CREATE TABLE orders (
    id           text        PRIMARY KEY DEFAULT 'ord_' || replace(gen_random_uuid()::text, '-', ''),
    account_id   text        NOT NULL,
    amount_cents bigint      NOT NULL CHECK (amount_cents > 0),
    currency     text        NOT NULL,
    customer_id  text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
)`

// checkResult are the facts, as numbers.
type checkResult struct {
	// (a)
	MismatchStatus     int  `json:"mismatch_status"`
	MismatchReplayed   bool `json:"mismatch_marked_replayed"`
	MismatchSameBody   bool `json:"mismatch_got_first_body"`
	MismatchRowsOfBody int  `json:"mismatch_rows_inserted_for_second_body"`
	// (b)
	Pairs               int `json:"pairs"`
	TwoInstancesDoubled int `json:"two_instances_pairs_inserted_twice"`
	OneInstanceDoubled  int `json:"one_instance_pairs_inserted_twice"`
	// (c)
	CrashRowsBeforeRetry int  `json:"crash_rows_before_retry"`
	CrashRowsAfterRetry  int  `json:"crash_rows_after_retry"`
	CrashRetryReplayed   bool `json:"crash_retry_marked_replayed"`
}

func runCheck(ctx context.Context, cfg config, pairs int, out io.Writer) (err error) {
	admin := cfg.dbURL
	if admin == "" {
		admin = defaultAdminURL
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.Background())
	var b [6]byte
	_, _ = rand.Read(b[:])
	run := hex.EncodeToString(b[:])
	dbName := "idemgen_fibercheck_" + run
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+dbName+" TEMPLATE template0"); err != nil {
		return err
	}
	defer func() {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, derr := conn.Exec(c, "DROP DATABASE IF EXISTS "+dbName+" WITH (FORCE)"); derr != nil {
			err = errors.Join(err, derr)
		}
	}()
	cc := conn.Config().Copy()
	cc.Database = dbName
	db, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return err
	}
	defer db.Close(context.Background())
	if _, err := db.Exec(ctx, ordersTable); err != nil {
		return err
	}
	dbURL := withDB(admin, dbName)

	// The instances share a prefix, as instances of one service do.
	prefix := keyBase + strconv.Itoa(os.Getpid()) + ":"
	host, port, _ := net.SplitHostPort(cfg.redisAddr)
	portN, _ := strconv.Atoi(port)
	store := redis.New(redis.Config{Host: host, Port: portN})
	keys := prefixed{store: store, prefix: prefix}
	defer func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = errors.Join(err, keys.clear(c), store.Close())
	}()

	bin, err := os.Executable()
	if err != nil {
		return err
	}
	start := func(crash bool) (*instance, error) {
		return startInstance(ctx, bin, dbURL, cfg.redisAddr, prefix, crash)
	}
	a, err := start(false)
	if err != nil {
		return err
	}
	defer a.stop()
	bInst, err := start(false)
	if err != nil {
		return err
	}
	defer bInst.stop()
	rows := func(customer string) (int, error) {
		var n int
		err := db.QueryRow(ctx, `SELECT count(*) FROM orders WHERE customer_id = $1`, customer).Scan(&n)
		return n, err
	}
	var res checkResult

	// (a) A reused key with another body.
	first, err := post(ctx, a.url, "mismatch-"+run, order1("cus_a_"+run, 1250))
	if err != nil || first.status != http.StatusCreated {
		return fmt.Errorf("(a) first request: %v %+v", err, first)
	}
	second, err := post(ctx, a.url, "mismatch-"+run, order1("cus_b_"+run, 9999))
	if err != nil {
		return fmt.Errorf("(a) second request: %w", err)
	}
	res.MismatchStatus, res.MismatchReplayed = second.status, second.replayed
	res.MismatchSameBody = bytes.Equal(first.body, second.body)
	if res.MismatchRowsOfBody, err = rows("cus_b_" + run); err != nil {
		return err
	}

	// (b) Pairs of one key, one request to each instance, all at once;
	// then the same on one instance.
	res.Pairs = pairs
	if res.TwoInstancesDoubled, err = doubled(ctx, [2]string{a.url, bInst.url}, pairs, "two-"+run, rows); err != nil {
		return fmt.Errorf("(b): %w", err)
	}
	if res.OneInstanceDoubled, err = doubled(ctx, [2]string{a.url, a.url}, pairs, "one-"+run, rows); err != nil {
		return fmt.Errorf("(b) one instance: %w", err)
	}

	// (c) A crash between the insert and storing the response.
	crasher, err := start(true)
	if err != nil {
		return err
	}
	customer := "cus_crash_" + run
	if r, err := post(ctx, crasher.url, "crash-"+run, order1(customer, 1250)); err == nil {
		return fmt.Errorf("(c) the crashing instance answered %+v", r)
	}
	crasher.wait()
	if res.CrashRowsBeforeRetry, err = rows(customer); err != nil {
		return err
	}
	retry, err := post(ctx, a.url, "crash-"+run, order1(customer, 1250))
	if err != nil || retry.status != http.StatusCreated {
		return fmt.Errorf("(c) retry: %v %+v", err, retry)
	}
	res.CrashRetryReplayed = retry.replayed
	if res.CrashRowsAfterRetry, err = rows(customer); err != nil {
		return err
	}
	return res.write(out)
}

func (r checkResult) write(out io.Writer) error {
	js, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, `Fiber v3 idempotency middleware, Redis storage, from outside:
(a) a reused key with another body: %d, replayed=%v, the first request's body=%v; rows inserted for the second body: %d
(b) %d pairs of one key sent at once, one request to each of two instances: %d pairs inserted twice
    the same %d pairs on one instance: %d inserted twice
(c) killed after the insert, before the response was stored: %d row(s); the retry with the same key: replayed=%v, %d row(s) after it
%s
`, r.MismatchStatus, r.MismatchReplayed, r.MismatchSameBody, r.MismatchRowsOfBody,
		r.Pairs, r.TwoInstancesDoubled, r.Pairs, r.OneInstanceDoubled,
		r.CrashRowsBeforeRetry, r.CrashRetryReplayed, r.CrashRowsAfterRetry, js)
	return err
}

// doubled sends pairs pairs of requests, each pair one key, to urls[0] and
// urls[1] at once, and counts the pairs whose order was inserted twice.
func doubled(ctx context.Context, urls [2]string, pairs int, tag string, rows func(string) (int, error)) (int, error) {
	release := make(chan struct{})
	errs := make(chan error, 2*pairs)
	var wg sync.WaitGroup
	for i := range pairs {
		for _, u := range urls {
			wg.Go(func() {
				<-release
				r, err := post(ctx, u, tag+"-"+strconv.Itoa(i), order1(tag+"-"+strconv.Itoa(i), 1250))
				if err == nil && r.status != http.StatusCreated {
					err = fmt.Errorf("answered %d: %s", r.status, r.body)
				}
				if err != nil {
					errs <- err
				}
			})
		}
	}
	close(release)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	n := 0
	for i := range pairs {
		c, err := rows(tag + "-" + strconv.Itoa(i))
		if err != nil {
			return 0, err
		}
		if c > 1 {
			n++
		}
	}
	return n, nil
}

func order1(customer string, amount int64) []byte {
	b, _ := json.Marshal(newOrder{AmountCents: amount, Currency: "EUR", CustomerID: customer})
	return b
}

type answer struct {
	status   int
	replayed bool
	body     []byte
}

var checkClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 100}}

func post(ctx context.Context, base, key string, body []byte) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/orders", bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(headerAccount, "acct_check")
	req.Header.Set(headerKey, key)
	resp, err := checkClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, replayed: resp.Header.Get(headerReplayed) == "true", body: b}, err
}

// instance is a fiberpeer server started by the check.
type instance struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
}

const instanceEnv = "FIBERPEER_INSTANCE"

var listeningLine = regexp.MustCompile(`msg="fiberpeer: listening" url=(\S+)`)

func startInstance(ctx context.Context, bin, dbURL, redisAddr, prefix string, crash bool) (*instance, error) {
	args := []string{"-addr", "127.0.0.1:0", "-redis", redisAddr, "-key-prefix", prefix, "-clear=false"}
	if crash {
		args = append(args, "-crash-after-insert")
	}
	in := &instance{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	// instanceEnv makes a test binary, too, serve (see TestMain).
	in.cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, instanceEnv+"=1")
	stderr, err := in.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := in.cmd.Start(); err != nil {
		return nil, err
	}
	found := make(chan string, 1)
	var log bytes.Buffer
	go func() {
		defer close(in.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if m := listeningLine.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case in.url = <-found:
		return in, nil
	case <-in.done:
		_ = in.cmd.Wait()
		return nil, fmt.Errorf("fiberpeer exited before listening:\n%s", log.String())
	case <-time.After(30 * time.Second):
		in.stop()
		return nil, errors.New("fiberpeer did not listen within 30 s")
	case <-ctx.Done():
		in.stop()
		return nil, ctx.Err()
	}
}

// wait waits for the instance to exit on its own.
func (in *instance) wait() {
	<-in.done
	_ = in.cmd.Wait()
}

func (in *instance) stop() {
	_ = in.cmd.Process.Signal(os.Interrupt)
	select {
	case <-in.done:
	case <-time.After(10 * time.Second):
		_ = in.cmd.Process.Kill()
	}
	_ = in.cmd.Wait()
}

// withDB is admin, a URL or a keyword/value string, with its database
// replaced by name.
func withDB(admin, name string) string {
	if u, err := url.Parse(admin); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path, u.RawPath = "/"+name, ""
		return u.String()
	}
	return admin + " dbname=" + name
}
