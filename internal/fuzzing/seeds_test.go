package fuzzing_test

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"github.com/mdplane/mdplane/apis/engine"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/fuzzing"
)

// fuzzEngines is apis/engine's fuzz targets' engine table, in its order (the first input byte
// picks an engine from it). The engine targets do not import this package: its Kubernetes
// dependencies would multiply their coverage counters, and so the fuzzer's cost per input.
var fuzzEngines = []workerv1.Engine{workerv1.EngineVLLM, workerv1.EngineSGLang, "TGI"}

// TestSeedCorpus keeps the seed corpora (testdata/fuzz) of the fuzz targets of packages that do not
// import this one to the examples and golden cases. apis/engine: every role's command line with
// its deployment's engine, every argument of them, and every owned and degree flag of each engine.
func TestSeedCorpus(t *testing.T) {
	w, err := fuzzing.LoadWorld()
	if err != nil {
		t.Fatal(err)
	}
	owned, degrees := fuzzing.Corpus{}, fuzzing.Corpus{}
	name := func(prefix string, data []byte) string {
		sum := sha256.Sum256(data)
		return prefix + "-" + hex.EncodeToString(sum[:])[:12]
	}
	engineIndex := func(e workerv1.Engine) byte { return byte(slices.Index(fuzzEngines, e)) }
	for _, s := range w.Seeds {
		obj, _ := fuzzing.Decode(s.YAML)
		j, err := w.JudgeCreate(obj)
		if err != nil || j.Deployment == nil {
			continue
		}
		md := j.Deployment
		e := engineIndex(md.Spec.Engine.Name)
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
				degrees[name(s.Name, data)] = data
				for _, a := range args {
					data := fuzzing.CorpusFile(e, md.Spec.KVCache != nil, a, "x")
					owned[name("arg", data)] = data
				}
			}
		}
	}
	for i, e := range fuzzEngines {
		for _, flag := range append(engine.OwnedArgs(e, true), engine.DegreeFlags(e)...) {
			data := fuzzing.CorpusFile(byte(i), true, flag+"=1", "{}")
			owned[name("flag", data)] = data
			data = fuzzing.CorpusFile(byte(i), flag+"\n2", "", uint8(1))
			degrees[name("flag", data)] = data
		}
	}
	owned.CheckIn(t, "../../apis/engine", "FuzzOwnedArg")
	degrees.CheckIn(t, "../../apis/engine", "FuzzParallelDegrees")
}
