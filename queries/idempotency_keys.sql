-- Queries of the idempotency key store. Every query is keyed by the full
-- primary key (scope, operation, key), so the table can be sharded by scope.

-- name: LookupKey :one
-- Reads a key without writing: replays, 409s and 422s commit nothing.
-- idle is false while a claimant holds the key's advisory lock, which is how
-- an atomic attempt, whose row is not yet committed, is seen as in flight.
-- The shared lock taken here lasts only for this statement.
SELECT
    pg_try_advisory_xact_lock_shared(sqlc.arg(lock_id)::bigint) AS idle,
    k.fingerprint,
    k.status,
    k.recovery_point,
    k.response_status,
    k.response_headers,
    k.response_body,
    coalesce(k.expires_at <= now(), false)::boolean AS expired,
    coalesce(k.locked_until <= now(), false)::boolean AS lease_expired
FROM (SELECT 1) AS one
LEFT JOIN idempotency_keys AS k
    ON k.scope = sqlc.arg(scope) AND k.operation = sqlc.arg(operation) AND k.key = sqlc.arg(key);

-- name: ClaimKey :one
-- Claims a key inside the attempt's transaction. The exclusive advisory
-- lock makes concurrent duplicates see the key as busy without waiting for
-- this transaction; got is false when someone else holds it. The row is
-- inserted, or replaces one whose TTL has passed, or takes over an
-- in-flight row whose lease expired (keeping its recovery point).
-- claimed is false when a live row exists.
WITH lock AS (
    SELECT pg_try_advisory_xact_lock(sqlc.arg(lock_id)::bigint) AS got
), claimed AS (
    INSERT INTO idempotency_keys AS k
        (scope, operation, key, fingerprint, status, locked_until, recovery_point, created_at, expires_at)
    SELECT sqlc.arg(scope)::text, sqlc.arg(operation)::text, sqlc.arg(key)::text, sqlc.arg(fingerprint)::bytea,
        'in_flight', now() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond', '',
        now(), now() + sqlc.arg(ttl_ms)::bigint * interval '1 millisecond'
    FROM lock
    WHERE lock.got
    ON CONFLICT (scope, operation, key) DO UPDATE
    SET fingerprint = excluded.fingerprint,
        status = 'in_flight',
        locked_until = excluded.locked_until,
        recovery_point = CASE WHEN k.expires_at <= now() THEN '' ELSE k.recovery_point END,
        response_status = NULL,
        response_headers = NULL,
        response_body = NULL,
        created_at = CASE WHEN k.expires_at <= now() THEN excluded.created_at ELSE k.created_at END,
        expires_at = CASE WHEN k.expires_at <= now() THEN excluded.expires_at ELSE k.expires_at END
    WHERE k.expires_at <= now()
       OR (k.status = 'in_flight' AND k.locked_until <= now() AND k.fingerprint = excluded.fingerprint)
    RETURNING k.recovery_point
)
SELECT lock.got, claimed.recovery_point
FROM lock LEFT JOIN claimed ON true;

-- name: CompleteKey :execrows
-- Stores the response of the attempt that holds the key.
UPDATE idempotency_keys
SET status = 'completed',
    locked_until = NULL,
    response_status = sqlc.arg(response_status),
    response_headers = sqlc.arg(response_headers),
    response_body = sqlc.arg(response_body)
WHERE scope = sqlc.arg(scope) AND operation = sqlc.arg(operation) AND key = sqlc.arg(key)
  AND status = 'in_flight';
