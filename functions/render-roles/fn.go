package renderroles

import (
	"context"
	"fmt"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/response"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/xfn"
)

// FunctionName is the name Crossplane gives this function when a Configuration depends on its
// package, and so the name Compositions call it by.
const FunctionName = "mdplane-function-render-roles"

// Function is the render-roles composition function.
type Function struct {
	fnv1.UnimplementedFunctionRunnerServiceServer

	Log logging.Logger
}

// step renders one kind of composite. It writes desired state and requirements into rsp and returns
// an error when the composite cannot be rendered.
type step func(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, xr *resource.Composite) error

// phases makes a step of its three phases. observe reads the request into a plain struct, nil while
// Crossplane has not fetched what the step required (it calls again once it has); plan decides,
// reading and writing nothing; write puts the desired objects, conditions and status on the
// response.
func phases[O, P any](
	observe func(*fnv1.RunFunctionRequest, *fnv1.RunFunctionResponse, *resource.Composite) (*O, error),
	plan func(*O) (*P, error),
	write func(*fnv1.RunFunctionRequest, *fnv1.RunFunctionResponse, *resource.Composite, *O, *P) error,
) step {
	return func(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, xr *resource.Composite) error {
		o, err := observe(req, rsp, xr)
		if err != nil || o == nil {
			return err
		}
		p, err := plan(o)
		if err != nil {
			return err
		}
		return write(req, rsp, xr, o, p)
	}
}

// RunFunction picks the step for the composite's kind.
func (f *Function) RunFunction(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	rsp := response.To(req, response.DefaultTTL)
	xr, err := request.GetObservedCompositeResource(req)
	if err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot read the observed composite: %w", err))
		return rsp, nil
	}
	steps := map[schema.GroupVersionKind]step{
		workerv1.SchemeGroupVersion.WithKind(workerv1.ModelDeploymentKind): deploymentStep,
	}
	gvk := xr.Resource.GroupVersionKind()
	run, ok := steps[gvk]
	if !ok {
		response.Fatal(rsp, fmt.Errorf("render-roles composes ModelDeployments, not %s", gvk))
		return rsp, nil
	}
	if err := run(req, rsp, xr); err != nil {
		if f.Log != nil {
			f.Log.Info("render failed", "composite", xr.Resource.GetName(), "error", err.Error())
		}
		xfn.Fatal(rsp, err)
		return rsp, nil
	}
	return rsp, nil
}

// statusReady reports whether a composite's Ready condition is True.
func statusReady(s xpv2.ConditionedStatus) bool {
	return s.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue
}
