package validation_test

import (
	"fmt"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mdplane/mdplane/internal/fuzzing"
)

var world = sync.OnceValues(fuzzing.LoadWorld)

// updateBases are the seeds the schema admits on create: the stored objects FuzzUpdateRules edits.
var updateBases = sync.OnceValue(func() []*unstructured.Unstructured {
	w, err := world()
	if err != nil {
		return nil
	}
	var out []*unstructured.Unstructured
	for _, s := range w.Seeds {
		obj, _ := fuzzing.Decode(s.YAML)
		if j, err := w.JudgeCreate(obj); err == nil && schemaAdmits(j) {
			out = append(out, obj)
		}
	}
	return out
})

// FuzzUpdateRules updates a stored deployment through admission: the schema's update rules, then
// ValidateUpdate, against the fixed world of internal/fuzzing. The stored object (old) is a seed
// (base picks it, among those the schema admits on create) with one fuzzed field written
// (oldPath, a field path such as spec.roles[0].extraArgs[1], and oldValue, YAML; none when
// oldPath is empty), and skipped unless the schema still admits it; the update (new) is old with
// one more field written (newPath, newValue). Properties:
//
//   - no rule panics, and every refusal names a field path that exists in the new object or, for a
//     removal, in the stored one (as written or with its defaults; a missing required field: its
//     parent exists);
//   - ValidateUpdate is deterministic: judging again gives the same refusals in the same order;
//   - an object admitted on create is admitted as an update to itself (an apply that changes nothing
//     is never refused), for old and for new;
//   - the update that only releases a deleted deployment's finalizers is admitted, whatever the
//     stored object holds.
func FuzzUpdateRules(f *testing.F) {
	w, err := world()
	if err != nil {
		f.Fatal(err)
	}
	bases := updateBases()
	if len(bases) == 0 {
		f.Fatal("no seed the schema admits")
	}
	f.Fuzz(func(t *testing.T, base byte, oldPath string, oldValue []byte, newPath string, newValue []byte) {
		old := bases[int(base)%len(bases)].DeepCopy()
		if oldPath != "" && !fuzzing.Set(old.Object, oldPath, fuzzing.DecodeValue(oldValue)) {
			t.Skip("oldPath cannot be written")
		}
		obj := old.DeepCopy()
		if !fuzzing.Set(obj.Object, newPath, fuzzing.DecodeValue(newValue)) {
			t.Skip("newPath cannot be written")
		}
		stored, err := w.JudgeCreate(old)
		if err != nil {
			t.Fatal(err)
		}
		if !schemaAdmits(stored) {
			t.Skip("the schema refuses old: it cannot be stored")
		}
		fields := []map[string]any{obj.Object, w.Checker.Default(obj).Object, old.Object, stored.Stored.Object}
		j, err := w.JudgeUpdate(obj, old)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range j.Refusals {
			if !fuzzing.NamesAField(r, fields...) {
				t.Fatalf("an update refusal names no field of either object: %s", r)
			}
		}
		again, err := w.JudgeUpdate(obj, old)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(again.Refusals) != fmt.Sprint(j.Refusals) {
			t.Fatalf("the update rules are not deterministic:\n%v\n%v", j.Refusals, again.Refusals)
		}
		selfUpdate(t, w, old, stored)
		if created, err := w.JudgeCreate(obj); err == nil {
			selfUpdate(t, w, obj, created)
		}
		releasesFinalizers(t, w, old)
	})
}

// schemaAdmits reports whether no refusal of j is the schema's.
func schemaAdmits(j *fuzzing.Judged) bool {
	for _, r := range j.Refusals {
		if r.Schema {
			return false
		}
	}
	return true
}

// selfUpdate: an object admitted on create is admitted as an update to itself.
func selfUpdate(t *testing.T, w *fuzzing.World, obj *unstructured.Unstructured, created *fuzzing.Judged) {
	t.Helper()
	if !created.Admitted() {
		return
	}
	j, err := w.JudgeUpdate(obj, obj)
	if err != nil {
		t.Fatal(err)
	}
	if !j.Admitted() {
		t.Fatalf("an object admitted on create is refused as an update to itself: %v", j.Refusals)
	}
}

// releasesFinalizers: once a stored deployment is being deleted, the update that removes its
// finalizers, and changes nothing else, is admitted.
func releasesFinalizers(t *testing.T, w *fuzzing.World, old *unstructured.Unstructured) {
	t.Helper()
	deleting := old.DeepCopy()
	now := metav1.Now()
	deleting.SetDeletionTimestamp(&now)
	deleting.SetFinalizers([]string{"kubernetes.io/test"})
	released := deleting.DeepCopy()
	released.SetFinalizers(nil)
	j, err := w.JudgeUpdate(released, deleting)
	if err != nil {
		t.Fatal(err)
	}
	if !j.Admitted() {
		t.Fatalf("the update releasing a deleted deployment's finalizers is refused: %v", j.Refusals)
	}
}
