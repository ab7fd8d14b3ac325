package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuq/gpuq/plans"
)

// configKeys are the settings the user config file may hold, as written there.
var configKeys = []string{keyGPUs, keyPlan, keyHeadroom, keyHostReserve, keyStateDir, keyServer, keyLedger, keyMetrics, keyJobMap, keyUtilTarget}

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
	out := map[string]any{}
	var probs plans.Problems
	for _, k := range doc.Keys {
		v, err := configValue(k, doc.Vals[k])
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
