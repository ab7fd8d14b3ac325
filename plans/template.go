package plans

import (
	"encoding/json"
	"fmt"
	"slices"
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
// file wrote them in. (Shape names are made of it, and journaled: see CanonicalShape.)
func valueKey(v any) string { return string(appendKey(nil, v)) }

// appendKey appends v as json.Marshal writes it with every Map made a Go map (whose
// keys it sorts), without making the Go maps: a sweep of 100,000 jobs makes two keys of each.
func appendKey(b []byte, v any) []byte {
	switch t := v.(type) {
	case *Map:
		if t == nil {
			return append(b, "null"...)
		}
		return appendMapKey(b, t, nil)
	case []any:
		b = append(b, '[')
		for i, e := range t {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendKey(b, e)
		}
		return append(b, ']')
	case int64:
		return strconv.AppendInt(b, t, 10)
	case int:
		return strconv.AppendInt(b, int64(t), 10)
	case bool:
		return strconv.AppendBool(b, t)
	case nil:
		return append(b, "null"...)
	case string:
		return appendString(b, t)
	case Float:
		return appendJSON(b, t.Value) // 1e-4 is 0.0001
	}
	return appendJSON(b, v)
}

// appendString appends s as JSON: quoted as it is where nothing in it is escaped
// (most parameters' names and values), else as encoding/json escapes it.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return appendJSON(b, s)
		}
	}
	return append(append(append(b, '"'), s...), '"')
}

// appendMapKey appends m's key less the keys skip names (nil: none).
func appendMapKey(b []byte, m *Map, skip []string) []byte {
	b = append(b, '{')
	n := 0
	keys := m.Keys
	if !slices.IsSorted(keys) { // most are: a sweep of 100,000 jobs sorted a copy for each
		keys = slices.Sorted(slices.Values(keys))
	}
	for _, k := range keys {
		if slices.Contains(skip, k) {
			continue
		}
		if n++; n > 1 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendKey(b, m.Vals[k])
	}
	return append(b, '}')
}

func appendJSON(b []byte, v any) []byte {
	enc, _ := json.Marshal(v)
	return append(b, enc...)
}
