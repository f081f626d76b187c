package orders

import (
	"context"
	"fmt"

	"github.com/idemgen/idemgen/example/gen"
	"github.com/idemgen/idemgen/idem"
	"github.com/jackc/pgx/v5"
)

// ImportOrders creates one order per line of a purchase order, all in the
// attempt's transaction. The spec keys it by the purchase order's number
// (key: {body: /po_number}), so importing it again creates nothing and
// gets this answer back. Its lines are checked by the spec before the
// number is claimed, so it answers no 400 of its own: a stored one would
// keep the number from a corrected purchase order.
func (s *Service) ImportOrders(ctx context.Context, at *idem.Attempt[pgx.Tx], req gen.ImportOrdersRequestObject) (gen.ImportOrdersResponseObject, error) {
	po := req.Body
	imported := gen.Import{PoNumber: po.PoNumber, Orders: make([]gen.Order, 0, len(po.Lines))}
	for i, line := range po.Lines {
		o, err := InsertOrder(ctx, at.Tx(), req.Params.XAccountId, &gen.NewOrder{AmountCents: line.AmountCents, Currency: line.Currency, CustomerId: line.CustomerId})
		if err != nil {
			return nil, fmt.Errorf("import %s, line %d: %w", po.PoNumber, i+1, err)
		}
		imported.Orders = append(imported.Orders, o)
	}
	return gen.ImportOrders201JSONResponse(imported), nil
}
