package main

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpuq/gpuq/plans"
)

// configKeys are the settings the user config file may hold, as written there.
var configKeys = []string{keyGPUs, keyPlan, keyHeadroom, keyHostReserve, keyStateDir, keyServer, keyLedger, keyMetrics, keyJobMap, keyUtilTarget}

// pathKeys are the settings of the config file that name a file or a directory: the
// daemon's state, the simulated cards' ledger, dcgm-exporter's job map. Each is a value
// as its flag takes it, and a flag's path has been through the shell, which expands a
// leading ~ and which a relative path is read against the directory it was typed in. A
// file has no shell: configPath does what it did, with the file's own directory as the
// one it was typed in (as git's include.path and docker-compose's paths are read), so
// that a daemon, a gpuq run and a gpuq status started in different directories read the
// same state. Taken as it was written, "~/gpuq" made a directory named ~ wherever gpuq
// ran, and "state" a state directory of each directory's own, so none of them saw the
// others. A key that names a path is listed here, and nowhere else needs to know.
var pathKeys = []string{keyStateDir, keyLedger, keyJobMap}

// readConfigFile reads the user config file into the settings viper layers under the
// flags and the environment, each as the string its flag would take. A key gpuq does not
// know, or a value of the wrong kind, is bad input naming the file and the key: ignored,
// a typo (gpu_plans) would leave the machine silently on its defaults.
func readConfigFile(path string) (map[string]any, error) {
	data, err := plans.ReadDocument(path)
	if err != nil {
		return nil, err
	}
	doc, err := plans.Decode(data, plans.FormatOf(path))
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	var probs plans.Problems
	for _, k := range doc.Keys {
		v, err := configValue(k, doc.Vals[k])
		if err == nil && v != "" && slices.Contains(pathKeys, k) {
			v, err = configPath(v, dir)
		}
		if err != nil {
			probs = append(probs, &plans.FieldError{File: path, Field: k, Msg: err.Error()})
		} else if v != "" {
			out[k] = v
		}
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return out, nil
}

// configValue is one setting of the config file as a string. gpus and gpu_plan may be
// lists, as in a sweep file.
func configValue(key string, v any) (string, error) {
	if !slices.Contains(configKeys, key) {
		return "", fmt.Errorf("unknown key%s; the config file has %s", plans.Suggest(key, configKeys), strings.Join(configKeys, ", "))
	}
	switch t := v.(type) {
	case nil:
		return "", nil
	case *plans.Map:
		return "", errors.New("write a single value, as its flag takes it, not a mapping")
	case []any:
		if key != keyGPUs && key != keyPlan {
			return "", errors.New("write a single value, as its flag takes it, not a list")
		}
		parts := make([]string, len(t))
		for i, e := range t {
			switch e.(type) {
			case []any, *plans.Map:
				return "", fmt.Errorf("write a list of numbers, e.g. %s: [2, 2, 1]", key)
			}
			parts[i] = plans.FormatValue(e)
		}
		return strings.Join(parts, ","), nil
	}
	return plans.FormatValue(v), nil
}

// configPath is a path the config file in dir gives (see pathKeys) as the shell would
// have handed it to the flag typed in dir: a leading ~ or ~/ is the home directory and
// ~name/ that user's, and a relative path is read against dir. An absolute path is
// kept as written. Where the shell would have left a ~ as it was (no home directory, no
// such user) it is an error rather than a directory named ~ under dir, which nobody
// means; a path that is meant to begin with a ~ may be written ./~name.
func configPath(p, dir string) (string, error) {
	if rest, ok := strings.CutPrefix(p, "~"); ok {
		name, tail, _ := strings.Cut(rest, "/")
		var home string
		if name == "" {
			h, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("%q: cannot expand ~: %v; write the path out", p, err)
			}
			home = h
		} else {
			u, err := user.Lookup(name)
			if err != nil {
				return "", fmt.Errorf("%q: cannot expand ~%s: no such user; write the path out, or ./%s for a directory of that name beside the config file", p, name, p)
			}
			home = u.HomeDir
		}
		return filepath.Join(home, tail), nil
	}
	if filepath.IsAbs(p) {
		return p, nil
	}
	return filepath.Join(dir, p), nil
}
