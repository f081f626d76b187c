package orders

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
)

// SendReceipt is the job createPayment stages in its last phase, for a
// payment that succeeded: inserted with River's InsertTx on the phase's
// transaction, it commits with the payment's response or not at all (the
// outbox), so a payment has its receipt job once, whatever crashed and
// was retried on the way.
type SendReceipt struct {
	PaymentID string `json:"payment_id"`
	AccountID string `json:"account_id"`
}

// Kind is the job's kind in River.
func (SendReceipt) Kind() string { return "send_receipt" }

// ReceiptWorker sends receipts; the example records them in receipts.
// River may run a job more than once (a worker that dies after the work
// and before River marks it done), so a receipt is recorded once per
// payment.
type ReceiptWorker struct {
	river.WorkerDefaults[SendReceipt]
	Pool *pgxpool.Pool
}

// Work records the receipt of the job's payment.
func (w *ReceiptWorker) Work(ctx context.Context, job *river.Job[SendReceipt]) error {
	if _, err := w.Pool.Exec(ctx, `INSERT INTO receipts (payment_id, account_id) VALUES ($1, $2) ON CONFLICT (payment_id) DO NOTHING`,
		job.Args.PaymentID, job.Args.AccountID); err != nil {
		return fmt.Errorf("record the receipt of payment %s: %w", job.Args.PaymentID, err)
	}
	return nil
}
