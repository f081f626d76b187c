package annotation

import "testing"

func TestReadFingerprintInclude(t *testing.T) {
	runReadCases(t, []readCase{
		{
			name: "pointers and parameter names",
			src: spec(`
paths:
  /webhooks:
    post:
      x-idempotent:
        fingerprint:
          include: [/id, /data, X-Account-Id]
`),
			want: []Operation{with(annotated("/webhooks", "POST", at(4, 7)), func(o *Operation) {
				o.FingerprintInclude = []Pointer{{"/id", at(6, 21)}, {"/data", at(6, 26)}, {"X-Account-Id", at(6, 33)}}
			})},
		},
		{
			name: "JSON",
			src:  `{"paths": {"/w": {"post": {"x-idempotent": {"fingerprint": {"include": ["/id"]}}}}}}`,
			want: []Operation{with(annotated("/w", "POST", at(1, 28)), func(o *Operation) {
				o.FingerprintInclude = []Pointer{{"/id", at(1, 73)}}
			})},
		},
		{
			name: "shared through an anchor",
			src: spec(`
paths:
  /a:
    post:
      x-idempotent:
        fingerprint: &fp
          include: [/id]
  /b:
    post:
      x-idempotent:
        fingerprint: *fp
`),
			want: []Operation{
				with(annotated("/a", "POST", at(4, 7)), func(o *Operation) { o.FingerprintInclude = []Pointer{{"/id", at(6, 21)}} }),
				with(annotated("/b", "POST", at(9, 7)), func(o *Operation) { o.FingerprintInclude = []Pointer{{"/id", at(6, 21)}} }),
			},
		},
	})
}

func TestReadFingerprintIncludeErrors(t *testing.T) {
	runReadCases(t, []readCase{
		{
			name: "entries",
			src: spec(`
paths:
  /a:
    post:
      x-idempotent:
        fingerprint:
          include:
            - ""
            - /a~2b
            - 5
            - [/a]
            - {a: 1}
            - /ok~0~1
`),
			errs: []string{
				`spec.yaml:7:15: x-idempotent.fingerprint.include[0]: the value is empty; expected a JSON pointer such as /metadata/trace_id, or a parameter's name such as X-Trace-Id`,
				`spec.yaml:8:15: x-idempotent.fingerprint.include[1]: "/a~2b" is not a JSON pointer ("~" must be followed by 0 or 1, as in ~0 for "~" and ~1 for "/"); expected a pointer such as /metadata/trace_id`,
				`spec.yaml:9:15: x-idempotent.fingerprint.include[2]: 5 is a number; expected a JSON pointer such as /metadata/trace_id`,
				`spec.yaml:10:15: x-idempotent.fingerprint.include[3]: the value is a list; expected a JSON pointer such as /metadata/trace_id`,
				`spec.yaml:11:15: x-idempotent.fingerprint.include[4]: the value is a mapping; expected a JSON pointer such as /metadata/trace_id`,
			},
		},
		{
			name: "not a list, or an empty one",
			src: spec(`
paths:
  /a:
    post:
      x-idempotent:
        fingerprint: {include: /id}
  /b:
    post:
      x-idempotent:
        fingerprint:
          include: []
  /c:
    post:
      x-idempotent:
        fingerprint:
          include:
`),
			errs: []string{
				`spec.yaml:5:32: x-idempotent.fingerprint.include: "/id" is a string; expected a list of JSON pointers into the body, such as [/metadata/trace_id], or parameter names`,
				`spec.yaml:10:20: x-idempotent.fingerprint.include: the list is empty, which would leave only the operation's name in the fingerprint; expected the JSON pointers into the body and the parameter names that count, such as [/id, /data], or no include`,
				`spec.yaml:15:19: x-idempotent.fingerprint.include: the value is empty; expected a list of JSON pointers into the body, such as [/metadata/trace_id], or parameter names`,
			},
		},
		{
			name: "combined with exclude",
			src: spec(`
paths:
  /a:
    post:
      x-idempotent:
        fingerprint:
          include: [/data]
          exclude: [/data/updated_at]
  /b:
    post:
      x-idempotent:
        fingerprint: {exclude: [/note], include: [/id]}
  /c:
    post:
      x-idempotent:
        fingerprint:
          include: [/id]
          include: [/type]
`),
			errs: []string{
				`spec.yaml:7:11: x-idempotent.fingerprint: exclude cannot be combined with include (line 6); expected include alone, listing only what counts (leave out of it what exclude would remove), or exclude alone`,
				`spec.yaml:11:41: x-idempotent.fingerprint: include cannot be combined with exclude (line 11); expected include alone, listing only what counts (leave out of it what exclude would remove), or exclude alone`,
				`spec.yaml:17:11: x-idempotent.fingerprint: duplicate key "include" (first at line 16); expected each key once`,
			},
		},
	})
}
