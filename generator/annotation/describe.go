package annotation

import (
	"fmt"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// describe says what a node of the wrong type is, for messages of the
// form "field: <describe>; expected ...".
func describe(v *yaml.Node) string {
	switch v.Kind {
	case yaml.MappingNode:
		return "the value is a mapping"
	case yaml.SequenceNode:
		return "the value is a list"
	case yaml.ScalarNode:
		return describeScalar(v)
	}
	return "the value is an unresolved alias"
}

func describeScalar(v *yaml.Node) string {
	switch tag := v.ShortTag(); tag {
	case "!!str":
		return quote(v.Value) + " is a string"
	case "!!int", "!!float":
		return truncate(v.Value) + " is a number"
	case "!!bool":
		return truncate(v.Value) + " is a bool"
	case "!!null":
		if v.Value == "" {
			return "the value is empty"
		}
		return "the value is null"
	default:
		return fmt.Sprintf("%s has tag %s", quote(v.Value), tag)
	}
}

// maxQuoted bounds how much of a value a message repeats, so that a stray
// multi-kilobyte string does not drown the message.
const maxQuoted = 64

func quote(s string) string {
	return fmt.Sprintf("%q", truncate(s))
}

func truncate(s string) string {
	if utf8.RuneCountInString(s) > maxQuoted {
		return string([]rune(s)[:maxQuoted]) + "..."
	}
	return s
}
