-- A lookup that claims: when the lookup of an atomic attempt finds no row,
-- the same statement tries to take the key's advisory lock for the session
-- (see LookupKey), so that a first execution decides and claims in one
-- round trip. The lock is the one idemgen_claim takes for a transaction,
-- so claims of either kind exclude each other and lookups see both as
-- held. Its transaction then begins with the handler's first statement,
-- and idemgen_release_claim, sent with COMMIT, gives the lock back.

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
    IF NOT pg_try_advisory_lock(lock_id) THEN
        RETURN false;
    END IF;
    IF EXISTS (SELECT 1 FROM idempotency_keys AS k
               WHERE k.scope = key_scope AND k.operation = key_operation AND k.key = key_key) THEN
        PERFORM pg_advisory_unlock(lock_id);
        RETURN false;
    END IF;
    PERFORM set_config('idle_session_timeout', idle_timeout_ms::text, false);
    PERFORM set_config('idle_in_transaction_session_timeout', idle_timeout_ms::text, false);
    RETURN true;
END
$$;

-- Gives back what idemgen_try_claim took: the lock, and the session's own
-- idle timeouts. False when the session did not hold the lock.
CREATE OR REPLACE FUNCTION idemgen_release_claim(lock_id bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    RESET idle_session_timeout;
    RESET idle_in_transaction_session_timeout;
    RETURN pg_advisory_unlock(lock_id);
END
$$;
