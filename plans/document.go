package plans

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"go.yaml.in/yaml/v3"
)

// Map is a decoded mapping that keeps its keys in the order of the file, so that a
// matrix expands in the order the user wrote it and a rendered config keeps its layout.
// Values are nil, bool, int64, float64, Float (a number written otherwise than its
// value prints), string, []any or *Map.
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
	return m.cloneFor(0)
}

// cloneFor is Clone of a map that more keys are to be set in, with room for them:
// a map grown key by key is made again at each size (a third of what expanding a
// matrix of 100,000 points allocated).
func (m *Map) cloneFor(more int) *Map {
	c := &Map{Keys: append(make([]string, 0, len(m.Keys)+more), m.Keys...), Vals: make(map[string]any, len(m.Vals)+more)}
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
	v, err := (&decoder{}).decodeJSON(b)
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

// Limits on a document, checked as it is decoded, so that a hostile file is refused in
// a moment instead of taking minutes and gigabytes: YAML aliases can make a few hundred
// bytes expand to billions of values, and nesting is recursion. Sweeps and configs are
// far smaller.
const (
	maxDocumentSize = 8 << 20 // bytes
	maxDepth        = 100     // nested mappings and lists
	maxValues       = 1 << 20 // values decoded, YAML aliases expanded
)

// ReadDocument reads a sweep or config file within the limits: a regular file (a FIFO
// would block, /dev/zero never ends) of at most 8 MiB.
func ReadDocument(path string) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxDocumentSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxDocumentSize {
		return nil, fmt.Errorf("%s is larger than the %d MiB a sweep or config file may be", path, maxDocumentSize>>20)
	}
	return data, nil
}

// Decode reads a YAML or JSON document whose top level is a mapping.
func Decode(data []byte, f Format) (*Map, error) {
	if len(data) > maxDocumentSize {
		return nil, fmt.Errorf("the document is larger than the %d MiB a sweep or config may be", maxDocumentSize>>20)
	}
	var v any
	var err error
	d := &decoder{}
	if f == JSON {
		v, err = d.decodeJSON(data)
	} else {
		v, err = d.decodeYAML(data)
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

// decoder counts what one document decodes to, against the limits.
type decoder struct {
	values int
	// scalars are the YAML scalars decoded so far: an alias repeats its nodes, and
	// decoding one costs more than the rest of a value.
	scalars map[*yaml.Node]any
}

// value accounts for one more value at depth (the top level is 1).
func (d *decoder) value(depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nested deeper than %d levels", maxDepth)
	}
	if d.values++; d.values > maxValues {
		return fmt.Errorf("more than %d values (YAML aliases expanded): a sweep or config is far smaller", maxValues)
	}
	return nil
}

func (d *decoder) decodeYAML(data []byte) (any, error) {
	d.scalars = map[*yaml.Node]any{}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", yamlLine(err))
	}
	if root.Kind == 0 {
		return nil, nil
	}
	return d.fromNode(&root, 1)
}

// parserLine is a syntax error of YAML's parser (not of its scanner), whose line
// go-yaml counts from 0: "yaml: line 4: did not find expected key" of a key on the
// fifth line. It is compiled when first asked: a package's initialisation is every
// supervisor's start.
var parserLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^yaml: line (\d+): (did not find expected (key|node content|'-' indicator|',' or '\]'|',' or '\}'|<document start>))$`)
})

// yamlLine is a YAML syntax error with its line counted from 1, as editors count, and
// as go-yaml counts the lines of its scanner's errors.
func yamlLine(err error) error {
	m := parserLine().FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	n, _ := strconv.Atoi(m[1])
	return fmt.Errorf("yaml: line %d: %s", n+1, m[2])
}

func (d *decoder) fromNode(n *yaml.Node, depth int) (any, error) {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return d.fromNode(n.Content[0], depth)
	case yaml.AliasNode:
		return d.fromNode(n.Alias, depth)
	}
	if err := d.value(depth); err != nil {
		return nil, fmt.Errorf("line %d: %w", n.Line, err)
	}
	switch n.Kind {
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := d.fromNode(c, depth+1)
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
				merged, err := d.fromNode(v, depth+1)
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
			val, err := d.fromNode(v, depth+1)
			if err != nil {
				return nil, err
			}
			m.Set(k.Value, val)
		}
		return m, nil
	case yaml.ScalarNode:
		if v, ok := d.scalars[n]; ok {
			return v, nil
		}
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		switch t := v.(type) {
		case int:
			v = int64(t)
		case uint64:
			v = float64(t)
		case float64:
			v = literalFloat(t, n.Value)
		}
		d.scalars[n] = v
		return v, nil
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", n.Line)
}

func (d *decoder) decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := d.jsonValue(dec, 1)
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("not valid JSON: text after the top-level value")
	}
	return v, nil
}

func (d *decoder) jsonValue(dec *json.Decoder, depth int) (any, error) {
	if err := d.value(depth); err != nil {
		return nil, fmt.Errorf("byte %d: %w", dec.InputOffset(), err)
	}
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
				v, err := d.jsonValue(dec, depth+1)
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
				v, err := d.jsonValue(dec, depth+1)
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
		f, err := t.Float64()
		if err != nil {
			return nil, err
		}
		return literalFloat(f, t.String()), nil
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
	case float64, Float:
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
	case bool, int64, float64, Float, string:
		return true
	}
	return false
}

// FormatValue prints a parameter value as it is substituted into argv, env and names:
// a mapping or a list as JSON, keys in the order written ({"batch_size":16}), which a
// trainer can parse, rather than Go's print of its insides.
func FormatValue(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case float64:
		return formatFloat(t)
	case Float:
		return t.Text
	case int64:
		return strconv.FormatInt(t, 10)
	case bool:
		return strconv.FormatBool(t)
	case *Map, []any:
		if b, err := json.Marshal(t); err == nil {
			return string(b)
		}
	}
	return fmt.Sprint(v)
}
