package licence

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		kind      Kind
		size      string
		repo, lic string
		ok        bool
	}{
		{DA3, "small", "depth-anything/DA3-SMALL", Apache2, true},
		{DA3, "giant", "depth-anything/DA3-GIANT", CCBYNC4, true},
		{DA3Mono, "large", "depth-anything/DA3MONO-LARGE", Apache2, true},
		{DA3Metric, "large", "depth-anything/DA3METRIC-LARGE", Apache2, true},
		{DA3Nested, "", "depth-anything/DA3NESTED-GIANT-LARGE", CCBYNC4, true},
		{DA2, "small", "depth-anything/Depth-Anything-V2-Small", Apache2, true},
		{DA2MetricOutdoor, "base", "depth-anything/Depth-Anything-V2-Metric-VKITTI-Base", CCBYNC4, true},
		{DA2Metric, "large", "", CCBYNC4, true},
		{DA3Mono, "small", "", "", false},
		{DA2, "giant", "", "", false},
		{DA3, "", "", "", false},
	} {
		c, ok := Of(tc.kind, tc.size)
		assert.Equal(t, tc.ok, ok, "%s %s", tc.kind, tc.size)
		assert.Equal(t, tc.repo, c.Repo, "%s %s", tc.kind, tc.size)
		assert.Equal(t, tc.lic, c.Licence, "%s %s", tc.kind, tc.size)
	}
	assert.True(t, NonCommercial(CCBYNC4))
	assert.False(t, NonCommercial(Apache2))
	assert.Equal(t, "https://huggingface.co/depth-anything/DA3-SMALL", Checkpoint{Repo: "depth-anything/DA3-SMALL"}.URL())
	assert.Empty(t, Checkpoint{}.URL())
}

func TestFromModelCard(t *testing.T) {
	for card, want := range map[string]string{
		"---\nlicense: apache-2.0\ntags:\n- depth\n---\n# DA3\n":        "Apache-2.0",
		"---\r\nlicense: cc-by-nc-4.0\r\n---\r\n":                       "CC-BY-NC-4.0",
		"---\nlicense: other\nlicense_name: my-licence\n---\n":          "my-licence",
		"---\nlicense: other\n---\n":                                    "",
		"# no front matter\nlicense: mit\n":                             "",
		"---\nmodel-index:\n  license: mit\n---\nlicense: apache-2.0\n": "",
		"---\nlicense: \"MIT\"\n---\n":                                  "MIT",
	} {
		assert.Equal(t, want, FromModelCard(card), card)
	}
}
