package plans

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Builtins are the placeholders gpuq fills itself, beside the job's parameters.
var Builtins = []string{
	"config",      // path of the attempt's rendered config file
	"master_port", // a free TCP port for torchrun / DDP rendezvous
	"sweep",       // the sweep's name
	"job",         // the job's id
	"attempt",     // the attempt's number, from 1
	"tier",        // the ladder tier the attempt runs at, 0 = as written
}

func isBuiltin(name string) bool {
	for _, b := range Builtins {
		if b == name {
			return true
		}
	}
	return false
}

// Placeholders lists the {name} placeholders in s, in order. "{{" and "}}" stand for
// literal braces.
func Placeholders(s string) ([]string, error) {
	var names []string
	_, err := expand(s, func(name string) (string, bool) {
		names = append(names, name)
		return "", true
	})
	return names, err
}

// Expand replaces every {name} in s with lookup(name). A name lookup does not know is an
// error: a half-filled command line must never run.
func Expand(s string, lookup func(name string) (string, bool)) (string, error) {
	return expand(s, lookup)
}

func expand(s string, lookup func(string) (string, bool)) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '{' && i+1 < len(s) && s[i+1] == '{':
			b.WriteByte('{')
			i++
		case c == '}' && i+1 < len(s) && s[i+1] == '}':
			b.WriteByte('}')
			i++
		case c == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", fmt.Errorf("%q has a { without a closing }: write {{ for a literal brace", s)
			}
			name := s[i+1 : i+end]
			if !validName(name) {
				return "", fmt.Errorf("%q has placeholder {%s}: a placeholder is a parameter name such as {seed}; write {{ for a literal brace", s, name)
			}
			v, ok := lookup(name)
			if !ok {
				return "", &missingPlaceholder{name: name}
			}
			b.WriteString(v)
			i += end
		case c == '}':
			return "", fmt.Errorf("%q has a } without an opening {: write }} for a literal brace", s)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

type missingPlaceholder struct{ name string }

func (m *missingPlaceholder) Error() string { return fmt.Sprintf("no value for {%s}", m.name) }

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		ok := r == '_' || r == '.' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9'
		if !ok {
			return false
		}
	}
	return true
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// valueKey identifies a value for equality: 87 and "87" differ, 1e-4 and 0.0001 do
// not, and two mappings with the same keys and values are equal whatever order the
// file wrote them in. (Shape
// names are made of it, and journaled: see CanonicalShape.)
func valueKey(v any) string {
	b, _ := json.Marshal(unordered(v))
	return string(b)
}

// unordered turns every Map within v into a Go map, whose JSON has its keys sorted.
func unordered(v any) any {
	switch t := v.(type) {
	case *Map:
		if t == nil {
			return nil
		}
		m := make(map[string]any, len(t.Keys))
		for _, k := range t.Keys {
			m[k] = unordered(t.Vals[k])
		}
		return m
	case []any:
		c := make([]any, len(t))
		for i := range t {
			c[i] = unordered(t[i])
		}
		return c
	case Float:
		return t.Value // 1e-4 is 0.0001
	}
	return v
}
