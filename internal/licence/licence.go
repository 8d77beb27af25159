// Package licence knows the licences and the official Hugging Face
// repositories of the Depth Anything checkpoints, so that the published
// model table (package fetch), the converter (package convert) and the
// command can say which licence a model's weights carry.
//
// The facts, from the official repositories' model tables (Depth Anything 3's
// README, Depth Anything V2's README):
//
//	DA3-SMALL, DA3-BASE, DA3MONO-LARGE, DA3METRIC-LARGE     Apache-2.0
//	DA3-LARGE, DA3-GIANT, DA3NESTED-GIANT-LARGE (and their
//	retrained -1.1 checkpoints)                             CC-BY-NC-4.0
//	Depth-Anything-V2-Small (relative, metric Hypersim/VKITTI)  Apache-2.0
//	Depth-Anything-V2-Base/Large (relative and metric)      CC-BY-NC-4.0
//
// A GGUF converted from a checkpoint carries the checkpoint's licence.
package licence

import (
	"strings"
)

// SPDX identifiers of the licences the checkpoints use.
const (
	Apache2 = "Apache-2.0"
	CCBYNC4 = "CC-BY-NC-4.0"
)

// Kind is a model kind of the official checkpoints.
type Kind string

// Model kinds.
const (
	DA3              Kind = "da3"                 // any-view DA3-SIZE
	DA3Mono          Kind = "da3-mono"            // DA3MONO-LARGE
	DA3Metric        Kind = "da3-metric"          // DA3METRIC-LARGE
	DA3Nested        Kind = "da3-nested"          // DA3NESTED-GIANT-LARGE (size ignored)
	DA2              Kind = "da2"                 // Depth-Anything-V2-SIZE
	DA2MetricIndoor  Kind = "da2-metric-hypersim" // Depth-Anything-V2-Metric-Hypersim-SIZE
	DA2MetricOutdoor Kind = "da2-metric-vkitti"   // Depth-Anything-V2-Metric-VKITTI-SIZE
	DA2Metric        Kind = "da2-metric"          // a DA2 metric model of unknown training set
)

// Checkpoint is what is known of one official checkpoint.
type Checkpoint struct {
	// Repo is the Hugging Face repository, "depth-anything/DA3-SMALL"; empty
	// when the kind does not name one (DA2Metric).
	Repo string
	// Licence is the SPDX identifier of the weights' licence.
	Licence string
}

// URL is the repository's address on Hugging Face, or "" without a Repo.
func (c Checkpoint) URL() string {
	if c.Repo == "" {
		return ""
	}
	return RepoURL(c.Repo)
}

// RepoURL is the address of a Hugging Face repository "org/name".
func RepoURL(repo string) string { return "https://huggingface.co/" + repo }

// NonCommercial reports whether the licence forbids commercial use (the
// Creative Commons NC licences).
func NonCommercial(spdx string) bool {
	return strings.Contains(strings.ToUpper(spdx), "-NC")
}

// Of returns the checkpoint of a kind and size (small, base, large,
// giant), and false for a combination no official checkpoint has.
func Of(kind Kind, size string) (Checkpoint, bool) {
	size = strings.ToLower(size)
	da2 := map[string]string{"small": "Small", "base": "Base", "large": "Large"}
	switch kind {
	case DA3:
		switch size {
		case "small", "base":
			return Checkpoint{"depth-anything/DA3-" + strings.ToUpper(size), Apache2}, true
		case "large", "giant":
			return Checkpoint{"depth-anything/DA3-" + strings.ToUpper(size), CCBYNC4}, true
		}
	case DA3Mono, DA3Metric:
		if size == "large" {
			return Checkpoint{"depth-anything/DA3" + strings.ToUpper(strings.TrimPrefix(string(kind), "da3-")) + "-LARGE", Apache2}, true
		}
	case DA3Nested:
		return Checkpoint{"depth-anything/DA3NESTED-GIANT-LARGE", CCBYNC4}, true
	case DA2, DA2MetricIndoor, DA2MetricOutdoor, DA2Metric:
		sz, ok := da2[size]
		if !ok {
			break
		}
		lic := CCBYNC4
		if size == "small" {
			lic = Apache2
		}
		repo := ""
		switch kind {
		case DA2:
			repo = "depth-anything/Depth-Anything-V2-" + sz
		case DA2MetricIndoor:
			repo = "depth-anything/Depth-Anything-V2-Metric-Hypersim-" + sz
		case DA2MetricOutdoor:
			repo = "depth-anything/Depth-Anything-V2-Metric-VKITTI-" + sz
		}
		return Checkpoint{repo, lic}, true
	}
	return Checkpoint{}, false
}

// SizeOfWidth is the size name of a DINOv2 backbone by its embedding
// width, or "" for a width no official model has.
func SizeOfWidth(embedDim int) string {
	switch embedDim {
	case 384:
		return "small"
	case 768:
		return "base"
	case 1024:
		return "large"
	case 1536:
		return "giant"
	}
	return ""
}

// Normalize turns a licence as model cards write it (Hugging Face's
// lower-case ids: "apache-2.0", "cc-by-nc-4.0", "mit") into its SPDX
// spelling; an id it does not know is returned trimmed, as written.
func Normalize(id string) string {
	id = strings.TrimSpace(id)
	switch strings.ToLower(id) {
	case "apache-2.0":
		return Apache2
	case "mit":
		return "MIT"
	case "bsd-3-clause":
		return "BSD-3-Clause"
	case "openrail":
		return "OpenRAIL"
	}
	if l := strings.ToLower(id); strings.HasPrefix(l, "cc-") || strings.HasPrefix(l, "cc0") {
		return strings.ToUpper(id)
	}
	return id
}

// FromModelCard reads the licence from a Hugging Face model card
// (README.md): the "license:" entry of its YAML front matter, or its
// "license_name:" when the licence is "other". It returns "" when the card
// has none.
func FromModelCard(readme string) string {
	lines := strings.Split(strings.ReplaceAll(readme, "\r\n", "\n"), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != "---" {
		return ""
	}
	var lic, name string
	for _, l := range lines[1:] {
		if strings.TrimSpace(l) == "---" {
			break
		}
		key, val, ok := strings.Cut(l, ":")
		if !ok || strings.HasPrefix(key, " ") || strings.HasPrefix(key, "\t") {
			continue
		}
		val = strings.Trim(strings.TrimSpace(val), `"'`)
		switch strings.TrimSpace(key) {
		case "license":
			lic = val
		case "license_name":
			name = val
		}
	}
	if strings.EqualFold(lic, "other") && name != "" {
		lic = name
	}
	if lic == "" || strings.EqualFold(lic, "other") {
		return ""
	}
	return Normalize(lic)
}
