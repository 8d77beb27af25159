package stream

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// GraphEdge is a measurement between two windows of a run: Z is the transform from window J's frame to
// window I's, so that the windows' transforms to the run's frame satisfy G_I⁻¹·G_J ≈ Z.
type GraphEdge struct {
	I, J int
	Z    Sim3
	// Weight scales the edge's information (0 means 1).
	Weight float64
	// Loop marks a loop closure: its residual is weighted by the Cauchy kernel (GraphOptions.Cauchy);
	// the other edges (the seams between consecutive windows) are trusted and weighted by least squares.
	Loop bool
}

// GraphOptions tune OptimizeGraph. The zero value uses the defaults.
type GraphOptions struct {
	// Iterations caps the Levenberg–Marquardt steps of each of the two phases (default 50).
	Iterations int
	// Length is the unit of the translation residuals (the scene's scale, e.g. its median depth): they are
	// divided by it so that they weigh as much as the rotation (radians) and scale (log) residuals
	// (default 1).
	Length float64
	// Cauchy is the scale c of the Cauchy kernel on loop edges, in the normalised residual's units: a loop
	// edge whose residual norm is r is weighted by 1/(1 + r²/c²) (default 0.1: 6°, 10 % of Length or of
	// the scale).
	Cauchy float64
	// Scales are measurements of single windows' scales (the windows' own metric scales, for a run in
	// metres): least squares like the seams, then re-weighted by the Cauchy kernel like the loops.
	Scales []ScalePrior
}

// ScalePrior is a measurement of one window's scale: the residual of node Node is
// log(S(G_Node)) − log(Scale), weighted by Weight (0 means 1). A prior on node 0 frees node 0's scale
// (its rotation and translation stay fixed): the priors then set the scale of the whole graph.
type ScalePrior struct {
	Node          int
	Scale, Weight float64
}

func (o GraphOptions) withDefaults() GraphOptions {
	if o.Iterations <= 0 {
		o.Iterations = 50
	}
	if !(o.Length > 0) {
		o.Length = 1
	}
	if !(o.Cauchy > 0) {
		o.Cauchy = 0.1
	}
	return o
}

// GraphStats describe an optimisation.
type GraphStats struct {
	// Iterations is the number of accepted steps.
	Iterations int
	// InitialCost and FinalCost are the weighted sums of squared normalised residuals (with the final
	// robust weights).
	InitialCost, FinalCost float64
	// LoopWeights are the loop edges' final robust weights (1: fully trusted; near 0: rejected), in the
	// order the loop edges were given.
	LoopWeights []float64
	// ScaleWeights are the scale priors' final robust weights, in the order they were given.
	ScaleWeights []float64
}

// OptimizeGraph is a Sim(3) pose-graph optimisation: it returns the windows' transforms G (node 0 fixed,
// but for its scale when a scale prior is on it)
// that minimise Σₑ wₑ·|D·Log(Zₑ⁻¹·G_I⁻¹·G_J)|² + Σₚ wₚ·(log S(G_p) − log Sₚ)², D dividing the
// translation part by Length (the second sum: opt.Scales, none by default). Each node is
// updated on the Lie algebra, G ← Exp(δ)·G (7 parameters), by Levenberg–Marquardt on the analytic
// Jacobians ∂e/∂δ_J = D·J_r⁻¹(e)·Adjoint(G_J⁻¹) = −∂e/∂δ_I. It runs in two phases: least squares on every
// edge, then with the loop edges re-weighted by the Cauchy kernel at every step (iteratively re-weighted
// least squares): a loop that disagrees with the rest of the graph after the first phase is down-weighted
// without having stopped a correct one, far from the chain's drifted solution, from pulling at the start.
func OptimizeGraph(nodes []Sim3, edges []GraphEdge, opt GraphOptions) ([]Sim3, GraphStats, error) {
	opt = opt.withDefaults()
	var st GraphStats
	n := len(nodes)
	for _, e := range edges {
		if e.I < 0 || e.J < 0 || e.I >= n || e.J >= n || e.I == e.J {
			return nil, st, fmt.Errorf("pose graph: edge %d–%d of %d nodes", e.I, e.J, n)
		}
		if !(e.Weight >= 0) {
			return nil, st, fmt.Errorf("pose graph: edge %d–%d has weight %g", e.I, e.J, e.Weight)
		}
	}
	for _, p := range opt.Scales {
		if p.Node < 0 || p.Node >= n || !(p.Scale > 0) || math.IsInf(p.Scale, 0) || !(p.Weight >= 0) {
			return nil, st, fmt.Errorf("pose graph: scale prior %g (weight %g) on node %d of %d", p.Scale, p.Weight, p.Node, n)
		}
	}
	if err := connected(n, edges); err != nil {
		return nil, st, err
	}
	g := &graph{nodes: append([]Sim3(nil), nodes...), edges: edges, opt: opt, robust: make([]float64, len(edges)),
		scaleRobust: make([]float64, len(opt.Scales))}
	for i := range g.robust {
		g.robust[i] = 1
	}
	for i, p := range opt.Scales {
		g.scaleRobust[i] = 1
		g.free0 = g.free0 || p.Node == 0
	}
	first, entries := envelope(n, edges, g.free0)
	if entries > maxGraphEntries {
		return nil, st, fmt.Errorf("%w: its normal equations hold %d entries (at most %d): fewer loops, or loops spanning fewer windows", ErrGraphTooLarge, entries, maxGraphEntries)
	}
	g.first = first
	st.InitialCost = g.cost(g.nodes)
	if n < 2 || len(edges) == 0 {
		st.FinalCost = st.InitialCost
		st.ScaleWeights = g.scaleRobust
		return g.nodes, st, nil
	}
	for phase := range 2 {
		lambda := 1e-6
		for range opt.Iterations {
			if phase == 1 {
				g.reweight()
			}
			ok, done, err := g.step(&lambda)
			if err != nil {
				return nil, st, err
			}
			if ok {
				st.Iterations++
			}
			if done {
				break
			}
		}
	}
	st.FinalCost = g.cost(g.nodes)
	for i, e := range edges {
		if e.Loop {
			st.LoopWeights = append(st.LoopWeights, g.robust[i])
		}
	}
	st.ScaleWeights = g.scaleRobust
	return g.nodes, st, nil
}

// connected checks that every node is joined to node 0 by edges (else its transform is not determined).
func connected(n int, edges []GraphEdge) error {
	adj := make([][]int, n)
	for _, e := range edges {
		adj[e.I] = append(adj[e.I], e.J)
		adj[e.J] = append(adj[e.J], e.I)
	}
	seen := make([]bool, n)
	seen[0] = true
	queue := []int{0}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, u := range adj[v] {
			if !seen[u] {
				seen[u] = true
				queue = append(queue, u)
			}
		}
	}
	for i, ok := range seen {
		if !ok {
			return fmt.Errorf("pose graph: node %d is not connected to node 0: %w", i, errDisconnected)
		}
	}
	return nil
}

var errDisconnected = errors.New("a window no edge joins to the others")

// graph is OptimizeGraph's state: the current nodes and the edges' and scale priors' robust weights.
type graph struct {
	nodes       []Sim3
	edges       []GraphEdge
	opt         GraphOptions
	robust      []float64
	scaleRobust []float64
	free0       bool  // node 0's scale is a parameter (a prior measures it)
	first       []int // the normal equations' envelope (see envelope)
}

// ErrGraphTooLarge: the normal equations of the graph's loops would hold more than maxGraphEntries.
var ErrGraphTooLarge = errors.New("pose graph: too large")

// scaleResidual is scale prior p's residual log S(G_p) − log Sₚ at nodes.
func scaleResidual(nodes []Sim3, p ScalePrior) float64 {
	return math.Log(nodes[p.Node].S) - math.Log(p.Scale)
}

func (g *graph) scaleWeight(i int) float64 {
	w := g.opt.Scales[i].Weight
	if w == 0 {
		w = 1
	}
	return w * g.scaleRobust[i]
}

// residual is edge e's normalised residual D·Log(Z⁻¹·G_I⁻¹·G_J) at the nodes, and the raw Log.
func (g *graph) residual(nodes []Sim3, e GraphEdge) (r, raw Vec7) {
	raw = Log(e.Z.Inverse().Compose(nodes[e.I].Inverse()).Compose(nodes[e.J]))
	r = raw
	for k := 3; k < 6; k++ {
		r[k] /= g.opt.Length
	}
	return r, raw
}

func (g *graph) weight(i int) float64 {
	w := g.edges[i].Weight
	if w == 0 {
		w = 1
	}
	return w * g.robust[i]
}

// cost is the weighted sum of squared normalised residuals at nodes.
func (g *graph) cost(nodes []Sim3) float64 {
	var c float64
	for i, e := range g.edges {
		r, _ := g.residual(nodes, e)
		c += g.weight(i) * dot7(r, r)
	}
	for i, p := range g.opt.Scales {
		r := scaleResidual(nodes, p)
		c += g.scaleWeight(i) * r * r
	}
	return c
}

// reweight sets the loop edges' Cauchy weights at the current nodes.
func (g *graph) reweight() {
	c2 := g.opt.Cauchy * g.opt.Cauchy
	for i, e := range g.edges {
		if e.Loop {
			r, _ := g.residual(g.nodes, e)
			g.robust[i] = 1 / (1 + dot7(r, r)/c2)
		}
	}
	for i, p := range g.opt.Scales {
		r := scaleResidual(g.nodes, p)
		g.scaleRobust[i] = 1 / (1 + r*r/c2)
	}
}

// jacobian is ∂r/∂δ_J of edge e at nodes (∂r/∂δ_I is its negative).
func (g *graph) jacobian(nodes []Sim3, e GraphEdge, raw Vec7) [7][7]float64 {
	j := mul77(rightJacobianInv(raw), Adjoint(nodes[e.J].Inverse()))
	for k := 3; k < 6; k++ {
		for c := range 7 {
			j[k][c] /= g.opt.Length
		}
	}
	return j
}

// step takes one Levenberg–Marquardt step (raising λ until the cost falls, at most 10 times): whether a
// step was accepted, whether the optimisation has converged.
func (g *graph) step(lambda *float64) (ok, done bool, err error) {
	sys := g.normalEquations()
	cur := g.cost(g.nodes)
	for range 10 {
		d, err := sys.solve(*lambda)
		if err != nil {
			return false, true, err
		}
		next := make([]Sim3, len(g.nodes))
		next[0] = g.nodes[0]
		big := 0.0
		if k := g.index(0, 6); k >= 0 {
			next[0] = Exp(Vec7{6: d[k]}).Compose(g.nodes[0])
			big = math.Abs(d[k])
		}
		for k := 1; k < len(g.nodes); k++ {
			var x Vec7
			copy(x[:], d[7*(k-1):7*k])
			for _, v := range x {
				big = max(big, math.Abs(v))
			}
			next[k] = Exp(x).Compose(g.nodes[k])
		}
		c := g.cost(next)
		if c <= cur {
			g.nodes = next
			*lambda = max(*lambda/10, 1e-12)
			return true, big < 1e-10 || cur-c <= 1e-14*cur, nil
		}
		*lambda *= 10
	}
	return false, true, nil
}

// normalEquations builds JᵀWJ and JᵀWr over the free parameters: nodes 1…n−1, and node 0's scale when
// it is free (g.free0, last).
func (g *graph) normalEquations() *normalEq {
	sys := newNormalEq(g.first)
	for i, e := range g.edges {
		r, raw := g.residual(g.nodes, e)
		w := g.weight(i)
		j := g.jacobian(g.nodes, e, raw)
		// Blocks: +j for J, −j for I.
		blocks := [][2]int{{e.J, 1}, {e.I, -1}}
		for _, a := range blocks {
			sa := float64(a[1])
			for p := range 7 {
				ip := g.index(a[0], p)
				if ip < 0 {
					continue
				}
				var gp float64
				for k := range 7 {
					gp += j[k][p] * r[k]
				}
				sys.g[ip] += w * sa * gp
				for _, b := range blocks {
					s := w * sa * float64(b[1])
					for q := range 7 {
						iq := g.index(b[0], q)
						if iq < 0 {
							continue
						}
						var h float64
						for k := range 7 {
							h += j[k][p] * j[k][q]
						}
						sys.add(ip, iq, s*h)
					}
				}
			}
		}
	}
	// A scale prior's residual depends on its node's σ alone: log S(Exp(δ)·G) = δ_σ + log S(G).
	for i, p := range g.opt.Scales {
		k := g.index(p.Node, 6)
		if k < 0 {
			continue
		}
		w := g.scaleWeight(i)
		sys.g[k] += w * scaleResidual(g.nodes, p)
		sys.add(k, k, w)
	}
	return sys
}

// params is the number of free parameters: 7 per node but node 0, and node 0's scale when it is free.
func (g *graph) params() int {
	m := 7 * (len(g.nodes) - 1)
	if g.free0 {
		m++
	}
	return m
}

// index is the position of node's parameter p (0…6: ω, υ, σ) among the free ones, −1 when it is fixed.
func (g *graph) index(node, p int) int {
	switch {
	case node > 0:
		return 7*(node-1) + p
	case g.free0 && p == 6:
		return 7 * (len(g.nodes) - 1)
	}
	return -1
}

func dot7(a, b Vec7) float64 {
	var s float64
	for i := range 7 {
		s += a[i] * b[i]
	}
	return s
}

// normalEq is a symmetric system H·δ = −g, H's lower triangle stored within its envelope: row i from
// column first[i] (its first structural non-zero) to the diagonal. A chain of windows is banded, and only
// the rows of windows that close a loop reach back further.
type normalEq struct {
	n     int
	first []int // row i's first stored column
	off   []int // row i's entries are h[off[i] : off[i]+i−first[i]+1]
	h     []float64
	g     []float64
}

// maxGraphEntries caps the envelope of the normal equations (stored twice while solving, H and its
// factor: 64 MiB each): a chain of windows needs about 13 entries a parameter, a loop the parameters it
// spans.
const maxGraphEntries = 8 << 20

// envelope is the first column of each row of the normal equations over the free parameters of a graph
// of n nodes with edges (7 per node but node 0, and node 0's scale last when free0), and the number of
// entries it holds. An edge couples every parameter of its two nodes.
func envelope(n int, edges []GraphEdge, free0 bool) (first []int, entries int) {
	g := &graph{nodes: make([]Sim3, n), free0: free0}
	m := g.params()
	first = make([]int, m)
	for i := range first {
		first[i] = i
	}
	var idx []int
	for _, e := range edges {
		idx, lo := idx[:0], m
		for _, node := range []int{e.I, e.J} {
			for p := range 7 {
				if k := g.index(node, p); k >= 0 {
					idx = append(idx, k)
					lo = min(lo, k)
				}
			}
		}
		for _, k := range idx {
			first[k] = min(first[k], lo)
		}
	}
	for i, f := range first {
		entries += i - f + 1
	}
	return first, entries
}

func newNormalEq(first []int) *normalEq {
	n := len(first)
	s := &normalEq{n: n, first: first, off: make([]int, n+1), g: make([]float64, n)}
	for i, f := range first {
		s.off[i+1] = s.off[i] + i - f + 1
	}
	s.h = make([]float64, s.off[n])
	return s
}

// at is the position of H[i][j] (first[i] ≤ j ≤ i) in h.
func (s *normalEq) at(i, j int) int { return s.off[i] + j - s.first[i] }

// add adds v to H[i][j]; the upper triangle (j > i), symmetric, is not stored. An entry outside the
// envelope is a bug in its making.
func (s *normalEq) add(i, j int, v float64) {
	if j > i {
		return
	}
	if j < s.first[i] {
		panic(fmt.Sprintf("pose graph: H[%d][%d] outside the envelope (row from %d)", i, j, s.first[i]))
	}
	s.h[s.at(i, j)] += v
}

var errIndefinite = errors.New("pose graph: the normal equations are not positive definite")

// solve solves (H + λ·diag(H))·δ = −g by Cholesky factorisation within H's envelope (row i's entries
// before first[i] stay zero in the factor).
func (s *normalEq) solve(lambda float64) ([]float64, error) {
	n, first := s.n, s.first
	l := slices.Clone(s.h)
	for i := range n {
		l[s.at(i, i)] += lambda*l[s.at(i, i)] + 1e-15
	}
	for j := range n {
		rj := l[s.at(j, first[j]):s.at(j, j)]
		d := l[s.at(j, j)]
		for _, v := range rj {
			d -= v * v
		}
		if !(d > 0) {
			return nil, errIndefinite
		}
		d = math.Sqrt(d)
		l[s.at(j, j)] = d
		for i := j + 1; i < n; i++ {
			if j < first[i] {
				continue
			}
			k0 := max(first[i], first[j])
			v := l[s.at(i, j)]
			row, rk := l[s.at(i, k0):s.at(i, j)], l[s.at(j, k0):s.at(j, j)]
			for k := range row {
				v -= row[k] * rk[k]
			}
			l[s.at(i, j)] = v / d
		}
	}
	x := make([]float64, n)
	for i := range n {
		v := -s.g[i]
		for k := first[i]; k < i; k++ {
			v -= l[s.at(i, k)] * x[k]
		}
		x[i] = v / l[s.at(i, i)]
	}
	for i := n - 1; i >= 0; i-- {
		v := x[i]
		for k := i + 1; k < n; k++ {
			if i >= first[k] {
				v -= l[s.at(k, i)] * x[k]
			}
		}
		x[i] = v / l[s.at(i, i)]
	}
	return x, nil
}
