package generator_test

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/idemgen/idemgen/generator"
)

// abandoned and complete-after reach the model as the templates use them:
// the action as written, and the duration, 1h when complete-after is left
// out. abandoned: fail
// takes a multipart body, which abandoned: complete refuses.
func TestGenerateCarriesAbandoned(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "openapi.yaml"), []byte(header+`    post:
      operationId: createThing
      x-idempotent:
        mode: phased
        recovery-points: [thing_created]
        abandoned: complete
        complete-after: 30m
      requestBody:
        content:
          application/json:
            schema:
              $ref: "#/components/schemas/Thing"
      responses:
        "201":
          description: ok
    put:
      operationId: uploadThing
      x-idempotent:
        mode: phased
        recovery-points: [thing_stored]
        abandoned: fail
      requestBody:
        content:
          multipart/form-data:
            schema:
              $ref: "#/components/schemas/Thing"
      responses:
        "200":
          description: ok
    patch:
      operationId: updateThing
      x-idempotent:
        mode: phased
        recovery-points: [thing_updated]
      responses:
        "200":
          description: ok
    delete:
      operationId: deleteThing
      x-idempotent: true
      responses:
        "204":
          description: ok
`+components))
	res := generate(t, configFor(t, dir, "openapi.yaml", ""))
	want := map[string]generator.AbandonedSetting{
		"createThing": {Abandoned: "complete", CompleteAfter: 30 * time.Minute},
		"uploadThing": {Abandoned: "fail", CompleteAfter: time.Hour},
		"updateThing": {},
		"deleteThing": {},
	}
	if got := generator.AbandonedSettings(res); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}
