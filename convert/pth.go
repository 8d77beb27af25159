package convert

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/da3-go/da3-go/internal/safeio"
)

const (
	maxPickleSize   = 256 << 20 // data.pkl of a state dict is KBs to a few MB
	maxDeflatedSize = 8 << 30   // bound for one compressed storage entry
	maxDictDepth    = 6         // nesting searched for the state dict
)

// stateDictKeys are the wrapper keys under which training scripts store the
// state dict, in the order they are tried.
var stateDictKeys = []string{"state_dict", "model_state_dict", "model", "module", "net", "network"}

// OpenPth opens a PyTorch checkpoint in the zip format torch.save writes
// since 1.6 (<name>/data.pkl plus one <name>/data/<key> entry per storage).
// The pickle is evaluated by a small VM that understands state dicts and
// nothing else, so opening an untrusted file executes no code. The state dict
// is the top-level dict if it holds tensors, or else the first of
// "state_dict", "model_state_dict", "model", "module", "net", "network" (or
// the only dict-valued entry) that does, searched recursively; a common
// "module." prefix (DataParallel) is removed. Views with offsets or
// non-contiguous strides are materialised when read.
func OpenPth(path string) (*Checkpoint, error) {
	c, err := openPth(path)
	if err != nil {
		return nil, fmt.Errorf("open pth %s: %w", path, err)
	}
	return c, nil
}

func openPth(path string) (*Checkpoint, error) {
	f, fi, err := safeio.Open(path)
	if err != nil {
		return nil, err
	}
	var magic [4]byte
	if _, err := f.ReadAt(magic[:], 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("read magic: %w", err)
	}
	if isPickle(magic[:]) {
		f.Close()
		return nil, ErrLegacyPth
	}
	if string(magic[:]) != "PK\x03\x04" {
		f.Close()
		return nil, errors.New("not a zip archive (PyTorch checkpoints written by torch.save are zip files)")
	}
	c := newCheckpoint()
	c.closers = append(c.closers, f)
	if err := readPth(c, f, fi.Size()); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// ErrLegacyPth reports a checkpoint in torch.save's legacy format (before
// PyTorch 1.6: a bare pickle stream, not a zip archive).
var ErrLegacyPth = errors.New("legacy (non-zip) PyTorch pickle format is not supported: " +
	"re-save with torch.save(..., _use_new_zipfile_serialization=True)")

// isPickle tells a pickle stream by its PROTO opcode (protocols 2 to 5, which
// torch.save writes) and an opcode after it. A safetensors file cannot match:
// its first 8 bytes are the header length, whose third byte is at most 6 (the
// header is at most 100 MiB), and no opcode is below 0x20.
func isPickle(magic []byte) bool {
	return len(magic) >= 3 && magic[0] == opProto && magic[1] >= 2 && magic[1] <= 5 && magic[2] >= 0x20
}

func readPth(c *Checkpoint, f io.ReaderAt, size int64) error {
	zr, err := zip.NewReader(f, size)
	if err != nil {
		return fmt.Errorf("read zip: %w", err)
	}
	entries := map[string]*zip.File{}
	var pkl *zip.File
	for _, zf := range zr.File {
		entries[zf.Name] = zf
		dir, base, ok := strings.Cut(zf.Name, "/")
		if ok && base == "data.pkl" && !strings.Contains(dir, "/") {
			if pkl != nil {
				return errors.New("archive holds more than one data.pkl")
			}
			pkl = zf
		}
	}
	if pkl == nil {
		return errors.New("no <name>/data.pkl in the archive (not a torch.save checkpoint, or a TorchScript archive)")
	}
	prefix := strings.TrimSuffix(pkl.Name, "data.pkl")
	if bo, ok := entries[prefix+"byteorder"]; ok {
		b, err := readEntry(bo, 16)
		if err != nil {
			return fmt.Errorf("read byteorder: %w", err)
		}
		if s := strings.TrimSpace(string(b)); s != "little" {
			return fmt.Errorf("byte order %q is not supported (only little)", s)
		}
	}
	data, err := readEntry(pkl, maxPickleSize)
	if err != nil {
		return fmt.Errorf("read %s: %w", pkl.Name, err)
	}
	root, err := unpickle(data)
	if err != nil {
		return fmt.Errorf("%s: %w", pkl.Name, err)
	}
	sd, err := findStateDict(root, 0, map[*pyDict]bool{})
	if err != nil {
		return err
	}
	if sd == nil {
		return fmt.Errorf("no state dict (a dict of tensors) in %s; top level: %s", pkl.Name, describe(root))
	}
	storages := map[string]*storage{}
	dtypes := map[string]DType{}
	names := stateDictNames(sd)
	for i, k := range sd.keys {
		pt, ok := sd.vals[i].(*pyTensor)
		if !ok {
			if o, isObj := sd.vals[i].(*pyObject); isObj {
				return fmt.Errorf("state dict entry %v is an unsupported object %s", k, o.class)
			}
			continue // plain Python values (None, numbers, strings) carry no weights
		}
		name := names[i]
		st, ok := storages[pt.st.key]
		if !ok {
			st, err = openStorage(entries, prefix, f, size, pt.st)
			if err != nil {
				return fmt.Errorf("tensor %q: %w", name, err)
			}
			storages[pt.st.key] = st
			dtypes[pt.st.key] = pt.st.dtype
		} else if dtypes[pt.st.key] != pt.st.dtype {
			return fmt.Errorf("tensor %q: storage %s used as %v and %v", name, pt.st.key, dtypes[pt.st.key], pt.st.dtype)
		}
		t := &Tensor{Name: name, Shape: pt.shape, DType: pt.st.dtype, st: st, offset: pt.offset}
		if !isContiguous(pt.shape, pt.strides) {
			t.strides = pt.strides
		}
		if err := c.add(t); err != nil {
			return err
		}
	}
	if c.Len() == 0 {
		return errors.New("the state dict holds no tensors")
	}
	return nil
}

// stateDictNames returns the string keys of sd, without a "module." prefix
// shared by all tensor keys. Non-string keys yield "".
func stateDictNames(sd *pyDict) []string {
	names := make([]string, len(sd.keys))
	all := true
	for i, k := range sd.keys {
		s, _ := k.(string)
		names[i] = s
		if _, isT := sd.vals[i].(*pyTensor); isT && !strings.HasPrefix(s, "module.") {
			all = false
		}
	}
	if all {
		for i := range names {
			names[i] = strings.TrimPrefix(names[i], "module.")
		}
	}
	return names
}

// findStateDict returns the dict of tensors inside v (see OpenPth), or nil.
func findStateDict(v any, depth int, seen map[*pyDict]bool) (*pyDict, error) {
	d, ok := v.(*pyDict)
	if !ok || depth > maxDictDepth || seen[d] { // memo references can make cycles
		return nil, nil
	}
	seen[d] = true
	for i, val := range d.vals {
		if _, isT := val.(*pyTensor); isT {
			if _, isStr := d.keys[i].(string); !isStr {
				return nil, fmt.Errorf("state dict key %v is not a string", d.keys[i])
			}
			return d, nil
		}
	}
	for _, k := range stateDictKeys {
		if sub, ok := d.get(k); ok {
			sd, err := findStateDict(sub, depth+1, seen)
			if sd != nil || err != nil {
				return sd, err
			}
		}
	}
	var found *pyDict
	for _, val := range d.vals {
		sd, err := findStateDict(val, depth+1, seen)
		if err != nil {
			return nil, err
		}
		if sd != nil {
			if found != nil {
				return nil, errors.New("several dicts of tensors found; cannot tell which is the state dict")
			}
			found = sd
		}
	}
	return found, nil
}

// describe summarises a pickle value for error messages.
func describe(v any) string {
	switch x := v.(type) {
	case *pyDict:
		var ks []string
		for _, k := range x.keys {
			ks = append(ks, fmt.Sprint(k))
			if len(ks) == 10 {
				ks = append(ks, "...")
				break
			}
		}
		return fmt.Sprintf("dict with keys [%s]", strings.Join(ks, ", "))
	case *pyObject:
		return "object " + x.class.String()
	case nil:
		return "None"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// openStorage locates the zip entry of a storage and checks its size.
func openStorage(entries map[string]*zip.File, prefix string, f io.ReaderAt, size int64, ps *pyStorage) (*storage, error) {
	zf, ok := entries[prefix+"data/"+ps.key]
	if !ok {
		return nil, fmt.Errorf("storage %s: no entry %sdata/%s in the archive", ps.key, prefix, ps.key)
	}
	es := int64(ps.dtype.Size())
	if ps.numel > (1<<62)/es {
		return nil, fmt.Errorf("storage %s: %d elements is too large", ps.key, ps.numel)
	}
	need := ps.numel * es
	if zf.UncompressedSize64 < uint64(need) {
		return nil, fmt.Errorf("storage %s: entry holds %d bytes, %d elements of %v need %d (truncated?)",
			ps.key, zf.UncompressedSize64, ps.numel, ps.dtype, need)
	}
	if zf.Method == zip.Store {
		off, err := zf.DataOffset()
		if err != nil {
			return nil, fmt.Errorf("storage %s: %w", ps.key, err)
		}
		if zf.CompressedSize64 != zf.UncompressedSize64 || off < 0 || off > size || need > size-off {
			return nil, fmt.Errorf("storage %s: stored entry of %d bytes at %d lies outside the %d-byte file (truncated?)",
				ps.key, zf.CompressedSize64, off, size)
		}
		return &storage{ra: f, base: off, size: need}, nil
	}
	if need > maxDeflatedSize {
		return nil, fmt.Errorf("storage %s: compressed storage of %d bytes exceeds the %d-byte limit", ps.key, need, int64(maxDeflatedSize))
	}
	return &storage{size: need, open: func() ([]byte, error) {
		b, err := readEntry(zf, need)
		if err != nil {
			return nil, fmt.Errorf("storage %s: %w", ps.key, err)
		}
		if int64(len(b)) < need {
			return nil, fmt.Errorf("storage %s: %d bytes, want %d", ps.key, len(b), need)
		}
		return b[:need], nil
	}}, nil
}

// readEntry reads a whole zip entry of at most limit bytes.
func readEntry(zf *zip.File, limit int64) ([]byte, error) {
	if zf.UncompressedSize64 > uint64(limit) {
		return nil, fmt.Errorf("entry %s of %d bytes exceeds the %d-byte limit", zf.Name, zf.UncompressedSize64, limit)
	}
	rc, err := zf.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, io.LimitReader(rc, limit)); err != nil {
		return nil, err
	}
	return slices.Clip(buf.Bytes()), nil
}
