package elastic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// The engine's native resize routes and their bounds: a resize answers once the collective has
// been rebuilt, so the client waits long; an answer is read up to 1 MiB, redirects are not followed.
const (
	scalePath        = "/scale_elastic_ep"
	isScalingPath    = "/is_scaling_elastic_ep"
	engineTimeout    = 150 * time.Second
	answerLimit      = 1 << 20
	DrainTimeoutSecs = 120
)

// ScaleCommand is the body of POST /scale_elastic_ep.
type ScaleCommand struct {
	NewDataParallelSize int `json:"new_data_parallel_size"`
	DrainTimeout        int `json:"drain_timeout"`
}

// Answer is how the engine answered a resize command.
type Answer int

const (
	// Applied means a 200 carrying a string message; the engine runs the new size.
	Applied Answer = iota
	// Refused means the engine answered without applying it (503 reconfiguring, 408, 5xx, 400 or any other
	// status); it may be asked again.
	Refused
	// Unreachable means no connection was made, so the command never left.
	Unreachable
	// Lost means the command may have reached the engine and its answer is unknown (timeout, cancel, a
	// broken connection, an unreadable 200); it is never sent again.
	Lost
)

// Outcome is one command's answer and its words: the engine's message, or the error.
type Outcome struct {
	Answer Answer
	Detail string
}

// Engine speaks to an Elastic EP master's HTTP server.
type Engine struct {
	client *http.Client
}

// NewEngine is the engine client.
func NewEngine() *Engine {
	d := &net.Dialer{Timeout: 10 * time.Second}
	return &Engine{client: &http.Client{
		Timeout:       engineTimeout,
		Transport:     &http.Transport{DialContext: d.DialContext, Proxy: nil, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// Scale asks the master at address (host:port) to run target data-parallel engines.
func (e *Engine) Scale(ctx context.Context, address string, cmd ScaleCommand) Outcome {
	status, body, err := e.post(ctx, address, scalePath, cmd)
	switch {
	case err != nil && neverSent(err):
		return Outcome{Answer: Unreachable, Detail: err.Error()}
	case err != nil:
		return Outcome{Answer: Lost, Detail: err.Error()}
	case status != http.StatusOK:
		return Outcome{Answer: Refused, Detail: fmt.Sprintf("HTTP %d: %s", status, answerText(body))}
	}
	var a struct {
		Message *string `json:"message"`
	}
	if json.Unmarshal(body, &a) != nil || a.Message == nil {
		return Outcome{Answer: Lost, Detail: "HTTP 200 without a string message: " + answerText(body)}
	}
	return Outcome{Answer: Applied, Detail: *a.Message}
}

// IsScaling asks the master whether a resize is in flight.
func (e *Engine) IsScaling(ctx context.Context, address string) (bool, error) {
	status, body, err := e.post(ctx, address, isScalingPath, nil)
	if err != nil {
		return false, err
	}
	if status != http.StatusOK {
		return false, fmt.Errorf("%s answered HTTP %d: %s", isScalingPath, status, answerText(body))
	}
	var a struct {
		Scaling *bool `json:"is_scaling_elastic_ep"`
	}
	if json.Unmarshal(body, &a) != nil || a.Scaling == nil {
		return false, fmt.Errorf("%s answered without a boolean is_scaling_elastic_ep: %s", isScalingPath, answerText(body))
	}
	return *a.Scaling, nil
}

func (e *Engine) post(ctx context.Context, address, path string, body any) (int, []byte, error) {
	var payload io.Reader = http.NoBody
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		payload = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+address+path, payload)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	rsp, err := e.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = rsp.Body.Close() }()
	answer, err := io.ReadAll(io.LimitReader(rsp.Body, answerLimit+1))
	if err != nil {
		return 0, nil, err
	}
	if len(answer) > answerLimit {
		return 0, nil, fmt.Errorf("the answer to %s exceeds %d bytes", path, answerLimit)
	}
	return rsp.StatusCode, answer, nil
}

// neverSent reports an error of making the connection: the request never left.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// answerText is an answer's message (vLLM's error bodies carry one) or its first bytes.
func answerText(body []byte) string {
	var a struct {
		Message any `json:"message"`
		Error   any `json:"error"`
		Detail  any `json:"detail"`
	}
	if json.Unmarshal(body, &a) == nil {
		for _, v := range []any{a.Message, a.Error, a.Detail} {
			if s, ok := v.(string); ok && s != "" {
				return s
			}
		}
	}
	text := strings.TrimSpace(string(body))
	if len(text) > 512 {
		text = text[:512] + "..."
	}
	return text
}
