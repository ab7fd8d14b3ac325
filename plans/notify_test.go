package plans

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestNotifyForms(t *testing.T) {
	tests := []struct {
		notify string
		want   Notify
		err    string // a substring of the error; "" = accepted
	}{
		{"", Notify{}, ""},
		{"{command: [notify-send, done]}", Notify{Command: []string{"notify-send", "done"}, OnEnd: true}, ""},
		{"{webhook: \"https://hooks.example.com/x\", on: failure}", Notify{Webhook: "https://hooks.example.com/x", OnFailure: true}, ""},
		{"{command: [./hook.sh, 3], webhook: \"http://127.0.0.1:9/h\", on: [end, failure]}",
			Notify{Command: []string{"./hook.sh", "3"}, Webhook: "http://127.0.0.1:9/h", OnEnd: true, OnFailure: true}, ""},
		{"notify-send done", Notify{}, "notify: write a mapping"},
		{"{}", Notify{}, "notify: give a command, a webhook, or both"},
		{"{command: \"notify-send done\"}", Notify{}, "notify.command: write the command as a list of arguments"},
		{"{command: [a, {b: c}]}", Notify{}, "notify.command[1]: an argument is a string or number"},
		{"{webhook: hooks.example.com/x}", Notify{}, "notify.webhook: hooks.example.com/x is not an http(s) URL"},
		{"{webhook: \"ftp://x/y\"}", Notify{}, "is not an http(s) URL"},
		{"{command: [true], on: [end, fail]}", Notify{}, "notify.on: fail is not an event: write end, failure"},
		{"{command: [true], when: end}", Notify{}, "notify.when: unknown key"},
	}
	for _, tt := range tests {
		doc := "name: t\ncommand: [echo]\njobs: [{}]\n"
		if tt.notify != "" {
			doc += "notify: " + tt.notify + "\n"
		}
		s, err := DecodeSweep("t.yaml", []byte(doc), Overrides{})
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: refused: %v", tt.notify, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s:\n  got %v\n  want %q", tt.notify, err, tt.err)
		case err == nil && !reflect.DeepEqual(s.Notify, tt.want):
			t.Errorf("%s: got %+v, want %+v", tt.notify, s.Notify, tt.want)
		}
	}
}

// TestHookCheckedBeforeAnythingRuns: a hook whose program cannot be found is an error
// when the sweep is read, not when it ends ten hours later.
func TestHookCheckedBeforeAnythingRuns(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	os.WriteFile(filepath.Join(dir, "echo"), []byte("#!/bin/sh\n"), 0o755)
	sweep := filepath.Join(dir, "s.yaml")
	os.WriteFile(sweep, []byte("name: c\ncommand: [echo]\njobs: [{}]\nnotify: {command: [notify-sned, done]}\n"), 0o644)
	_, err := LoadSweep(sweep, Overrides{})
	if err == nil || !strings.Contains(err.Error(), "notify.command[0]: notify-sned is not on the PATH") {
		t.Errorf("got %v", err)
	}
}
