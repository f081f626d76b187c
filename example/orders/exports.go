package orders

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"strconv"
	"time"

	"github.com/idemgen/idemgen/example/gen"
	"github.com/idemgen/idemgen/idem"
	"github.com/jackc/pgx/v5"
)

// CreateExport builds the CSV of the account's orders. It runs on a River
// worker, not in the request that asked for it: the request was answered
// 202 once its key was claimed, and the client polls the export's status
// resource for this response. It reads through the attempt's transaction,
// so the file is the orders as one snapshot saw them.
func (s *Service) CreateExport(ctx context.Context, at *idem.Attempt[pgx.Tx], req gen.CreateExportRequestObject) (gen.CreateExportResponseObject, error) {
	rows, err := at.Tx().Query(ctx,
		`SELECT id, customer_id, amount_cents, currency, created_at FROM orders WHERE account_id = $1 ORDER BY created_at, id`,
		req.Params.XAccountId)
	if err != nil {
		return nil, fmt.Errorf("export orders: %w", err)
	}
	defer rows.Close()
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	_ = w.Write([]string{"id", "customer_id", "amount_cents", "currency", "created_at"})
	n := 0
	for rows.Next() {
		var id, customer, currency string
		var amount int64
		var created time.Time
		if err := rows.Scan(&id, &customer, &amount, &currency, &created); err != nil {
			return nil, fmt.Errorf("export orders: %w", err)
		}
		_ = w.Write([]string{id, customer, strconv.FormatInt(amount, 10), currency, created.UTC().Format(time.RFC3339)})
		n++
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("export orders: %w", err)
	}
	w.Flush()
	// The export's id is the same for every run of this request, and new
	// for the next request, whatever its key.
	return gen.CreateExport201JSONResponse{Id: "exp_" + at.DerivedKey("export")[:16], Rows: n, Csv: buf.String()}, nil
}
