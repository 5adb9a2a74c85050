package renderroles

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/fuzzing"
)

// editScope is what an edit changes, and so whose pod-spec-hash must move when it changes anything.
type editScope int

const (
	// scopeNone: a field outside the hash (the replica count, an Elastic EP role's width).
	scopeNone editScope = iota
	// scopeDeployment: an explicit deployment field every role's hash covers.
	scopeDeployment
	// scopeRole: an explicit field of the edited role.
	scopeRole
	// scopeInstanceType: a resolved binding, the status of the edited role's InstanceType.
	scopeInstanceType
)

// hashEdit is one edit FuzzPodSpecHash applies: to the deployment and the role it names, or, for
// scopeInstanceType, to a copy of the role's InstanceType. ok is false when the value does not fit
// the field (not a number, not a quantity) or the role has no such field.
type hashEdit struct {
	name  string
	scope editScope
	apply func(md *workerv1.ModelDeployment, role *workerv1.ModelDeploymentRole, it *unstructured.Unstructured, v string) (ok bool)
}

func atoi32(v string) (int32, bool) {
	n, err := strconv.ParseInt(v, 10, 32)
	return int32(n), err == nil
}

func quantity(v string) (*resource.Quantity, bool) {
	q, err := resource.ParseQuantity(v)
	return &q, err == nil
}

var hashEdits = []hashEdit{
	{"extraArgs: append", scopeRole, func(_ *workerv1.ModelDeployment, r *workerv1.ModelDeploymentRole, _ *unstructured.Unstructured, v string) bool {
		r.ExtraArgs = append(r.ExtraArgs, v)
		return true
	}},
	{"extraArgs: replace one", scopeRole, func(_ *workerv1.ModelDeployment, r *workerv1.ModelDeploymentRole, _ *unstructured.Unstructured, v string) bool {
		if len(r.ExtraArgs) == 0 {
			return false
		}
		r.ExtraArgs[len(v)%len(r.ExtraArgs)] = v
		return true
	}},
	{"extraArgs: drop the last", scopeRole, func(_ *workerv1.ModelDeployment, r *workerv1.ModelDeploymentRole, _ *unstructured.Unstructured, _ string) bool {
		if len(r.ExtraArgs) == 0 {
			return false
		}
		r.ExtraArgs = r.ExtraArgs[:len(r.ExtraArgs)-1]
		return true
	}},
	{"env: set FUZZ_VAR", scopeRole, func(_ *workerv1.ModelDeployment, r *workerv1.ModelDeploymentRole, _ *unstructured.Unstructured, v string) bool {
		for i := range r.Env {
			if r.Env[i].Name == "FUZZ_VAR" {
				r.Env[i].Value = v
				return true
			}
		}
		r.Env = append(r.Env, workerv1.ModelDeploymentEnvVar{Name: "FUZZ_VAR", Value: v})
		return true
	}},
	{"env: the first variable's value", scopeRole, func(_ *workerv1.ModelDeployment, r *workerv1.ModelDeploymentRole, _ *unstructured.Unstructured, v string) bool {
		if len(r.Env) == 0 {
			return false
		}
		r.Env[0].Value = v
		return true
	}},
	{"spec.engine.image", scopeDeployment, func(md *workerv1.ModelDeployment, _ *workerv1.ModelDeploymentRole, _ *unstructured.Unstructured, v string) bool {
		md.Spec.Engine.Image = v
		return true
	}},
	{"role image", scopeRole, func(_ *workerv1.ModelDeployment, r *workerv1.ModelDeploymentRole, _ *unstructured.Unstructured, v string) bool {
		r.Image = v
		return true
	}},
	{"spec.model.name", scopeDeployment, func(md *workerv1.ModelDeployment, _ *workerv1.ModelDeploymentRole, _ *unstructured.Unstructured, v string) bool {
		md.Spec.Model.Name = v
		return true
	}},
	{"resources.accelerator", scopeRole, func(_ *workerv1.ModelDeployment, r *workerv1.ModelDeploymentRole, _ *unstructured.Unstructured, v string) bool {
		q, ok := quantity(v)
		if r.Resources == nil {
			r.Resources = &workerv1.ModelDeploymentRoleResources{}
		}
		r.Resources.Accelerator = q
		return ok
	}},
	{"shmSize", scopeRole, func(_ *workerv1.ModelDeployment, r *workerv1.ModelDeploymentRole, _ *unstructured.Unstructured, v string) bool {
		q, ok := quantity(v)
		r.ShmSize = q
		return ok
	}},
	{"terminationGracePeriodSeconds", scopeRole, func(_ *workerv1.ModelDeployment, r *workerv1.ModelDeploymentRole, _ *unstructured.Unstructured, v string) bool {
		n, err := strconv.ParseInt(v, 10, 64)
		r.TerminationGracePeriodSeconds = &n
		return err == nil
	}},
	{"topology.requiredLevel", scopeRole, func(_ *workerv1.ModelDeployment, r *workerv1.ModelDeploymentRole, _ *unstructured.Unstructured, v string) bool {
		r.Topology = &workerv1.ModelDeploymentRoleTopology{RequiredLevel: v}
		return true
	}},
	{"size", scopeRole, func(_ *workerv1.ModelDeployment, r *workerv1.ModelDeploymentRole, _ *unstructured.Unstructured, v string) bool {
		n, ok := atoi32(v)
		r.Size = n
		return ok
	}},
	{"startupTimeoutSeconds", scopeRole, func(_ *workerv1.ModelDeployment, r *workerv1.ModelDeploymentRole, _ *unstructured.Unstructured, v string) bool {
		n, ok := atoi32(v)
		r.StartupTimeoutSeconds = &n
		return ok
	}},
	{"command", scopeRole, func(_ *workerv1.ModelDeployment, r *workerv1.ModelDeploymentRole, _ *unstructured.Unstructured, v string) bool {
		r.Command = strings.Fields(v)
		return true
	}},
	{"replicas", scopeNone, func(_ *workerv1.ModelDeployment, r *workerv1.ModelDeploymentRole, _ *unstructured.Unstructured, v string) bool {
		n, ok := atoi32(v)
		r.Replicas = n
		return ok
	}},
	{"elasticEp.width", scopeNone, func(_ *workerv1.ModelDeployment, r *workerv1.ModelDeploymentRole, _ *unstructured.Unstructured, v string) bool {
		n, ok := atoi32(v)
		if r.ElasticEP == nil {
			return false
		}
		r.ElasticEP.Width = n
		return ok
	}},
	{"InstanceType status.entrance", scopeInstanceType, func(_ *workerv1.ModelDeployment, _ *workerv1.ModelDeploymentRole, it *unstructured.Unstructured, v string) bool {
		return unstructured.SetNestedField(it.Object, v, "status", "entrance") == nil
	}},
	{"InstanceType status.detail.manufacturer", scopeInstanceType, func(_ *workerv1.ModelDeployment, _ *workerv1.ModelDeploymentRole, it *unstructured.Unstructured, v string) bool {
		return unstructured.SetNestedField(it.Object, v, "status", "detail", "manufacturer") == nil
	}},
}

// hashBase is an admitted seed and its render.
type hashBase struct {
	*fuzzing.Judged
	rendered *rendered
}

// hashBases are the seeds admitted as they are, each with its render: the deployments
// FuzzPodSpecHash edits.
var hashBases = sync.OnceValue(func() []hashBase {
	w, err := world()
	if err != nil {
		return nil
	}
	var out []hashBase
	for _, s := range w.Seeds {
		obj, _ := fuzzing.Decode(s.YAML)
		j, err := w.JudgeCreate(obj)
		if err != nil || !j.Admitted() {
			continue
		}
		if r, err := renderAll(w, j.Deployment, false); err == nil {
			out = append(out, hashBase{j, r})
		}
	}
	return out
})

// FuzzPodSpecHash edits one field of an admitted deployment (one of the seeds: base picks it, role
// picks the role, edit the field among hashEdits, value is the new value) and, when the edited
// deployment is admitted too, renders both. The pod-spec-hash is the role's configuration digest
// (docs/decisions/0004-revisions.md): the explicit deployment fields, the role's configuration
// without its replica count (nor an Elastic EP role's width) and the resolved bindings. Properties,
// per role:
//
//   - the Pod template changed (anything but the hash annotation) ⇒ the hash changed: no edit
//     reaches a Pod without rolling it;
//   - nothing the hash covers changed (the spec, semantically, apart from replicas and widths; the
//     InstanceType) ⇒ no role's hash changed: scaling and a no-op rewrite roll nothing;
//   - an edit changed a field in the role's scope (a deployment field, the role's own, its
//     InstanceType's status) ⇒ that role's hash changed.
//
// The cache client the kv-cache step adds (the pool's endpoint) is outside this render; the golden
// test TestPoolEndpointMovesConfigAndHash holds that binding to the same rule.
func FuzzPodSpecHash(f *testing.F) {
	w := loadWorld(f)
	bases := hashBases()
	if len(bases) == 0 {
		f.Fatal("no admitted seed to edit")
	}
	f.Fuzz(func(t *testing.T, base, role, edit byte, value string) {
		b := bases[int(base)%len(bases)]
		e := hashEdits[int(edit)%len(hashEdits)]
		md := b.Deployment.DeepCopy()
		r := &md.Spec.Roles[int(role)%len(md.Spec.Roles)]
		it := w.Find(workerv1.SchemeGroupVersion.String(), workerv1.InstanceTypeKind, "", r.InstanceType)
		if it == nil {
			t.Skip("the role's InstanceType is not in the world")
		}
		it = it.DeepCopy()
		if !e.apply(md, r, it, value) {
			t.Skip("the value does not fit the field")
		}
		roleName, typeName := r.Name, r.InstanceType
		edited := w
		if e.scope == scopeInstanceType {
			var err error
			if edited, err = w.With(it); err != nil {
				t.Skip("the InstanceType does not decode")
			}
			if _, violations, err := w.Checker.Check(it, nil); err != nil || len(violations) > 0 {
				t.Skip("the schema refuses the edited InstanceType")
			}
		}
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(md)
		if err != nil {
			t.Fatal(err)
		}
		j, err := edited.JudgeCreate(&unstructured.Unstructured{Object: raw})
		if err != nil {
			t.Fatal(err)
		}
		if !j.Admitted() {
			t.Skip("the edit is refused")
		}
		before := b.rendered
		after, err := renderAll(edited, j.Deployment, false)
		if err != nil {
			if strings.Contains(err.Error(), missingReference) || e.scope == scopeInstanceType {
				// An InstanceType's status is no deployment's to admit: one the render cannot use
				// (an unknown manufacturer) fails the render, which says so and waits.
				t.Skip(err)
			}
			t.Fatalf("an admitted edit does not render: %v", err)
		}
		unchanged := sameHashInputs(b.Deployment, j.Deployment) && (e.scope != scopeInstanceType ||
			equality.Semantic.DeepEqual(boundType(w.InstanceTypes[typeName]), boundType(edited.InstanceTypes[typeName])))
		for name, was := range before.roles {
			now := after.roles[name]
			if now == nil {
				t.Fatalf("role %s is not rendered after the edit", name)
			}
			hashWas, hashNow := was.Template.Annotations[workerv1.AnnotationPodSpecHash], now.Template.Annotations[workerv1.AnnotationPodSpecHash]
			templateMoved := !bytes.Equal(withoutHash(t, was.Template), withoutHash(t, now.Template))
			if templateMoved && hashWas == hashNow {
				t.Fatalf("%s: role %s's Pod template changed but its pod-spec-hash did not:\n%s\n%s", e.name, name,
					withoutHash(t, was.Template), withoutHash(t, now.Template))
			}
			if unchanged && hashWas != hashNow {
				t.Fatalf("%s: nothing the hash covers changed, but role %s's pod-spec-hash moved", e.name, name)
			}
			if inScope(e.scope, name, roleName, typeName, now) && !unchanged && changedInScope(e.scope, b.Deployment, j.Deployment, roleName) && hashWas == hashNow {
				t.Fatalf("%s: role %s's explicit configuration changed but its pod-spec-hash did not", e.name, name)
			}
		}
	})
}

// boundType is what the hash reads of a role's InstanceType (docs/decisions/0004-revisions.md): a
// status with no detail and one whose detail names no manufacturer bind the same.
func boundType(it *workerv1.InstanceType) any {
	if it == nil {
		return nil
	}
	manufacturer := ""
	if it.Status.Detail != nil {
		manufacturer = it.Status.Detail.Manufacturer
	}
	return []any{it.Name, it.Status.Entrance, manufacturer, it.Spec.Acceleratable, it.Spec.UnitResources, it.Spec.LocalStorage}
}

// sameHashInputs reports whether two deployments are the same to the hash: the spec, semantically,
// with every role's replica count and Elastic EP width set aside and its defaults applied (a managed
// role's grace among them).
func sameHashInputs(a, b *workerv1.ModelDeployment) bool {
	return equality.Semantic.DeepEqual(hashView(a), hashView(b))
}

func hashView(md *workerv1.ModelDeployment) workerv1.ModelDeploymentSpec {
	spec := *md.Spec.DeepCopy()
	for i, r := range spec.Roles {
		r = r.WithDefaults()
		// A managed role's default grace written out is the default left unwritten: one Pod, one
		// hash (docs/decisions/0007-drain-hook.md).
		r.TerminationGracePeriodSeconds = configuredGrace(r)
		r.Replicas = 0
		if r.ElasticEP != nil {
			r.ElasticEP.Width = 0
		}
		spec.Roles[i] = r
	}
	return spec
}

// inScope reports whether a rendered role is one an edit of scope must move: every role for a
// deployment field, the edited role for its own field (the Elastic EP head is rendered from its
// role's spec too), the roles on the edited InstanceType for a binding.
func inScope(scope editScope, name, edited, typeName string, r *RenderedRole) bool {
	switch scope {
	case scopeDeployment:
		return true
	case scopeRole:
		return name == edited
	case scopeInstanceType:
		return r.Role.InstanceType == typeName
	}
	return false
}

// changedInScope reports whether the edit changed what it was applied to: the deployment's own
// fields, or the edited role, as the hash reads them.
func changedInScope(scope editScope, a, b *workerv1.ModelDeployment, role string) bool {
	va, vb := hashView(a), hashView(b)
	switch scope {
	case scopeDeployment:
		va.Roles, vb.Roles = nil, nil
		return !equality.Semantic.DeepEqual(va, vb)
	case scopeRole:
		for i := range va.Roles {
			if va.Roles[i].Name == role {
				return !equality.Semantic.DeepEqual(va.Roles[i], vb.Roles[i])
			}
		}
	case scopeInstanceType:
		return true // unchanged, computed by the caller, covers the type
	}
	return false
}
