-- The current definition of every function of the key store, as the
-- migrations leave it (TestFunctionsFileIsCurrent holds them equal). Read
-- this file to know what a function does today; change a function only
-- with a new migration, which states the new definition whole, and
-- update it here in the same change. A function keeps its signature for
-- a release (see README.md in this directory): code of the previous
-- release calls it too.
--
-- This file is not a migration: Migrate and the migration tools never
-- run it.

-- What a claim requires of the key's row, written once for every claim:
-- no row for a new use (expect_attempt 0), the terminal row read past its
-- TTL for a new generation, or with takeover the in-flight row read past
-- its lease. found is false when the key has no row.
-- As of migration 0006_retained_generations.
CREATE OR REPLACE FUNCTION idemgen_claimable(found boolean, row_status text, row_locked_until timestamptz,
    row_expires_at timestamptz, row_attempt integer, expect_attempt integer, takeover boolean)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN NOT found THEN expect_attempt = 0 AND NOT takeover
        WHEN row_attempt <> expect_attempt THEN false
        WHEN takeover THEN row_status = 'in_flight' AND row_locked_until <= now()
        ELSE row_status IN ('completed', 'expired') AND row_expires_at <= now()
    END
$$;

-- A lookup's claim (LookupKey with claim): takes the key's advisory lock
-- for the session when the key has no row, and records it in the setting
-- idemgen.claim; the session's idle timeouts free a key whose holder
-- vanished (their own values are kept, and put back when the claim
-- ends). A session left holding a claim by a transaction-mode pooler
-- never claims again.
-- As of migration 0010_claims_keep_session_settings.
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
    PERFORM set_config('idemgen.idle_session_timeout', current_setting('idle_session_timeout'), false);
    PERFORM set_config('idemgen.idle_in_transaction_session_timeout', current_setting('idle_in_transaction_session_timeout'), false);
    PERFORM set_config('idle_session_timeout', idle_timeout_ms::text, false);
    PERFORM set_config('idle_in_transaction_session_timeout', idle_timeout_ms::text, false);
    RETURN true;
END
$$;

-- An atomic attempt's claim, sent with BEGIN: takes the key's lock for
-- the transaction, bounds how long it may sit idle, and raises IG409
-- unless the row is still as the engine read it (idemgen_claimable).
-- As of migration 0006_retained_generations.
CREATE OR REPLACE FUNCTION idemgen_claim(lock_id bigint, idle_timeout_ms bigint,
    key_scope text, key_operation text, key_key text, expect_attempt integer, takeover boolean)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    k idempotency_keys%ROWTYPE;
BEGIN
    IF coalesce(current_setting('idemgen.claim', true), '') = lock_id::text
       OR NOT pg_try_advisory_xact_lock(lock_id) THEN
        RAISE EXCEPTION 'idemgen: the key is held by another attempt' USING ERRCODE = 'IG409';
    END IF;
    PERFORM set_config('idle_in_transaction_session_timeout', idle_timeout_ms::text, true);
    SELECT * INTO k FROM idempotency_keys AS r
    WHERE r.scope = key_scope AND r.operation = key_operation AND r.key = key_key;
    IF NOT idemgen_claimable(FOUND, k.status, k.locked_until, k.expires_at, k.attempt, expect_attempt, takeover) THEN
        RAISE EXCEPTION 'idemgen: the key is not free as it was read' USING ERRCODE = 'IG409';
    END IF;
END
$$;

-- Hands a lookup's session claim over to the attempt's transaction, in
-- the statement that writes the key's row, so that COMMIT frees the key
-- with its row visible. False when this session holds no such claim.
-- As of migration 0010_claims_keep_session_settings.
CREATE OR REPLACE FUNCTION idemgen_hand_over_claim(lock_id bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('idemgen.claim', true), '') <> lock_id::text THEN
        RETURN false;
    END IF;
    PERFORM pg_advisory_xact_lock(lock_id);
    PERFORM pg_advisory_unlock(lock_id);
    PERFORM set_config('idemgen.claim', '', false);
    PERFORM idemgen_restore_idle_timeouts();
    RETURN true;
END
$$;

-- Ends a lookup's claim whose attempt did not hand it over: releases the
-- session's lock if it still holds it, and puts the session's idle
-- timeouts back. False when this session did not claim the key.
-- As of migration 0010_claims_keep_session_settings.
CREATE OR REPLACE FUNCTION idemgen_release_claim(lock_id bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('idemgen.claim', true), '') <> lock_id::text THEN
        RETURN false;
    END IF;
    PERFORM set_config('idemgen.claim', '', false);
    PERFORM idemgen_restore_idle_timeouts();
    -- An advisory lock on a bigint is (classid, objid) = its high and low
    -- halves, objsubid 1.
    IF EXISTS (SELECT 1 FROM pg_locks AS l
               WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid() AND l.objsubid = 1
                 AND l.classid = ((lock_id >> 32) & 4294967295)::oid AND l.objid = (lock_id & 4294967295)::oid
                 AND l.mode = 'ExclusiveLock') THEN
        PERFORM pg_advisory_unlock(lock_id);
    END IF;
    RETURN true;
END
$$;

-- Starts a phase of a phased attempt, sent with BEGIN: takes the key's
-- lock for the transaction, extends the lease, and raises IG410 when the
-- row is no longer this attempt's (it was taken over or forgotten).
-- As of migration 0004_pipelined_attempts.
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

-- Puts back the idle timeouts a lookup's claim kept, or resets them
-- where it kept none (a claim taken before migration 0010).
-- As of migration 0010_claims_keep_session_settings.
CREATE OR REPLACE FUNCTION idemgen_restore_idle_timeouts()
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('idemgen.idle_session_timeout', true), '') = '' THEN
        RESET idle_session_timeout;
        RESET idle_in_transaction_session_timeout;
        RETURN;
    END IF;
    PERFORM set_config('idle_session_timeout', current_setting('idemgen.idle_session_timeout'), false);
    PERFORM set_config('idle_in_transaction_session_timeout', current_setting('idemgen.idle_in_transaction_session_timeout'), false);
    PERFORM set_config('idemgen.idle_session_timeout', '', false);
    PERFORM set_config('idemgen.idle_in_transaction_session_timeout', '', false);
END
$$;

-- Moves the replay filter's epoch on when a completed row is removed
-- before its TTL (the triggers idemgen_forget_deleted and
-- idemgen_forget_emptied call it).
-- As of migration 0011_replay_filter_epoch.
CREATE OR REPLACE FUNCTION idemgen_next_filter_epoch()
RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE idemgen_filter_epoch SET epoch = epoch + 1;
    RETURN NULL;
END
$$;
