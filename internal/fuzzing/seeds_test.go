package fuzzing_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mdplane/mdplane/apis/engine"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/fuzzing"
)

// The fuzz tables of the targets whose packages do not import this one (its Kubernetes
// dependencies would multiply their coverage counters, and so the fuzzer's cost per input), in
// their order: an input byte picks from them. Keep each equal to its target's.
var (
	// apis/engine's fuzzEngines.
	engineEngines = []workerv1.Engine{workerv1.EngineVLLM, workerv1.EngineSGLang, "TGI"}
	// functions/kv-cache's tables.
	connectorEngines       = []workerv1.Engine{workerv1.EngineVLLM, workerv1.EngineSGLang}
	connectorKinds         = []workerv1.RoleKind{workerv1.RoleKindServer, workerv1.RoleKindPrefill, workerv1.RoleKindDecode, workerv1.RoleKindEncode, ""}
	connectorProtocols     = []workerv1.TransferProtocol{"", workerv1.TransferAuto, workerv1.TransferTCP, workerv1.TransferRDMA, workerv1.TransferEFA, workerv1.TransferCANN, workerv1.TransferROCM}
	connectorManufacturers = []string{"", "nvidia", "ascend", "amd"}
	// functions/kv-cache/routers/llmd's tables.
	eppEngines = []workerv1.Engine{workerv1.EngineVLLM, workerv1.EngineSGLang, "TGI"}
	eppKinds   = []workerv1.RoleKind{"", workerv1.RoleKindServer, workerv1.RoleKindPrefill, workerv1.RoleKindDecode, workerv1.RoleKindEncode}
)

// index is v's place in table, 0 when it is not there.
func index[T comparable](table []T, v T) byte {
	return byte(max(slices.Index(table, v), 0))
}

// seedName names a seed by its source and content.
func seedName(prefix string, data []byte) string {
	sum := sha256.Sum256(data)
	return prefix + "-" + hex.EncodeToString(sum[:])[:12]
}

// admittedSeeds are the world's seeds the schema admits as they are, decoded (the webhook may refuse
// some: their arguments are seeds too).
func admittedSeeds(t *testing.T) (*fuzzing.World, map[string]*workerv1.ModelDeployment) {
	t.Helper()
	w, err := fuzzing.LoadWorld()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*workerv1.ModelDeployment{}
	for _, s := range w.Seeds {
		obj, _ := fuzzing.Decode(s.YAML)
		if j, err := w.JudgeCreate(obj); err == nil && j.Deployment != nil {
			out[s.Name] = j.Deployment
		}
	}
	return w, out
}

// TestSeedCorpus keeps the seed corpora (testdata/fuzz) of the fuzz targets of packages that do not
// import this one to the examples and golden cases; each target's own package keeps the others'.
func TestSeedCorpus(t *testing.T) {
	w, seeds := admittedSeeds(t)
	t.Run("apis/engine", func(t *testing.T) { engineSeeds(t, seeds) })
	t.Run("functions/kv-cache", func(t *testing.T) { connectorSeeds(t, w, seeds) })
	t.Run("functions/kv-cache/routers/llmd", func(t *testing.T) { eppSeeds(t, seeds) })
}

// engineSeeds: every role's command line with its deployment's engine, every argument of them, and
// every owned and degree flag of each engine.
func engineSeeds(t *testing.T, seeds map[string]*workerv1.ModelDeployment) {
	owned, degrees := fuzzing.Corpus{}, fuzzing.Corpus{}
	for name, md := range seeds {
		e := index(engineEngines, md.Spec.Engine.Name)
		for _, r := range md.Spec.Roles {
			dp := ""
			for _, v := range r.Env {
				if v.Name == "VLLM_DP_SIZE" {
					dp = v.Value
				}
			}
			for _, args := range [][]string{r.ExtraArgs, r.Command} {
				if len(args) == 0 {
					continue
				}
				data := fuzzing.CorpusFile(e, strings.Join(args, "\n"), dp, uint8(3))
				degrees[seedName(name, data)] = data
				for _, a := range args {
					data := fuzzing.CorpusFile(e, md.Spec.KVCache != nil, a, "x")
					owned[seedName("arg", data)] = data
				}
			}
		}
	}
	for i, e := range engineEngines {
		for _, flag := range append(engine.OwnedArgs(e, true), engine.DegreeFlags(e)...) {
			data := fuzzing.CorpusFile(byte(i), true, flag+"=1", "{}")
			owned[seedName("flag", data)] = data
			data = fuzzing.CorpusFile(byte(i), flag+"\n2", "", uint8(1))
			degrees[seedName("flag", data)] = data
		}
	}
	owned.CheckIn(t, "../../apis/engine", "FuzzOwnedArg")
	degrees.CheckIn(t, "../../apis/engine", "FuzzParallelDegrees")
}

// connectorSeeds: every role of a vLLM or SGLang seed, with its deployment's router, transfer,
// InstanceType manufacturer and, when bound, the world's pool endpoint, tenant and dtype.
func connectorSeeds(t *testing.T, w *fuzzing.World, seeds map[string]*workerv1.ModelDeployment) {
	c := fuzzing.Corpus{}
	for name, md := range seeds {
		if !slices.Contains(connectorEngines, md.Spec.Engine.Name) {
			continue
		}
		var protocol workerv1.TransferProtocol
		if md.Spec.KVTransfer != nil {
			protocol = md.Spec.KVTransfer.Protocol
		}
		routed := md.Spec.Router != nil && md.Spec.Router.Name == workerv1.RouterLLMD
		endpoint, tenant, dtype, prefix := "", "", "", ""
		chain := w.Chain(md)
		bound := chain != nil && chain.Binding != nil && chain.Pool != nil
		if bound {
			endpoint, tenant, dtype = chain.Pool.Status.ClientEndpoint, chain.Binding.Spec.Domain.Name, chain.Binding.Spec.Domain.Dtype
			if md.Spec.Model.ArtifactRef != nil {
				prefix = "m-5e1f0c2b9d8a7e6f5a4b3c2d1e0f9a8b"
			}
		}
		for _, r := range md.Spec.Roles {
			manufacturer := ""
			if it := w.InstanceTypes[r.InstanceType]; it != nil && it.Status.Detail != nil {
				manufacturer = it.Status.Detail.Manufacturer
			}
			var env []string
			for _, v := range r.Env {
				env = append(env, v.Name)
			}
			data := fuzzing.CorpusFile(index(connectorEngines, md.Spec.Engine.Name), index(connectorKinds, r.Kind), index(connectorProtocols, protocol),
				index(connectorManufacturers, manufacturer), routed, bound, endpoint, tenant, dtype, "", prefix,
				strings.Join(r.ExtraArgs, "\n"), strings.Join(env, "\n"), r.TakesOver())
			c[seedName(name, data)] = data
		}
	}
	c.CheckIn(t, "../../functions/kv-cache", "FuzzConnector")
}

// eppSeeds: every seed's deployment as its EPP document is built from it.
func eppSeeds(t *testing.T, seeds map[string]*workerv1.ModelDeployment) {
	c := fuzzing.Corpus{}
	for name, md := range seeds {
		var roles []string
		for _, r := range md.Spec.Roles {
			roles = append(roles, strings.Join(append([]string{r.Name, fmt.Sprint(index(eppKinds, r.Kind))}, r.ExtraArgs...), " "))
		}
		threshold, timeout := int32(0), int32(0)
		thresholdSet, timeoutSet := false, false
		if r := md.Spec.Router; r != nil {
			if r.DisaggregationThresholdTokens != nil {
				threshold, thresholdSet = *r.DisaggregationThresholdTokens, true
			}
			if r.RequestTimeoutSeconds != nil {
				timeout, timeoutSet = *r.RequestTimeoutSeconds, true
			}
		}
		data := fuzzing.CorpusFile(md.Namespace, md.Name, md.Spec.Model.Name, index(eppEngines, md.Spec.Engine.Name), int32(8000),
			threshold, thresholdSet, false, strings.Join(roles, "\n"), timeout, timeoutSet)
		c[seedName(name, data)] = data
	}
	c.CheckIn(t, "../../functions/kv-cache/routers/llmd", "FuzzEPP")
}
