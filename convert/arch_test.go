package convert

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fullSpecs builds the schema of a released model from its published
// hyper-parameters, without any checkpoint.
func fullSpecs(t *testing.T, c, depth, heads, hidden, qk int, swiglu, anyView, gs, aux, da2 bool, f int, oc [4]int) []tensorSpec {
	t.Helper()
	v := vitHP{C: c, Depth: depth, Heads: heads, Hidden: hidden, Patch: 14, Rows: 1370, Grid: 37,
		SwiGLU: swiglu, QKNormStart: qk, CatToken: anyView}
	d := c
	if anyView {
		d = 2 * c
	}
	kind := headMono
	switch {
	case da2:
		kind = headDA2
	case anyView:
		kind = headDualDPT
	}
	outDim := 1
	if anyView {
		outDim = 2
	}
	h := headHP{Kind: kind, D: d, F: f, OC: oc, F2: f / 2, HF2: 32, OutDim: outDim, Aux: aux, AuxOut: 7}
	specs := append(v.specs("vit"), h.specs("head")...)
	if anyView {
		specs = append(specs, camSpecs(d)...)
	}
	if gs {
		g := headHP{Kind: headGS, D: d, F: 256, OC: [4]int{256, 512, 1024, 1024}, F2: 128, HF2: 32, OutDim: 38, Merger: [3]int{32, 64, 128}}
		specs = append(specs, g.specs("gs")...)
	}
	return specs
}

func countParams(specs []tensorSpec) int64 {
	var n int64
	for _, s := range specs {
		e, _ := numElements(s.shape)
		n += e
	}
	return n
}

// TestSchemaCountsMatchSpec checks the schema against the tensor and
// parameter counts of MODEL-SPEC §12.4 and §14, computed there from the
// module definitions.
func TestSchemaCountsMatchSpec(t *testing.T) {
	small := [4]int{48, 96, 192, 384}
	base := [4]int{96, 192, 384, 768}
	large := [4]int{256, 512, 1024, 1024}
	cases := []struct {
		name    string
		specs   []tensorSpec
		tensors int
		params  int64
	}{
		{"DA3-SMALL", fullSpecs(t, 384, 12, 6, 1536, 4, false, true, false, false, false, 64, small), 279, 26179819},
		{"DA3-SMALL aux", fullSpecs(t, 384, 12, 6, 1536, 4, false, true, false, true, false, 64, small), 331, 0},
		{"DA3-BASE", fullSpecs(t, 768, 12, 12, 3072, 4, false, true, false, false, false, 128, base), 279, 103022955},
		{"DA3-LARGE", fullSpecs(t, 1024, 24, 16, 4096, 8, false, true, false, false, false, 256, large), 479, 345439467},
		{"DA3-LARGE aux", fullSpecs(t, 1024, 24, 16, 4096, 8, false, true, false, true, false, 256, large), 531, 0},
		{"DA3-GIANT", fullSpecs(t, 1536, 40, 24, 4096, 13, true, true, true, false, false, 256, large), 813, 1226566065},
		{"DA3-GIANT aux", fullSpecs(t, 1536, 40, 24, 4096, 13, true, true, true, true, false, 256, large), 865, 0},
		{"DA3MONO-LARGE", fullSpecs(t, 1024, 24, 16, 4096, -1, false, false, false, false, false, 256, large), 406, 334171394},
		{"DA2-Small", fullSpecs(t, 384, 12, 6, 1536, -1, false, false, false, false, true, 64, small), 238, 24784705},
		{"DA2-Base", fullSpecs(t, 768, 12, 12, 3072, -1, false, false, false, false, true, 128, base), 238, 97470017},
		{"DA2-Large", fullSpecs(t, 1024, 24, 16, 4096, -1, false, false, false, false, true, 256, large), 406, 335314625},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.NotEmpty(t, tc.specs)
			assert.Len(t, tc.specs, tc.tensors)
			if tc.params > 0 {
				assert.Equal(t, tc.params, countParams(tc.specs))
			}
			seen := map[string]bool{}
			for _, s := range tc.specs {
				assert.False(t, seen[s.name], "duplicate %s", s.name)
				seen[s.name] = true
			}
		})
	}
}
