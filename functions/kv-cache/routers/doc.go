// Package routers renders the argv routers a ModelDeployment's spec.router names (vllm-router and
// sglang-gateway) and llm-d-router: a Deployment that discovers the roles' leaders by label, only
// the eligible ones once the role Services select on eligibility (Eligibility), its Service, and
// the ServiceAccount, Role and RoleBinding that let it watch Pods. The kv-cache function composes
// them.
package routers
