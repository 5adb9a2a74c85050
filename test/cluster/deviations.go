package cluster

import (
	"fmt"
	"strings"
)

// Deviation is one way the stack runs a component otherwise than a default install on a cluster
// does. Every flag the stack gives a component beyond what that component's own install sets is a
// row here, and docs/install.md tells users the same (TestDeviationsAreDocumented): a setting the
// stack made silently would make it kinder than the clusters users run.
type Deviation struct {
	// Component is the program, by its log's name.
	Component string
	// Flag is the command-line flag, without its value; empty for a deviation that is not a flag
	// (an identity, a missing controller).
	Flag string
	// value is the flag's value on a stack started with the options; "" leaves the flag out. Nil for
	// a flag a test passes itself (Options.ControllerArgs).
	value func(Options) string
	// Why the stack deviates, and what a user does instead.
	Why string
}

// Deviations are every deviation of the stack from a default install, by component.
var Deviations = []Deviation{
	{Component: "crossplane", Flag: "--poll-interval", value: func(o Options) string { return o.CrossplanePollInterval.String() },
		Why: "tests wait for composites to settle; the default (1m) also converges, more slowly (set through the chart's args value)"},
	{Component: "crossplane", Flag: "--debug", value: fixed(""),
		Why: "debug logs, for a failing test's logs; no change of behaviour (set through the chart's args value)"},
	{Component: "kube-apiserver", Flag: "",
		Why: "the real node is the stack's system node pool: the PodNodeSelector admission plugin and its annotation on kube-system, crossplane-system and mdplane-system (made before mdplane's install) pin their Pods to it, as a cluster pins its add-ons to a system pool; the fake nodes, which are free and large, would otherwise be chosen, and cannot run a container"},
	{Component: "kueue", Flag: "--feature-gates", value: fixed("VisibilityOnDemand=false,TASReplaceNodeOnNodeTaints=false"),
		Why: "VisibilityOnDemand: the visibility API server would listen on every interface, and mdplane does not use it; TASReplaceNodeOnNodeTaints: docs/install.md's Prerequisites ask for it off, since Kueue v0.17 judges a tainted node by the Workload's Pod template alone and evicts a topology-placed replica its flavor lets onto that node"},
	{Component: "kueue", Flag: "--zap-log-level", value: fixed("2"),
		Why: "verbose logs, for a failing test's logs; no change of behaviour"},
	{Component: "kueue", Flag: "",
		Why: "its Configuration is the release's controller_manager_config.yaml with internal certificate management, metrics and leader election off, webhooks on loopback with envtest's certificate, and the Pod integration alone"},
	{Component: "kueue", Flag: "",
		Why: "waitForPodsReady on, timeout 2m (recoveryTimeout the same), which the release leaves commented out: mdplane is tested under it as clusters that turn it on run it; docs/operations.md sizes it"},
	{Component: "kube-controller-manager", Flag: "--controllers", value: fixed("garbage-collector-controller,namespace-controller,endpoints-controller,endpointslice-controller,node-lifecycle-controller,clusterrole-aggregation-controller,deployment-controller,replicaset-controller,job-controller,serviceaccount-controller,root-ca-certificate-publisher-controller,pod-garbage-collector-controller,taint-eviction-controller,disruption-controller,persistentvolume-binder-controller,persistentvolume-protection-controller,persistentvolumeclaim-protection-controller,horizontal-pod-autoscaler-controller"),
		Why: "only the controllers the tests rely on; a cluster runs them all"},
	{Component: "kube-controller-manager", Flag: "--use-service-account-credentials", value: fixed("true"),
		Why: "each controller runs as its own ServiceAccount with its bootstrap role, as kubeadm and managed clusters run it (the binary's default runs them all as the manager)"},
	{Component: "containerd", Flag: "",
		Why: "keeps every container's oom_score_adj at or above 0 (restrict_oom_score_adj: a machine whose capability bounding set lacks CAP_SYS_RESOURCE starts no sandbox otherwise), pulls every registry through the stack's own, and reaches nothing else"},
	{Component: "coredns", Flag: "",
		Why: "the kubernetes plugin without forward: the stack's Pods resolve the cluster's names and nothing outside it"},
	{Component: "kube-proxy", Flag: "",
		Why: "the stack translates the fake nodes' Pod range to its exporter in an nftables table of its own, beside kube-proxy's"},
	{Component: "mdplane-controllers", Flag: "--park-after",
		Why: "the e2e suite parks a set in a minute and a half to watch it; the default is 30m"},
	{Component: "mdplane-controllers", Flag: "--queue-instance-types",
		Why: "the e2e suite makes its own queues for the types of its examples; the default manages every type's queue"},
	{Component: "mdplane-controllers", Flag: "--model-artifact-retry-interval",
		Why: "the e2e suite watches a refused artifact resolve again in seconds; the default is 5m"},
}

func fixed(v string) func(Options) string { return func(Options) string { return v } }

// deviationFlags are the flags of component's deviations on a stack with opts, as "--flag=value"
// ("--flag" where the value is empty).
func deviationFlags(component string, opts Options) []string {
	var out []string
	for _, d := range Deviations {
		if d.Component != component || d.Flag == "" || d.value == nil {
			continue
		}
		if v := d.value(opts); v != "" {
			out = append(out, d.Flag+"="+v)
		} else {
			out = append(out, d.Flag)
		}
	}
	return out
}

// checkListed refuses a flag a test passes to component that Deviations does not list.
func checkListed(component string, args []string) error {
	for _, a := range args {
		flag, _, _ := strings.Cut(a, "=")
		listed := false
		for _, d := range Deviations {
			listed = listed || d.Component == component && d.Flag == flag
		}
		if !listed {
			return fmt.Errorf("the stack would give %s the flag %s, which test/cluster's Deviations does not list (add it there with its reason, and to docs/install.md)", component, flag)
		}
	}
	return nil
}
