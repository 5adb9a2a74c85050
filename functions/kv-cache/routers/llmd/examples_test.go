package llmd_test

// caseA is the EndpointPickerConfig of a server-only vLLM deployment: the precise prefix-cache
// producer fed by KV events.
const caseA = `apiVersion: llm-d.ai/v1alpha1
dataLayer:
  sources:
  - extractors:
    - pluginRef: core-metrics-extractor
    pluginRef: metrics-data-source
  - extractors:
    - pluginRef: precise-prefix-cache-producer
    pluginRef: endpoint-notification-source
kind: EndpointPickerConfig
plugins:
- name: server-pods
  parameters:
    matchLabels:
      modeldeployment.gpustack.ai/role-kind: server
  type: label-selector-filter
- parameters:
    modelName: Qwen/Qwen3-8B
    vllm:
      url: http://qwen-server.team-a.svc:8000
  type: token-producer
- type: endpoint-notification-source
- parameters:
    kvEventsConfig:
      concurrency: 4
      discoverPods: true
      engineType: vllm
      podDiscoveryConfig:
        podLabelSelector: app.kubernetes.io/name=model-deployment,app.kubernetes.io/instance=qwen,modeldeployment.gpustack.ai/member-index=0,!modeldeployment.gpustack.ai/router
        podNamespace: team-a
        replaySocketPort: 5558
        socketPort: 5557
      topicFilter: kv@
  type: precise-prefix-cache-producer
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: max-score-picker
- parameters:
    prefixMatchInfoProducerName: precise-prefix-cache-producer
  type: prefix-cache-scorer
- parameters:
    port: 8000
  type: metrics-data-source
- parameters:
    engineConfigs:
    - kvUsageSpec: vllm:kv_cache_usage_perc
      name: vllm
      queuedRequestsSpec: vllm:num_requests_waiting
      runningRequestsSpec: vllm:num_requests_running
  type: core-metrics-extractor
schedulingProfiles:
- name: server
  plugins:
  - pluginRef: server-pods
  - pluginRef: queue-scorer
    weight: 2
  - pluginRef: kv-cache-utilization-scorer
    weight: 2
  - pluginRef: max-score-picker
  - pluginRef: prefix-cache-scorer
    weight: 3
`

// caseB is a server-only SGLang deployment's: the approximate producer and defaultEngine.
const caseB = `apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- name: server-pods
  parameters:
    matchLabels:
      modeldeployment.gpustack.ai/role-kind: server
  type: label-selector-filter
- type: approx-prefix-cache-producer
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: max-score-picker
- type: prefix-cache-scorer
- parameters:
    port: 8000
  type: metrics-data-source
- parameters:
    defaultEngine: sglang
    engineConfigs:
    - cacheBlockSizeSpec: sglang:page_size
      cacheNumBlocksSpec: sglang:num_pages
      kvUsageSpec: sglang:token_usage
      name: sglang
      queuedRequestsSpec: sglang:num_queue_reqs
      runningRequestsSpec: sglang:num_running_reqs
  type: core-metrics-extractor
schedulingProfiles:
- name: server
  plugins:
  - pluginRef: server-pods
  - pluginRef: queue-scorer
    weight: 2
  - pluginRef: kv-cache-utilization-scorer
    weight: 2
  - pluginRef: max-score-picker
  - pluginRef: prefix-cache-scorer
    weight: 3
`

// caseC is a vLLM prefill/decode deployment's: the prefiller tokenizes, decoders are not dialled
// for KV events.
const caseC = `apiVersion: llm-d.ai/v1alpha1
dataLayer:
  sources:
  - extractors:
    - pluginRef: core-metrics-extractor
    pluginRef: metrics-data-source
  - extractors:
    - pluginRef: precise-prefix-cache-producer
    pluginRef: endpoint-notification-source
kind: EndpointPickerConfig
plugins:
- name: decode-pods
  parameters:
    matchLabels:
      modeldeployment.gpustack.ai/role-kind: decode
  type: label-selector-filter
- name: prefill-pods
  parameters:
    matchLabels:
      modeldeployment.gpustack.ai/role-kind: prefill
  type: label-selector-filter
- parameters:
    modelName: Qwen/Qwen3-8B
    vllm:
      url: http://qwen-prefill.team-a.svc:8000
  type: token-producer
- type: endpoint-notification-source
- parameters:
    kvEventsConfig:
      concurrency: 4
      discoverPods: true
      engineType: vllm
      podDiscoveryConfig:
        podLabelSelector: app.kubernetes.io/name=model-deployment,app.kubernetes.io/instance=qwen,modeldeployment.gpustack.ai/member-index=0,!modeldeployment.gpustack.ai/router,modeldeployment.gpustack.ai/role-kind!=decode
        podNamespace: team-a
        replaySocketPort: 5558
        socketPort: 5557
      topicFilter: kv@
  type: precise-prefix-cache-producer
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: max-score-picker
- parameters:
    prefixMatchInfoProducerName: precise-prefix-cache-producer
  type: prefix-cache-scorer
- parameters:
    port: 8000
  type: metrics-data-source
- parameters:
    engineConfigs:
    - kvUsageSpec: vllm:kv_cache_usage_perc
      name: vllm
      queuedRequestsSpec: vllm:num_requests_waiting
      runningRequestsSpec: vllm:num_requests_running
  type: core-metrics-extractor
- parameters:
    nonCachedTokens: 8
    promptTokens: 0
  type: prefix-based-pd-decider
- parameters:
    deciders:
      prefill: prefix-based-pd-decider
    profiles:
      decode: decode
      prefill: prefill
  type: disagg-profile-handler
schedulingProfiles:
- name: decode
  plugins:
  - pluginRef: decode-pods
  - pluginRef: queue-scorer
    weight: 2
  - pluginRef: kv-cache-utilization-scorer
    weight: 2
  - pluginRef: max-score-picker
- name: prefill
  plugins:
  - pluginRef: prefill-pods
  - pluginRef: queue-scorer
    weight: 2
  - pluginRef: kv-cache-utilization-scorer
    weight: 2
  - pluginRef: max-score-picker
  - pluginRef: prefix-cache-scorer
    weight: 3
`
