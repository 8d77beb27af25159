package stream

import (
	"log/slog"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// smallSim3 draws a transform near the identity: rotation up to rot radians, log scale up to ls,
// translation up to tr per axis.
func smallSim3(r *rand.Rand, rot, ls, tr float64) Sim3 {
	var x Vec7
	for k := range 3 {
		x[k] = rot * (2*r.Float64() - 1) / math.Sqrt(3)
		x[3+k] = tr * (2*r.Float64() - 1)
	}
	x[6] = ls * (2*r.Float64() - 1)
	return Exp(x)
}

// sim3Close compares scale (relative), rotation matrix entries and translation (relative to its size).
func sim3Close(t *testing.T, want, got Sim3, tol float64, msg string, args ...any) {
	t.Helper()
	s, _, tr := maxTransformDiff(got, want)
	var rot float64
	for i := range 3 {
		for j := range 3 {
			rot = max(rot, math.Abs(got.R[i][j]-want.R[i][j]))
		}
	}
	assert.Less(t, s, tol, append([]any{msg}, args...)...)
	assert.Less(t, rot, tol, append([]any{msg}, args...)...)
	assert.Less(t, tr, tol*max(1, math.Abs(want.T[0])+math.Abs(want.T[1])+math.Abs(want.T[2])), append([]any{msg}, args...)...)
}

// TestSim3ExpLog: Log inverts Exp (rotations up to 3 rad, scales e^±2, and near π), Exp of a rotation-only
// or scale-only element is that rotation or scale, and the adjoint moves an element across a transform.
func TestSim3ExpLog(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 200 {
		var x Vec7
		ang := 3.0 * r.Float64()
		if i%20 == 0 {
			ang = math.Pi - 1e-6*r.Float64()
		}
		ax := [3]float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
		n := math.Sqrt(ax[0]*ax[0] + ax[1]*ax[1] + ax[2]*ax[2])
		for k := range 3 {
			x[k] = ang * ax[k] / n
			x[3+k] = 4 * r.NormFloat64()
		}
		x[6] = 2 * (2*r.Float64() - 1)
		y := Log(Exp(x))
		for k := range 7 {
			require.InDelta(t, x[k], y[k], 1e-6*max(1, math.Abs(x[k])), "element %d component %d (angle %g)", i, k, ang)
		}
	}
	a := Exp(Vec7{0, 0, math.Pi / 2, 0, 0, 0, 0})
	want := [3]float64{0, 1, 0}
	got := a.Apply([3]float64{1, 0, 0})
	for k := range 3 {
		assert.InDelta(t, want[k], got[k], 1e-12)
	}
	assert.InDelta(t, math.E, Exp(Vec7{6: 1}).S, 1e-12)
	// a·Exp(x)·a⁻¹ = Exp(Adjoint(a)·x).
	for range 20 {
		a, x := randomSim3(r), Vec7{}
		for k := range 7 {
			x[k] = 0.3 * r.NormFloat64()
		}
		lhs := a.Compose(Exp(x)).Compose(a.Inverse())
		adj := Adjoint(a)
		var ax Vec7
		for i := range 7 {
			for j := range 7 {
				ax[i] += adj[i][j] * x[j]
			}
		}
		sim3Close(t, lhs, Exp(ax), 1e-9, "adjoint")
	}
}

// TestGraphJacobians: the analytic Jacobians of an edge's residual match central finite differences of
// the residual under G ← Exp(h·eₖ)·G, for both nodes, far from the solution (residuals of 0.5 rad and more).
func TestGraphJacobians(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	g := &graph{opt: GraphOptions{Length: 2.5}.withDefaults()}
	for trial := range 20 {
		nodes := []Sim3{randomSim3(r), randomSim3(r)}
		e := GraphEdge{I: 0, J: 1, Z: nodes[0].Inverse().Compose(nodes[1]).Compose(smallSim3(r, 1.0, 0.3, 1))}
		_, raw := g.residual(nodes, e)
		jj := g.jacobian(nodes, e, raw)
		const h = 1e-6
		for _, node := range []int{e.J, e.I} {
			sign := 1.0
			if node == e.I {
				sign = -1
			}
			for k := range 7 {
				var dx Vec7
				dx[k] = h
				plus, minus := append([]Sim3(nil), nodes...), append([]Sim3(nil), nodes...)
				plus[node] = Exp(dx).Compose(nodes[node])
				dx[k] = -h
				minus[node] = Exp(dx).Compose(nodes[node])
				rp, _ := g.residual(plus, e)
				rm, _ := g.residual(minus, e)
				for row := range 7 {
					num := (rp[row] - rm[row]) / (2 * h)
					require.InDelta(t, num, sign*jj[row][k], 1e-5*max(1, math.Abs(num)), "trial %d node %d ∂r%d/∂δ%d", trial, node, row, k)
				}
			}
		}
	}
}

// chainGraph is a ring of n windows with true transforms truth: consecutive edges and one loop edge from
// the last window to the first, measured exactly.
func chainGraph(r *rand.Rand, n int) (truth []Sim3, edges []GraphEdge) {
	truth = []Sim3{Identity()}
	for i := 1; i < n; i++ {
		truth = append(truth, truth[i-1].Compose(smallSim3(r, 0.5, 0.1, 1)))
	}
	for i := 1; i < n; i++ {
		edges = append(edges, GraphEdge{I: i - 1, J: i, Z: truth[i-1].Inverse().Compose(truth[i])})
	}
	edges = append(edges, GraphEdge{I: 0, J: n - 1, Z: truth[0].Inverse().Compose(truth[n-1]), Loop: true})
	return truth, edges
}

// TestGraphConvergesToKnownSolution: consistent measurements and nodes perturbed by up to 0.3 rad, 10 %
// scale and 0.5 units: the optimiser returns the true transforms (node 0 fixed) to 1e-8.
func TestGraphConvergesToKnownSolution(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	truth, edges := chainGraph(r, 12)
	edges = append(edges, GraphEdge{I: 3, J: 8, Z: truth[3].Inverse().Compose(truth[8]), Loop: true})
	init := []Sim3{truth[0]}
	for i := 1; i < len(truth); i++ {
		init = append(init, smallSim3(r, 0.3, 0.1, 0.5).Compose(truth[i]))
	}
	got, st, err := OptimizeGraph(init, edges, GraphOptions{Length: 2})
	require.NoError(t, err)
	t.Logf("cost %.3g → %.3g in %d steps", st.InitialCost, st.FinalCost, st.Iterations)
	assert.Less(t, st.FinalCost, 1e-16)
	for i := range truth {
		sim3Close(t, truth[i], got[i], 1e-8, "node %d", i)
	}
	assert.Equal(t, []float64{1, 1}, roundAll(st.LoopWeights, 1e-6))
}

func roundAll(v []float64, q float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = math.Round(x/q) * q
	}
	return out
}

// TestGraphLoopRemovesDrift: the consecutive edges carry the same small error each (drift); the exact loop
// edge pulls the ring back: the worst window's error falls by 5× or more, and without the loop edge the
// drift stays (the loop edge is what does it).
func TestGraphLoopRemovesDrift(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	truth, edges := chainGraph(r, 10)
	drift := Exp(Vec7{0.02, -0.01, 0.015, 0.03, 0, -0.02, 0.02})
	for i := range edges {
		if !edges[i].Loop {
			edges[i].Z = edges[i].Z.Compose(drift)
		}
	}
	chained := []Sim3{Identity()}
	for i := 1; i < len(truth); i++ {
		chained = append(chained, chained[i-1].Compose(edges[i-1].Z))
	}
	errAt := func(nodes []Sim3) float64 {
		var worst float64
		for i := range nodes {
			x := Log(truth[i].Inverse().Compose(nodes[i]))
			worst = max(worst, math.Sqrt(dot7(x, x)))
		}
		return worst
	}
	got, _, err := OptimizeGraph(chained, edges, GraphOptions{})
	require.NoError(t, err)
	noLoop, _, err := OptimizeGraph(chained, edges[:len(edges)-1], GraphOptions{})
	require.NoError(t, err)
	t.Logf("worst node error: chained %.3g, optimised %.3g, without the loop edge %.3g", errAt(chained), errAt(got), errAt(noLoop))
	assert.Less(t, errAt(got), errAt(chained)/5)
	assert.InDelta(t, errAt(chained), errAt(noLoop), 1e-9)
}

// TestGraphRejectsWrongLoop: a loop edge 1 rad off the truth, with ten consistent loops of the chain, ends
// with a small Cauchy weight and leaves the nodes near the truth.
func TestGraphRejectsWrongLoop(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	truth, edges := chainGraph(r, 10)
	edges = append(edges, GraphEdge{I: 2, J: 7, Z: truth[2].Inverse().Compose(truth[7]).Compose(Exp(Vec7{1, 0, 0, 0.5, 0, 0, 0.3})), Loop: true})
	got, st, err := OptimizeGraph(truth, edges, GraphOptions{})
	require.NoError(t, err)
	require.Len(t, st.LoopWeights, 2)
	t.Logf("loop weights %v", st.LoopWeights)
	assert.Greater(t, st.LoopWeights[0], 0.9)
	assert.Less(t, st.LoopWeights[1], 0.05)
	for i := range truth {
		x := Log(truth[i].Inverse().Compose(got[i]))
		assert.Less(t, math.Sqrt(dot7(x, x)), 0.1, "node %d", i)
	}
}

func TestGraphErrors(t *testing.T) {
	_, _, err := OptimizeGraph([]Sim3{Identity(), Identity()}, []GraphEdge{{I: 0, J: 2, Z: Identity()}}, GraphOptions{})
	assert.ErrorContains(t, err, "edge 0–2")
	// A node no edge reaches cannot be solved for.
	_, _, err = OptimizeGraph([]Sim3{Identity(), Identity(), Identity()}, []GraphEdge{{I: 0, J: 1, Z: Exp(Vec7{0.1})}}, GraphOptions{})
	assert.ErrorIs(t, err, errDisconnected)
}

// TestOptimizeGraphScalePriors: a chain whose seams agree with each other and whose every window is
// measured at scale 2 ends with every window at scale 2, window 0's included (a prior on node 0 frees its
// scale, not its rotation or translation), the seams kept; a prior that disagrees with the others by far
// is down-weighted by the Cauchy kernel; a bad prior is refused.
func TestOptimizeGraphScalePriors(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	nodes := []Sim3{Identity()}
	for k := 1; k < 6; k++ {
		nodes = append(nodes, nodes[k-1].Compose(smallSim3(r, 0.2, 0.05, 1)))
	}
	var edges []GraphEdge
	for k := 1; k < len(nodes); k++ {
		edges = append(edges, GraphEdge{I: k - 1, J: k, Z: nodes[k-1].Inverse().Compose(nodes[k])})
	}
	// Priors: every window's scale times 2 (the seams' scales agree with them), one outlier at ×3.
	var priors []ScalePrior
	for k, g := range nodes {
		f := 2.0
		if k == 3 {
			f = 6
		}
		priors = append(priors, ScalePrior{Node: k, Scale: f * g.S, Weight: 0.3})
	}
	got, st, err := OptimizeGraph(nodes, edges, GraphOptions{Scales: priors})
	require.NoError(t, err)
	require.Len(t, st.ScaleWeights, len(nodes))
	assert.Less(t, st.ScaleWeights[3], 0.1, "the outlier prior is down-weighted")
	for k := range nodes {
		assert.InDelta(t, 2, got[k].S/nodes[k].S, 0.02, "node %d's scale doubled", k)
		if k != 3 {
			assert.Greater(t, st.ScaleWeights[k], 0.9)
		}
	}
	assert.Equal(t, nodes[0].R, got[0].R, "node 0's rotation stays")
	assert.Equal(t, nodes[0].T, got[0].T, "node 0's translation stays")
	for _, e := range edges {
		rel := got[e.I].Inverse().Compose(got[e.J])
		sim3Close(t, e.Z, rel, 0.02, "seam %d–%d kept", e.I, e.J)
	}
	_, _, err = OptimizeGraph(nodes, edges, GraphOptions{Scales: []ScalePrior{{Node: 9, Scale: 1}}})
	assert.ErrorContains(t, err, "scale prior")
	_, _, err = OptimizeGraph(nodes, edges, GraphOptions{Scales: []ScalePrior{{Node: 1, Scale: 0}}})
	assert.ErrorContains(t, err, "scale prior")
}

// TestNormalEqEnvelope: the normal equations stored within their envelope. For a ring of 30 windows with
// loops (one reaching from node 0, whose scale is free), the envelope holds every entry the edges couple;
// H built from random blocks on the edges (both triangles added, as normalEquations does), solved with
// λ, agrees with a dense Cholesky solve of the same system to 1e-10; an entry outside the envelope is
// refused; a chain needs about 11 entries a parameter.
func TestNormalEqEnvelope(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	const n = 30
	_, edges := chainGraph(r, n)
	edges = append(edges, GraphEdge{I: 4, J: 20, Loop: true}, GraphEdge{I: 0, J: 12, Loop: true})
	g := &graph{nodes: make([]Sim3, n), free0: true}
	first, entries := envelope(n, edges, true)
	m := g.params()
	require.Len(t, first, m)
	s := newNormalEq(first)
	assert.Len(t, s.h, entries)
	dense := make([][]float64, m)
	for i := range dense {
		dense[i] = make([]float64, m)
	}
	for _, e := range edges {
		var idx []int
		for _, node := range []int{e.I, e.J} {
			for p := range 7 {
				if k := g.index(node, p); k >= 0 {
					idx = append(idx, k)
				}
			}
		}
		b := make([]float64, len(idx)) // a rank-one block per edge, three times
		for range 3 {
			for k := range b {
				b[k] = r.NormFloat64()
			}
			for a, i := range idx {
				for c, j := range idx {
					require.LessOrEqual(t, first[max(i, j)], min(i, j), "H[%d][%d] outside the envelope", i, j)
					s.add(i, j, b[a]*b[c])
					dense[i][j] += b[a] * b[c]
				}
			}
		}
	}
	for i := range m {
		s.g[i] = r.NormFloat64()
		s.add(i, i, 0.1)
		dense[i][i] += 0.1
	}
	const lambda = 1e-3
	got, err := s.solve(lambda)
	require.NoError(t, err)
	// dense Cholesky of H + λ·diag(H) + 1e-15·I
	l := make([][]float64, m)
	for i := range l {
		l[i] = append([]float64(nil), dense[i]...)
		l[i][i] += lambda*l[i][i] + 1e-15
	}
	for j := range m {
		for k := range j {
			l[j][j] -= l[j][k] * l[j][k]
		}
		l[j][j] = math.Sqrt(l[j][j])
		for i := j + 1; i < m; i++ {
			for k := range j {
				l[i][j] -= l[i][k] * l[j][k]
			}
			l[i][j] /= l[j][j]
		}
	}
	want := make([]float64, m)
	for i := range m {
		v := -s.g[i]
		for k := range i {
			v -= l[i][k] * want[k]
		}
		want[i] = v / l[i][i]
	}
	for i := m - 1; i >= 0; i-- {
		v := want[i]
		for k := i + 1; k < m; k++ {
			v -= l[k][i] * want[k]
		}
		want[i] = v / l[i][i]
	}
	var worst, size float64
	for i := range want {
		worst, size = max(worst, math.Abs(got[i]-want[i])), max(size, math.Abs(want[i]))
	}
	assert.Less(t, worst, 1e-10*size, "envelope against dense solve")
	assert.Panics(t, func() { s.add(g.index(25, 0), g.index(2, 0), 1) }, "outside the envelope")

	var seams []GraphEdge
	for k := 1; k < 1000; k++ {
		seams = append(seams, GraphEdge{I: k - 1, J: k})
	}
	_, chain := envelope(1000, seams, false)
	assert.Less(t, chain, 12*7*999)
}

// TestFitEnvelope: a run of 2000 windows with 134 loops accepted, most of them spanning 1700 windows or
// more, is more than the pose graph holds: the loops spanning the most windows are dropped (and marked not
// accepted) until it fits, every one kept spanning no more than any dropped; a ring with two loops is left
// alone and optimised.
func TestFitEnvelope(t *testing.T) {
	const n = 2000
	var edges []GraphEdge
	for k := 1; k < n; k++ {
		edges = append(edges, GraphEdge{I: k - 1, J: k, Z: Identity()})
	}
	var loops []loopStats
	for k := range 200 {
		i, j := k%50, n-1-k
		if k%7 == 0 {
			j = i + 10
		}
		loops = append(loops, loopStats{I: i, J: j, Accepted: k%3 != 2})
		if k%3 != 2 {
			edges = append(edges, GraphEdge{I: i, J: j, Z: Identity(), Loop: true})
		}
	}
	was := make([]bool, len(loops))
	for i, l := range loops {
		was[i] = l.Accepted
	}
	before := len(edges)
	got := fitEnvelope(n, edges, loops, slog.New(slog.DiscardHandler))
	_, entries := envelope(n, got, true)
	assert.LessOrEqual(t, entries, maxGraphEntries)
	require.Less(t, len(got), before, "loops dropped")
	kept, maxKept, minDropped := 0, 0, n
	for _, e := range got {
		if e.Loop {
			kept++
			maxKept = max(maxKept, e.J-e.I)
		}
	}
	accepted := 0
	for i, l := range loops {
		if l.Accepted {
			accepted++
		} else if was[i] {
			minDropped = min(minDropped, l.J-l.I)
		}
	}
	t.Logf("%d of %d loops dropped, %d entries; loops kept span up to %d windows, dropped from %d", before-len(got), before-(n-1), entries, maxKept, minDropped)
	assert.Equal(t, kept, accepted, "the loops accepted are the loop edges kept")
	assert.LessOrEqual(t, maxKept, minDropped, "the loops spanning the most windows dropped first")

	// A ring with two loops fits: nothing dropped, and the graph optimises (consistent: the nodes stay).
	few := append(append([]GraphEdge(nil), edges[:n-1]...), GraphEdge{I: 0, J: n - 1, Z: Identity(), Loop: true},
		GraphEdge{I: 5, J: 1900, Z: Identity(), Loop: true})
	fewLoops := []loopStats{{I: 0, J: n - 1, Accepted: true}, {I: 5, J: 1900, Accepted: true}}
	assert.Len(t, fitEnvelope(n, few, fewLoops, slog.New(slog.DiscardHandler)), n+1)
	nodes := make([]Sim3, n)
	for i := range nodes {
		nodes[i] = Identity()
	}
	out, _, err := OptimizeGraph(nodes, few, GraphOptions{Length: 1})
	require.NoError(t, err)
	sim3Close(t, nodes[n-1], out[n-1], 1e-12, "last node")
}
