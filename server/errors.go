package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"syscall"
)

// apiError is an error answered to the client: an HTTP status, a kind (the
// metrics label and the JSON "type") and a message naming the problem.
type apiError struct {
	Status int
	Kind   string
	Msg    string
}

func (e *apiError) Error() string { return e.Msg }

// Error kinds and their statuses.
const (
	kindBadRequest    = "bad_request"        // 400: malformed body or options
	kindNotFound      = "not_found"          // 404
	kindMethod        = "method_not_allowed" // 405
	kindTooLarge      = "too_large"          // 413: body or image over the limits
	kindMediaType     = "unsupported_media"  // 415
	kindUnprocessable = "unprocessable"      // 422: well-formed, but not something the model can run
	kindQueueFull     = "queue_full"         // 503
	kindTimeout       = "timeout"            // 503
	kindDraining      = "shutting_down"      // 503
	kindCanceled      = "client_closed"      // client went away; nobody reads the answer
	kindInternal      = "internal"           // 500
)

// serverFault is the answer to an error of the server's own file system
// (a full disk, a temporary directory it cannot write): 507 for no space,
// else 500, naming no path of the server. It is nil for other errors.
func serverFault(err error) *apiError {
	var pe *fs.PathError
	var le *os.LinkError
	if !errors.As(err, &pe) && !errors.As(err, &le) && !errors.Is(err, syscall.ENOSPC) {
		return nil
	}
	if errors.Is(err, syscall.ENOSPC) {
		return errorf(http.StatusInsufficientStorage, kindInternal, "the server is out of disk space")
	}
	return errorf(http.StatusInternalServerError, kindInternal, "the server could not write a temporary file")
}

func errorf(status int, kind, format string, args ...any) *apiError {
	return &apiError{Status: status, Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *apiError {
	return errorf(http.StatusBadRequest, kindBadRequest, format, args...)
}

func unprocessable(format string, args ...any) *apiError {
	return errorf(http.StatusUnprocessableEntity, kindUnprocessable, format, args...)
}

func tooLarge(format string, args ...any) *apiError {
	return errorf(http.StatusRequestEntityTooLarge, kindTooLarge, format, args...)
}

// ErrorBody is the JSON body of every error answer:
// {"error": {"code": 422, "type": "unprocessable", "message": "..."}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail names the problem.
type ErrorDetail struct {
	Code    int    `json:"code"`
	Type    string `json:"type"`
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v) // the client may be gone; nothing to do then
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, ErrorBody{Error: ErrorDetail{Code: e.Status, Type: e.Kind, Message: e.Msg}})
}
