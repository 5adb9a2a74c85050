package pairing

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/mdplane/mdplane/apis/naming"
)

// transferFlag is vLLM's flag carrying the transfer document.
const transferFlag = "--kv-transfer-config"

// legConnector is the connector of vLLM-Ascend's prefill/decode leg, whose extra configuration holds
// both halves' degrees (functions/kv-cache, vllmTransferConfig).
const legConnector = "MooncakeConnectorV1"

// TransferConfiguration names the transfer document a Pod was started with: the first 16 hex digits
// of the SHA-256 of what both halves of the pair share in it (the leg connector's prefill and decode
// degrees), read from the engine container's arguments as deployed. "" when the Pod carries no such
// document. Read from the Pod rather than rendered onto it, so Pods created before this controller
// existed, and Pods of any revision, are told apart by what they actually run.
func TransferConfiguration(pod *corev1.Pod) string {
	doc, ok := transferDocument(engineArgs(pod))
	if !ok {
		return ""
	}
	var parsed any
	if err := json.Unmarshal([]byte(doc), &parsed); err != nil {
		return ""
	}
	shared := legDegrees(parsed)
	if shared == nil {
		return ""
	}
	canonical, err := json.Marshal(shared) // map keys sorted: the same degrees, the same bytes
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])[:16]
}

// engineArgs is the engine container's command line: the container named main, else the first.
func engineArgs(pod *corev1.Pod) []string {
	for _, c := range pod.Spec.Containers {
		if c.Name == naming.MainContainer {
			return append(append([]string{}, c.Command...), c.Args...)
		}
	}
	if len(pod.Spec.Containers) == 0 {
		return nil
	}
	return append(append([]string{}, pod.Spec.Containers[0].Command...), pod.Spec.Containers[0].Args...)
}

// transferDocument is the value of the last --kv-transfer-config (as vLLM reads it: the last wins),
// written as two arguments or as one with "=".
func transferDocument(args []string) (string, bool) {
	doc, found := "", false
	for i, a := range args {
		switch {
		case a == transferFlag && i+1 < len(args):
			doc, found = args[i+1], true
		case strings.HasPrefix(a, transferFlag+"="):
			doc, found = strings.TrimPrefix(a, transferFlag+"="), true
		}
	}
	return doc, found
}

// legDegrees finds the leg connector anywhere in the document (alone, or among a MultiConnector's
// connectors) and returns its prefill and decode members; nil when there is none.
func legDegrees(v any) map[string]any {
	switch node := v.(type) {
	case map[string]any:
		if node["kv_connector"] == legConnector {
			if extra, ok := node["kv_connector_extra_config"].(map[string]any); ok {
				return map[string]any{"prefill": extra["prefill"], "decode": extra["decode"]}
			}
		}
		for _, child := range node {
			if found := legDegrees(child); found != nil {
				return found
			}
		}
	case []any:
		for _, child := range node {
			if found := legDegrees(child); found != nil {
				return found
			}
		}
	}
	return nil
}
