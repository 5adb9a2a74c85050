package engine

import (
	"strconv"
	"strings"

	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// ElasticOwnedArgs are the vLLM flags the Elastic EP renderer writes on a master, or whose
// meaning it fixes (one pipeline stage, Ray as the executor and the data-parallel backend). The
// tensor-parallel size is the user's (extraArgs), frozen after
// create.
var ElasticOwnedArgs = []string{
	"--data-parallel-size", "--data-parallel-backend", "--data-parallel-address", "--enable-expert-parallel",
	"--data-parallel-size-local", "--enable-elastic-ep", "--enable-eplb", "--pipeline-parallel-size",
	"--distributed-executor-backend", "--ray-address",
}

// elasticOwnedShort are vLLM's single-dash spellings of the owned flags.
var elasticOwnedShort = map[string]string{
	"-dp": "--data-parallel-size", "-dpl": "--data-parallel-size-local", "-dpb": "--data-parallel-backend",
	"-dpa": "--data-parallel-address", "-pp": "--pipeline-parallel-size",
}

// The variables an elastic member reads its own Pod from, for the Ray join.
const (
	EnvElasticPodUID = "GPUSTACK_ELASTIC_POD_UID"
	EnvElasticPodIP  = "GPUSTACK_ELASTIC_POD_IP"
)

// ElasticOwnedEnv are the variables the Elastic EP renderer writes, or whose meaning it fixes.
var ElasticOwnedEnv = []string{
	"VLLM_DP_SIZE", "VLLM_DATA_PARALLEL_SIZE_LOCAL", "VLLM_ENABLE_ELASTIC_EP", "VLLM_ENABLE_EPLB",
	"VLLM_TENSOR_PARALLEL_SIZE", "VLLM_PIPELINE_PARALLEL_SIZE", "VLLM_RAY_ADDRESS", "RAY_ADDRESS",
	EnvElasticPodUID, EnvElasticPodIP, "VLLM_RAY_DP_PACK_STRATEGY", "RAY_OVERRIDE_LABELS",
}

// ElasticOwnedArg reports which flag the Elastic EP renderer owns, if any, an argument is in a
// spelling vLLM reads as it: the flag, its single-dash form, underscores for dashes, or any prefix of
// an owned flag (OwnedArg's judge).
func ElasticOwnedArg(arg string) (string, bool) {
	name, _, _ := strings.Cut(arg, "=")
	if flag, ok := elasticOwnedShort[name]; ok {
		return flag, true
	}
	if !strings.HasPrefix(name, "--") || len(name) <= len("--") {
		return "", false
	}
	name = strings.ReplaceAll(name, "_", "-")
	name, _, _ = strings.Cut(name, ".")
	return prefixOf(ElasticOwnedArgs, name)
}

// prefixOf is the flag of owned that name spells exactly, else the first one it abbreviates.
func prefixOf(owned []string, name string) (string, bool) {
	var matches []string
	for _, flag := range owned {
		if flag == name {
			return flag, true
		}
		if strings.HasPrefix(flag, name) {
			matches = append(matches, flag)
		}
	}
	if len(matches) > 0 {
		return matches[0], true
	}
	return "", false
}

// ElasticOwnedEnvName reports whether the Elastic EP renderer owns a variable.
func ElasticOwnedEnvName(name string) bool {
	for _, n := range ElasticOwnedEnv {
		if n == name {
			return true
		}
	}
	return false
}

// ElasticTensorParallel is the tensor-parallel size of an Elastic EP member, read from its extraArgs
// in any spelling vLLM accepts; 1 when unset. Each member holds that many whole cards.
func ElasticTensorParallel(args []string) int {
	return ReadDegrees(workerv1.EngineVLLM, args).TP
}

// ElasticHeadCommand is the Ray head's command, exactly: the head schedules no GPUs and labels
// itself with its Pod's UID, as the members do.
var ElasticHeadCommand = []string{"/bin/sh", "-ec", "ray start --head --include-dashboard=true --num-gpus=0 --port=" +
	strconv.Itoa(naming.ElasticHeadPort) + ` --dashboard-host=0.0.0.0 --labels=gpustack-pod-uid="$` + EnvElasticPodUID + `" --block`}
