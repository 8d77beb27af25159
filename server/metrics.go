package server

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// latencyBuckets are the upper bounds (seconds) of the latency histograms.
var latencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// histogram is a Prometheus histogram without labels of its own.
type histogram struct {
	counts []uint64 // per bucket, not cumulative; the last is +Inf
	sum    float64
	n      uint64
}

func (h *histogram) observe(v float64) {
	if h.counts == nil {
		h.counts = make([]uint64, len(latencyBuckets)+1)
	}
	i := sort.SearchFloat64s(latencyBuckets, v)
	h.counts[i]++
	h.sum += v
	h.n++
}

// metrics collects the server's counters and histograms and writes them in
// the Prometheus text exposition format (version 0.0.4).
type metrics struct {
	mu        sync.Mutex
	requests  map[[2]string]uint64  // {handler, code}
	errors    map[string]uint64     // error kind
	latency   map[string]*histogram // handler
	inference map[string]*histogram // model
	images    uint64
	start     time.Time
}

func newMetrics() *metrics {
	return &metrics{requests: map[[2]string]uint64{}, errors: map[string]uint64{},
		latency: map[string]*histogram{}, inference: map[string]*histogram{}, start: time.Now()}
}

func (m *metrics) request(handler string, code int, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests[[2]string{handler, strconv.Itoa(code)}]++
	h := m.latency[handler]
	if h == nil {
		h = &histogram{}
		m.latency[handler] = h
	}
	h.observe(d.Seconds())
}

func (m *metrics) error(kind string) {
	m.mu.Lock()
	m.errors[kind]++
	m.mu.Unlock()
}

func (m *metrics) run(model string, images int, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.inference[model]
	if h == nil {
		h = &histogram{}
		m.inference[model] = h
	}
	h.observe(d.Seconds())
	m.images += uint64(images)
}

// write writes every metric; pools supply the per-model gauges.
func (m *metrics) write(w io.Writer, pools []*pool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }

	p("# HELP da3_http_requests_total HTTP requests answered, by handler and status code.\n# TYPE da3_http_requests_total counter\n")
	keys := make([][2]string, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	for _, k := range keys {
		p("da3_http_requests_total{handler=%q,code=%q} %d\n", k[0], k[1], m.requests[k])
	}

	p("# HELP da3_errors_total Requests that failed, by kind.\n# TYPE da3_errors_total counter\n")
	for _, k := range sortedKeys(m.errors) {
		p("da3_errors_total{kind=%q} %d\n", k, m.errors[k])
	}

	p("# HELP da3_request_duration_seconds Time from request to response, by handler.\n# TYPE da3_request_duration_seconds histogram\n")
	for _, k := range sortedKeys(m.latency) {
		writeHistogram(w, "da3_request_duration_seconds", "handler", k, m.latency[k])
	}
	p("# HELP da3_inference_duration_seconds Model run time (queue excluded), by model.\n# TYPE da3_inference_duration_seconds histogram\n")
	for _, k := range sortedKeys(m.inference) {
		writeHistogram(w, "da3_inference_duration_seconds", "model", k, m.inference[k])
	}
	p("# HELP da3_images_total Images (views) processed.\n# TYPE da3_images_total counter\nda3_images_total %d\n", m.images)

	p("# HELP da3_queue_length Requests waiting for a model instance.\n# TYPE da3_queue_length gauge\n")
	for _, pl := range pools {
		p("da3_queue_length{model=%q} %d\n", pl.info.Name, pl.waiting.Load())
	}
	p("# HELP da3_runs_in_flight Model runs in progress.\n# TYPE da3_runs_in_flight gauge\n")
	for _, pl := range pools {
		p("da3_runs_in_flight{model=%q} %d\n", pl.info.Name, pl.running.Load())
	}
	p("# HELP da3_model_weight_bytes Size of each model's weights (one instance).\n# TYPE da3_model_weight_bytes gauge\n")
	for _, pl := range pools {
		p("da3_model_weight_bytes{model=%q,device=%q} %d\n", pl.info.Name, pl.info.Device, pl.info.WeightBytes)
	}

	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p("# HELP process_resident_memory_bytes Resident memory size in bytes.\n# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %d\n", residentBytes())
	p("# HELP process_start_time_seconds Start time of the process since the Unix epoch.\n# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %d\n", m.start.Unix())
	p("# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines %d\n", runtime.NumGoroutine())
	p("# HELP go_memstats_heap_alloc_bytes Go heap bytes allocated and in use.\n# TYPE go_memstats_heap_alloc_bytes gauge\ngo_memstats_heap_alloc_bytes %d\n", ms.HeapAlloc)
}

func writeHistogram(w io.Writer, name, label, value string, h *histogram) {
	var cum uint64
	for i, le := range latencyBuckets {
		cum += h.counts[i]
		fmt.Fprintf(w, "%s_bucket{%s=%q,le=%q} %d\n", name, label, value, strconv.FormatFloat(le, 'g', -1, 64), cum)
	}
	cum += h.counts[len(latencyBuckets)]
	fmt.Fprintf(w, "%s_bucket{%s=%q,le=\"+Inf\"} %d\n", name, label, value, cum)
	fmt.Fprintf(w, "%s_sum{%s=%q} %g\n", name, label, value, h.sum)
	fmt.Fprintf(w, "%s_count{%s=%q} %d\n", name, label, value, h.n)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// residentBytes is the process's resident set size (VmRSS), 0 where
// /proc is not available.
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}
