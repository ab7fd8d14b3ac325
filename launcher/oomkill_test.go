package launcher

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"
)

func TestReadOOMKills(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	vmstat := file("nr_free_pages 123\noom_kill 4\n")
	for _, tt := range []struct {
		name string
		root fstest.MapFS
		want oomKills
	}{
		{"cgroup v2", fstest.MapFS{
			"proc/self/cgroup": file("0::/user.slice/user-1000.slice/session-3.scope\n"),
			"sys/fs/cgroup/user.slice/user-1000.slice/session-3.scope/memory.events": file("low 0\nhigh 0\nmax 2\noom 1\noom_kill 1\noom_group_kill 0\n"),
			"proc/vmstat": vmstat}, oomKills{1, 4}},
		{"cgroup v2 namespace root", fstest.MapFS{
			"proc/self/cgroup":            file("0::/\n"),
			"sys/fs/cgroup/memory.events": file("oom 0\noom_kill 0\n")}, oomKills{0, -1}},
		{"cgroup v1", fstest.MapFS{
			"proc/self/cgroup": file("12:pids:/slurm/uid_1000/job_7\n5:memory:/slurm/uid_1000/job_7\n1:name=systemd:/slurm\n"),
			"sys/fs/cgroup/memory/slurm/uid_1000/job_7/memory.oom_control": file("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"),
			"proc/vmstat": vmstat}, oomKills{3, 4}},
		{"v1 with controllers together", fstest.MapFS{
			"proc/self/cgroup": file("4:cpu,memory:/docker/abc\n"),
			"sys/fs/cgroup/memory/docker/abc/memory.oom_control": file("oom_kill 2\n")}, oomKills{2, -1}},
		{"hybrid: v2 has no memory controller", fstest.MapFS{
			"proc/self/cgroup": file("9:memory:/user.slice\n0::/user.slice/session.scope\n"),
			"sys/fs/cgroup/memory/user.slice/memory.oom_control": file("oom_kill 5\n")}, oomKills{5, -1}},
		{"kernel before 4.13", fstest.MapFS{
			"proc/self/cgroup": file("0::/\n"), "sys/fs/cgroup/memory.events": file("oom 0\n"),
			"proc/vmstat": file("nr_free_pages 1\n")}, oomKills{-1, -1}},
		{"not linux", fstest.MapFS{}, oomKills{-1, -1}},
	} {
		if got := readOOMKills(tt.root); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// TestOOMKillsSince: an OOM kill counted in gpuq's cgroup or on the machine is one;
// none counted on the machine is none, whatever cgroup the trainer ran in.
func TestOOMKillsSince(t *testing.T) {
	for _, tt := range []struct {
		before, after oomKills
		want          KernelOOM
	}{
		{oomKills{1, 4}, oomKills{2, 5}, KernelKilled},
		{oomKills{1, 4}, oomKills{1, 5}, KernelKilled}, // a trainer in a cgroup of its own
		{oomKills{-1, 4}, oomKills{-1, 5}, KernelKilled},
		{oomKills{1, -1}, oomKills{2, -1}, KernelKilled},
		{oomKills{1, 4}, oomKills{1, 4}, KernelNoKill},
		{oomKills{-1, 4}, oomKills{-1, 4}, KernelNoKill},
		{oomKills{1, -1}, oomKills{1, -1}, KernelUnknown}, // the cgroup's count alone cannot say none
		{oomKills{-1, -1}, oomKills{-1, -1}, KernelUnknown},
		{oomKills{1, 4}, oomKills{-1, -1}, KernelUnknown},
	} {
		if got := tt.before.since(tt.after); got != tt.want {
			t.Errorf("%+v then %+v: %v, want %v", tt.before, tt.after, got, tt.want)
		}
	}
}

// TestOOMKillsReadForFailures: the kernel's counts are read again at an attempt's end
// only where it failed, for Classify alone looks at them, and only for a failure: a
// supervisor of a short trainer spent a tenth of its CPU reading them.
func TestOOMKillsReadForFailures(t *testing.T) {
	var reads atomic.Int32
	counts := oomKills{cgroup: 0, machine: 4}
	saved := hostOOMKills
	hostOOMKills = func() oomKills {
		reads.Add(1)
		return counts
	}
	t.Cleanup(func() { hostOOMKills = saved })
	for _, tt := range []struct {
		name   string
		script string
		stop   bool
		reads  int32
		want   KernelOOM
	}{
		{"succeeded", "exit 0", false, 1, KernelUnknown},
		{"failed", "exit 3", false, 2, KernelNoKill},
		{"killed", "kill -9 $$", false, 2, KernelNoKill},
		{"cancelled", "sleep 30", true, 1, KernelUnknown},
	} {
		reads.Store(0)
		p, err := Start(Command{Argv: []string{"sh", "-c", tt.script}, Env: os.Environ()}, filepath.Join(t.TempDir(), "log"), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if tt.stop {
			p.Stop(time.Second)
		}
		waitDone(t, p)
		if got := reads.Load(); got != tt.reads || p.Exit().OOMKill != tt.want {
			t.Errorf("%s: the counts were read %d times, OOMKill %v; want %d, %v", tt.name, got, p.Exit().OOMKill, tt.reads, tt.want)
		}
	}
}
