package generator_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/idemgen/idemgen/generator"
)

// An async operation's augmented spec declares its 202, with Location and
// Retry-After, and the GET of its status resource with the status schema,
// in the operation's scope; oapi-codegen's client of it compiles.
func TestAsyncAugmentedSpec(t *testing.T) {
	t.Parallel()
	cfg := loadConfig(t, filepath.Join("testdata", "exports", "idemgen.yaml"))
	src := augmented(t, generate(t, cfg), cfg.Output.Spec)
	doc, err := openapi3.NewLoader().LoadFromData(src)
	if err != nil {
		t.Fatal(err)
	}
	accepted := doc.Paths.Find("/exports").Post.Responses.Status(202)
	if accepted == nil || accepted.Value.Headers["Location"] == nil || accepted.Value.Headers["Retry-After"] == nil ||
		accepted.Value.Content.Get("application/json").Schema.Ref != "#/components/schemas/IdempotencyAsyncStatus" {
		t.Fatalf("createExport's 202: %+v", accepted)
	}
	status := doc.Paths.Find("/exports/requests/{key}")
	if status == nil || status.Get == nil || status.Get.OperationID != "createExportStatus" {
		t.Fatalf("no status operation at /exports/requests/{key}: %+v", status)
	}
	var names []string
	for _, p := range status.Get.Parameters {
		names = append(names, p.Value.In+":"+p.Value.Name)
	}
	if got := strings.Join(names, ","); got != "path:key,header:X-Account-Id" {
		t.Errorf("the status operation's parameters are %s, want the key and the scope header", got)
	}
	for code, want := range map[int]string{200: "#/components/schemas/IdempotencyAsyncStatus", 404: "", 400: "", 503: ""} {
		r := status.Get.Responses.Status(code)
		if r == nil {
			t.Errorf("the status operation declares no %d", code)
			continue
		}
		if want != "" && r.Value.Content.Get("application/json").Schema.Ref != want {
			t.Errorf("its %d is not the status schema", code)
		}
	}
	st := doc.Components.Schemas["IdempotencyAsyncStatus"]
	if st == nil || len(st.Value.Properties["status"].Value.Enum) != 4 {
		t.Fatal("the status schema is missing or lacks its four states")
	}
	if doc.Paths.Find("/refunds/{key}/status") == nil {
		t.Error("createRefund's status operation is missing")
	}
	compileClient(t, src)
}

// Async annotations the spec cannot serve are refused at the annotation:
// a status path the spec has a GET at, a status operationId taken, an
// operation without an operationId, a stream body, a 202 of its own, and
// jobs: none in the config.
func TestAsyncRefused(t *testing.T) {
	t.Parallel()
	const op = `    post:
      operationId: createThing
      x-idempotent: {mode: async, status: "%s"}
      requestBody:
        content:
          %s:
            schema: {type: object}
      responses:
        "%s":
          description: ok
`
	tests := []struct {
		name, extra, status, media, code, jobs string
		want                                   string
	}{
		{name: "status path taken", status: "/things/{key}", media: "application/json", code: "201",
			extra: "  /things/{key}:\n    get:\n      operationId: getThing\n      parameters:\n        - {name: key, in: path, required: true, schema: {type: string}}\n      responses:\n        \"200\":\n          description: ok\n",
			want:  `9:43: x-idempotent.status: /things/{key} has a GET in the spec already; expected a path of its own for the status resource of createThing`},
		{name: "status operationId taken", status: "/things/{key}", media: "application/json", code: "201",
			extra: "  /other:\n    get:\n      operationId: createThingStatus\n      responses:\n        \"200\":\n          description: ok\n",
			want:  `9:43: x-idempotent.status: the operationId createThingStatus, which the status operation of createThing takes, is taken by another operation; rename that one`},
		{name: "multipart body", status: "/things/{key}", media: "multipart/form-data", code: "201",
			want: `9:28: x-idempotent on POST /things: mode: async: request body multipart/form-data is a stream, which cannot be stored for a worker to run the request from; expected a JSON or form request body, or mode: atomic`},
		{name: "a 202 of its own", status: "/things/{key}", media: "application/json", code: "202",
			want: `9:28: x-idempotent on POST /things: mode: async answers 202 Accepted itself, with the status resource, and the operation declares a 202 of its own; expected its final responses only, such as a 201`},
		{name: "jobs none", status: "/things/{key}", media: "application/json", code: "201", jobs: "none",
			want: `9:28: x-idempotent on POST /things: mode: async runs requests on River workers, and the config says jobs: none; expected jobs: river in the config, or mode: atomic or phased`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			spec := filepath.Join(dir, "openapi.yaml")
			body := header + fmt.Sprintf(op, tt.status, tt.media, tt.code) + tt.extra
			writeFile(t, spec, []byte(body+components))
			cfg := configFor(t, dir, "openapi.yaml", "")
			cfg.Jobs = tt.jobs
			if cfg.Jobs == "" {
				cfg.Jobs = generator.JobsRiver
			}
			res, err := generateFrom(cfg)
			if err == nil {
				t.Fatalf("Generate succeeded with %d files; want an error", len(res.Files))
			}
			if want := spec + ":" + tt.want; err.Error() != want {
				t.Errorf("got error\n\t%v\nwant\n\t%s", err, want)
			}
		})
	}
}
