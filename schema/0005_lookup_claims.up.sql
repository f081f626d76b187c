-- A lookup that claims: when the lookup of an atomic attempt finds no row,
-- the same statement tries to take the key's advisory lock for the session
-- (see LookupKey), so that a first execution decides and claims in one
-- round trip. The lock is the one idemgen_claim takes for a transaction,
-- so claims of either kind exclude each other and lookups see both as
-- held. The attempt's transaction then begins with the handler's first
-- statement, and idemgen_release_claim, sent with COMMIT, gives the lock
-- back.
--
-- The session also records its claim in the setting idemgen.claim. A
-- session holds one claim at a time; one that still holds a claim when it
-- is asked for another was left holding it by a pooler that hands each
-- transaction to any server session (PgBouncer's transaction mode), and
-- the attempt's later statements went to another. Such a session must not
-- claim again, since advisory locks are re-entrant within a session, and
-- its lock must keep reading as held.

-- Takes the key's advisory lock for the session when no row exists. It
-- reads the row again after locking: the lookup's snapshot predates the
-- lock, and a claimant may have committed the key's row and released the
-- lock in between. A session that vanishes while holding the lock is ended
-- by PostgreSQL after idle_timeout_ms idle, in a transaction or not, which
-- frees the key.
CREATE OR REPLACE FUNCTION idemgen_try_claim(lock_id bigint, idle_timeout_ms bigint,
    key_scope text, key_operation text, key_key text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('idemgen.claim', true), '') <> '' THEN
        RETURN false;
    END IF;
    IF NOT pg_try_advisory_lock(lock_id) THEN
        RETURN false;
    END IF;
    IF EXISTS (SELECT 1 FROM idempotency_keys AS k
               WHERE k.scope = key_scope AND k.operation = key_operation AND k.key = key_key) THEN
        PERFORM pg_advisory_unlock(lock_id);
        RETURN false;
    END IF;
    PERFORM set_config('idemgen.claim', lock_id::text, false);
    PERFORM set_config('idle_session_timeout', idle_timeout_ms::text, false);
    PERFORM set_config('idle_in_transaction_session_timeout', idle_timeout_ms::text, false);
    RETURN true;
END
$$;

-- Gives back what idemgen_try_claim took: the lock, and the session's own
-- idle timeouts. False when this session did not claim the key: a pooler
-- sent the release to another session than the claim's.
CREATE OR REPLACE FUNCTION idemgen_release_claim(lock_id bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('idemgen.claim', true), '') <> lock_id::text THEN
        RETURN false;
    END IF;
    PERFORM set_config('idemgen.claim', '', false);
    RESET idle_session_timeout;
    RESET idle_in_transaction_session_timeout;
    RETURN pg_advisory_unlock(lock_id);
END
$$;

-- idemgen_claim of migration 0004, refusing a key whose claim this
-- session was left holding (see above): its transaction-scoped lock would
-- be granted, the session holding the key already.
CREATE OR REPLACE FUNCTION idemgen_claim(lock_id bigint, idle_timeout_ms bigint,
    key_scope text, key_operation text, key_key text, expect_attempt integer, takeover boolean)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('idemgen.claim', true), '') = lock_id::text
       OR NOT pg_try_advisory_xact_lock(lock_id) THEN
        RAISE EXCEPTION 'idemgen: the key is held by another attempt' USING ERRCODE = 'IG409';
    END IF;
    PERFORM set_config('idle_in_transaction_session_timeout', idle_timeout_ms::text, true);
    IF coalesce((SELECT CASE WHEN takeover AND k.status = 'in_flight' AND k.locked_until <= now() THEN k.attempt
                             WHEN NOT takeover AND k.status = 'completed' AND k.expires_at <= now() THEN k.attempt
                             ELSE -1 END
                 FROM idempotency_keys AS k
                 WHERE k.scope = key_scope AND k.operation = key_operation AND k.key = key_key), 0) <> expect_attempt THEN
        RAISE EXCEPTION 'idemgen: the key is not free as it was read' USING ERRCODE = 'IG409';
    END IF;
END
$$;
