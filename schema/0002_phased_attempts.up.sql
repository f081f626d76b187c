-- Phased attempts: a claim that commits before the handler runs needs a
-- fencing token, so that an attempt whose lease was taken over can no
-- longer commit a phase; and derived keys need a secret of the database's
-- own, so that they are stable across processes and unguessable by clients.

-- attempt counts the claims of a key: 1 for the first, one more for each
-- takeover. A phase commits only while the row still has its attempt.
ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS attempt integer NOT NULL DEFAULT 1;

-- One row: the key from which derived keys for foreign calls are computed.
CREATE TABLE IF NOT EXISTS idempotency_secret (
    id     integer PRIMARY KEY CHECK (id = 1),
    secret bytea   NOT NULL
);
-- 244 random bits from the server's strong random source.
INSERT INTO idempotency_secret (id, secret)
VALUES (1, uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()))
ON CONFLICT (id) DO NOTHING;
