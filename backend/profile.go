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

// NodeTime is the time one node took over the profiled runs. A node is
// told apart by its place in its graph, its op and its shapes, so the same
// node of every run adds up (a run of several graphs may merge two nodes
// that agree in all four).
type NodeTime struct {
	Index int    // its place in its graph's nodes
	Op    string // as OpTime's
	Shape [4]int // its output's ne
	Src   [4]int // its first source's ne (zeros without one)
	Count int    // times computed
	Time  time.Duration
}

type nodeKey struct {
	index     int
	op        string
	shape, sr [4]int
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
		rt.nodeTimes = map[nodeKey]*NodeTime{}
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

// NodeProfile returns the node times gathered since ProfileOps(true),
// longest first (ties in graph order).
func (rt *Runtime) NodeProfile() []NodeTime {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := make([]NodeTime, 0, len(rt.nodeTimes))
	for _, t := range rt.nodeTimes {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Time != out[j].Time {
			return out[i].Time > out[j].Time
		}
		return out[i].Index < out[j].Index
	})
	return out
}

// gatherOps adds the last compute's node times to the profile, by op and
// by node.
func (rt *Runtime) gatherOps() {
	for i, n := range rt.sched.NodeTimes() {
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
		k := nodeKey{i, op, n.Shape, n.Src}
		nt := rt.nodeTimes[k]
		if nt == nil {
			nt = &NodeTime{Index: i, Op: op, Shape: n.Shape, Src: n.Src}
			rt.nodeTimes[k] = nt
		}
		nt.Count++
		nt.Time += n.Time
	}
}
