package engine

import (
	"strings"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// Ownership is per (engine, key): a key one engine owns is an ordinary user argument on another. The
// tables are the spec's "Operator-owned keys".
var (
	ownedArgs = map[workerv1.Engine][]string{
		workerv1.EngineVLLM: {"--kv-transfer-config", "--kv-events-config"},
		workerv1.EngineSGLang: {"--hicache-storage-backend", "--hicache-storage-backend-extra-config",
			"--disaggregation-mode", "--disaggregation-transfer-backend", "--disaggregation-bootstrap-port"},
	}
	ownedEnv = map[workerv1.Engine][]string{
		workerv1.EngineVLLM: {"MOONCAKE_CONFIG_PATH", "VLLM_MOONCAKE_BOOTSTRAP_PORT"},
		workerv1.EngineSGLang: {"SGLANG_HICACHE_MOONCAKE_CONFIG_PATH", "MOONCAKE_MASTER", "MOONCAKE_TE_META_DATA_SERVER",
			"MOONCAKE_PROTOCOL", "MOONCAKE_DEVICE", "MOONCAKE_GLOBAL_SEGMENT_SIZE", "MOONCAKE_LOCAL_HOSTNAME", "MOONCAKE_TENANT_ID"},
	}
	// instanceEnv are owned on every engine and at every size, so widening a role later never turns
	// an accepted deployment into a refused one.
	instanceEnv = []string{EnvLeaderAddress, EnvReplicaSize, EnvMemberIndex}
)

// The three variables every member of a multi-member replica is told about its instance: the
// leader's address, the replica's size and the member's own index.
const (
	EnvLeaderAddress = "GPUSTACK_REPLICA_LEADER_ADDRESS"
	EnvReplicaSize   = "GPUSTACK_REPLICA_SIZE"
	EnvMemberIndex   = "GPUSTACK_MEMBER_INDEX"
)

// KVCacheDtypeFlag carries the Binding's dtype, so it is owned on both engines while spec.kvCache is
// set.
const KVCacheDtypeFlag = "--kv-cache-dtype"

// OwnedArgs lists the flags mdplane owns on an engine; kvCache adds --kv-cache-dtype.
func OwnedArgs(e workerv1.Engine, kvCache bool) []string {
	out := append([]string(nil), ownedArgs[e]...)
	if kvCache {
		out = append(out, KVCacheDtypeFlag)
	}
	return out
}

// OwnedEnv lists the environment variables mdplane owns on an engine.
func OwnedEnv(e workerv1.Engine) []string {
	return append(append([]string(nil), ownedEnv[e]...), instanceEnv...)
}

// OwnedEnvName reports whether mdplane owns a variable on an engine.
func OwnedEnvName(e workerv1.Engine, name string) bool {
	for _, n := range OwnedEnv(e) {
		if n == name {
			return true
		}
	}
	return false
}

// OwnedArg reports which owned flag, if any, a user argument is in a spelling the engine reads as
// it, and returns that flag. Both engines accept a unique prefix of a flag (argparse's
// abbreviations); vLLM also reads underscores as dashes and a dotted member
// (--kv-transfer-config.kv_role) as part of the whole document. A prefix is judged against the
// owned flags only: one that would be ambiguous on the engine fails there anyway, and one that
// abbreviates an owned flag is refused here.
func OwnedArg(e workerv1.Engine, kvCache bool, arg string) (string, bool) {
	if !strings.HasPrefix(arg, "--") || arg == "--" {
		return "", false
	}
	name, _, _ := strings.Cut(arg, "=")
	if e == workerv1.EngineVLLM {
		name = strings.ReplaceAll(name, "_", "-")
		name, _, _ = strings.Cut(name, ".")
	}
	owned := OwnedArgs(e, kvCache)
	var matches []string
	for _, flag := range owned {
		if flag == name {
			return flag, true // an exact spelling wins over abbreviations
		}
		if strings.HasPrefix(flag, name) && len(name) > len("--") {
			matches = append(matches, flag)
		}
	}
	if len(matches) > 0 {
		// Every owned flag the abbreviation could stand for is owned; name the first.
		return matches[0], true
	}
	return "", false
}

// OwnedArgIn returns the first user argument in args that is an owned flag, and the flag.
func OwnedArgIn(e workerv1.Engine, kvCache bool, args []string) (arg, flag string, found bool) {
	for _, a := range args {
		if f, ok := OwnedArg(e, kvCache, a); ok {
			return a, f, true
		}
	}
	return "", "", false
}

// hubArgs are the flags that name or fetch the weights, which an artifact delivers: mdplane renders
// the model argument and, under Engine delivery, --revision.
// SGLang's --model is read as --model-path's alias.
var hubArgs = map[workerv1.Engine][]string{
	workerv1.EngineVLLM:   {"--model", "--revision", "--tokenizer-revision", "--download-dir"},
	workerv1.EngineSGLang: {"--model-path", "--model", "--revision", "--download-dir"},
}

// ArtifactEnv are the variables an artifact's delivery owns, whatever its source.
var ArtifactEnv = []string{"HF_TOKEN", "HF_ENDPOINT", "HF_HOME", "MODELSCOPE_API_TOKEN", "MODELSCOPE_DOMAIN",
	"MODELSCOPE_CACHE", "VLLM_USE_MODELSCOPE", "SGLANG_USE_MODELSCOPE"}

// ArtifactOwnsEnv reports whether an artifact's delivery owns a variable on an engine:
// SGLANG_USE_MODELSCOPE is SGLang's own switch, rendered only there, so on vLLM it is the role's.
func ArtifactOwnsEnv(e workerv1.Engine, name string) bool {
	if name == "SGLANG_USE_MODELSCOPE" && e != workerv1.EngineSGLang {
		return false
	}
	for _, owned := range ArtifactEnv {
		if owned == name {
			return true
		}
	}
	return false
}

// ArtifactPaths are where an artifact's weights and the engine's download cache are mounted.
var ArtifactPaths = []string{"/var/lib/gpustack/model", "/var/lib/gpustack/model-cache"}

// HubArg reports which hub flag, if any, an argument names on an engine, in any spelling the engine
// reads as it (OptionName: an exact spelling, a unique prefix, vLLM's underscores).
func HubArg(e workerv1.Engine, arg string) (string, bool) {
	name, ok := OptionName(e, arg)
	if !ok {
		return "", false
	}
	for _, flag := range hubArgs[e] {
		if name == flag {
			return flag, true
		}
	}
	return "", false
}
