package convert

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/da3-go/da3-go/internal/safeio"
)

const maxConfigSize = 4 << 20

// OpenCheckpoint opens src, which is one of:
//   - a PyTorch .pth/.pt file (zip format, see OpenPth);
//   - a .safetensors file, with config.json read from the same directory
//     when present;
//   - a sharded safetensors index (*.safetensors.index.json);
//   - a directory holding model.safetensors (or a sharded index, or exactly
//     one .safetensors or .pth file) and optionally config.json.
//
// The file format is recognised by content, not by extension.
func OpenCheckpoint(src string) (*Checkpoint, error) {
	c, err := openCheckpoint(src)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint %s: %w", src, err)
	}
	return c, nil
}

func openCheckpoint(src string) (*Checkpoint, error) {
	fi, err := os.Stat(src)
	if err != nil {
		return nil, err
	}
	path := src
	if fi.IsDir() {
		path, err = pickCheckpointFile(src)
		if err != nil {
			return nil, err
		}
	}
	var c *Checkpoint
	isSafetensors := false
	switch {
	case strings.HasSuffix(path, ".index.json"):
		c, err = openShardedSafetensors(path)
		isSafetensors = true
	default:
		var pth bool
		pth, err = isPth(path)
		if err != nil {
			return nil, err
		}
		if pth {
			c, err = OpenPth(path)
		} else {
			c, err = OpenSafetensors(path)
			isSafetensors = true
		}
	}
	if err != nil {
		return nil, err
	}
	if isSafetensors {
		cfg, err := readConfig(filepath.Join(filepath.Dir(path), "config.json"))
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Config = cfg
	}
	return c, nil
}

// isPth tells PyTorch checkpoints (a zip archive, or the legacy format: a
// pickle, which OpenPth reports as such) from safetensors files.
func isPth(path string) (bool, error) {
	f, _, err := safeio.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return false, fmt.Errorf("%s: file too short to be a checkpoint", path)
		}
		return false, err
	}
	return string(magic[:]) == "PK\x03\x04" || isPickle(magic[:]), nil
}

// pickCheckpointFile chooses the weights file inside a model directory.
func pickCheckpointFile(dir string) (string, error) {
	for _, name := range []string{"model.safetensors.index.json", "model.safetensors"} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var cands []string
	for _, e := range ents {
		n := e.Name()
		if e.Type().IsRegular() && (strings.HasSuffix(n, ".safetensors") || strings.HasSuffix(n, ".pth") || strings.HasSuffix(n, ".pt")) {
			cands = append(cands, n)
		}
	}
	switch len(cands) {
	case 1:
		return filepath.Join(dir, cands[0]), nil
	case 0:
		return "", errors.New("directory holds no model.safetensors, .safetensors or .pth file")
	}
	return "", fmt.Errorf("directory holds several checkpoints (%s): name one", strings.Join(cands, ", "))
}

// openShardedSafetensors opens every shard named by a safetensors index.
func openShardedSafetensors(index string) (*Checkpoint, error) {
	b, err := readSmallFile(index, maxConfigSize)
	if err != nil {
		return nil, err
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("%s: %w", index, err)
	}
	var shards []string
	for _, f := range idx.WeightMap {
		if f != filepath.Base(f) || f == "." || f == ".." {
			return nil, fmt.Errorf("%s: shard name %q is not a plain file name", index, f)
		}
		if !slices.Contains(shards, f) {
			shards = append(shards, f)
		}
	}
	if len(shards) == 0 {
		return nil, fmt.Errorf("%s: empty weight_map", index)
	}
	slices.Sort(shards)
	c := newCheckpoint()
	for _, s := range shards {
		p := filepath.Join(filepath.Dir(index), s)
		f, err := os.Open(p)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.closers = append(c.closers, f)
		fi, err := f.Stat()
		if err == nil {
			err = readSafetensors(c, f, fi.Size())
		}
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("shard %s: %w", p, err)
		}
	}
	for name, f := range idx.WeightMap {
		if _, ok := c.Tensor(name); !ok {
			c.Close()
			return nil, fmt.Errorf("%s: tensor %q listed for %s is not in any shard", index, name, f)
		}
	}
	return c, nil
}

// readConfig parses a JSON config file; a missing file yields nil.
func readConfig(path string) (map[string]any, error) {
	b, err := readSmallFile(path, maxConfigSize)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

func readSmallFile(path string, limit int64) ([]byte, error) { return safeio.ReadFile(path, limit) }

// defaultName derives a checkpoint name from the source path: the directory
// name for a model directory or a model.safetensors inside one (resolving a
// Hugging Face cache snapshot to its repository name), else the file name
// without extension.
func defaultName(src string) string {
	abs, err := filepath.Abs(src)
	if err != nil {
		abs = src
	}
	dir := abs
	if fi, err := os.Stat(abs); err == nil && !fi.IsDir() {
		base := filepath.Base(abs)
		if base != "model.safetensors" && !strings.HasSuffix(base, ".index.json") {
			return strings.TrimSuffix(base, filepath.Ext(base))
		}
		dir = filepath.Dir(abs)
	}
	// ~/.cache/huggingface/hub/models--ORG--NAME/snapshots/<hash>
	if parent := filepath.Dir(dir); filepath.Base(parent) == "snapshots" {
		repo := filepath.Base(filepath.Dir(parent))
		if i := strings.LastIndex(repo, "--"); strings.HasPrefix(repo, "models--") && i >= 0 {
			return repo[i+2:]
		}
	}
	return filepath.Base(dir)
}
