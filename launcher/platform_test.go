package launcher

import (
	"bytes"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/gpuq/gpuq/plans"
)

func TestDetectPlatform(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	for _, tt := range []struct {
		name string
		root fstest.MapFS
		want Platform
	}{
		{"linux", fstest.MapFS{"proc/sys/kernel/osrelease": file("6.8.0-45-generic\n"),
			"proc/version": file("Linux version 6.8.0-45-generic (buildd@lcy02-amd64-115) (x86_64-linux-gnu-gcc-13)\n")}, Native},
		{"wsl2", fstest.MapFS{"proc/sys/kernel/osrelease": file("5.15.153.1-microsoft-standard-WSL2\n")}, WSL},
		{"wsl2 by version", fstest.MapFS{"proc/version": file("Linux version 5.15.90.1-microsoft-standard-WSL2 (oe-user@oe-host)\n")}, WSL},
		{"jetson release file", fstest.MapFS{"proc/sys/kernel/osrelease": file("5.15.136-tegra\n"),
			"etc/nv_tegra_release": file("# R36 (release), REVISION: 3.0\n")}, Jetson},
		{"jetson device tree", fstest.MapFS{"proc/device-tree/compatible": file("nvidia,p3768-0000+p3767-0005\x00nvidia,p3767-0005\x00nvidia,tegra234\x00")}, Jetson},
		{"nothing readable", fstest.MapFS{}, Native},
	} {
		if got := detectPlatform(tt.root); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestAllocConfDefaultWhereSupported: expandable segments by default on native Linux;
// on WSL2 and Jetson, where they fail, none, and gpuq says so once.
func TestAllocConfDefaultWhereSupported(t *testing.T) {
	for _, p := range []Platform{Native, WSL, Jetson} {
		var said bytes.Buffer
		d := &allocConfDefault{platform: func() Platform { return p }, w: &said}
		for range 3 {
			conf, ok := d.get()
			if p == Native && (!ok || conf != plans.DefaultAllocConf) || p != Native && ok {
				t.Errorf("%s: %q %v", p, conf, ok)
			}
		}
		switch {
		case p == Native && said.Len() > 0:
			t.Errorf("native: said %q", said.String())
		case p != Native && (strings.Count(said.String(), "\n") != 1 || !strings.Contains(said.String(), p.String())):
			t.Errorf("%s: said %q, want one line naming the platform", p, said.String())
		}
	}
}

// TestPrepareLeavesAllocConfUnsetOnWSL: the trainer's environment has no
// PYTORCH_CUDA_ALLOC_CONF of gpuq's where expandable segments fail; the sweep's own
// still reaches it.
func TestPrepareLeavesAllocConfUnsetOnWSL(t *testing.T) {
	saved := defaultAllocConf
	t.Cleanup(func() { defaultAllocConf = saved })
	var said bytes.Buffer
	defaultAllocConf = &allocConfDefault{platform: func() Platform { return WSL }, w: &said}
	s := testSweep(t)
	a := Attempt{Sweep: s, JobID: "t.1", N: 1, Params: s.Jobs[0].Params, Dir: t.TempDir(), MasterPort: 29517}
	c, err := Prepare(a, nil)
	if err != nil {
		t.Fatal(err)
	}
	if envValue(c.Env, "PYTORCH_CUDA_ALLOC_CONF") != "expandable_segments:False" {
		t.Errorf("the sweep's PYTORCH_CUDA_ALLOC_CONF is lost: %q", c.Env)
	}
	s.Env = nil
	a.Dir = filepath.Join(a.Dir, "2")
	if c, err = Prepare(a, []string{"HOME=/home/u"}); err != nil {
		t.Fatal(err)
	}
	for _, kv := range c.Env {
		if strings.HasPrefix(kv, "PYTORCH_CUDA_ALLOC_CONF=") || strings.HasPrefix(kv, "PYTORCH_ALLOC_CONF=") {
			t.Errorf("gpuq set %s on WSL2", kv)
		}
	}
	if !strings.Contains(said.String(), "WSL2") {
		t.Errorf("gpuq did not say why: %q", said.String())
	}
}

// TestCUDADriverOOMOnWSLIsNotAnOOM: with expandable segments, WSL2 and Jetson refuse
// the driver's virtual memory calls, which PyTorch reports as "CUDA driver error: out
// of memory" on a card with room: no smaller batch mends that.
func TestCUDADriverOOMOnWSLIsNotAnOOM(t *testing.T) {
	text := []byte("    _engine_run_backward(\nRuntimeError: CUDA driver error: out of memory\n")
	for _, tt := range []struct {
		p    Platform
		want plans.Outcome
	}{{Native, plans.GPUOOM}, {WSL, plans.Failed}, {Jetson, plans.Failed}} {
		if got, _ := classify(Exit{Code: 1}, text, func() Platform { return tt.p }); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.p, got, tt.want)
		}
	}
	// Any other OOM text on WSL2 is one.
	other := []byte("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.")
	if got, _ := classify(Exit{Code: -1, Signal: syscall.SIGABRT}, other, func() Platform { return WSL }); got != plans.GPUOOM {
		t.Errorf("CUDA out of memory on WSL2: %s", got)
	}
}
