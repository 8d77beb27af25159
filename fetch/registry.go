package fetch

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/da3-go/da3-go/internal/licence"
)

// Model is one published GGUF file and the friendly names that select it.
type Model struct {
	Name    string   `json:"name"`              // canonical friendly name, e.g. "da2-small"
	Aliases []string `json:"aliases,omitempty"` // other names for the same file, e.g. "da2-small-f32"
	Family  string   `json:"family"`            // da2, da2-metric, da3, da3-mono, da3-metric, da3-nested
	File    string   `json:"file"`              // file name in the repository and in the cache
	SHA256  string   `json:"sha256"`            // lower-case hex digest of the whole file
	// Licence is the SPDX identifier of the weights' licence, the licence
	// of the official checkpoint the file was converted from.
	Licence string `json:"licence"`
	// NonCommercial is set for licences that forbid commercial use
	// (CC-BY-NC-4.0).
	NonCommercial bool `json:"non_commercial"`
	// Source is the Hugging Face page of the official checkpoint.
	Source string `json:"source"`
}

// ErrUnknownModel is returned (wrapped) when a name is neither a file nor a
// published model.
var ErrUnknownModel = errors.New("unknown model")

// Names returns the published models in listing order: family, then size,
// then weight type (f32 first).
func Names() []Model {
	r := published_()
	out := make([]Model, len(r.models))
	for i, m := range r.models {
		m.Aliases = slices.Clone(m.Aliases)
		out[i] = m
	}
	return out
}

// Lookup finds a published model by friendly name, alias or file name
// (with or without ".gguf"), ignoring case.
func Lookup(name string) (Model, bool) { return published_().lookup(name) }

// registry indexes models by every name that selects them.
type registry struct {
	models []Model
	byName map[string]int
}

// newRegistry indexes models. Every name, alias and file must be unique.
func newRegistry(models []Model) (*registry, error) {
	r := &registry{models: models, byName: map[string]int{}}
	for i, m := range models {
		keys := append([]string{m.Name, m.File, strings.TrimSuffix(m.File, ".gguf")}, m.Aliases...)
		for _, k := range keys {
			k = strings.ToLower(k)
			if j, dup := r.byName[k]; dup && j != i {
				return nil, fmt.Errorf("name %q selects both %s and %s", k, models[j].File, m.File)
			}
			r.byName[k] = i
		}
	}
	return r, nil
}

func (r *registry) lookup(name string) (Model, bool) {
	i, ok := r.byName[strings.ToLower(strings.TrimSpace(name))]
	if !ok {
		return Model{}, false
	}
	return r.models[i], true
}

// suggest returns up to n friendly names close to name: names it is a
// prefix of, then names within a small edit distance, nearest first.
func (r *registry) suggest(name string, n int) []string {
	name = strings.ToLower(strings.TrimSpace(name))
	type cand struct {
		name string
		dist int
	}
	var cands []cand
	limit := max(2, len(name)/4)
	for _, m := range r.models {
		best := cand{dist: -1}
		for _, alias := range append([]string{m.Name}, m.Aliases...) {
			d := editDistance(name, alias)
			if strings.HasPrefix(alias, name) && len(name) >= 3 {
				d = 0
			}
			if d <= limit && (best.dist < 0 || d < best.dist) {
				best = cand{alias, d}
			}
		}
		if best.dist >= 0 {
			cands = append(cands, best)
		}
	}
	slices.SortStableFunc(cands, func(a, b cand) int { return cmp.Compare(a.dist, b.dist) })
	var out []string
	for _, c := range cands[:min(n, len(cands))] {
		out = append(out, c.name)
	}
	return out
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// published_ is the registry of the generated table, built once. A file the
// naming rules do not cover is a programmer error caught by the tests.
var published_ = sync.OnceValue(func() *registry {
	models, err := modelsFor(published)
	if err != nil {
		panic("fetch: published table: " + err.Error())
	}
	r, err := newRegistry(models)
	if err != nil {
		panic("fetch: published table: " + err.Error())
	}
	return r
})

// Listing order.
var (
	familyRank = []string{"da2", "da2-metric", "da3", "da3-mono", "da3-metric", "da3-nested"}
	sizeRank   = []string{"small", "base", "large", "giant"}
	typeRank   = []string{"f32", "f16", "q8_0", "q6_k", "q5_k", "q4_k"}
)

// modelsFor names every file of the table and sorts them for listing.
func modelsFor(files []publishedFile) ([]Model, error) {
	type ranked struct {
		m   Model
		key []int
	}
	var rs []ranked
	for _, f := range files {
		m, key, err := modelFor(f.file, f.sha256)
		if err != nil {
			return nil, err
		}
		rs = append(rs, ranked{m, key})
	}
	slices.SortStableFunc(rs, func(a, b ranked) int {
		if c := slices.Compare(a.key, b.key); c != 0 {
			return c
		}
		return strings.Compare(a.m.Name, b.m.Name)
	})
	out := make([]Model, len(rs))
	for i, r := range rs {
		out[i] = r.m
	}
	return out, nil
}

// modelFor derives the friendly names of one published file:
//
//	depth-anything2-SIZE-TYPE.gguf                 da2-SIZE[-TYPE]
//	depth-anything2-metric-hypersim-SIZE-TYPE.gguf da2-metric-indoor-SIZE[-TYPE]  (alias da2-metric-hypersim-…)
//	depth-anything2-metric-vkitti-SIZE-TYPE.gguf   da2-metric-outdoor-SIZE[-TYPE] (alias da2-metric-vkitti-…)
//	depth-anything-REST[-TYPE].gguf                da3-REST[-TYPE]
//
// TYPE f32 is the default and is left out of the canonical name; the name
// with an explicit "-f32" is an alias.
func modelFor(file, sha string) (Model, []int, error) {
	bad := func(why string) (Model, []int, error) {
		return Model{}, nil, fmt.Errorf("%s: %s", file, why)
	}
	stem, ok := strings.CutSuffix(file, ".gguf")
	if !ok {
		return bad("not a .gguf file")
	}
	// Split off the weight type when there is one.
	typ := ""
	if i := strings.LastIndexByte(stem, '-'); i >= 0 && slices.Contains(typeRank, stem[i+1:]) {
		stem, typ = stem[:i], stem[i+1:]
	}
	m := Model{File: file, SHA256: sha}
	var base []string // canonical name first, then aliases, all without type
	size := ""
	var kind licence.Kind
	switch {
	case strings.HasPrefix(stem, "depth-anything2-metric-"):
		rest := strings.TrimPrefix(stem, "depth-anything2-metric-")
		dataset, sz, ok := strings.Cut(rest, "-")
		if !ok || typ == "" {
			return bad("want depth-anything2-metric-DATASET-SIZE-TYPE.gguf")
		}
		scene := map[string]string{"hypersim": "indoor", "vkitti": "outdoor"}[dataset]
		if scene == "" {
			return bad("unknown metric dataset " + dataset)
		}
		m.Family, size = "da2-metric", sz
		kind = licence.Kind("da2-metric-" + dataset)
		base = []string{"da2-metric-" + scene + "-" + sz, "da2-metric-" + dataset + "-" + sz}
	case strings.HasPrefix(stem, "depth-anything2-"):
		sz := strings.TrimPrefix(stem, "depth-anything2-")
		if typ == "" {
			return bad("want depth-anything2-SIZE-TYPE.gguf")
		}
		m.Family, size = "da2", sz
		kind = licence.DA2
		base = []string{"da2-" + sz}
	case strings.HasPrefix(stem, "depth-anything-"):
		rest := strings.TrimPrefix(stem, "depth-anything-")
		variant, sz, _ := strings.Cut(rest, "-")
		switch variant {
		case "mono", "metric", "nested":
			m.Family = "da3-" + variant
			size = sz
		default:
			m.Family, size = "da3", rest
		}
		kind = licence.Kind(m.Family)
		base = []string{"da3-" + rest}
	default:
		return bad("unknown model family")
	}
	if !slices.Contains(sizeRank, size) && m.Family != "da3-nested" {
		return bad("unknown size " + size)
	}
	ck, ok := licence.Of(kind, size)
	if !ok || ck.Repo == "" {
		return bad("no official checkpoint known for " + string(kind) + " " + size)
	}
	m.Licence, m.NonCommercial, m.Source = ck.Licence, licence.NonCommercial(ck.Licence), ck.URL()
	for i, b := range base {
		names := []string{b}
		switch typ {
		case "", "f32":
			if typ == "f32" {
				names = append(names, b+"-f32")
			}
		default:
			names = []string{b + "-" + typ}
		}
		if i == 0 {
			m.Name, names = names[0], names[1:]
		}
		m.Aliases = append(m.Aliases, names...)
	}
	key := []int{rank(familyRank, m.Family), 0, rank(sizeRank, size), rank(typeRank, cmp.Or(typ, "f32"))}
	if strings.Contains(m.Name, "-outdoor-") {
		key[1] = 1
	}
	return m, key, nil
}

// rank is s's position in order, or len(order) when absent.
func rank(order []string, s string) int {
	if i := slices.Index(order, s); i >= 0 {
		return i
	}
	return len(order)
}

// Models lists the models opts select: Registry when set, else Names().
func (o Options) Models() []Model {
	if o.Registry == nil {
		return Names()
	}
	return slices.Clone(o.Registry)
}

// Lookup is the package Lookup over the models opts select.
func (o Options) Lookup(name string) (Model, bool) {
	r, err := o.registry()
	if err != nil {
		return Model{}, false
	}
	return r.lookup(name)
}
