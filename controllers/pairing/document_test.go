package pairing

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

func podRunning(args ...string) *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "wait-for-worker"}, {Name: "main", Args: args}}}}
}

// The documents functions/kv-cache renders for the two halves of one pair (golden vllm-ascend-pd).
const (
	decodeDoc  = `{"kv_connector":"MultiConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"connectors":[{"kv_connector":"MooncakeConnectorV1","kv_role":"kv_consumer","kv_port":8998,"kv_connector_extra_config":{"decode":{"dp_size":2,"tp_size":2},"prefill":{"dp_size":1,"tp_size":4}}},{"kv_connector":"AscendStoreConnector","kv_role":"kv_consumer"}]}}`
	prefillDoc = `{"kv_connector":"MultiConnector","kv_role":"kv_producer","kv_connector_extra_config":{"connectors":[{"kv_connector":"MooncakeConnectorV1","kv_role":"kv_producer","kv_port":8998,"kv_connector_extra_config":{"decode":{"dp_size":2,"tp_size":2},"prefill":{"dp_size":1,"tp_size":4}}},{"kv_connector":"AscendStoreConnector","kv_role":"kv_both"}]}}`
	legOnly    = `{"kv_connector":"MooncakeConnectorV1","kv_role":"kv_producer","kv_port":8998,"kv_connector_extra_config":{"prefill":{"tp_size":4,"dp_size":1},"decode":{"tp_size":2,"dp_size":2}}}`
	narrower   = `{"kv_connector":"MooncakeConnectorV1","kv_role":"kv_consumer","kv_port":8998,"kv_connector_extra_config":{"prefill":{"tp_size":4,"dp_size":1},"decode":{"tp_size":1,"dp_size":2}}}`
)

func TestTransferConfiguration(t *testing.T) {
	decode := TransferConfiguration(podRunning("vllm", "serve", "--kv-transfer-config", decodeDoc))
	assert.Len(t, decode, 16)
	assert.Equal(t, decode, TransferConfiguration(podRunning("--kv-transfer-config", prefillDoc)), "both halves of a pair share the configuration, whatever their roles")
	assert.Equal(t, decode, TransferConfiguration(podRunning("--kv-transfer-config="+legOnly)), "the leg alone or among a MultiConnector's, in any key order, spelt with =")
	assert.NotEqual(t, decode, TransferConfiguration(podRunning("--kv-transfer-config", narrower)), "another degree is another configuration")
	assert.Equal(t, decode, TransferConfiguration(podRunning("--kv-transfer-config", narrower, "--kv-transfer-config", decodeDoc)), "the last flag wins, as vLLM reads it")
	assert.Empty(t, TransferConfiguration(podRunning("vllm", "serve")), "no document")
	assert.Empty(t, TransferConfiguration(podRunning("--kv-transfer-config", `{"kv_connector":"AscendStoreConnector"}`)), "a document without the leg")
	assert.Empty(t, TransferConfiguration(podRunning("--kv-transfer-config", "{not json")), "an unreadable document")
}
