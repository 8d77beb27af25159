package stream

import "fmt"

// Window is one window of a streamed run: frames [Start, End) run as one scene. The merged outputs take
// frames [OwnStart, OwnEnd) from it: the frames two consecutive windows share are split at the middle,
// so that each frame comes from the window in which it is further from the edge.
type Window struct {
	Index            int
	Start, End       int
	OwnStart, OwnEnd int
}

// Len is the number of frames the window runs.
func (w Window) Len() int { return w.End - w.Start }

// Plan cuts frames into windows of size frames with overlap shared frames between consecutive windows
// (upstream's da3_streaming steps by size − overlap). The last window is moved back to end at the last
// frame, so every window runs size frames (one graph shape for the whole run) and the last one shares
// overlap or more with the one before it. size ≥ frames gives one window.
func Plan(frames, size, overlap int) ([]Window, error) {
	switch {
	case frames < 1:
		return nil, fmt.Errorf("plan: %d frames", frames)
	case size < 2 && frames > 1:
		return nil, fmt.Errorf("plan: windows of %d frame(s): a window needs 2 or more", size)
	case frames > size && (overlap < 1 || overlap >= size):
		return nil, fmt.Errorf("plan: overlap %d must be at least 1 and less than the window of %d frames (consecutive windows are aligned on the frames they share)", overlap, size)
	}
	if frames <= size {
		return []Window{{Start: 0, End: frames, OwnStart: 0, OwnEnd: frames}}, nil
	}
	step := size - overlap
	var ws []Window
	for start := 0; ; start += step {
		if start+size >= frames {
			start = frames - size
		}
		ws = append(ws, Window{Index: len(ws), Start: start, End: start + size})
		if start+size == frames {
			break
		}
	}
	for i := range ws {
		ws[i].OwnStart, ws[i].OwnEnd = ws[i].Start, ws[i].End
		if i > 0 {
			// The shared frames [ws[i].Start, ws[i-1].End): the first half (rounded up) stays with i−1.
			mid := ws[i].Start + (ws[i-1].End-ws[i].Start+1)/2
			ws[i-1].OwnEnd, ws[i].OwnStart = mid, mid
		}
	}
	return ws, nil
}
