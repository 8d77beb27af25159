package fetch

import (
	"errors"
	"fmt"
	"strings"

	"github.com/da3-go/da3-go/internal/licence"
)

// ErrNotPublished is returned (wrapped) for a name of Unpublished: an
// official checkpoint with no published GGUF file to download.
var ErrNotPublished = errors.New("no published GGUF yet")

// unpublished are the retrained "-1.1" checkpoints the official Depth
// Anything 3 repository recommends. No GGUF of them is published with a
// known SHA-256, so they cannot be downloaded; they are listed so that
// their names give a clear answer instead of "unknown model".
var unpublished = []Model{
	{Name: "da3-large-1.1", Family: "da3", Licence: licence.CCBYNC4, NonCommercial: true,
		Source: licence.RepoURL("depth-anything/DA3-LARGE-1.1")},
	{Name: "da3-giant-1.1", Family: "da3", Licence: licence.CCBYNC4, NonCommercial: true,
		Source: licence.RepoURL("depth-anything/DA3-GIANT-1.1")},
	{Name: "da3-nested-1.1", Aliases: []string{"da3nested-giant-large-1.1"}, Family: "da3-nested", Licence: licence.CCBYNC4,
		NonCommercial: true, Source: licence.RepoURL("depth-anything/DA3NESTED-GIANT-LARGE-1.1")},
}

// Unpublished lists the official checkpoints that have names but no
// published GGUF file (File and SHA256 are empty): Resolve and Fetch
// answer them with ErrNotPublished, which says to convert the checkpoint.
func Unpublished() []Model {
	out := make([]Model, len(unpublished))
	for i, m := range unpublished {
		m.Aliases = append([]string(nil), m.Aliases...)
		out[i] = m
	}
	return out
}

// lookupUnpublished finds an unpublished model by name or alias, ignoring case.
func lookupUnpublished(name string) (Model, bool) {
	name = strings.TrimSpace(name)
	for _, m := range unpublished {
		for _, n := range append([]string{m.Name}, m.Aliases...) {
			if strings.EqualFold(n, name) {
				return m, true
			}
		}
	}
	return Model{}, false
}

// notPublishedError explains how to get a model of Unpublished.
func notPublishedError(m Model) error {
	repo := m.Source[strings.LastIndexByte(m.Source, '/')+1:]
	return fmt.Errorf("model %s: %w: convert the official checkpoint with `da3-go convert` "+
		"(download %s, then: da3-go convert %s/ %s.gguf)", m.Name, ErrNotPublished, m.Source, repo, m.Name)
}
