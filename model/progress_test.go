package model_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/da3-go/da3-go/backend"
	"github.com/da3-go/da3-go/model"
)

// progressLog records a run's Progress reports: the graphs in the order
// they started, and each graph's last report.
type progressLog struct {
	mu     sync.Mutex
	graphs []string
	last   map[string]model.Progress
}

func (l *progressLog) tell(p model.Progress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := fmt.Sprintf("%s %d/%d", p.Stage, p.Part, p.Parts)
	if _, ok := l.last[key]; !ok {
		l.graphs = append(l.graphs, key)
	}
	l.last[key] = p
}

// TestRunProgress: a run tells RunOptions.Progress about each of its graphs
// (one fused graph for a scene within a chunk, backbone then head chunks
// beyond it, batches of independent images), each ending with Done ==
// Total > 0.
func TestRunProgress(t *testing.T) {
	m, err := model.Load(context.Background(), tinyModel(), model.Options{Options: backend.Options{Device: "cpu", Threads: 1}})
	require.NoError(t, err)
	defer m.Close()
	three := []model.Image{photo(64, 48), photo(64, 48), photo(64, 48)}
	for _, tc := range []struct {
		name string
		run  func(opt model.RunOptions) error
		want []string
	}{
		{"two views in one chunk", func(opt model.RunOptions) error {
			_, err := m.MultiView(context.Background(), three[:2], opt)
			return err
		}, []string{"network 1/1"}},
		{"three views in chunks of two", func(opt model.RunOptions) error {
			opt.ChunkSize = 2
			_, err := m.MultiView(context.Background(), three, opt)
			return err
		}, []string{"backbone 1/1", "heads 1/2", "heads 2/2"}},
		{"three independent images in batches of two", func(opt model.RunOptions) error {
			opt.ChunkSize = 2
			_, err := m.Independent(context.Background(), three, opt)
			return err
		}, []string{"batch 1/2", "batch 2/2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &progressLog{last: map[string]model.Progress{}}
			require.NoError(t, tc.run(model.RunOptions{ProcessRes: 56, Progress: log.tell}))
			graphs := log.graphs
			if len(graphs) > 0 && graphs[0] == "reference view 1/1" {
				graphs = graphs[1:] // models with a camera token choose the reference view first
			}
			assert.Equal(t, tc.want, graphs)
			for key, p := range log.last {
				assert.Positive(t, p.Total, key)
				assert.Equal(t, p.Total, p.Done, "%s ends complete", key)
			}
		})
	}
}
