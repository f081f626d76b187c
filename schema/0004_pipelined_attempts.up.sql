-- Attempts that begin with their claim: each function below runs in the
-- statement sent with BEGIN, in one round trip, and raises instead of
-- returning a result, so that a failed claim aborts the transaction it
-- began. SQLSTATE IG409: the key is held or changed since it was read;
-- IG410: a phased attempt's lease is lost.

-- An atomic attempt's claim writes nothing: it takes the key's advisory
-- lock, which lookups see as held, bounds how long the transaction may sit
-- idle, and checks that the key is free as the engine decided from what
-- it read: no row (expect_attempt 0), or that completed row (its attempt),
-- past its TTL, or, with takeover, that in-flight row, past its lease.
-- The row is written once, with the response, when the attempt commits;
-- until then the lock keeps a phase of the attempt it took over from
-- starting.
CREATE OR REPLACE FUNCTION idemgen_claim(lock_id bigint, idle_timeout_ms bigint,
    key_scope text, key_operation text, key_key text, expect_attempt integer, takeover boolean)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT pg_try_advisory_xact_lock(lock_id) THEN
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

-- A phase of a phased attempt starts by taking the key's advisory lock, so
-- lookups see the key busy and no takeover starts while it runs, checking
-- that the row is still this attempt's, and extending its lease.
CREATE OR REPLACE FUNCTION idemgen_start_phase(lock_id bigint, idle_timeout_ms bigint,
    key_scope text, key_operation text, key_key text, key_attempt integer, lease_ms bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(lock_id);
    PERFORM set_config('idle_in_transaction_session_timeout', idle_timeout_ms::text, true);
    UPDATE idempotency_keys AS k
    SET locked_until = now() + lease_ms * interval '1 millisecond'
    WHERE k.scope = key_scope AND k.operation = key_operation AND k.key = key_key
      AND k.status = 'in_flight' AND k.attempt = key_attempt;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'idemgen: the attempt no longer holds the key' USING ERRCODE = 'IG410';
    END IF;
END
$$;
