-- Back to migration 0006's default.
ALTER TABLE idempotency_keys ALTER COLUMN derived SET DEFAULT false;
