package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemriver"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/idem/redisfilter"
)

const keysAbout = `Keys lists, shows and forgets the keys in the key store: to look into a
request a client asks about or a log line names, and to let a key run anew.
Logs carry a key's hash (key_hash), never the key; keys list prints it
beside each key.

  list     the newest keys (-limit, 100 by default), of one -scope, one
           -operation and one -status (in_flight, completed or expired)
           when given: hash, status, stored response status, generation,
           age, time left (the TTL, or an in-flight attempt's lease),
           recovery point, and whether a live attempt holds the key. An
           atomic attempt's key shows once it has committed.
  show     one key (-operation, -key, and -scope unless it has none) with
           its stored response: status, headers, and body up to -max-body
           bytes.
  forget   one key, so that the next request with it runs as new: a
           completed key, one past its TTL, or an attempt abandoned partway
           (its lease passed). A key whose attempts derived keys keeps its
           row, emptied, so that its next use is the next generation and
           derives keys never used before; any other key's row is deleted.

A service whose store has a Redis replay filter (pgstore's ReplayCache)
answers replays from Redis too. Forgetting a key moves the filter's epoch
on in PostgreSQL, and every server of the service stops reading the key's
entries within 2 seconds, whatever Redis kept or lost. With -redis-url
(and -redis-prefix, when the service sets its own), forget holds the key
for those seconds, answering 409, and returns once no server can replay
it; it also leaves a tombstone for servers of the previous release, which
read no epoch. Without it a server may replay the forgotten response for
up to 2 seconds.

A key a live attempt holds is not forgotten without -force. With -force, a
phased attempt is fenced off: its later phases fail with lease lost (a phase
running now is waited for first). What it already did stays done: the phases
it committed and its calls to others, such as a charge. The next request
runs as new, in a new generation, and does all of it again. An atomic
attempt that is running cannot be fenced: it commits its response or rolls
back on its own, within its lease; wait for it.

-scope, -operation and -key take values as keys list prints them, with Go
string escapes: \x1f for the unit separator that joins a scope of two parts,
\\ for a backslash, \" for a quote; '' or "" is the empty scope, which show
and forget use when -scope is not given. Flags go before or after the
subcommand. -json prints JSON: one object per key, each on a line, with
stable field names.

Examples:

  idemgen keys list -operation createOrder
  idemgen keys list -scope 'acme\x1facct_42' -status in_flight -json
  idemgen keys show -operation createOrder -scope 'acme\x1facct_42' -key 9b2f0c
  idemgen keys forget -operation createPayment -key 9b2f0c -force
  idemgen keys forget -operation createOrder -key 9b2f0c -redis-url redis://127.0.0.1:6379/0

It exits 1 when the key is not found or is held, or the database fails, and
2 for a mistake in how it was run.
`

// keysOptions are keys' flags.
type keysOptions struct {
	databaseURL      string
	redisURL         string
	redisPrefix      string
	scope, operation escapedFlag
	key              escapedFlag
	status           statusFlag
	json, force      bool
	limit, maxBody   int
}

// keysFlags lists, for each flag that only some subcommands take, those
// that take it.
var keysFlags = map[string][]string{
	"key":          {"show", "forget"},
	"limit":        {"list"},
	"status":       {"list"},
	"force":        {"forget"},
	"redis-url":    {"forget"},
	"redis-prefix": {"forget"},
	"max-body":     {"show"},
}

// keysCommand is keys': its first argument names the subcommand, and its
// flags may also follow that.
func keysCommand(fs *flag.FlagSet) func(args []string, stdout, stderr io.Writer) int {
	var o keysOptions
	// Not defaulted from the environment, so that -h cannot print a password.
	fs.StringVar(&o.databaseURL, "database-url", "", "the key store's PostgreSQL database, as a `URL` (default $DATABASE_URL)")
	fs.Var(&o.scope, "scope", "list: only the keys of this `scope`; show, forget: the key's scope (default: the empty scope)")
	fs.Var(&o.operation, "operation", "list: only the keys of the operation with this `operationId`; show, forget: the key's operation (required)")
	fs.Var(&o.key, "key", "show, forget: the idempotency `key` (required)")
	fs.Var(&o.status, "status", "list: only the keys in this `status`: in_flight, completed or expired")
	fs.IntVar(&o.limit, "limit", 100, fmt.Sprintf("list: list at most `n` keys, the newest, up to %d", pgstore.MaxListLimit))
	fs.IntVar(&o.maxBody, "max-body", 64<<10, "show: print at most `n` bytes of the stored body; 0 prints none")
	fs.BoolVar(&o.json, "json", false, "print JSON: one object per key, each on a line")
	fs.BoolVar(&o.force, "force", false, "forget: also forget a key a phased attempt holds, fencing the attempt off (see above)")
	fs.StringVar(&o.redisURL, "redis-url", "", "forget: also forget the key in the replay filter's Redis, as a `URL` such as redis://127.0.0.1:6379/0")
	fs.StringVar(&o.redisPrefix, "redis-prefix", "", "forget: the replay filter's key `prefix` in Redis (default: redisfilter's, idemgen:replay:)")
	return func(args []string, stdout, stderr io.Writer) int {
		if len(args) == 0 {
			return usageError(stderr, "keys", "missing subcommand: list, show or forget")
		}
		sub := args[0]
		if err := fs.Parse(args[1:]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stdout, lookup("keys").help())
				return 0
			}
			return usageError(stderr, "keys", strings.Replace(err.Error(), " for flag -", " for -", 1))
		}
		if err := o.check(fs, sub); err != "" {
			return usageError(stderr, "keys", err)
		}
		return runKeys(sub, o, stdout, stderr)
	}
}

// check reports what is wrong with how keys sub was run, or "".
func (o *keysOptions) check(fs *flag.FlagSet, sub string) string {
	if !slices.Contains([]string{"list", "show", "forget"}, sub) {
		return fmt.Sprintf("unknown subcommand %q: want list, show or forget", sub)
	}
	if fs.NArg() > 0 {
		return fmt.Sprintf("unexpected arguments %q", fs.Args())
	}
	var wrong string
	fs.Visit(func(f *flag.Flag) {
		if subs, ok := keysFlags[f.Name]; ok && wrong == "" && !slices.Contains(subs, sub) {
			wrong = fmt.Sprintf("-%s is not a flag of %s, only of %s", f.Name, sub, strings.Join(subs, " and "))
		}
	})
	switch {
	case wrong != "":
		return wrong
	case sub == "list" && (o.limit < 1 || o.limit > pgstore.MaxListLimit):
		return fmt.Sprintf("-limit must be 1 to %d", pgstore.MaxListLimit)
	case sub == "list":
		return ""
	case !o.operation.set || o.operation.value == "":
		return sub + " needs -operation"
	case !o.key.set || o.key.value == "":
		return sub + " needs -key"
	case o.maxBody < 0:
		return "-max-body must be 0 or more"
	}
	return ""
}

func runKeys(sub string, o keysOptions, stdout, stderr io.Writer) int {
	cmd := "keys " + sub
	if o.databaseURL == "" {
		o.databaseURL = os.Getenv("DATABASE_URL")
	}
	if o.databaseURL == "" {
		fmt.Fprintf(stderr, "idemgen %s: no database; set DATABASE_URL or pass -database-url\n", cmd)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, o.databaseURL)
	if err != nil {
		fmt.Fprintf(stderr, "idemgen %s: %v\n", cmd, err)
		return 2
	}
	defer pool.Close()
	opts := pgstore.Options{Logger: slog.New(slog.NewTextHandler(stderr, nil))}
	if o.redisURL != "" {
		ropts, err := redis.ParseURL(o.redisURL)
		if err != nil {
			fmt.Fprintf(stderr, "idemgen %s: -redis-url: %v\n", cmd, err)
			return 2
		}
		ropts.ContextTimeoutEnabled = true
		// The filter reports Redis's failures; go-redis's own log would
		// repeat them, unstructured.
		logging.Disable()
		rdb := redis.NewClient(ropts)
		defer rdb.Close()
		// A command waits longer than a request would.
		if opts.ReplayCache, err = redisfilter.New(rdb, redisfilter.Options{Prefix: o.redisPrefix, Timeout: 5 * time.Second, Logger: opts.Logger}); err != nil {
			fmt.Fprintf(stderr, "idemgen %s: %v\n", cmd, err)
			return 2
		}
	}
	store := pgstore.New(pool, opts)

	id := idem.ID{Scope: o.scope.value, Operation: o.operation.value, Key: o.key.value}
	switch sub {
	case "list":
		return listKeys(ctx, store, o, stdout, stderr)
	case "show":
		show := pgstore.ShowOptions{MaxBody: o.maxBody}
		if o.maxBody == 0 {
			show.MaxBody = -1 // no body; pgstore's zero is its default
		}
		d, err := store.ShowKey(ctx, id, show)
		if err != nil {
			return keyError(stderr, cmd, id, o, err, pgstore.KeyInfo{})
		}
		// An async operation's request has a River job.
		job, hasJob, err := idemriver.FindJob(ctx, pool, id, d.Generation)
		if err != nil {
			return databaseError(stderr, cmd, err)
		}
		if o.json {
			j := shownJSON(d, o.maxBody)
			if hasJob {
				j.Job = &job
			}
			return printJSON(stdout, stderr, cmd, j)
		}
		var shownJob *idemriver.Job
		if hasJob {
			shownJob = &job
		}
		printShown(stdout, d, o.maxBody, shownJob)
		return 0
	}
	k, err := store.ForgetKey(ctx, id, pgstore.ForgetOptions{Force: o.force})
	if err != nil {
		return keyError(stderr, cmd, id, o, err, k)
	}
	if o.redisURL == "" && k.Status == pgstore.StatusCompleted && k.ExpiresAt.After(k.Now) {
		fmt.Fprintf(stderr, "idemgen %s: a service with a Redis replay filter may go on replaying the key for up to 2s, "+
			"and one of the previous release until %s; to hold the key until none does, forget with -redis-url (and -redis-prefix, if the service sets one)\n",
			cmd, k.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if o.json {
		return printJSON(stdout, stderr, cmd, forgottenJSON(k, o.force))
	}
	printForgotten(stdout, k, o.force, o.redisURL != "")
	return 0
}

func listKeys(ctx context.Context, store *pgstore.Store, o keysOptions, stdout, stderr io.Writer) int {
	f := pgstore.KeyFilter{Operation: o.operation.value, Status: pgstore.KeyStatus(o.status), Limit: o.limit}
	if o.scope.set {
		f.Scope = &o.scope.value
	}
	keys, err := store.ListKeys(ctx, f)
	if err != nil {
		return databaseError(stderr, "keys list", err)
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		for _, k := range keys {
			if err := enc.Encode(keyJSONOf(k)); err != nil {
				fmt.Fprintf(stderr, "idemgen keys list: %v\n", err)
				return 1
			}
		}
	} else if len(keys) > 0 {
		w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "HASH\tOPERATION\tSCOPE\tKEY\tSTATUS\tRESPONSE\tGEN\tAGE\tLEFT\tRECOVERY POINT\tHELD")
		for _, k := range keys {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", k.Hash, escape(k.Operation), escape(k.Scope), escape(k.Key),
				k.Status, orDash(k.ResponseStatus), k.Generation, short(k.Age()), left(k), orDash(k.RecoveryPoint), yesNo(k.Held))
		}
		w.Flush()
	}
	switch {
	case len(keys) == 0:
		fmt.Fprintln(stderr, "idemgen keys list: no keys match")
	case len(keys) == o.limit:
		fmt.Fprintf(stderr, "idemgen keys list: listed the newest %s; more may match: raise -limit (up to %d), or narrow with -scope, -operation or -status\n",
			count(len(keys), "key"), pgstore.MaxListLimit)
	}
	return 0
}

// left is a key's time left, as keys list prints it: the TTL of a
// completed key, the lease of an in-flight one.
func left(k pgstore.KeyInfo) string {
	switch {
	case k.Status == pgstore.StatusCompleted && k.TTLLeft() > 0:
		return short(k.TTLLeft())
	case k.Status == pgstore.StatusCompleted:
		return "expired"
	case k.Status == pgstore.StatusInFlight && k.LeaseEnds.IsZero():
		return "-"
	case k.Status == pgstore.StatusInFlight && k.LeaseLeft() > 0:
		return "lease " + short(k.LeaseLeft())
	case k.Status == pgstore.StatusInFlight:
		return "lease passed"
	}
	return "-"
}

// keyError reports a failed show or forget, naming the fix.
func keyError(stderr io.Writer, cmd string, id idem.ID, o keysOptions, err error, k pgstore.KeyInfo) int {
	name := fmt.Sprintf("%s of %s in scope %s (hash %s)", escape(id.Key), escape(id.Operation), escape(id.Scope), idem.KeyHash(id))
	switch {
	case errors.Is(err, pgstore.ErrKeyNotFound):
		hint := ""
		if !o.scope.set {
			hint = "; without -scope, the key is looked for in the empty scope"
		}
		fmt.Fprintf(stderr, "idemgen %s: no key %s%s; 'idemgen keys list -operation %s' lists its keys\n", cmd, name, hint, escape(id.Operation))
		switch {
		case o.redisURL != "" && errors.Is(err, pgstore.ErrFilterForget):
			fmt.Fprintf(stderr, "idemgen %s: its entry in the replay filter, if it has one, was not removed: %v\n", cmd, err)
		case o.redisURL != "":
			fmt.Fprintf(stderr, "idemgen %s: its entry in the replay filter, if it had one, was removed: the service no longer replays the key from Redis\n", cmd)
		}
	case errors.Is(err, pgstore.ErrKeyHeld) && !fenceable(k):
		fmt.Fprintf(stderr, "idemgen %s: key %s is held by a running atomic attempt, which commits its response or rolls back on its own, within its lease; "+
			"-force cannot fence it off: wait for it, then forget the key\n", cmd, name)
	case errors.Is(err, pgstore.ErrKeyHeld) && k.LeaseLeft() > 0:
		fmt.Fprintf(stderr, "idemgen %s: key %s is held by a live attempt (lease ends in %s); wait for it, or pass -force to fence it off\n",
			cmd, name, short(k.LeaseLeft()))
	case errors.Is(err, pgstore.ErrKeyHeld):
		fmt.Fprintf(stderr, "idemgen %s: key %s is held by a running attempt; wait for it, or pass -force to fence it off\n", cmd, name)
	case errors.Is(err, pgstore.ErrFilterForget):
		fmt.Fprintf(stderr, "idemgen %s: key %s: %v\n", cmd, name, err)
	default:
		return databaseError(stderr, cmd, err)
	}
	return 1
}

// fenceable reports whether -force can fence off the attempt that holds
// key k: a phased attempt, whose row is in flight. An atomic attempt
// writes its row only when it commits, over whatever the row holds.
func fenceable(k pgstore.KeyInfo) bool {
	return k.Status == pgstore.StatusInFlight && !k.CreatedAt.IsZero()
}

func printShown(w io.Writer, d pgstore.KeyDetail, maxBody int, job *idemriver.Job) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "hash:\t%s\n", d.Hash)
	fmt.Fprintf(tw, "operation:\t%s\n", escape(d.Operation))
	fmt.Fprintf(tw, "scope:\t%s\n", escape(d.Scope))
	fmt.Fprintf(tw, "key:\t%s\n", escape(d.Key))
	fmt.Fprintf(tw, "status:\t%s\n", d.Status)
	fmt.Fprintf(tw, "held:\t%s\n", yesNo(d.Held))
	if d.CreatedAt.IsZero() {
		// An atomic attempt's first use: its row comes with its response.
		fmt.Fprintf(tw, "row:\tnone yet: an atomic attempt is running, and writes it when it commits\n")
		tw.Flush()
		return
	}
	fmt.Fprintf(tw, "generation:\t%d\n", d.Generation)
	fmt.Fprintf(tw, "attempt:\t%d\n", d.Attempt)
	fmt.Fprintf(tw, "derived keys:\t%s\n", yesNo(d.Derived))
	fmt.Fprintf(tw, "created:\t%s (%s ago)\n", stamp(d.CreatedAt), short(d.Age()))
	fmt.Fprintf(tw, "expires:\t%s (%s)\n", stamp(d.ExpiresAt), when(d.TTLLeft()))
	if d.Status == pgstore.StatusInFlight && !d.LeaseEnds.IsZero() {
		fmt.Fprintf(tw, "lease ends:\t%s (%s)\n", stamp(d.LeaseEnds), when(d.LeaseLeft()))
	}
	fmt.Fprintf(tw, "recovery point:\t%s\n", orDash(d.RecoveryPoint))
	if job != nil {
		fmt.Fprintf(tw, "job:\tRiver job %d (%s), %s, attempt %d of %d\n", job.ID, job.Kind, job.State, job.Attempt, job.MaxAttempts)
	}
	if d.ResponseStatus == 0 {
		fmt.Fprintf(tw, "response:\tnone\n")
		tw.Flush()
		return
	}
	fmt.Fprintf(tw, "response:\t%d %s\n", d.ResponseStatus, http.StatusText(d.ResponseStatus))
	tw.Flush()

	fmt.Fprintln(w)
	for _, name := range slices.Sorted(maps.Keys(d.Header)) {
		for _, v := range d.Header[name] {
			fmt.Fprintf(w, "%s: %s\n", name, v)
		}
	}
	switch {
	case d.BodyLen == 0:
		return
	case maxBody == 0:
		fmt.Fprintf(w, "\n[a body of %d bytes, not shown: -max-body 0]\n", d.BodyLen)
		return
	}
	body, text := bodyText(d)
	if !text {
		fmt.Fprintf(w, "\n[%d bytes of binary data; -json shows them, base64-encoded]\n", len(body))
	} else {
		fmt.Fprintf(w, "\n%s", body)
		if !strings.HasSuffix(string(body), "\n") {
			fmt.Fprintln(w)
		}
	}
	if d.Truncated {
		fmt.Fprintf(w, "[the first %d of %d bytes; -max-body %d shows them all]\n", len(body), d.BodyLen, d.BodyLen)
	}
}

func printForgotten(w io.Writer, k pgstore.KeyInfo, force, filtered bool) {
	name := fmt.Sprintf("%s of %s in scope %s (hash %s)", escape(k.Key), escape(k.Operation), escape(k.Scope), k.Hash)
	switch action := forgetAction(k); {
	case action == "none" && filtered:
		fmt.Fprintf(w, "key %s had expired already, in generation %d: the next request with it runs as new, in generation %d; its row is unchanged, and its entry in the replay filter, if any, was dropped\n",
			name, k.Generation, k.Generation+1)
	case action == "none":
		fmt.Fprintf(w, "key %s had expired already, in generation %d: the next request with it runs as new, in generation %d; nothing changed\n",
			name, k.Generation, k.Generation+1)
	case action == "deleted":
		fmt.Fprintf(w, "forgot key %s, %s: the next request with it runs as new (its attempts derived no key, so its row was deleted)\n",
			name, was(k))
	default:
		fmt.Fprintf(w, "forgot key %s, %s: the next request with it runs as new, in generation %d\n", name, was(k), k.Generation+1)
	}
	if force && k.Held {
		fmt.Fprintln(w, "the attempt that held it was fenced off: its later phases fail with lease lost; what it did stays done, and the next request does it all again")
	}
}

// was says what a forgotten key was.
func was(k pgstore.KeyInfo) string {
	switch k.Status {
	case pgstore.StatusCompleted:
		return fmt.Sprintf("completed (%d) in generation %d", k.ResponseStatus, k.Generation)
	case pgstore.StatusInFlight:
		s := fmt.Sprintf("in flight in generation %d", k.Generation)
		if k.RecoveryPoint != "" {
			s += ", at recovery point " + k.RecoveryPoint
		}
		return s
	}
	return fmt.Sprintf("%s in generation %d", k.Status, k.Generation)
}

// forgetAction is what ForgetKey did to forgotten key k's row, as its
// documentation says: emptied when the row must stay (derived keys, or in
// flight), deleted otherwise, nothing when it had expired already.
func forgetAction(k pgstore.KeyInfo) string {
	switch {
	case k.Status == pgstore.StatusExpired:
		return "none"
	case k.Derived || k.Status == pgstore.StatusInFlight:
		return "emptied"
	}
	return "deleted"
}

// keyJSON is a key as -json prints it. The field names are stable.
type keyJSON struct {
	Hash             string     `json:"hash"`
	Operation        string     `json:"operation"`
	Scope            string     `json:"scope"`
	Key              string     `json:"key"`
	Status           string     `json:"status"`
	Held             bool       `json:"held"`
	Generation       int64      `json:"generation"`
	Attempt          int64      `json:"attempt"`
	Derived          bool       `json:"derived"`
	RecoveryPoint    string     `json:"recovery_point"`
	ResponseStatus   int        `json:"response_status"`
	CreatedAt        *time.Time `json:"created_at"`
	ExpiresAt        *time.Time `json:"expires_at"`
	LeaseEnds        *time.Time `json:"lease_ends"`
	Now              *time.Time `json:"now"`
	AgeSeconds       int64      `json:"age_seconds"`
	TTLLeftSeconds   int64      `json:"ttl_left_seconds"`
	LeaseLeftSeconds int64      `json:"lease_left_seconds"`
}

func keyJSONOf(k pgstore.KeyInfo) keyJSON {
	return keyJSON{
		Hash: k.Hash, Operation: k.Operation, Scope: k.Scope, Key: k.Key, Status: string(k.Status), Held: k.Held,
		Generation: k.Generation, Attempt: k.Attempt, Derived: k.Derived, RecoveryPoint: k.RecoveryPoint, ResponseStatus: k.ResponseStatus,
		CreatedAt: timeOrNil(k.CreatedAt), ExpiresAt: timeOrNil(k.ExpiresAt), LeaseEnds: timeOrNil(k.LeaseEnds), Now: timeOrNil(k.Now),
		AgeSeconds: seconds(k.Age()), TTLLeftSeconds: seconds(k.TTLLeft()), LeaseLeftSeconds: seconds(k.LeaseLeft()),
	}
}

type shownKeyJSON struct {
	keyJSON
	// Job is an async operation's request's River job, when it has one.
	Job     *idemriver.Job `json:"job,omitempty"`
	Headers http.Header    `json:"headers"`
	// Body is the body when it is UTF-8 text; BodyBase64, otherwise.
	Body          *string `json:"body,omitempty"`
	BodyBase64    []byte  `json:"body_base64,omitempty"`
	BodyLength    int     `json:"body_length"`
	BodyTruncated bool    `json:"body_truncated"`
}

func shownJSON(d pgstore.KeyDetail, maxBody int) shownKeyJSON {
	j := shownKeyJSON{keyJSON: keyJSONOf(d.KeyInfo), Headers: d.Header, BodyLength: d.BodyLen, BodyTruncated: d.Truncated}
	switch {
	case maxBody == 0 || d.BodyLen == 0:
	default:
		if body, text := bodyText(d); text {
			s := string(body)
			j.Body = &s
		} else {
			j.BodyBase64 = body
		}
	}
	return j
}

// bodyText returns the shown body, and whether it is UTF-8 text: a cut
// that split a character leaves the character out.
func bodyText(d pgstore.KeyDetail) ([]byte, bool) {
	body := d.Body
	for i := 0; d.Truncated && i < utf8.UTFMax-1 && !utf8.Valid(body) && len(body) > 0; i++ {
		body = body[:len(body)-1]
	}
	if utf8.Valid(body) {
		return body, true
	}
	return d.Body, false
}

type forgottenKeyJSON struct {
	keyJSON
	// Action is what was done to the key's row: emptied, deleted, or none
	// when it had expired already. Fenced reports that -force fenced off
	// the live attempt that held the key.
	Action         string `json:"action"`
	Fenced         bool   `json:"fenced"`
	NextGeneration int64  `json:"next_generation"`
}

func forgottenJSON(k pgstore.KeyInfo, force bool) forgottenKeyJSON {
	j := forgottenKeyJSON{keyJSON: keyJSONOf(k), Action: forgetAction(k), Fenced: force && k.Held, NextGeneration: k.Generation + 1}
	if j.Action == "deleted" {
		j.NextGeneration = 1
	}
	return j
}

func printJSON(stdout, stderr io.Writer, cmd string, v any) int {
	if err := json.NewEncoder(stdout).Encode(v); err != nil {
		fmt.Fprintf(stderr, "idemgen %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

// escapedFlag is a string flag written as keys list prints it (see
// escape), remembering whether it was set: an empty scope is a scope.
type escapedFlag struct {
	value string
	set   bool
}

func (f *escapedFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	return escape(f.value)
}

func (f *escapedFlag) Set(s string) error {
	v, err := unescape(s)
	if err != nil {
		return err
	}
	f.value, f.set = v, true
	return nil
}

// escape renders s for a terminal, and for -scope, -operation and -key to
// read back: Go string escapes for what is not printable (a scope joined
// from two parts holds the unit separator, \x1f), a backslash or a quote,
// and "" for the empty string.
func escape(s string) string {
	if s == "" {
		return `""`
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// unescape reads what escape writes; ” also is the empty string.
func unescape(s string) (string, error) {
	if s == `""` {
		return "", nil
	}
	v, err := strconv.Unquote(`"` + s + `"`)
	if err != nil {
		return "", errors.New(`not a valid escaped string: write \x1f for the unit separator, \\ for a backslash, \" for a quote`)
	}
	return v, nil
}

// statusFlag is -status: one of a key's statuses, checked as the flag is
// parsed.
type statusFlag string

func (f *statusFlag) String() string { return string(*f) }

func (f *statusFlag) Set(s string) error {
	switch st := pgstore.KeyStatus(s); st {
	case "", pgstore.StatusInFlight, pgstore.StatusCompleted, pgstore.StatusExpired:
		*f = statusFlag(s)
		return nil
	}
	return fmt.Errorf("expected one of %s, %s, %s", pgstore.StatusInFlight, pgstore.StatusCompleted, pgstore.StatusExpired)
}

// short renders a duration in two units at most: 42s, 3m10s, 5h3m, 3d4h.
func short(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < 0:
		return "-" + short(-d)
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

// when renders a time d from now: "in 5m3s", or "passed 2m ago".
func when(d time.Duration) string {
	if d > 0 {
		return "in " + short(d)
	}
	return "passed " + short(-d) + " ago"
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func seconds(d time.Duration) int64 { return int64(d.Round(time.Second) / time.Second) }

func orDash[T comparable](v T) string {
	var zero T
	if v == zero {
		return "-"
	}
	return fmt.Sprint(v)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
