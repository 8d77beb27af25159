package server

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/ggml/kernels"
	"github.com/da3-go/da3-go/model"
)

// TestLoadOptions: every instance is loaded with Options.Load (kernel
// policy, precision), and serves with it.
func TestLoadOptions(t *testing.T) {
	da3, _ := fixtures(t)
	policy := func(s *Server) []kernels.Policy {
		var out []kernels.Policy
		for _, p := range s.pools {
			for _, in := range p.all {
				m, ok := in.r.(*model.Model)
				require.True(t, ok)
				out = append(out, m.Kernels())
			}
		}
		return out
	}

	s, ts := newTestServer(t, Options{Device: "cpu", Parallel: 2, Models: []ModelSpec{{Path: da3}},
		Load: model.Options{Options: backend.Options{Kernels: kernels.Policy{Explicit: true, Variant: kernels.VariantOff}}}})
	got := policy(s)
	require.Len(t, got, 2)
	for _, p := range got {
		assert.Equal(t, kernels.VariantOff, p.Variant, "-kernels none: ggml's own ops")
		assert.False(t, p.GEMM || p.Attention)
	}
	resp, body := postJSON(t, ts.URL, DepthRequest{Image: enc64(readFile(t, view0)), ProcessRes: 56})
	assert.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))

	if !kernels.PrecisionRuns(kernels.VariantAuto, kernels.PrecisionBF16) {
		t.Skip("this CPU lacks AVX512_BF16: bf16 not tested")
	}
	s, ts = newTestServer(t, Options{Device: "cpu", Models: []ModelSpec{{Path: da3}},
		Load: model.Options{Options: backend.Options{Kernels: kernels.Policy{Precision: kernels.PrecisionBF16, Convs: kernels.ConvsNarrow}}}})
	got = policy(s)
	require.Len(t, got, 1)
	assert.Equal(t, kernels.PrecisionBF16, got[0].Precision)
	assert.Equal(t, kernels.ConvsNarrow, got[0].Convs)
	resp, body = postJSON(t, ts.URL, DepthRequest{Image: enc64(readFile(t, view0)), ProcessRes: 56})
	assert.Equal(t, http.StatusOK, resp.StatusCode, truncate(body))
}
