package generator

import (
	"fmt"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/generator/annotation"
)

// checkNames must find what would not compile in oapi-codegen's output,
// and nothing in code that compiles.
func TestCheckNames(t *testing.T) {
	const prelude = "package gen\n\nimport (\n\t\"net/http\"\n\t\"time\"\n)\n\n"
	tests := []struct {
		name string
		src  string
		want []string // problems; nil when the code is fine
	}{
		{
			name: "fine",
			src: `type Pet struct {
	// Field names are not types, even when nothing declares them.
	Owner Owner ` + "`json:\"owner\"`" + `
	Born  time.Time
	Tags  []string
	Extra map[string]any
}

type Owner = struct{ Name string }

type Lister[T any] interface {
	List(kind Kind, w http.ResponseWriter) ([]T, error)
}

type Kind int

type page[T comparable] struct{ items []T }

func (p *page[T]) first() T { var zero T; return zero }

func find[K comparable, V any](m map[K]V, k K) (V, bool) { v, ok := m[k]; return v, ok }

var handlers = map[string]func(w http.ResponseWriter, r *http.Request){}
`,
		},
		{
			name: "undeclared",
			src: `type NewPetJSONRequestBody = Pet

type Wrapper struct {
	Items []Item
	Pet   *Pet
}

func Visit(w http.ResponseWriter, r Reply) error { return nil }
`,
			want: []string{
				"Pet is used by oapi-codegen's output (line 8) but not declared",
				"Item is used by oapi-codegen's output (line 11) but not declared",
				"Reply is used by oapi-codegen's output (line 15) but not declared",
			},
		},
		{
			name: "declared twice",
			src: `type Pet struct{}

const Pet = 1
`,
			want: []string{"Pet is declared twice by oapi-codegen (lines 8 and 10 of its output)"},
		},
		{
			name: "method on an interface",
			src: `type Answer interface{}

func (a Answer) VisitAnswer(w http.ResponseWriter) error { return nil }
`,
			want: []string{"oapi-codegen declares method VisitAnswer on Answer, which is an interface type"},
		},
		{
			name: "clash with the layer",
			src:  "type IdempotentServer struct{}\n",
			want: []string{"IdempotentServer is declared by oapi-codegen's output and by the idempotency layer"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkSource("openapi.yaml", []byte(prelude+tt.src), &model{Spec: "../openapi.yaml"})
			if tt.want == nil {
				if err != nil {
					t.Fatalf("checkNames: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("checkNames found nothing; want %q", tt.want)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "openapi.yaml: the generated code would not compile:\n") {
				t.Errorf("the message does not start with the spec's path:\n%s", msg)
			}
			problems := strings.Split(msg, "\n\t")[1:]
			if len(problems) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%s", len(problems), len(tt.want), msg)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(problems[i], w) {
					t.Errorf("problem %d: got %q, want it to start with %q", i, problems[i], w)
				}
			}
		})
	}
}

// checkSource is checkNames on src, oapi-codegen's output.
func checkSource(specPath string, src []byte, m *model) error {
	s, err := scanNames("oapi.gen.go", src)
	if err != nil {
		return err
	}
	return checkNames(specPath, s, m)
}

// The names a phased operation adds to the package are checked against
// oapi-codegen's output like the others.
func TestCheckNamesPhased(t *testing.T) {
	op := operation{GoName: "CreateThing", Name: "createThing", Idempotent: true, Answer: "createThingAnswer"}
	op.Points = []recoveryPoint{{Name: "done", Const: "CreateThingDone", Phase: "CreateThingAfterDone"}}
	src := "package gen\n\ntype CreateThingStep struct{}\n\nconst CreateThingDone = 1\n\ntype CreateThingAfterDone struct{}\n"
	err := checkSource("openapi.yaml", []byte(src), &model{Operations: []operation{op}})
	if err == nil {
		t.Fatal("checkNames found nothing")
	}
	// A phase method is not a package-level name: CreateThingAfterDone is
	// no clash.
	problems := strings.Split(err.Error(), "\n\t")[1:]
	want := []string{
		"CreateThingStep is declared by oapi-codegen's output and by the idempotency layer",
		"CreateThingDone is declared by oapi-codegen's output and by the idempotency layer",
	}
	if len(problems) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(problems), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(problems[i], w) {
			t.Errorf("problem %d: got %q, want it to start with %q", i, problems[i], w)
		}
	}
}

// checkPhaseNames finds every name a recovery point makes that the layer
// already uses, and blames the operation whose point makes it.
func TestCheckPhaseNames(t *testing.T) {
	phased := func(goName, name, path string, points ...string) operation {
		op := operation{GoName: goName, Name: name, Method: "POST", Path: path, Idempotent: true}
		op.pos.Line = len(path) // tells the operations apart
		for _, p := range points {
			g := annotation.GoName(p)
			op.Points = append(op.Points, recoveryPoint{Name: p, Const: goName + g, Phase: goName + "After" + g})
		}
		return op
	}
	tests := []struct {
		name string
		ops  []operation
		want []string // "line: message start"; nil for none
	}{
		{
			name: "fine",
			ops: []operation{
				phased("CreatePayment", "createPayment", "/payments", "payment_created", "charge_created"),
				{GoName: "GetPayment", Method: "GET", Path: "/payments/{id}"},
				phased("CreateRefund", "createRefund", "/refunds", "refund_created"),
			},
		},
		{
			name: "a point named like a fixed declaration",
			ops:  []operation{phased("Idempotent", "idempotent", "/idempotent", "server", "handler_options")},
			want: []string{
				`11: x-idempotent on POST /idempotent: recovery point "server" makes the constant IdempotentServer, which the idempotency layer already declares;`,
				`11: x-idempotent on POST /idempotent: recovery point "handler_options" makes the constant IdempotentHandlerOptions, which the idempotency layer already declares;`,
			},
		},
		{
			name: "a point named like a declaration of its operation",
			ops:  []operation{phased("Pay", "pay", "/pay", "point", "next", "respond", "phases")},
			want: []string{
				`4: x-idempotent on POST /pay: recovery point "point" makes the constant PayPoint, which the idempotency layer already declares for pay's phases;`,
				`4: x-idempotent on POST /pay: recovery point "next" makes the constant PayNext,`,
				`4: x-idempotent on POST /pay: recovery point "respond" makes the constant PayRespond,`,
				`4: x-idempotent on POST /pay: recovery point "phases" makes the constant PayPhases,`,
			},
		},
		{
			name: "a point named like another operation's constant",
			ops: []operation{
				phased("Foo", "foo", "/foo", "bar_baz"),
				phased("FooBar", "fooBar", "/foo/bar", "baz"),
			},
			want: []string{`8: x-idempotent on POST /foo/bar: recovery point "baz" makes the constant FooBarBaz, which is already the constant of foo's recovery point "bar_baz";`},
		},
		{
			name: "a phase method named like a later operation's method",
			ops: []operation{
				phased("Foo", "foo", "/foo", "bar"),
				{GoName: "FooAfterBar", Method: "PUT", Path: "/foo/bar"},
			},
			want: []string{`4: x-idempotent on POST /foo: recovery point "bar" makes the phase method FooAfterBar of IdempotentServer, which is already the method of PUT /foo/bar;`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := checkPhaseNames(tt.ops)
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d errors, want %d: %v", len(errs), len(tt.want), errs)
			}
			for i, err := range errs {
				ae, ok := err.(*annotation.Error)
				if !ok {
					t.Fatalf("error %d is a %T, want an *annotation.Error", i, err)
				}
				if got := fmt.Sprintf("%d: %s", ae.Pos.Line, ae.Msg); !strings.HasPrefix(got, tt.want[i]) {
					t.Errorf("error %d:\n\tgot  %s\n\twant %s...", i, got, tt.want[i])
				}
			}
		})
	}
}
