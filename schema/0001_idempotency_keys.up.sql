-- The idempotency key store: one row per (scope, operation, key).
CREATE TABLE IF NOT EXISTS idempotency_keys (
    scope            text        NOT NULL,
    operation        text        NOT NULL,
    key              text        NOT NULL,
    -- SHA-256 of the canonical request; a reused key with another fingerprint is a 422.
    fingerprint      bytea       NOT NULL,
    status           text        NOT NULL DEFAULT 'in_flight'
                                 CHECK (status IN ('in_flight', 'completed')),
    -- The lease of an in-flight attempt; others may take over once it has passed.
    locked_until     timestamptz,
    -- The last recovery point a phased attempt committed ('' before the first).
    recovery_point   text        NOT NULL DEFAULT '',
    response_status  integer,
    response_headers jsonb,
    response_body    bytea,
    created_at       timestamptz NOT NULL DEFAULT now(),
    expires_at       timestamptz NOT NULL,
    PRIMARY KEY (scope, operation, key)
);

-- The lease sweeper reads only in-flight rows.
CREATE INDEX IF NOT EXISTS idempotency_keys_lease_idx
    ON idempotency_keys (locked_until) WHERE status = 'in_flight';

-- The TTL reaper deletes only terminal rows, oldest first.
CREATE INDEX IF NOT EXISTS idempotency_keys_expiry_idx
    ON idempotency_keys (expires_at) WHERE status = 'completed';
