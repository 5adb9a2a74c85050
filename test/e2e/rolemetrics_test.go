package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// scrapeControllers reads the metrics of the stack's mdplane-controllers (the leader).
func scrapeControllers() (string, error) {
	resp, err := http.Get(stack.ControllersMetricsURL()) //nolint:noctx // a scrape of the stack's own Pod in a test
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// TestARoleIsDashboarded: a running deployment's role shows on the controllers' metrics endpoint as
// declared, standing and Ready, with its replicas' time to admission and to Ready observed; the
// deployment's status.phase reads Ready, and Degraded once a scale-up leaves it short.
func TestARoleIsDashboarded(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := ownName(t, "ns")
	const name = "dash"
	runOnH20(t, ctx, ns, "dash", 8, name, 2, deploymentOnH20(ns, name, "server Server 2 1"))
	labels := fmt.Sprintf(`{deployment=%q,namespace=%q,role="server"}`, name, ns)
	eventually(t, time.Minute, "the role's gauges and its replicas' histograms scraped", func() error {
		body, err := scrapeControllers()
		if err != nil {
			return err
		}
		for _, want := range []string{
			"mdplane_role_replicas_declared" + labels + " 2",
			"mdplane_role_replicas_standing" + labels + " 2",
			"mdplane_role_replicas_ready" + labels + " 2",
			"mdplane_role_replicas_up_to_date" + labels + " 2",
			"mdplane_role_replacements_in_flight" + labels + " 0",
			"mdplane_role_retirements_in_flight" + labels + " 0",
		} {
			if !strings.Contains(body, want+"\n") {
				return fmt.Errorf("no %s", want)
			}
		}
		for _, h := range []string{"mdplane_replica_time_to_admitted_seconds_count", "mdplane_replica_time_to_ready_seconds_count"} {
			if strings.Contains(body, h+" 0\n") || !strings.Contains(body, h+" ") {
				return fmt.Errorf("%s observed nothing", h)
			}
		}
		return nil
	})
	phase := func(want workerv1.Phase) func() error {
		return func() error {
			md, err := modelDeployment(ctx, ns, name)
			if err != nil {
				return err
			}
			if md.Status.Phase != want {
				return fmt.Errorf("phase %q (%s), want %q", md.Status.Phase, md.Status.PhaseMessage, want)
			}
			return nil
		}
	}
	eventually(t, editRendered, "the deployment's phase Ready", phase(workerv1.PhaseReady))
	// Past the queue's quota: the third replica waits, and the deployment serves short of it.
	setQuota(t, ctx, "dash", 2)
	patchReplicas(t, ns, name, 3)
	eventually(t, editRendered, "the deployment's phase Degraded, naming the short role", func() error {
		if err := phase(workerv1.PhaseDegraded)(); err != nil {
			return err
		}
		md, err := modelDeployment(ctx, ns, name)
		if err != nil {
			return err
		}
		if md.Status.PhaseMessage != "role server has 2 of 3 replicas Ready" {
			return fmt.Errorf("phaseMessage %q", md.Status.PhaseMessage)
		}
		return nil
	})
}
