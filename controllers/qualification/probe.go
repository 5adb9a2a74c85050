package qualification

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// The group-forward probe's bounds: the whole replica within 15 s, an
// answer read up to 1 MiB.
const (
	ProbeBound     = 15 * time.Second
	probeAnswerCap = 1 << 20
)

// probedVersions are the engine versions whose answers the probe knows how to bind.
var probedVersions = map[workerv1.Engine][]string{
	workerv1.EngineVLLM:   {"0.25.1", "0.29.0"},
	workerv1.EngineSGLang: {"0.5.18", "0.5.21"},
}

// ProbedVersions are the versions of engine e (without a leading v) whose answers the probe binds.
func ProbedVersions(e workerv1.Engine) []string {
	return slices.Clone(probedVersions[e])
}

// ProbeSupport reports why a replica's group forwarding cannot be probed, "" when it can: only a
// Server role's managed members, of an engine version whose answer is known. The version is read
// from the tag of the member's own engine image (spec.engine.image: the API has no engine version
// field), with or without a leading v.
func ProbeSupport(e workerv1.Engine, kind workerv1.RoleKind, member *corev1.Pod) string {
	if kind != workerv1.RoleKindServer {
		return fmt.Sprintf("a %s role's group forwarding is not probed", kind)
	}
	if TakesOver([]*corev1.Pod{member}) {
		return "a take-over member is not probed"
	}
	version := engineVersion(member)
	if !slices.Contains(probedVersions[e], version) {
		return fmt.Sprintf("%s version %q is not one the probe reads (%s)", e, version, strings.Join(probedVersions[e], ", "))
	}
	return ""
}

// engineVersion is the tag of the member's engine image, without a leading v or a digest.
func engineVersion(p *corev1.Pod) string {
	for _, c := range p.Spec.Containers {
		if c.Name != naming.MainContainer {
			continue
		}
		ref, _, _ := strings.Cut(c.Image, "@")
		if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
			return strings.TrimPrefix(ref[i+1:], "v")
		}
	}
	return ""
}

// Generation is a replica's membership generation: its members' UIDs, sorted, joined by "/". A
// replaced member makes a new generation, which carries no earlier probe over.
func Generation(members []*corev1.Pod) string {
	uids := make([]string, 0, len(members))
	for _, p := range members {
		uids = append(uids, string(p.UID))
	}
	slices.Sort(uids)
	return strings.Join(uids, "/")
}

// Probe sends one completion through each member, directly to its Pod IP (never through a Service),
// and reads whether each answer is bound to its request: Verified when every one is, Failed when a
// member answers with an error status, Unknown when one does not answer or answers unbound.
func Probe(ctx context.Context, c *http.Client, e workerv1.Engine, members []*corev1.Pod) v1alpha1.QualificationLeg {
	ctx, cancel := context.WithTimeout(ctx, ProbeBound)
	defer cancel()
	leg := v1alpha1.QualificationLeg{Type: LegGroupForward, State: v1alpha1.LegVerified}
	// In name order: the first member not verified names the leg's reason, and a retry that named
	// another member each time (the cache lists them in no order) would rewrite the status for nothing.
	members = slices.Clone(members)
	slices.SortFunc(members, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for _, p := range members {
		state, reason := probeMember(ctx, c, e, p)
		if state != v1alpha1.LegVerified {
			return v1alpha1.QualificationLeg{Type: LegGroupForward, State: state, Reason: fmt.Sprintf("member %s: %s", p.Name, reason)}
		}
	}
	return leg
}

func probeMember(ctx context.Context, c *http.Client, e workerv1.Engine, p *corev1.Pod) (state, reason string) {
	requestID := "gpustack-qualify-" + string(p.UID)
	route, body := "/v1/completions", map[string]any{"prompt": "ok", "max_tokens": 1, "temperature": 0, "request_id": requestID}
	if e == workerv1.EngineSGLang {
		route, body = "/generate", map[string]any{"text": "ok", "rid": requestID, "log_metrics": false,
			"sampling_params": map[string]any{"max_new_tokens": 1, "temperature": 0}}
	}
	scheme := p.Annotations[workerv1.AnnotationScrapeScheme]
	if scheme == "" {
		scheme = "http"
	}
	port := p.Annotations[workerv1.AnnotationScrapePort]
	if p.Status.PodIP == "" || port == "" {
		return v1alpha1.LegUnknown, "no Pod IP or engine port to probe"
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return v1alpha1.LegUnknown, err.Error()
	}
	url := fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(p.Status.PodIP, port), route)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(raw))
	if err != nil {
		return v1alpha1.LegUnknown, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	rsp, err := c.Do(req)
	if err != nil {
		return v1alpha1.LegUnknown, "unanswered: " + err.Error()
	}
	defer func() { _ = rsp.Body.Close() }()
	answer, err := io.ReadAll(io.LimitReader(rsp.Body, probeAnswerCap))
	if err != nil {
		return v1alpha1.LegUnknown, "unanswered: " + err.Error()
	}
	if rsp.StatusCode/100 != 2 {
		return v1alpha1.LegFailed, fmt.Sprintf("%s answered %d", route, rsp.StatusCode)
	}
	if !bound(e, answer, requestID) {
		return v1alpha1.LegUnknown, fmt.Sprintf("%s answered without binding request %s", route, requestID)
	}
	return v1alpha1.LegVerified, ""
}

// bound reports whether an answer is the completion of the request: vLLM's id is cmpl- and the
// request id, with a finish reason on its first choice; SGLang's meta_info carries the rid and a
// finish reason.
func bound(e workerv1.Engine, answer []byte, requestID string) bool {
	if e == workerv1.EngineSGLang {
		var a struct {
			MetaInfo struct {
				ID           string          `json:"id"`
				FinishReason json.RawMessage `json:"finish_reason"`
			} `json:"meta_info"`
		}
		return json.Unmarshal(answer, &a) == nil && a.MetaInfo.ID == requestID && len(a.MetaInfo.FinishReason) > 0 && string(a.MetaInfo.FinishReason) != "null"
	}
	var a struct {
		ID      string `json:"id"`
		Choices []struct {
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
	}
	return json.Unmarshal(answer, &a) == nil && a.ID == "cmpl-"+requestID && len(a.Choices) > 0 && a.Choices[0].FinishReason != nil
}
