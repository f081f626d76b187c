-- Back to the claims of migrations 0005 and 0008, which reset the
-- session's idle timeouts when a claim ends.
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

CREATE OR REPLACE FUNCTION idemgen_hand_over_claim(lock_id bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('idemgen.claim', true), '') <> lock_id::text THEN
        RETURN false;
    END IF;
    PERFORM pg_advisory_xact_lock(lock_id);
    PERFORM pg_advisory_unlock(lock_id);
    PERFORM set_config('idemgen.claim', '', false);
    RESET idle_session_timeout;
    RESET idle_in_transaction_session_timeout;
    RETURN true;
END
$$;

CREATE OR REPLACE FUNCTION idemgen_release_claim(lock_id bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('idemgen.claim', true), '') <> lock_id::text THEN
        RETURN false;
    END IF;
    PERFORM set_config('idemgen.claim', '', false);
    RESET idle_session_timeout;
    RESET idle_in_transaction_session_timeout;
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

-- idemgen_restore_idle_timeouts stays: the functions above no longer call
-- it, but a session that began a call of this migration's versions just
-- before this rollback committed may still look it up, and would fail.
-- Applied again, this migration replaces it.
