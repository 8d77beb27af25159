package server

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// errQueueFull reports a request refused because the queue is full.
var errQueueFull = errors.New("queue full")

// pool holds the loaded instances of one model and the bounded queue of the
// requests waiting for one. A request takes a free instance, runs, and gives
// it back; when none is free it waits in the queue, unless the queue already
// holds maxQueue requests.
type pool struct {
	info     ModelInfo
	all      []*instance
	free     chan *instance
	maxQueue int64
	waiting  atomic.Int64
	running  atomic.Int64
	closeMu  sync.Mutex
	closed   bool
}

func newPool(info ModelInfo, insts []*instance, maxQueue int) *pool {
	p := &pool{info: info, all: insts, free: make(chan *instance, len(insts)), maxQueue: int64(maxQueue)}
	for _, in := range insts {
		p.free <- in
	}
	p.info.Instances = len(insts)
	p.info.Exports = exportsFor(p.info)
	return p
}

// acquire waits for a free instance. It fails with errQueueFull at once when
// maxQueue requests already wait, and with ctx's error when ctx ends first.
func (p *pool) acquire(ctx context.Context) (*instance, error) {
	select { // a free instance needs no queue slot
	case in := <-p.free:
		p.running.Add(1)
		return in, nil
	default:
	}
	if p.waiting.Add(1) > p.maxQueue {
		p.waiting.Add(-1)
		return nil, errQueueFull
	}
	defer p.waiting.Add(-1)
	select {
	case in := <-p.free:
		p.running.Add(1)
		return in, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *pool) release(in *instance) {
	p.running.Add(-1)
	p.free <- in
}

// close waits for the runs in flight and frees every instance.
func (p *pool) close() error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	for range p.all {
		in := <-p.free
		errs = append(errs, in.close())
	}
	return errors.Join(errs...)
}
