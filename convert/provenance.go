package convert

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/da3-go/da3-go/internal/licence"
	"github.com/da3-go/da3-go/loader"
)

// Standard GGUF metadata keys (the GGUF specification's general.*) that
// Convert writes when it knows the checkpoint's licence and origin.
const (
	// KeyLicense is the SPDX identifier of the weights' licence.
	KeyLicense = "general.license"
	// KeySourceURL is the page of the checkpoint the file was converted from.
	KeySourceURL = "general.source.url"
)

// maxModelCard bounds the README.md read for its licence.
const maxModelCard = 1 << 20

// da2Kind is the Depth Anything V2 kind by the metric model's maximum
// depth: 20 m is the Hypersim (indoor) model, 80 m the VKITTI (outdoor) one.
func da2Kind(maxDepth float32) licence.Kind {
	switch {
	case maxDepth == 0:
		return licence.DA2
	case maxDepth == 20:
		return licence.DA2MetricIndoor
	case maxDepth == 80:
		return licence.DA2MetricOutdoor
	}
	return licence.DA2Metric
}

// provenanceKVs are the licence and source keys of one output, when known.
//
// The licence comes from the checkpoint's own model card when there is one:
// the "license:" of the front matter of README.md beside the weights (every
// official Hugging Face repository has one), else a "license" entry of
// config.json. Without either, it comes from the official licence of the
// model kind and size the layout matches (package internal/licence: DA3
// small/base and DA2 small are Apache-2.0, the larger ones CC-BY-NC-4.0).
// A layout of no official size (a test model, a custom width) gets no
// licence key. The source is the official repository of that kind and size.
func provenanceKVs(src string, c *Checkpoint, o *output) []loader.KeyValue {
	ck, known := licence.Of(o.kind, o.size)
	if o.kind == licence.DA3Mono && c.Config["model_name"] != "da3mono-large" {
		ck.Repo = "" // mono or metric: without config.json's model_name the layouts are the same
	}
	if known && ck.Repo != "" {
		// A retrained "-1.1" checkpoint has the layout of its original.
		if name := defaultName(src); strings.EqualFold(name, ck.Repo[strings.IndexByte(ck.Repo, '/')+1:]+"-1.1") {
			ck.Repo += "-1.1"
		}
	}
	lic := checkpointLicence(src, c)
	if lic == "" && known {
		lic = ck.Licence
	}
	var kv []loader.KeyValue
	if lic != "" {
		kv = append(kv, loader.KeyValue{Key: KeyLicense, Value: loader.ValueOf[string](lic)})
	}
	if known && ck.Repo != "" {
		kv = append(kv, loader.KeyValue{Key: KeySourceURL, Value: loader.ValueOf[string](ck.URL())})
	}
	return kv
}

// checkpointLicence is the licence the checkpoint states itself: its model
// card (README.md in the checkpoint's directory) or config.json, or "".
func checkpointLicence(src string, c *Checkpoint) string {
	dir := src
	if fi, err := os.Stat(src); err == nil && !fi.IsDir() {
		dir = filepath.Dir(src)
	}
	if b, err := readSmallFile(filepath.Join(dir, "README.md"), maxModelCard); err == nil {
		if lic := licence.FromModelCard(string(b)); lic != "" {
			return lic
		}
	}
	if lic, ok := c.Config["license"].(string); ok && strings.TrimSpace(lic) != "" {
		return licence.Normalize(lic)
	}
	return ""
}
