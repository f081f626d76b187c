package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrSchema reports a key store whose tables are missing, older than this
// code, or out of the server's reach; Check's errors match it.
var ErrSchema = errors.New("pgstore: the key store's schema is not ready")

// schemaProbes read every column the store's queries use, newest
// migration last, so that the first one to fail names what is missing.
var schemaProbes = []struct {
	migration string
	sql       string
}{
	{"0001_idempotency_keys", `SELECT scope, operation, key, fingerprint, status, locked_until, recovery_point,
		response_status, response_headers, response_body, created_at, expires_at FROM idempotency_keys WHERE false`},
	{"0002_phased_attempts", `SELECT attempt FROM idempotency_keys WHERE false`},
	{"0002_phased_attempts", `SELECT secret FROM idempotency_secret WHERE false`},
	{"0003_key_generations", `SELECT generation FROM idempotency_keys WHERE false`},
	{"0004_pipelined_attempts", `SELECT 'idemgen_claim(bigint, bigint, text, text, text, integer, boolean)'::regprocedure,
		'idemgen_start_phase(bigint, bigint, text, text, text, integer, bigint)'::regprocedure`},
	{"0005_lookup_claims", `SELECT 'idemgen_try_claim(bigint, bigint, text, text, text)'::regprocedure,
		'idemgen_release_claim(bigint)'::regprocedure`},
	{"0006_retained_generations", `SELECT derived FROM idempotency_keys WHERE false`},
	{"0006_retained_generations", `SELECT 'idemgen_claimable(boolean, text, timestamptz, timestamptz, integer, integer, boolean)'::regprocedure`},
	{"0007_completer_requests", `SELECT request FROM idempotency_keys WHERE false`},
	{"0008_claim_handover", `SELECT 'idemgen_hand_over_claim(bigint)'::regprocedure`},
	{"0013_derived_per_request", `SELECT per_request FROM idempotency_keys WHERE false`},
}

// MinServerVersion is the oldest PostgreSQL the store runs on, as
// server_version_num: 14 brought idle_session_timeout, which frees a key
// whose holder vanished.
const MinServerVersion = 140000

// ErrServerVersion reports a PostgreSQL older than MinServerVersion;
// Check's error matches it.
var ErrServerVersion = errors.New("pgstore: PostgreSQL is too old for the key store")

// checkVersion refuses a server_version_num older than MinServerVersion.
func checkVersion(num int) error {
	if num >= MinServerVersion {
		return nil
	}
	return fmt.Errorf("%w: the server is PostgreSQL %d.%d, and the key store needs %d or later (it sets idle_session_timeout, so that a key whose holder vanished is freed); upgrade the server, or keep the key table on a newer one",
		ErrServerVersion, num/10000, num%10000, MinServerVersion/10000)
}

// Check verifies that db holds the key store's tables, as new as this
// code needs, and that the connecting role may use them. Call it at
// start, after connecting: a server that starts on a missing or old
// schema would answer every annotated request with a 500. Its error says
// what to run.
func Check(ctx context.Context, db DB) error {
	var version int
	if err := db.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		return fmt.Errorf("pgstore: check the server's version: %w", err)
	}
	if err := checkVersion(version); err != nil {
		return err
	}
	for _, p := range schemaProbes {
		_, err := db.Exec(ctx, p.sql)
		if err == nil {
			continue
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) {
			return fmt.Errorf("pgstore: check the key store's schema: %w", err)
		}
		switch pgErr.Code {
		case "42P01": // undefined_table
			if p.migration == "0001_idempotency_keys" {
				return fmt.Errorf("%w: the table idempotency_keys is missing (%s); apply the key-store migrations: call pgstore.Migrate at start, or run the files `idemgen migrations` writes with your migration tool", ErrSchema, pgErr.Message)
			}
			fallthrough
		case "42703", "42883": // undefined_column, undefined_function
			return fmt.Errorf("%w: it is older than this code (%s); apply migration %s and those after it: call pgstore.Migrate, or run the files `idemgen migrations` writes", ErrSchema, pgErr.Message, p.migration)
		case "42501": // insufficient_privilege
			return fmt.Errorf("%w: the database role may not use the key store (%s); grant it SELECT, INSERT, UPDATE and DELETE on idempotency_keys and SELECT on idempotency_secret", ErrSchema, pgErr.Message)
		}
		return fmt.Errorf("pgstore: check the key store's schema: %w", err)
	}
	return nil
}
