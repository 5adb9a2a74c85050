package renderroles

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/fuzzing"
	"github.com/mdplane/mdplane/internal/xfn"
)

// world is the fixed cluster of the fuzz targets, loaded once per process.
var world = sync.OnceValues(fuzzing.LoadWorld)

func loadWorld(tb testing.TB) *fuzzing.World {
	tb.Helper()
	w, err := world()
	if err != nil {
		tb.Fatal(err)
	}
	return w
}

// missingReference is how a render failure names an object the deployment refers to that the
// cluster does not hold ("... names InstanceType "x", which does not exist", "... names KVCachePool
// p, which does not exist"): the one render failure an admitted deployment may meet.
const missingReference = "which does not exist"

// FuzzDeploymentFromYAML drives a ModelDeployment manifest through decode → admission → render, the
// path `mdplane render` takes, against the fixed world of internal/fuzzing (the golden and example
// clusters, the cases' artifacts and cache chains, the default Settings). Inputs that are not one
// ModelDeployment document are skipped. Properties:
//
//   - every refusal, the schema's and the webhook's, names a field path that exists in the input or
//     in the object as stored with its defaults (a missing required field: its parent exists);
//   - an admitted deployment renders (its inputs resolved through the same requirements the function
//     asks Crossplane for, then every role, the Elastic EP head, the ModelRoles, replica 0's Pods and
//     the Services), unless the render says a referenced object does not exist;
//   - admission and render are deterministic: judging again gives the same refusals in the same
//     order, rendering again gives the same bytes.
func FuzzDeploymentFromYAML(f *testing.F) {
	w := loadWorld(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, ok := fuzzing.Decode(data)
		if !ok {
			t.Skip("not one ModelDeployment document")
		}
		input := obj.DeepCopy().Object
		j, err := w.JudgeCreate(obj)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range j.Refusals {
			if !fuzzing.NamesAField(r, input, j.Stored.Object) {
				t.Fatalf("a refusal names no field of the input: %s", r)
			}
		}
		again, err := w.JudgeCreate(obj)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(again.Refusals) != fmt.Sprint(j.Refusals) {
			t.Fatalf("admission is not deterministic:\n%v\n%v", j.Refusals, again.Refusals)
		}
		if !j.Admitted() {
			return
		}
		first, err := renderAll(w, j.Deployment)
		if err != nil {
			if strings.Contains(err.Error(), missingReference) {
				return
			}
			t.Fatalf("an admitted deployment does not render: %v", err)
		}
		second, err := renderAll(w, j.Deployment)
		if err != nil {
			t.Fatalf("the second render fails: %v", err)
		}
		if !bytes.Equal(first.bytes, second.bytes) {
			t.Fatalf("the render is not deterministic:\n%s\n%s", first.bytes, second.bytes)
		}
	})
}

// rendered is what renderAll renders of a deployment: every role's RenderedRole by role name (the
// Elastic EP head under its own name), and all of it marshalled.
type rendered struct {
	roles map[string]*RenderedRole
	bytes []byte
}

// renderAll renders a deployment as the render-roles deployment step and the controllers that
// materialize its roles do, without the protobuf layer: its inputs resolved by the step's own
// requirements, answered from the world, the plan (every role, the head, the status), then each role's ModelRole, the Pods of
// replica 0 from its current revision, the instance Service and the role Service.
func renderAll(w *fuzzing.World, md *workerv1.ModelDeployment) (*rendered, error) {
	in, err := resolveInputs(w, md)
	if err != nil {
		return nil, err
	}
	o := &deploymentObservation{md: md, inputs: in, roles: map[string]*v1alpha1.ModelRole{},
		exists: map[resource.Name]bool{}, eligibilityMarked: map[resource.Name]bool{}}
	p, err := planDeployment(o)
	if err != nil {
		return nil, err
	}
	out := &rendered{roles: map[string]*RenderedRole{}}
	var objs []any
	add := func(role workerv1.ModelDeploymentRole, r *RenderedRole, d *Delivery) {
		out.roles[role.Name] = r
		mr := modelRole(md, role, r, d)
		replica := Replica{Namespace: md.Namespace, Deployment: md.Name, Role: role.Name, Revision: CurrentRevision(mr.Spec)}
		objs = append(objs, mr, RenderMembers(replica), RenderInstanceService(replica),
			RenderRoleService(md.Namespace, naming.RoleServiceName(md.Name, role.Name), md.Name, role.Name, r, false))
	}
	if p.head != nil {
		add(p.head.Role, p.head, nil)
	}
	for i, role := range p.roles {
		add(role, p.rendered[i], in.delivery)
	}
	objs = append(objs, p.status, p.quota, p.upToDate, p.weights, p.eligibility)
	if out.bytes, err = json.Marshal(objs); err != nil {
		return nil, err
	}
	return out, nil
}

// resolveInputs runs the deployment step's readDeploymentInputs until its requirements settle, as
// Crossplane calls a step, answering each requirement by name from the world.
func resolveInputs(w *fuzzing.World, md *workerv1.ModelDeployment) (*deploymentInputs, error) {
	req := &fnv1.RunFunctionRequest{RequiredResources: map[string]*fnv1.Resources{}}
	for range 5 {
		rsp := &fnv1.RunFunctionResponse{}
		r := xfn.NewRequirements(req, rsp)
		in, err := readDeploymentInputs(r, md)
		if err != nil || !r.Pending {
			return in, err
		}
		for key, sel := range rsp.GetRequirements().GetResources() {
			res, err := fetchByName(w, sel)
			if err != nil {
				return nil, err
			}
			req.RequiredResources[key] = res
		}
	}
	return nil, errors.New("the requirements do not settle")
}

// fetchByName answers a by-name requirement from the world.
func fetchByName(w *fuzzing.World, sel *fnv1.ResourceSelector) (*fnv1.Resources, error) {
	if sel.GetMatchName() == "" {
		return nil, fmt.Errorf("a requirement by labels: %v", sel)
	}
	obj := w.Find(sel.GetApiVersion(), sel.GetKind(), sel.GetNamespace(), sel.GetMatchName())
	if obj == nil {
		return &fnv1.Resources{}, nil
	}
	s, err := structpb.NewStruct(obj.Object)
	if err != nil {
		return nil, err
	}
	return &fnv1.Resources{Items: []*fnv1.Resource{{Resource: s}}}, nil
}

// withoutHash is a rendered Pod template without its pod-spec-hash, marshalled.
func withoutHash(tb testing.TB, t corev1.PodTemplateSpec) []byte {
	tb.Helper()
	t = *t.DeepCopy()
	delete(t.Annotations, workerv1.AnnotationPodSpecHash)
	b, err := json.Marshal(t)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
