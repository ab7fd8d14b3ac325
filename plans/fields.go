package plans

// The checker's readers of a sweep's fields: typed values, the command, config, env,
// env, gpus, plan, threads and shape_ignores (config's is in config.go), each failing with the field's name and the fix.

import (
	"fmt"
	"slices"
	"strings"
)

func (c *checker) failAt(o Override, field, format string, args ...any) {
	if o.Source != "" {
		c.errs = append(c.errs, &FieldError{File: o.Source, Msg: fmt.Sprintf(format, args...)})
		return
	}
	c.fail(field, format, args...)
}

// override returns the override if set, else the file's value as a string.
func override(doc *Map, key string, o Override) (Override, bool) {
	if o.Value != "" {
		return o, true
	}
	v, ok := doc.Get(key)
	if !ok || v == nil {
		return Override{}, false
	}
	switch t := v.(type) {
	case []any:
		parts := make([]string, len(t))
		for i, e := range t {
			parts[i] = FormatValue(e)
		}
		return Override{Value: strings.Join(parts, ",")}, true
	case *Map:
		return Override{Value: "{...}"}, true
	}
	return Override{Value: FormatValue(v)}, true
}

func (c *checker) str(doc *Map, key, def string) string {
	v, ok := doc.Get(key)
	if !ok || v == nil {
		return def
	}
	s, ok := v.(string)
	if !ok {
		c.fail(key, "write a string, not a %s", kindOf(v))
		return def
	}
	return s
}

func (c *checker) integer(doc *Map, key string, def, lo int) int {
	v, ok := doc.Get(key)
	if !ok || v == nil {
		return def
	}
	return c.intValue(key, "", v, lo, def)
}

func (c *checker) intValue(field, job string, v any, lo, def int) int {
	i, ok := v.(int64)
	if !ok || int(i) < lo || i > 1<<31 {
		want := "a whole number"
		if lo == 1 {
			want = "a whole number of at least 1"
		} else if lo == 0 {
			want = "a whole number of at least 0"
		}
		c.failJob(field, job, "%s is not %s", FormatValue(v), want)
		return def
	}
	return int(i)
}

func (c *checker) size(field, job string, v any) int64 {
	s, ok := v.(string)
	if !ok {
		c.failJob(field, job, "write a size with its unit, e.g. \"11GiB\", not %s %s", kindOf(v), FormatValue(v))
		return 0
	}
	b, err := ParseSize(s)
	if err != nil {
		c.failJob(field, job, "%v", err)
	}
	return b
}

func (c *checker) command(doc *Map) []string {
	v, ok := doc.Get("command")
	if !ok {
		c.fail("command", "a sweep needs a command, as a list: command: [python3, train.py, --config, \"{config}\"]")
		return nil
	}
	argv := c.argv("command", v, `[python3, train.py, --seed, "{seed}"]`)
	for i, a := range argv {
		if _, err := Placeholders(a); err != nil {
			c.fail(fmt.Sprintf("command[%d]", i), "%v", err)
		}
	}
	return argv
}

// argv reads a command written as a list of arguments; example shows one.
func (c *checker) argv(field string, v any, example string) []string {
	list, ok := v.([]any)
	if !ok {
		c.fail(field, "write the command as a list of arguments, e.g. %s: gpuq never runs a shell, so values need no quoting", example)
		return nil
	}
	if len(list) == 0 {
		c.fail(field, "the command is empty")
		return nil
	}
	argv := make([]string, len(list))
	for i, a := range list {
		if !isScalar(a) {
			c.fail(fmt.Sprintf("%s[%d]", field, i), "an argument is a string or number, not a %s", kindOf(a))
			continue
		}
		argv[i] = FormatValue(a)
		if strings.ContainsRune(argv[i], 0) {
			c.fail(fmt.Sprintf("%s[%d]", field, i), "%s", nulProblem)
		}
	}
	return argv
}

// nulProblem is what is wrong with a NUL byte in what becomes a program's argument,
// environment or directory: the kernel takes each as a C string, so no program could be
// started with it.
const nulProblem = "holds a NUL byte (\\0), which no program's argument, environment or directory can carry: remove it"

// placedVar is why a sweep's env may not set variable k to value: gpuq sets it for each
// job apart (its cards, its port, who it is), and one value for every job would put
// them all on one card, or one port; "" where it may.
func placedVar(k, value string) string {
	switch {
	case k == "CUDA_VISIBLE_DEVICES":
		return "gpuq sets CUDA_VISIBLE_DEVICES to the cards it places each job on; remove it, and choose the cards with gpus: (e.g. gpus: 0,1)"
	case k == "CUDA_DEVICE_ORDER" && value != "PCI_BUS_ID":
		return "gpuq numbers cards as NVML and nvidia-smi do, and sets CUDA_DEVICE_ORDER=PCI_BUS_ID so that CUDA agrees; another order puts jobs on other cards than gpuq placed them on: remove it"
	case (k == "MASTER_PORT" || k == "PET_MASTER_PORT") && !strings.Contains(value, "{"):
		return "gpuq gives each job a free port of its own in MASTER_PORT and PET_MASTER_PORT ({master_port}); one port for every job makes jobs on one machine collide: remove it"
	case strings.HasPrefix(k, "GPUQ_"):
		return "gpuq sets its GPUQ_ variables for each job (who it is, where its attempt's files are): remove it, or give it a name of your own"
	}
	return ""
}

func (c *checker) env(doc *Map) []EnvVar {
	v, ok := doc.Get("env")
	if !ok || v == nil {
		return nil
	}
	m, ok := v.(*Map)
	if !ok {
		c.fail("env", "write a mapping of variable names to values, e.g. env: {HF_HOME: /data/hf}")
		return nil
	}
	var out []EnvVar
	for _, k := range m.Keys {
		val := m.Vals[k]
		switch {
		case !envNameRe().MatchString(k):
			c.fail("env."+k, "%q is not a variable name: use letters, digits and _", k)
		case !isScalar(val) && val != nil:
			c.fail("env."+k, "a value is a string or number, not a %s", kindOf(val))
		case !c.submitted && placedVar(k, FormatValue(val)) != "": // a sweep a daemon took before keeps its env
			c.fail("env."+k, "%s", placedVar(k, FormatValue(val)))
		default:
			s := FormatValue(val)
			if _, err := Placeholders(s); err != nil {
				c.fail("env."+k, "%v", err)
			}
			if strings.ContainsRune(s, 0) {
				c.fail("env."+k, "%s", nulProblem)
			}
			out = append(out, EnvVar{Name: k, Value: s})
		}
	}
	return out
}

func (c *checker) gpus(doc *Map, ov Override) GPUSpec {
	o, ok := override(doc, "gpus", ov)
	if !ok {
		return GPUSpec{}
	}
	spec, err := ParseGPUs(o.Value)
	if err != nil {
		c.failAt(o, "gpus", "%v", err)
	}
	return spec
}

func (c *checker) plan(doc *Map, ov Override) GPUPlan {
	o, ok := override(doc, "gpu_plan", ov)
	if !ok {
		return nil
	}
	p, err := ParsePlan(o.Value)
	if err != nil {
		c.failAt(o, "gpu_plan", "%v", err)
	}
	return p
}

// Order is the order in which a sweep's jobs are offered to the cards, within a
// priority.
type Order string

// Orders.
const (
	// BigFirst offers the largest jobs first: by memory times learned duration, by
	// memory alone until a duration is learned. Started last, the largest and longest
	// jobs would run on alone at the end of a sweep.
	BigFirst Order = "big-first"
	// FIFO offers jobs in submission order.
	FIFO Order = "fifo"
)

var orders = []string{string(BigFirst), string(FIFO)}

func (c *checker) order(doc *Map, ov Override) Order {
	o, ok := override(doc, "order", ov)
	if !ok {
		return BigFirst
	}
	if !slices.Contains(orders, o.Value) {
		c.failAt(o, "order", "%q is not an order%s: write big-first (the default: largest jobs first) or fifo (submission order)", o.Value, Suggest(o.Value, orders))
		return BigFirst
	}
	return Order(o.Value)
}

func (c *checker) threads(doc *Map) int {
	v, ok := doc.Get("threads")
	if !ok || v == nil {
		return 1
	}
	if s, ok := v.(string); ok && strings.EqualFold(s, "auto") {
		return 0
	}
	return c.intValue("threads", "", v, 1, 1)
}

func (c *checker) shapeIgnores(doc *Map) []string {
	v, ok := doc.Get("shape_ignores")
	if !ok {
		return []string{"seed"}
	}
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, e := range list {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	if v != nil && (list == nil || len(out) != len(list)) {
		c.fail("shape_ignores", "write a list of the parameters that do not change memory, e.g. [seed, learning_rate]")
	}
	return out
}

func (c *checker) boolean(m *Map, field, key string) bool {
	v, ok := m.Get(key)
	if !ok {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		c.fail(field, "write true or false")
	}
	return b
}
