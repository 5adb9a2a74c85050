package renderroles

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/response"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	kvcache "github.com/mdplane/mdplane/functions/kv-cache"
	"github.com/mdplane/mdplane/internal/fuzzing"
	"github.com/mdplane/mdplane/internal/replicas"
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
//     the Services, then the kv-cache step on what was composed), unless the render says a
//     referenced object does not exist;
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
		first, err := renderAll(w, j.Deployment, true)
		if err != nil {
			if strings.Contains(err.Error(), missingReference) {
				return
			}
			t.Fatalf("an admitted deployment does not render: %v", err)
		}
		second, err := renderAll(w, j.Deployment, true)
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
// requirements, answered from the world, the plan (every role, the head, the status), then each
// role's ModelRole, the Pods of replica 0 from its current revision, the instance Service and the
// role Service; with kvCache, then the kv-cache step on what the step composed, as Crossplane
// calls it.
func renderAll(w *fuzzing.World, md *workerv1.ModelDeployment, kvCache bool) (*rendered, error) {
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
		replica := replicas.Replica{Namespace: md.Namespace, Deployment: md.Name, Role: role.Name, Revision: replicas.CurrentRevision(mr.Spec)}
		objs = append(objs, mr, replicas.RenderMembers(replica), replicas.RenderInstanceService(replica),
			RenderRoleService(md.Namespace, naming.RoleServiceName(md.Name, role.Name), md.Name, role.Name, r, false))
	}
	if p.head != nil {
		add(p.head.Role, p.head, nil)
	}
	for i, role := range p.roles {
		add(role, p.rendered[i], in.delivery)
	}
	objs = append(objs, p.status, p.quota, p.upToDate, p.weights, p.eligibility)
	if out.bytes, err = json.Marshal(objs); err != nil || !kvCache {
		return out, err
	}
	// What the step composes, as writeDeployment writes it: the ModelRoles and Services.
	composed := map[resource.Name]*resource.DesiredComposed{}
	if err := composeRoles(composed, o, p); err != nil {
		return nil, err
	}
	first := md.Spec.Roles[0].Name
	if composed[deploymentServiceResource], err = xfn.Composed(RenderRoleService(md.Namespace, md.Name, md.Name, first, p.rendered[0], false), false); err != nil {
		return nil, err
	}
	rsp := &fnv1.RunFunctionResponse{}
	if err := response.SetDesiredComposedResources(rsp, composed); err != nil {
		return nil, err
	}
	amended, err := runKVCache(w, md, rsp.GetDesired())
	if err != nil {
		return nil, fmt.Errorf("step kv-cache: %w", err)
	}
	out.bytes = append(out.bytes, amended...)
	return out, nil
}

// runKVCache runs the kv-cache step, the Composition's next, on what the render-roles step composed,
// as Crossplane calls it: the deployment observed, the ModelRoles and Services desired, called again
// until its requirements settle, each answered by name from the world. It returns the desired state
// it writes, marshalled; a fatal result is an error.
func runKVCache(w *fuzzing.World, md *workerv1.ModelDeployment, desired *fnv1.State) ([]byte, error) {
	xr, err := structOf(md)
	if err != nil {
		return nil, err
	}
	req := &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: xr}}, Desired: desired,
		RequiredResources: map[string]*fnv1.Resources{}}
	fn := &kvcache.Function{}
	for range 5 {
		rsp, err := fn.RunFunction(context.Background(), req)
		if err != nil {
			return nil, err
		}
		for _, r := range rsp.GetResults() {
			if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
				return nil, errors.New(r.GetMessage())
			}
		}
		settled := true
		for key, sel := range rsp.GetRequirements().GetResources() {
			if _, answered := req.RequiredResources[key]; answered {
				continue
			}
			settled = false
			if req.RequiredResources[key], err = fetchByName(w, sel); err != nil {
				return nil, err
			}
		}
		if settled {
			return proto.MarshalOptions{Deterministic: true}.Marshal(rsp.GetDesired())
		}
	}
	return nil, errors.New("the kv-cache step's requirements do not settle")
}

// structOf is an API object as a function request carries it.
func structOf(obj runtime.Object) (*structpb.Struct, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	s := &structpb.Struct{}
	return s, protojson.Unmarshal(b, s)
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
