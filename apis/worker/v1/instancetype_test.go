package v1_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// TestBorrowing: a type whose queue borrows from its cohort says so, naming itself; near misses: a
// type that only lends, and no type, say nothing.
func TestBorrowing(t *testing.T) {
	typed := func(reason string) *workerv1.InstanceType {
		return &workerv1.InstanceType{ObjectMeta: metav1.ObjectMeta{Name: "h100"}, Status: workerv1.InstanceTypeStatus{Conditions: []metav1.Condition{
			{Type: workerv1.InstanceTypeCohort, Status: metav1.ConditionTrue, Reason: reason, Message: "in cohort pool: borrows 2 nvidia.com/gpu"}}}}
	}
	if got := typed(workerv1.ReasonBorrowing).Borrowing(); got != "InstanceType h100 in cohort pool: borrows 2 nvidia.com/gpu" {
		t.Errorf("borrowing: %q", got)
	}
	if got := typed(workerv1.ReasonLending).Borrowing(); got != "" {
		t.Errorf("lending: %q", got)
	}
	var none *workerv1.InstanceType
	if got := none.Borrowing(); got != "" {
		t.Errorf("no type: %q", got)
	}
}
