// Package pairing keeps llm-d-router's endpoints of a prefill/decode pair that shares one transfer
// document (vLLM-Ascend's leg) on one configuration of that document at a time, so a request is never
// routed between an old prefill and a new decode.
package pairing
