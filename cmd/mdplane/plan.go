package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/admission"
	"github.com/mdplane/mdplane/internal/pipeline"
	"github.com/mdplane/mdplane/internal/plan"
	"github.com/mdplane/mdplane/internal/schemacheck"
)

type planCmd struct {
	Files      []string `short:"f" name:"filename" required:"" help:"The edited ModelDeployment (one), with any InstanceTypes, KVCachePools, KVCachePoolBindings, ModelArtifacts and Settings it references; a directory means its .yaml, .yml and .json files."`
	Old        []string `name:"old" help:"The stored version of the deployment (and what it references), for an offline plan; without it the stored deployment and its replicas are read from the cluster."`
	Kubeconfig string   `name:"kubeconfig" help:"The kubeconfig to read the cluster with; KUBECONFIG and ~/.kube/config otherwise."`
	Context    string   `name:"context" help:"The kubeconfig context to use."`
	Output     string   `short:"o" name:"output" enum:"table,json" default:"table" help:"table or json."`
}

// Run plans the edit: admission first (a refused edit rolls nothing and exits 1), then both
// versions rendered down to their Pods and the rollout simulated with the rollout controller's own
// pacing.
func (c *planCmd) Run(e *env) error {
	ctx := context.Background()
	checker, engine, err := renderer()
	if err != nil {
		return err
	}
	edited, err := schemacheck.ReadFiles(c.Files...)
	if err != nil {
		return err
	}
	md, err := theDeployment(edited)
	if err != nil {
		return err
	}
	var stored []schemacheck.Document
	var live *clusterState
	if len(c.Old) > 0 {
		if stored, err = schemacheck.ReadFiles(c.Old...); err != nil {
			return err
		}
	} else {
		if live, err = readCluster(ctx, c.Kubeconfig, c.Context, md.GetNamespace(), md.GetName()); err != nil {
			return err
		}
		stored = live.stored
	}
	in, err := planInput(ctx, checker, engine, md, edited, stored)
	if err != nil {
		return err
	}
	if live != nil && in.Refusals == nil {
		if err := live.observe(ctx, &in); err != nil {
			return err
		}
	}
	p := plan.Make(in)
	for _, w := range admission.SettingsWarnings(edited) {
		fmt.Fprintln(e.stderr, "warning:", w)
	}
	for _, r := range p.Refusals {
		fmt.Fprintln(e.stderr, "error:", r)
	}
	if c.Output == "json" {
		out, err := json.MarshalIndent(p, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, string(out))
	} else if p.Admitted {
		printPlan(e.stdout, p)
	}
	if !p.Admitted {
		return errRefused
	}
	return nil
}

// theDeployment is the one ModelDeployment among the edited documents, namespaced (default when
// the file names none).
func theDeployment(docs []schemacheck.Document) (*unstructured.Unstructured, error) {
	var found []*unstructured.Unstructured
	for _, d := range docs {
		if d.Object.GroupVersionKind() == workerv1.SchemeGroupVersion.WithKind(workerv1.ModelDeploymentKind) {
			if d.Object.GetNamespace() == "" {
				d.Object.SetNamespace("default")
			}
			found = append(found, d.Object)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("plan needs exactly one ModelDeployment among the -f manifests, found %d", len(found))
	}
	return found[0], nil
}

// withReferences is docs and the objects of others they do not hold themselves, ModelDeployments
// apart: what one version references is used for both.
func withReferences(docs, others []schemacheck.Document) []schemacheck.Document {
	have := map[string]bool{}
	for _, d := range docs {
		have[schemacheck.Key(d.Object)] = true
	}
	out := append([]schemacheck.Document{}, docs...)
	for _, d := range others {
		if d.Object.GetKind() != workerv1.ModelDeploymentKind && !have[schemacheck.Key(d.Object)] {
			out = append(out, d)
		}
	}
	return out
}

// planInput judges the edit as an update of the stored version and renders both.
func planInput(ctx context.Context, checker *schemacheck.Checker, engine *pipeline.Engine, md *unstructured.Unstructured, edited, stored []schemacheck.Document) (plan.Input, error) {
	in := plan.Input{Namespace: md.GetNamespace(), Deployment: md.GetName()}
	editedDocs, storedDocs := withReferences(edited, stored), withReferences(stored, edited)
	objects, refusals, err := admission.Judge(checker, editedDocs, storedDocs)
	if err != nil {
		return in, err
	}
	for _, r := range append(unknownKinds(checker, editedDocs), refusals...) {
		in.Refusals = append(in.Refusals, r.String())
	}
	if len(in.Refusals) > 0 {
		return in, nil
	}
	if in.Edited, err = renderDeployment(ctx, engine, objects, md); err != nil {
		return in, fmt.Errorf("rendering the edited deployment: %w", err)
	}
	storedObjects, refusals, err := admission.Judge(checker, storedDocs, nil)
	if err != nil {
		return in, err
	}
	if len(refusals) > 0 {
		return in, fmt.Errorf("the stored deployment does not render: %s", refusals[0])
	}
	if in.Stored, err = renderDeployment(ctx, engine, storedObjects, md); err != nil {
		return in, fmt.Errorf("rendering the stored deployment: %w", err)
	}
	in.Manufacturers = manufacturers(objects)
	return in, nil
}

// renderDeployment renders the ModelDeployment named like md among objects down to its Pods.
func renderDeployment(ctx context.Context, engine *pipeline.Engine, objects []*unstructured.Unstructured, md *unstructured.Unstructured) (plan.Render, error) {
	for _, obj := range objects {
		if obj.GetKind() != workerv1.ModelDeploymentKind || obj.GetNamespace() != md.GetNamespace() || obj.GetName() != md.GetName() {
			continue
		}
		outputs, err := engine.Render(ctx, obj, objects)
		if err != nil {
			return plan.Render{}, err
		}
		all := []*unstructured.Unstructured{obj} // its spec: a composite's render carries only its status
		for _, o := range outputs {
			if o.Composite != nil && o.Composite.GetKind() != workerv1.ModelDeploymentKind {
				all = append(all, o.Composite)
			}
			for _, c := range o.Composed {
				all = append(all, c.Object)
			}
			all = append(all, o.Materialized...)
		}
		return plan.RenderOf(all)
	}
	return plan.Render{}, fmt.Errorf("no ModelDeployment %s/%s among the stored manifests", md.GetNamespace(), md.GetName())
}

// manufacturers maps each InstanceType to its accelerator manufacturer, as its status reports it.
func manufacturers(objects []*unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	for _, obj := range objects {
		if obj.GroupVersionKind() == workerv1.SchemeGroupVersion.WithKind(workerv1.InstanceTypeKind) {
			m, _, _ := unstructured.NestedString(obj.Object, "status", "detail", "manufacturer")
			out[obj.GetName()] = m
		}
	}
	return out
}

// printPlan writes the plan as a table: one block per role, then the warnings.
func printPlan(w io.Writer, p plan.Plan) {
	mode := "against the cluster"
	if p.Offline {
		mode = "offline: every stored replica taken as admitted and Ready"
	}
	fmt.Fprintf(w, "ModelDeployment %s/%s: admitted; cadence %s (%s)\n", p.Namespace, p.Deployment, p.Cadence, mode)
	for _, r := range p.Roles {
		fmt.Fprintf(w, "\nrole %s (%s): %s\n", r.Name, r.Kind, r.Action)
		for _, why := range r.Why {
			fmt.Fprintf(w, "  why:       %s\n", why)
		}
		fmt.Fprintf(w, "  replicas:  %d → %d\n", r.Replicas.From, r.Replicas.To)
		if len(r.Leaving) > 0 {
			fmt.Fprintf(w, "  leaving:   %s (scale-down, highest first, before any replacement)\n", ordinals(r.Leaving))
		}
		if len(r.Created) > 0 {
			fmt.Fprintf(w, "  created:   %s (scale-up, at once)\n", ordinals(r.Created))
		}
		if len(r.Order) > 0 {
			fmt.Fprintf(w, "  order:     %s\n", ordinals(r.Order))
		}
		fmt.Fprintf(w, "  quota:     %s\n", quotaLine(r.Quota, len(r.Order) > 0, p.Offline))
		for i, s := range r.Steps {
			line := fmt.Sprintf("  step %d:    replace r%d; serving ≥ %d (%d if every earlier replacement is Ready)", i+1, s.Replace, s.ServingAtLeast, s.ServingOnceReady)
			if s.Waits != "" {
				line += "; first waits: " + s.Waits
			}
			fmt.Fprintln(w, line)
		}
		for _, line := range podChangeLines(r.PodChanges) {
			fmt.Fprintf(w, "  pod:       %s\n", line)
		}
	}
	if len(p.Warnings) > 0 {
		fmt.Fprintln(w)
		for _, warning := range p.Warnings {
			fmt.Fprintf(w, "warning: %s\n", warning)
		}
	}
}

func ordinals(os []int32) string {
	var parts []string
	for _, o := range os {
		parts = append(parts, fmt.Sprintf("r%d", o))
	}
	return strings.Join(parts, ", ")
}

func quotaLine(q plan.Quota, rolls, offline bool) string {
	line := "one replica needs " + resources(q.PerReplacement)
	switch {
	case q.Free == nil && offline:
		line += "; free: unknown offline"
	case q.Free == nil:
		line += "; free: unknown (the deployment's LocalQueue or ClusterQueue was not found)"
	default:
		line += "; queue free " + resources(q.Free)
		if rolls && q.WaitsForCapacity != nil {
			if *q.WaitsForCapacity {
				line += ", plus what the departing replica frees: will wait for capacity"
			} else {
				line += ", plus what the departing replica frees: fits"
			}
		}
	}
	if q.ScaleUp != nil {
		line += "; the scale-up needs " + resources(q.ScaleUp)
		if q.ScaleUpWaits != nil {
			if *q.ScaleUpWaits {
				line += ": will wait for capacity"
			} else {
				line += ": fits"
			}
		}
	}
	return line
}
