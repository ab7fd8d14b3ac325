package plans

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Map is a decoded mapping that keeps its keys in the order of the file, so that a
// matrix expands in the order the user wrote it and a rendered config keeps its layout.
// Values are nil, bool, int64, float64, string, []any or *Map.
type Map struct {
	Keys []string
	Vals map[string]any
}

// NewMap returns an empty Map.
func NewMap() *Map { return &Map{Vals: map[string]any{}} }

// Get returns the value under k.
func (m *Map) Get(k string) (any, bool) {
	if m == nil {
		return nil, false
	}
	v, ok := m.Vals[k]
	return v, ok
}

// Set puts v under k, appending k if it is new.
func (m *Map) Set(k string, v any) {
	if _, ok := m.Vals[k]; !ok {
		m.Keys = append(m.Keys, k)
	}
	m.Vals[k] = v
}

// Len is the number of keys.
func (m *Map) Len() int {
	if m == nil {
		return 0
	}
	return len(m.Keys)
}

// Clone copies the map and, deeply, every nested Map and list.
func (m *Map) Clone() *Map {
	if m == nil {
		return nil
	}
	c := &Map{Keys: append([]string(nil), m.Keys...), Vals: make(map[string]any, len(m.Vals))}
	for k, v := range m.Vals {
		c.Vals[k] = cloneValue(v)
	}
	return c
}

func cloneValue(v any) any {
	switch t := v.(type) {
	case *Map:
		return t.Clone()
	case []any:
		c := make([]any, len(t))
		for i := range t {
			c[i] = cloneValue(t[i])
		}
		return c
	}
	return v
}

// MarshalJSON writes the keys in order.
func (m *Map) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range m.Keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		vb, err := json.Marshal(m.Vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads a JSON object, keeping its keys in order.
func (m *Map) UnmarshalJSON(b []byte) error {
	v, err := decodeJSON(b)
	if err != nil {
		return err
	}
	mm, ok := v.(*Map)
	if !ok {
		return fmt.Errorf("want a JSON object, not a %s", kindOf(v))
	}
	*m = *mm
	return nil
}

// MarshalYAML keeps the keys in order.
func (m *Map) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for _, k := range m.Keys {
		var kn, vn yaml.Node
		if err := kn.Encode(k); err != nil {
			return nil, err
		}
		if err := vn.Encode(m.Vals[k]); err != nil {
			return nil, err
		}
		n.Content = append(n.Content, &kn, &vn)
	}
	return n, nil
}

// Format is how a document is written.
type Format string

// Document formats.
const (
	YAML Format = "yaml"
	JSON Format = "json"
)

// FormatOf tells the format from a file name: JSON for .json, YAML otherwise.
func FormatOf(name string) Format {
	if strings.HasSuffix(strings.ToLower(name), ".json") {
		return JSON
	}
	return YAML
}

// Decode reads a YAML or JSON document whose top level is a mapping.
func Decode(data []byte, f Format) (*Map, error) {
	var v any
	var err error
	if f == JSON {
		v, err = decodeJSON(data)
	} else {
		v, err = decodeYAML(data)
	}
	if err != nil {
		return nil, err
	}
	if v == nil {
		return NewMap(), nil
	}
	m, ok := v.(*Map)
	if !ok {
		return nil, fmt.Errorf("the top level must be a mapping of keys (name:, command:, ...), not a %s", kindOf(v))
	}
	return m, nil
}

func decodeYAML(data []byte) (any, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	if root.Kind == 0 {
		return nil, nil
	}
	return fromNode(&root)
}

func fromNode(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return fromNode(n.Content[0])
	case yaml.AliasNode:
		return fromNode(n.Alias)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := fromNode(c)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		m := NewMap()
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: a key must be a plain word", k.Line)
			}
			if k.Value == "<<" { // merge key: copy the aliased mapping's keys
				merged, err := fromNode(v)
				if err != nil {
					return nil, err
				}
				if mm, ok := merged.(*Map); ok {
					for _, mk := range mm.Keys {
						if _, dup := m.Vals[mk]; !dup {
							m.Set(mk, mm.Vals[mk])
						}
					}
				}
				continue
			}
			if _, dup := m.Vals[k.Value]; dup {
				return nil, fmt.Errorf("line %d: key %q appears twice", k.Line, k.Value)
			}
			val, err := fromNode(v)
			if err != nil {
				return nil, err
			}
			m.Set(k.Value, val)
		}
		return m, nil
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		switch t := v.(type) {
		case int:
			return int64(t), nil
		case uint64:
			return float64(t), nil
		}
		return v, nil
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", n.Line)
}

func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := jsonValue(dec)
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("not valid JSON: text after the top-level value")
	}
	return v, nil
}

func jsonValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			m := NewMap()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				if _, dup := m.Vals[k]; dup {
					return nil, fmt.Errorf("key %q appears twice", k)
				}
				v, err := jsonValue(dec)
				if err != nil {
					return nil, err
				}
				m.Set(k, v)
			}
			_, err := dec.Token()
			return m, err
		case '[':
			out := []any{}
			for dec.More() {
				v, err := jsonValue(dec)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
			_, err := dec.Token()
			return out, err
		}
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i, nil
		}
		return t.Float64()
	}
	return tok, nil
}

// kindOf names a decoded value's type in the user's words.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case int64:
		return "integer"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "list"
	case *Map:
		return "mapping"
	}
	return fmt.Sprintf("%T", v)
}

// isScalar reports whether v can be a parameter value.
func isScalar(v any) bool {
	switch v.(type) {
	case bool, int64, float64, string:
		return true
	}
	return false
}

// FormatValue prints a parameter value as it is substituted into argv, env and names.
func FormatValue(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case float64:
		return formatFloat(t)
	}
	return fmt.Sprint(v)
}
