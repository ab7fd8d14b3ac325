package launcher

// Where trainers run, where that changes what gpuq does: PyTorch's expandable segments
// map memory through the CUDA driver's virtual memory calls (cuMemCreate, cuMemMap),
// which WSL2's GPU paravirtualization and Jetson's integrated memory refuse; the refusal
// surfaces as "CUDA driver error: out of memory" on a card with memory to spare.

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"

	"github.com/gpuq/gpuq/plans"
)

// Platform is the kind of machine trainers run on.
type Platform string

// Platforms that matter.
const (
	Native Platform = ""
	WSL    Platform = "wsl"    // Windows Subsystem for Linux 2
	Jetson Platform = "jetson" // NVIDIA Jetson (Tegra)
)

// ExpandableSegments reports whether PyTorch's expandable segments work there.
func (p Platform) ExpandableSegments() bool { return p == Native }

func (p Platform) String() string {
	switch p {
	case WSL:
		return "WSL2"
	case Jetson:
		return "Jetson"
	}
	return "native Linux"
}

// detectPlatform tells the platform from the root of its filesystem: WSL's kernel
// names Microsoft in its release; a Jetson has a Tegra release file or device tree.
func detectPlatform(root fs.FS) Platform {
	for _, name := range []string{"proc/sys/kernel/osrelease", "proc/version"} {
		if data, err := fs.ReadFile(root, name); err == nil {
			if l := bytes.ToLower(data); bytes.Contains(l, []byte("microsoft")) || bytes.Contains(l, []byte("wsl")) {
				return WSL
			}
		}
	}
	if _, err := fs.Stat(root, "etc/nv_tegra_release"); err == nil {
		return Jetson
	}
	if data, err := fs.ReadFile(root, "proc/device-tree/compatible"); err == nil && bytes.Contains(data, []byte("nvidia,tegra")) {
		return Jetson
	}
	return Native
}

// hostPlatform is this machine's platform, read once, when first asked.
var hostPlatform = sync.OnceValue(func() Platform { return detectPlatform(os.DirFS("/")) })

// allocConfDefault is the PYTORCH_CUDA_ALLOC_CONF trainers get when their sweep sets
// none: expandable segments where they work; where they do not, none, which gpuq says
// once to w.
type allocConfDefault struct {
	platform func() Platform
	w        io.Writer
	once     sync.Once
}

var defaultAllocConf = &allocConfDefault{platform: hostPlatform, w: os.Stderr}

// get returns the value and whether there is one.
func (d *allocConfDefault) get() (string, bool) {
	p := d.platform()
	if p.ExpandableSegments() {
		return plans.DefaultAllocConf, true
	}
	d.once.Do(func() {
		fmt.Fprintf(d.w, "gpuq: %s does not support PyTorch's %s: trainers start without a PYTORCH_CUDA_ALLOC_CONF of gpuq's (a sweep's env may set one)\n",
			p, plans.DefaultAllocConf)
	})
	return "", false
}
