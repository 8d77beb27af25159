package backend

import (
	"sort"
	"time"

	"github.com/da3-go/da3-go/ggml/kernels"
)

// OpTime is the time the nodes of one kind took over the profiled runs.
type OpTime struct {
	// Op is the ggml op ("MUL_MAT", "ADD", "GELU" …) or, for the CPU
	// kernels, "kernel " and the kernel's name (kernels.KernelName).
	Op    string
	Nodes int // nodes computed
	Time  time.Duration
}

// ProfileOps starts (on) or stops timing every node of later runs, gathered
// by op (OpProfile); starting clears what was gathered. The scheduler then
// computes the nodes one at a time and waits for the device after each
// (ggml.Scheduler.ProfileNodes), so profiled runs are slower than others:
// the shares tell where the time goes, timings come from runs without it.
func (rt *Runtime) ProfileOps(on bool) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed {
		return ErrClosed
	}
	rt.profiling = on
	if on {
		rt.opTimes = map[string]*OpTime{}
	}
	if rt.sched != nil {
		return rt.sched.ProfileNodes(on)
	}
	return nil
}

// OpProfile returns the op times gathered since ProfileOps(true), longest
// first.
func (rt *Runtime) OpProfile() []OpTime {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := make([]OpTime, 0, len(rt.opTimes))
	for _, t := range rt.opTimes {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Time != out[j].Time {
			return out[i].Time > out[j].Time
		}
		return out[i].Op < out[j].Op
	})
	return out
}

// gatherOps adds the last compute's node times to the profile.
func (rt *Runtime) gatherOps() {
	for _, n := range rt.sched.NodeTimes() {
		op := n.Op
		if name := kernels.KernelName(n.Kernel); name != "" {
			op = "kernel " + name
		}
		t := rt.opTimes[op]
		if t == nil {
			t = &OpTime{Op: op}
			rt.opTimes[op] = t
		}
		t.Nodes++
		t.Time += n.Time
	}
}
