package generator

import (
	"strings"
	"testing"
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
			err := checkNames("openapi.yaml", []byte(prelude+tt.src), &model{Spec: "../openapi.yaml"})
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
