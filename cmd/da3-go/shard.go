package main

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// shard is -shard i/n: the run keeps the inputs whose key hashes to i
// modulo n (0 ≤ i < n); the zero shard (n = 0) keeps every input.
type shard struct{ i, n int }

// parseShard parses -shard "i/n", 0-based (Slurm's array task id and
// Kubernetes' completion index both start at 0); "" is no sharding.
func parseShard(s string) (shard, error) {
	if s == "" {
		return shard{}, nil
	}
	a, b, ok := strings.Cut(strings.TrimSpace(s), "/")
	i, err1 := strconv.Atoi(strings.TrimSpace(a))
	n, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return shard{}, fmt.Errorf("-shard %q: want i/n with 0 ≤ i < n, 0-based (the 4 shards of a job are 0/4, 1/4, 2/4 and 3/4)", s)
	}
	return shard{i, n}, nil
}

func (s shard) String() string { return fmt.Sprintf("%d/%d", s.i, s.n) }

// shardOf is the shard, of n, that key belongs to: FNV-1a 64 of the key
// modulo n. Every key is in exactly one shard, whatever the other keys.
func shardOf(key string, n int) int {
	h := fnv.New64a()
	h.Write([]byte(key))
	return int(h.Sum64() % uint64(n))
}

// shardKeys are the keys inputs are sharded by: each name's path relative
// to the directory holding every input, with forward slashes, so that
// machines that mount the inputs at different places agree.
func shardKeys(names []string) []string {
	common := commonDir(names)
	keys := make([]string, len(names))
	for i, n := range names {
		k, err := filepath.Rel(common, absPath(n))
		if err != nil {
			k = n
		}
		keys[i] = filepath.ToSlash(k)
	}
	return keys
}

// selectShard returns the indices of the names in shard s (all of them for
// the zero shard), in order.
func selectShard(names []string, s shard) []int {
	var keep []int
	keys := shardKeys(names)
	for i := range names {
		if s.n == 0 || shardOf(keys[i], s.n) == s.i {
			keep = append(keep, i)
		}
	}
	return keep
}

// outputsExist reports whether every output is a non-empty regular file
// (a symbolic link or an empty file, as an interrupted copy may leave, is
// not a finished output).
func outputsExist(outs []mapOutput) bool {
	for _, o := range outs {
		fi, err := os.Lstat(o.path)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
			return false
		}
	}
	return len(outs) > 0
}

// errNothingToRun ends a run before the model loads with success: every
// input was left out (another shard's, or its outputs exist).
var errNothingToRun = errors.New("nothing to run")
