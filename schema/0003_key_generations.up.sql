-- Key generations: a key reused after its TTL starts a new generation, and
-- the keys an attempt derives for foreign calls differ from one generation
-- to the next, so a reused key never receives the old generation's charge.
ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS generation bigint NOT NULL DEFAULT 1;
