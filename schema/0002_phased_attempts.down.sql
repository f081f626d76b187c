DROP TABLE IF EXISTS idempotency_secret;
ALTER TABLE idempotency_keys DROP COLUMN IF EXISTS attempt;
