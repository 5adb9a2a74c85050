package validation

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/mdplane/mdplane/apis/engine"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// Default is one field a mutating webhook writes into an object that lacks it: Pointer is the
// field's JSON pointer (its parent exists in the object), Value what is written there. The webhooks
// send each as an "add" patch; an offline check writes them with ApplyDefaults, so both store the
// same object.
type Default struct {
	Pointer string
	Value   any
}

// DeploymentDefaults are what the ModelDeployment mutating webhook writes, given the InstanceTypes
// of its roles (a role whose type is missing is defaulted nothing): a role on an acceleratable
// type that requests no card, no slice and no partition gets one card, and an Elastic EP role one
// card per tensor-parallel rank. Only the defaulted fields are written: the stored object carries
// fields (spec.crossplane) the Go type does not. A deployment being deleted is defaulted nothing.
func DeploymentDefaults(md *workerv1.ModelDeployment, types map[string]*workerv1.InstanceType) []Default {
	if md.DeletionTimestamp != nil {
		return nil
	}
	var out []Default
	for i, role := range md.Spec.Roles {
		it := types[role.InstanceType]
		if it == nil || !it.Spec.Acceleratable {
			continue
		}
		cards := "1"
		if role.ElasticEP != nil {
			cards = strconv.Itoa(engine.ElasticTensorParallel(role.ExtraArgs))
		}
		switch {
		case role.Resources == nil:
			out = append(out, Default{fmt.Sprintf("/spec/roles/%d/resources", i), map[string]any{"accelerator": cards}})
		case CardsUndeclared(role):
			out = append(out, Default{fmt.Sprintf("/spec/roles/%d/resources/accelerator", i), cards})
		}
	}
	return out
}

// CardsUndeclared reports whether a role leaves its accelerator count to the default: it declares
// none of the accelerator fields (a whole count, a slice of memory or cores, a partition profile).
// Only such a role's InstanceType decides a default.
func CardsUndeclared(role workerv1.ModelDeploymentRole) bool {
	res := role.Resources
	return res == nil || res.Accelerator == nil && res.AcceleratorSlicedMemoryPercentage == nil &&
		res.AcceleratorSlicedCoresPercentage == nil && res.AcceleratorPartitionedProfile == ""
}

// ArtifactDefaults are what the ModelArtifact mutating webhook writes: the hub revision of
// ArtifactRevisionDefault, as an update of old when one is stored.
func ArtifactDefaults(a, old *workerv1.ModelArtifact) []Default {
	pointer, revision := ArtifactRevisionDefault(a, old)
	if pointer == "" {
		return nil
	}
	return []Default{{pointer, revision}}
}

// ApplyDefaults writes defaults into an object decoded from JSON or YAML (nested maps and slices),
// as the API server applies a webhook's "add" patches. A pointer whose parent is missing is an
// error: the defaults name only fields whose parent the object has.
func ApplyDefaults(obj map[string]any, defaults []Default) error {
	for _, d := range defaults {
		tokens := strings.Split(strings.TrimPrefix(d.Pointer, "/"), "/")
		var parent any = obj
		for _, tok := range tokens[:len(tokens)-1] {
			next, ok := child(parent, unescape(tok))
			if !ok {
				return fmt.Errorf("default %s: the object has no %q", d.Pointer, tok)
			}
			parent = next
		}
		m, ok := parent.(map[string]any)
		if !ok {
			return fmt.Errorf("default %s: its parent is not an object", d.Pointer)
		}
		m[unescape(tokens[len(tokens)-1])] = d.Value
	}
	return nil
}

// child is the member of a JSON object, or the element of a JSON array, that tok names.
func child(node any, tok string) (any, bool) {
	switch n := node.(type) {
	case map[string]any:
		v, ok := n[tok]
		return v, ok
	case []any:
		i, err := strconv.Atoi(tok)
		if err != nil || i < 0 || i >= len(n) {
			return nil, false
		}
		return n[i], true
	}
	return nil, false
}

// unescape reads a JSON pointer token (RFC 6901: ~1 is /, ~0 is ~).
func unescape(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
}
