package annotation

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// annotationKey is a key of the annotations as docs/ANNOTATIONS.md writes
// it in code: an extension, then the members leading to the key.
var annotationKey = regexp.MustCompile("`(x-idempoten(?:cy|t)[a-z-]*(?:\\.[a-z-]+)*)`")

// TestDocsReferenceComplete holds docs/ANNOTATIONS.md to what the reader
// accepts: every extension and every key of each mapping (extensions and
// accepted, which the reader refuses anything outside of), dotted from
// its extension, as `x-idempotent.fingerprint.exclude`, and no key the
// reader would refuse.
func TestDocsReferenceComplete(t *testing.T) {
	doc, err := os.ReadFile("../../docs/ANNOTATIONS.md")
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(extensions)
	for field, keys := range accepted {
		for _, k := range keys {
			want = append(want, field+"."+k)
		}
	}
	slices.Sort(want)
	for _, key := range want {
		if !strings.Contains(string(doc), "`"+key+"`") {
			t.Errorf("docs/ANNOTATIONS.md does not document `%s`, which the annotations accept", key)
		}
	}
	for _, m := range annotationKey.FindAllStringSubmatch(string(doc), -1) {
		if !slices.Contains(want, m[1]) && accepted[m[1]] == nil {
			t.Errorf("docs/ANNOTATIONS.md documents `%s`, which the annotations do not accept", m[1])
		}
	}
}
