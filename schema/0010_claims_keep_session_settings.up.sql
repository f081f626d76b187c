-- compatible-from: 0008
-- (Code that knows migrations up to 0008 may serve a database with this
-- one applied: the functions it calls keep their signatures and answers.)
--
-- A lookup's claim (idemgen_try_claim) bounds its session's idle
-- timeouts, so that a key whose holder vanished is freed; ending the
-- claim RESET them, to the server's defaults, and a value the application
-- had set for its sessions (in pgx's AfterConnect, or a pooler's connect
-- query) was gone after the first claimed attempt on each connection.
-- The claim now keeps the session's values in settings of its own, and
-- ending it puts them back. A claim taken before this migration kept
-- none: ending it resets them, as before.

-- Puts back the idle timeouts a claim kept, or resets them where it kept
-- none.
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

-- idemgen_try_claim of migration 0005, keeping the session's idle
-- timeouts before it bounds them.
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

-- idemgen_hand_over_claim of migration 0008, putting the session's idle
-- timeouts back.
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

-- idemgen_release_claim of migration 0008, putting the session's idle
-- timeouts back.
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
