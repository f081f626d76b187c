CREATE TABLE IF NOT EXISTS orders (
    id           text        PRIMARY KEY DEFAULT 'ord_' || replace(gen_random_uuid()::text, '-', ''),
    account_id   text        NOT NULL,
    amount_cents bigint      NOT NULL CHECK (amount_cents > 0),
    currency     text        NOT NULL,
    customer_id  text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS orders_customer_idx ON orders (account_id, customer_id, created_at);

CREATE TABLE IF NOT EXISTS payments (
    id           text        PRIMARY KEY DEFAULT 'pay_' || replace(gen_random_uuid()::text, '-', ''),
    account_id   text        NOT NULL,
    order_id     text        NOT NULL REFERENCES orders (id),
    amount_cents bigint      NOT NULL CHECK (amount_cents > 0),
    currency     text        NOT NULL,
    -- A key derived from the request's Idempotency-Key: how the phases of
    -- one request find the payment its first phase recorded.
    reference    text        NOT NULL UNIQUE,
    charge_id    text,
    status       text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'declined')),
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- One row each time a payment.succeeded event of the provider is
-- processed: the idempotency layer makes that once per event, however
-- often the provider redelivers it, and the tests count the rows.
CREATE TABLE IF NOT EXISTS settlements (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    payment_id  text        NOT NULL REFERENCES payments (id),
    charge_id   text        NOT NULL,
    webhook_id  text        NOT NULL,
    settled_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS settlements_payment_idx ON settlements (payment_id);

-- One row per receipt sent: the send_receipt job createPayment stages in
-- its last phase writes it, once per payment however often it runs.
CREATE TABLE IF NOT EXISTS receipts (
    payment_id  text        PRIMARY KEY REFERENCES payments (id),
    account_id  text        NOT NULL,
    sent_at     timestamptz NOT NULL DEFAULT now()
);
