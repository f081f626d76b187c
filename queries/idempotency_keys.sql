-- Queries of the idempotency key store. Every query is keyed by the full
-- primary key (scope, operation, key), so the table can be sharded by scope.

-- name: LookupKey :one
-- Reads a key without writing: replays, 409s and 422s commit nothing. It
-- reports facts and the engine decides. held is true while a claimant holds
-- the key's advisory lock, which is how an atomic attempt, whose row is not
-- yet committed, is seen as in flight. The shared lock taken here lasts
-- only for this statement; a session left holding the key's claim by a
-- pooler reads it as held too (see migration 0005). With claim, a key
-- without a row is also claimed for an atomic attempt when it is free
-- (claimed; idemgen_try_claim): the session then holds the key's lock.
SELECT
    -- A completed row within its TTL is replayed whoever holds the key, so
    -- a replay does not probe the lock.
    (CASE WHEN k.status = 'completed' AND k.expires_at > now() THEN false
          ELSE NOT pg_try_advisory_xact_lock_shared(sqlc.arg(lock_id)::bigint)
               OR (k.scope IS NULL AND coalesce(current_setting('idemgen.claim', true), '') = sqlc.arg(lock_id)::bigint::text)
     END)::boolean AS held,
    (CASE WHEN k.scope IS NULL AND sqlc.arg(claim)::boolean
          THEN idemgen_try_claim(sqlc.arg(lock_id)::bigint, sqlc.arg(idle_timeout_ms)::bigint,
                                 sqlc.arg(scope)::text, sqlc.arg(operation)::text, sqlc.arg(key)::text)
          ELSE false END)::boolean AS claimed,
    (k.scope IS NOT NULL)::boolean AS found,
    k.fingerprint,
    k.status,
    k.recovery_point,
    k.generation,
    k.attempt,
    coalesce(k.per_request, false)::boolean AS per_request,
    k.response_status,
    k.response_headers,
    k.response_body,
    coalesce(k.expires_at <= now(), false)::boolean AS expired,
    coalesce((extract(epoch FROM k.locked_until - now()) * 1000)::bigint, 0)::bigint AS lease_left_ms,
    coalesce((extract(epoch FROM k.expires_at - now()) * 1000)::bigint, 0)::bigint AS ttl_left_ms
FROM (SELECT 1) AS one
LEFT JOIN idempotency_keys AS k
    ON k.scope = sqlc.arg(scope) AND k.operation = sqlc.arg(operation) AND k.key = sqlc.arg(key);

-- name: ClaimKey :one
-- Claims a key for a phased attempt, committing at once. The engine
-- decided on the claim from what LookupKey read, and it succeeds only
-- while the row is still that one (idemgen_claimable): no row, a terminal
-- row past its TTL (a new generation), or, with takeover, an in-flight
-- row whose lease has passed (same generation, recovery point kept). The
-- generation is the engine's, counted from the row it read. A phase may
-- derive keys before anything else of it commits, so a phased row counts
-- as derived from the start. The exclusive advisory lock makes concurrent
-- duplicates see the key as held without waiting for this transaction;
-- got is false when someone else holds it, and recovery_point is NULL
-- when the row is not as expected. request is kept for the completer; a
-- takeover keeps the one the first attempt stored.
WITH lock AS (
    SELECT pg_try_advisory_xact_lock(sqlc.arg(lock_id)::bigint) AS got,
        set_config('idle_in_transaction_session_timeout', sqlc.arg(idle_timeout_ms)::bigint::text, true) AS idle_timeout
), claimed AS (
    INSERT INTO idempotency_keys AS k
        (scope, operation, key, fingerprint, status, locked_until, recovery_point, attempt, generation, derived, per_request, request, created_at, expires_at)
    SELECT sqlc.arg(scope)::text, sqlc.arg(operation)::text, sqlc.arg(key)::text, sqlc.arg(fingerprint)::bytea,
        'in_flight', now() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond', '', 1, sqlc.arg(generation)::bigint, true,
        sqlc.arg(per_request)::boolean, sqlc.narg(request)::bytea, now(), now() + sqlc.arg(ttl_ms)::bigint * interval '1 millisecond'
    FROM lock
    WHERE lock.got AND lock.idle_timeout IS NOT NULL
      -- A row is proposed where a new use may claim the key without one,
      -- or where one exists, for the update below to check; none where the
      -- claim expected a row that is gone, which it must read again.
      AND (idemgen_claimable(false, NULL, NULL, NULL, NULL, sqlc.arg(expect_attempt)::integer, sqlc.arg(takeover)::boolean)
           OR EXISTS (SELECT 1 FROM idempotency_keys AS r
                      WHERE r.scope = sqlc.arg(scope) AND r.operation = sqlc.arg(operation) AND r.key = sqlc.arg(key)))
    ON CONFLICT (scope, operation, key) DO UPDATE
    SET fingerprint = excluded.fingerprint,
        status = 'in_flight',
        locked_until = excluded.locked_until,
        recovery_point = CASE WHEN sqlc.arg(takeover)::boolean THEN k.recovery_point ELSE '' END,
        generation = excluded.generation,
        derived = true,
        per_request = CASE WHEN sqlc.arg(takeover)::boolean THEN k.per_request ELSE excluded.per_request END,
        attempt = k.attempt + 1,
        request = CASE WHEN sqlc.arg(takeover)::boolean THEN coalesce(k.request, excluded.request) ELSE excluded.request END,
        response_status = NULL,
        response_headers = NULL,
        response_body = NULL,
        created_at = CASE WHEN sqlc.arg(takeover)::boolean THEN k.created_at ELSE excluded.created_at END,
        expires_at = CASE WHEN sqlc.arg(takeover)::boolean AND k.expires_at > now() THEN k.expires_at ELSE excluded.expires_at END
    WHERE idemgen_claimable(true, k.status, k.locked_until, k.expires_at, k.attempt,
                            sqlc.arg(expect_attempt)::integer, sqlc.arg(takeover)::boolean)
    RETURNING k.recovery_point, k.attempt, k.generation
)
SELECT lock.got, claimed.recovery_point, claimed.attempt, claimed.generation
FROM lock LEFT JOIN claimed ON true;

-- name: ClaimAtomic :exec
-- Claims a key for an atomic attempt, writing nothing; sent with BEGIN
-- (see idemgen_claim in migration 0004).
SELECT idemgen_claim(sqlc.arg(lock_id)::bigint, sqlc.arg(idle_timeout_ms)::bigint,
    sqlc.arg(scope)::text, sqlc.arg(operation)::text, sqlc.arg(key)::text, sqlc.arg(expect_attempt)::integer,
    sqlc.arg(takeover)::boolean);

-- name: StoreResponse :one
-- Writes an atomic attempt's key row, with its response, in the attempt's
-- transaction and sent with its COMMIT: the key's only write. It replaces
-- the row of an earlier generation past its TTL, which the attempt's
-- claim checked and its advisory lock keeps from changing; the row may
-- only have been reaped since, and the generation is the attempt's own.
-- derived stays true once any attempt on the key derived a key, so that
-- the reaper keeps the key's generation. An attempt its lookup claimed
-- (claim_lock not 0) hands its claim over to the transaction here, so
-- that COMMIT frees the key (see migration 0008); handed_over is false
-- when this session held no such claim.
WITH claim AS (
    SELECT CASE WHEN sqlc.arg(claim_lock)::bigint = 0 THEN true
                ELSE idemgen_hand_over_claim(sqlc.arg(claim_lock)::bigint) END AS handed_over
)
INSERT INTO idempotency_keys AS k
    (scope, operation, key, fingerprint, status, locked_until, recovery_point, attempt, generation, derived, per_request,
     response_status, response_headers, response_body, created_at, expires_at)
SELECT sqlc.arg(scope)::text, sqlc.arg(operation)::text, sqlc.arg(key)::text, sqlc.arg(fingerprint)::bytea, 'completed', NULL, '',
    sqlc.arg(attempt)::integer, sqlc.arg(generation)::bigint, sqlc.arg(derived)::boolean, sqlc.arg(per_request)::boolean,
    sqlc.narg(response_status)::integer,
    -- As bytea, which every pgx query mode sends intact, then read as JSON.
    convert_from(sqlc.arg(response_headers)::bytea, 'UTF8')::jsonb, sqlc.arg(response_body)::bytea,
    now(), now() + sqlc.arg(ttl_ms)::bigint * interval '1 millisecond'
FROM claim
ON CONFLICT (scope, operation, key) DO UPDATE
SET fingerprint = excluded.fingerprint,
    status = 'completed',
    locked_until = NULL,
    -- A takeover of a phased attempt's row keeps where it got to.
    recovery_point = CASE WHEN sqlc.arg(takeover)::boolean THEN k.recovery_point ELSE '' END,
    attempt = excluded.attempt,
    generation = excluded.generation,
    derived = k.derived OR excluded.derived,
    per_request = CASE WHEN sqlc.arg(takeover)::boolean THEN k.per_request ELSE excluded.per_request END,
    response_status = excluded.response_status,
    response_headers = excluded.response_headers,
    response_body = excluded.response_body,
    created_at = excluded.created_at,
    expires_at = excluded.expires_at
RETURNING (SELECT handed_over FROM claim)::boolean AS handed_over;

-- name: ReleaseClaim :one
-- Ends a claim LookupKey made: sent with the attempt's COMMIT or ROLLBACK.
SELECT idemgen_release_claim(sqlc.arg(lock_id)::bigint)::boolean AS released;

-- name: BeginPhase :exec
-- Starts a phase of a phased attempt; sent with BEGIN (see
-- idemgen_start_phase in migration 0004).
SELECT idemgen_start_phase(sqlc.arg(lock_id)::bigint, sqlc.arg(idle_timeout_ms)::bigint,
    sqlc.arg(scope)::text, sqlc.arg(operation)::text, sqlc.arg(key)::text, sqlc.arg(attempt)::integer, sqlc.arg(lease_ms)::bigint);

-- name: CompleteKey :execrows
-- Stores the response of the attempt that holds the key; the request kept
-- for the completer is needed no more.
UPDATE idempotency_keys
SET status = 'completed',
    locked_until = NULL,
    request = NULL,
    response_status = sqlc.arg(response_status),
    response_headers = convert_from(sqlc.arg(response_headers)::bytea, 'UTF8')::jsonb,
    response_body = sqlc.arg(response_body)
WHERE scope = sqlc.arg(scope) AND operation = sqlc.arg(operation) AND key = sqlc.arg(key)
  AND status = 'in_flight' AND attempt = sqlc.arg(attempt);

-- name: SetRecoveryPoint :execrows
-- Records the recovery point a phase reached, in the phase's transaction.
UPDATE idempotency_keys
SET recovery_point = sqlc.arg(recovery_point)
WHERE scope = sqlc.arg(scope) AND operation = sqlc.arg(operation) AND key = sqlc.arg(key)
  AND status = 'in_flight' AND attempt = sqlc.arg(attempt);

-- name: AcceptClaimed :one
-- Writes the in-flight row of an async request whose lookup claimed its
-- key (claim_lock), in the transaction of its job's insert and sent with
-- its COMMIT: the row keeps the request for the worker, and its lease has
-- passed already, so that the first worker takes it over at once. The
-- claim is handed over to the transaction, so that COMMIT frees the key
-- (see migration 0008); handed_over is false when this session held no
-- such claim. A lookup claims only a key without a row, and every other
-- claimant waits for its lock: the row is new, and a row found there
-- fails the insert, and so the COMMIT with it, job and all.
WITH claim AS (
    SELECT idemgen_hand_over_claim(sqlc.arg(claim_lock)::bigint) AS handed_over
)
INSERT INTO idempotency_keys
    (scope, operation, key, fingerprint, status, locked_until, recovery_point, attempt, generation, derived, per_request, request, created_at, expires_at)
SELECT sqlc.arg(scope)::text, sqlc.arg(operation)::text, sqlc.arg(key)::text, sqlc.arg(fingerprint)::bytea,
    'in_flight', now(), '', 1, 1, true, sqlc.arg(per_request)::boolean, sqlc.narg(request)::bytea,
    now(), now() + sqlc.arg(ttl_ms)::bigint * interval '1 millisecond'
FROM claim
RETURNING (SELECT handed_over FROM claim)::boolean AS handed_over;

-- name: ReleaseKey :execrows
-- Ends a phased attempt's lease early, after a handler error, so that a
-- retry takes over at once and resumes from the recovery point.
UPDATE idempotency_keys
SET locked_until = now()
WHERE scope = sqlc.arg(scope) AND operation = sqlc.arg(operation) AND key = sqlc.arg(key)
  AND status = 'in_flight' AND attempt = sqlc.arg(attempt);

-- name: GetSecret :one
-- The key of derived keys, created by the migrations.
SELECT secret FROM idempotency_secret WHERE id = 1;

-- name: GetFilterEpoch :one
-- The replay filter's epoch, which removing a completed key before its
-- TTL moves on (migration 0011).
SELECT epoch FROM idemgen_filter_epoch;

-- name: FailAbandoned :many
-- The lease sweeper: stores a failure response for up to batch_size
-- in-flight attempts whose lease ended abandoned_for ago or earlier,
-- oldest first.
-- Rows a phase holds are skipped, never waited for, so that concurrent
-- sweepers share the work and the hot path is not blocked.
WITH abandoned AS (
    SELECT scope, operation, key, locked_until
    FROM idempotency_keys
    WHERE status = 'in_flight' AND locked_until <= now() - sqlc.arg(abandoned_for_ms)::bigint * interval '1 millisecond'
    ORDER BY locked_until
    LIMIT sqlc.arg(batch_size)::integer
    FOR UPDATE SKIP LOCKED
)
UPDATE idempotency_keys AS k
SET status = 'completed',
    locked_until = NULL,
    response_status = sqlc.arg(response_status),
    response_headers = convert_from(sqlc.arg(response_headers)::bytea, 'UTF8')::jsonb,
    response_body = sqlc.arg(response_body)
FROM abandoned AS a
WHERE k.scope = a.scope AND k.operation = a.operation AND k.key = a.key
RETURNING k.scope, k.operation, k.key, k.recovery_point, k.attempt, a.locked_until::timestamptz AS lease_ended;

-- name: ListAbandoned :many
-- Reads what FailAbandoned would change, for reports and dry runs.
SELECT scope, operation, key, recovery_point, attempt, locked_until::timestamptz AS lease_ended
FROM idempotency_keys
WHERE status = 'in_flight' AND locked_until <= now() - sqlc.arg(abandoned_for_ms)::bigint * interval '1 millisecond'
ORDER BY locked_until
LIMIT sqlc.arg(max_rows)::integer;

-- name: CountAbandoned :one
SELECT count(*) FROM idempotency_keys
WHERE status = 'in_flight' AND locked_until <= now() - sqlc.arg(abandoned_for_ms)::bigint * interval '1 millisecond';

-- name: ReapExpired :one
-- The TTL reaper: ends up to batch_size completed keys whose TTL has
-- passed, oldest first. A key whose attempts derived no key is deleted; one
-- whose attempts did is emptied instead (no fingerprint, no response) and
-- marked 'expired', so that its next use counts the next generation and
-- derives keys never used before (see migration 0006). In-flight rows are
-- never touched, and rows another transaction holds are skipped rather
-- than waited for.
WITH due AS (
    SELECT scope, operation, key, derived
    FROM idempotency_keys
    WHERE status = 'completed' AND expires_at <= now()
    ORDER BY expires_at
    LIMIT sqlc.arg(batch_size)::integer
    FOR UPDATE SKIP LOCKED
), deleted AS (
    DELETE FROM idempotency_keys AS k
    USING due AS e
    WHERE NOT e.derived AND k.scope = e.scope AND k.operation = e.operation AND k.key = e.key
    RETURNING 1
), emptied AS (
    UPDATE idempotency_keys AS k
    SET status = 'expired',
        fingerprint = ''::bytea,
        response_status = NULL,
        response_headers = NULL,
        response_body = NULL
    FROM due AS e
    WHERE e.derived AND k.scope = e.scope AND k.operation = e.operation AND k.key = e.key
    RETURNING 1
)
SELECT (SELECT count(*) FROM deleted)::bigint AS deleted, (SELECT count(*) FROM emptied)::bigint AS emptied;

-- name: DeleteEmptied :execrows
-- Deletes up to batch_size rows that the reaper emptied at least
-- emptied_for_ms after their TTL ended, oldest first, when no provider
-- still remembers the keys their attempts derived: the key's next use is
-- its first again. Found by the index of migration 0012; rows another
-- transaction holds, such as a claim of the key's next use, are skipped.
WITH due AS (
    SELECT scope, operation, key
    FROM idempotency_keys
    WHERE status = 'expired'
      AND expires_at <= now() - sqlc.arg(emptied_for_ms)::bigint * interval '1 millisecond'
    ORDER BY expires_at
    LIMIT sqlc.arg(batch_size)::integer
    FOR UPDATE SKIP LOCKED
)
DELETE FROM idempotency_keys AS k
USING due AS e
WHERE k.scope = e.scope AND k.operation = e.operation AND k.key = e.key;

-- name: CountEmptied :one
SELECT count(*) FROM idempotency_keys
WHERE status = 'expired'
  AND expires_at <= now() - sqlc.arg(emptied_for_ms)::bigint * interval '1 millisecond';

-- name: CountExpired :one
SELECT count(*) FROM idempotency_keys
WHERE status = 'completed' AND expires_at <= now();

-- name: ListKeys :many
-- Lists keys for operators (pgstore's ListKeys; idemgen keys list), newest
-- first: of one scope (by_scope), one operation and one status when given
-- (an empty one matches any). now is the database's clock, which ages and
-- times left are counted from. Unlike the queries above, it is not keyed
-- by the full primary key: it reads one scope's keys by the primary key's
-- index, and otherwise the whole table. The queries below serve operators
-- too.
SELECT scope, operation, key, status, generation, attempt, derived, recovery_point,
    response_status, created_at, expires_at, locked_until, now()::timestamptz AS now
FROM idempotency_keys
WHERE (NOT sqlc.arg(by_scope)::boolean OR scope = sqlc.arg(scope)::text)
  AND (sqlc.arg(operation)::text = '' OR operation = sqlc.arg(operation)::text)
  AND (sqlc.arg(status)::text = '' OR status = sqlc.arg(status)::text)
ORDER BY created_at DESC, scope, operation, key
LIMIT sqlc.arg(max_rows)::integer;

-- name: KeyLocksHeld :many
-- Which of the keys' advisory locks (lock_ids) an attempt holds right now.
-- It reads pg_locks, which takes no lock, so that an operator's reads
-- never make a claim or a lookup see a key busy. A bigint lock shows as
-- its high and low 32 bits (classid, objid), with objsubid 1.
SELECT ((l.classid::bigint << 32) | l.objid::bigint)::bigint AS lock_id
FROM pg_catalog.pg_locks AS l
WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted AND l.mode = 'ExclusiveLock'
  AND l.database = (SELECT d.oid FROM pg_catalog.pg_database AS d WHERE d.datname = current_database())
  AND ((l.classid::bigint << 32) | l.objid::bigint) = ANY(sqlc.arg(lock_ids)::bigint[]);

-- name: ShowKey :one
-- Reads one key with its stored response, the body cut at max_body bytes.
SELECT scope, operation, key, status, generation, attempt, derived, recovery_point,
    response_status, created_at, expires_at, locked_until, now()::timestamptz AS now,
    response_headers,
    substring(response_body FROM 1 FOR sqlc.arg(max_body)::integer)::bytea AS response_body,
    coalesce(octet_length(response_body), 0)::integer AS body_len
FROM idempotency_keys
WHERE scope = sqlc.arg(scope) AND operation = sqlc.arg(operation) AND key = sqlc.arg(key);

-- name: LockKeyToForget :one
-- Takes the key's advisory lock for the rest of ForgetKey's transaction,
-- as a claim and a phase's start do, so that none can start on the key
-- until it commits. got is false when an attempt holds the lock; and when
-- this session was left holding the key's claim (see migration 0005),
-- whose lock it would be granted again.
SELECT (pg_try_advisory_xact_lock(sqlc.arg(lock_id)::bigint)
        AND coalesce(current_setting('idemgen.claim', true), '') <> sqlc.arg(lock_id)::bigint::text)::boolean AS got;

-- name: KeyToForget :one
-- Reads the key's row and locks it for ForgetKey: it waits for a phase
-- that is running to commit or roll back.
SELECT scope, operation, key, status, generation, attempt, derived, recovery_point,
    response_status, created_at, expires_at, locked_until, now()::timestamptz AS now
FROM idempotency_keys
WHERE scope = sqlc.arg(scope) AND operation = sqlc.arg(operation) AND key = sqlc.arg(key)
FOR UPDATE;

-- name: EmptyKey :exec
-- Forgets a key whose row must stay: one whose attempts derived keys, or
-- an in-flight one. It is emptied as the reaper empties a key past its
-- TTL, the request kept for the completer too, and expires now, so that
-- the key's next use counts the next generation; attempt moves on, so
-- that a phase of the attempt that held it commits nothing more.
UPDATE idempotency_keys
SET status = 'expired',
    fingerprint = ''::bytea,
    locked_until = NULL,
    recovery_point = '',
    response_status = NULL,
    response_headers = NULL,
    response_body = NULL,
    request = NULL,
    attempt = attempt + 1,
    expires_at = least(expires_at, now())
WHERE scope = sqlc.arg(scope) AND operation = sqlc.arg(operation) AND key = sqlc.arg(key);

-- name: DeleteKey :exec
-- Forgets a completed key whose attempts derived no key: reusing its
-- generation numbers repeats no key anyone was sent.
DELETE FROM idempotency_keys
WHERE scope = sqlc.arg(scope) AND operation = sqlc.arg(operation) AND key = sqlc.arg(key);

-- name: FindAbandoned :many
-- The completer's work: in-flight attempts of the operations named whose
-- lease passed at least that operation's after_ms ago, oldest first, and
-- that kept their request where the operation needs it (one without could
-- never be resumed, and would crowd out those that can). A plain read: the
-- completer's takeover claim decides who gets each one.
WITH o AS (
    SELECT u.operation, (sqlc.arg(after_ms)::bigint[])[u.i] AS after_ms,
        (sqlc.arg(needs_request)::boolean[])[u.i] AS needs_request
    FROM unnest(sqlc.arg(operations)::text[]) WITH ORDINALITY AS u(operation, i)
)
SELECT k.scope, k.operation, k.key, k.fingerprint, k.request, k.recovery_point, k.attempt, k.generation, k.per_request
FROM idempotency_keys AS k
JOIN o ON k.operation = o.operation
WHERE k.status = 'in_flight'
  AND k.locked_until <= now() - o.after_ms * interval '1 millisecond'
  AND (k.request IS NOT NULL OR NOT o.needs_request)
ORDER BY k.locked_until
LIMIT sqlc.arg(max_rows)::integer;

-- name: GetRequest :one
-- The request an in-flight key keeps: what the worker of an async
-- operation runs. NULL when the key holds none.
SELECT request FROM idempotency_keys
WHERE scope = sqlc.arg(scope) AND operation = sqlc.arg(operation) AND key = sqlc.arg(key)
  AND status = 'in_flight';

-- name: HoldKey :one
-- Holds a key for ForgetKey beyond its transaction, on its session, so
-- that no attempt claims it until every server's replay filter has read
-- the epoch the forget moved on (see migration 0011).
SELECT pg_try_advisory_lock(sqlc.arg(lock_id)::bigint) AS held;

-- name: UnholdKey :exec
SELECT pg_advisory_unlock(sqlc.arg(lock_id)::bigint);
