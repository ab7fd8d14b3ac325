package launcher

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSupervisorCommand: the gpuq-supervisor beside gpuq starts the supervisors only
// where it says gpuq's own build stamp; gpuq is its own supervisor otherwise.
func TestSupervisorCommand(t *testing.T) {
	cases := []struct {
		name   string
		helper string // the script beside gpuq; "" for none
		build  string // gpuq's stamp
		want   string // "helper" or "self"
	}{
		{"built together", "#!/bin/sh\n[ \"$1\" = __build ] && echo 42\n", "42", "helper"},
		{"another build's", "#!/bin/sh\necho 41\n", "42", "self"},
		{"none beside it", "", "42", "self"},
		{"gpuq built without a stamp", "#!/bin/sh\necho\n", "", "self"},
		{"one that fails", "#!/bin/sh\necho 42\nexit 1\n", "42", "self"},
		{"one that cannot run", "not a program\n", "42", "self"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			self := filepath.Join(dir, "gpuq")
			helper := filepath.Join(dir, SupervisorBinary)
			if c.helper != "" {
				if err := os.WriteFile(helper, []byte(c.helper), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			want := []string{self}
			if c.want == "helper" {
				want = []string{helper}
			}
			if got := SupervisorCommand(self, c.build); !slices.Equal(got, want) {
				t.Errorf("SupervisorCommand = %q, want %q", got, want)
			}
		})
	}
}
