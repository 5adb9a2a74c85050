package engine

import workerv1 "github.com/mdplane/mdplane/apis/worker/v1"

// DrainGauges are the engine's gauges of requests running or queued; the engine is idle when they
// sum to zero. SGLang counts a P/D role's bootstrap, in-flight, pre-allocation and transfer queues
// apart from its running and waiting requests.
func DrainGauges(e workerv1.Engine) []string {
	if e == workerv1.EngineSGLang {
		return []string{
			"sglang:num_running_reqs",
			"sglang:num_queue_reqs",
			"sglang:num_prefill_bootstrap_queue_reqs",
			"sglang:num_prefill_inflight_queue_reqs",
			"sglang:num_decode_prealloc_queue_reqs",
			"sglang:num_decode_transfer_queue_reqs",
		}
	}
	return []string{"vllm:num_requests_running", "vllm:num_requests_waiting"}
}
