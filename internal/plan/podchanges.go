package plan

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/mdplane/mdplane/apis/naming"
)

// PodChanges is what differs between the role's leader Pod (member 0 of replica 0) as the stored
// deployment renders it and as the edited one does: its engine container and its volumes.
type PodChanges struct {
	Args      ListChange        `json:"args"`
	Command   *Change           `json:"command,omitempty"`
	Env       EnvChanges        `json:"env"`
	Volumes   VolumeChanges     `json:"volumes"`
	Mounts    ListChange        `json:"volumeMounts"`
	Image     *Change           `json:"image,omitempty"`
	Resources map[string]Change `json:"resources,omitempty"`
}

// ListChange is the entries added and removed, each in the order it appears.
type ListChange struct {
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
}

// Change is a value before and after the edit.
type Change struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// EnvChanges is the engine container's environment: added and removed as NAME=value and NAME, and
// the variables whose value moved.
type EnvChanges struct {
	Added   []string      `json:"added"`
	Removed []string      `json:"removed"`
	Changed []NamedChange `json:"changed"`
}

// NamedChange is a named value before and after the edit.
type NamedChange struct {
	Name string `json:"name"`
	From string `json:"from"`
	To   string `json:"to"`
}

// VolumeChanges is the Pod's volumes by name: added, removed, and kept under the same name with
// another source.
type VolumeChanges struct {
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
	Changed []string `json:"changed"`
}

// Empty reports no change at all.
func (c PodChanges) Empty() bool {
	return len(c.Args.Added)+len(c.Args.Removed)+len(c.Env.Added)+len(c.Env.Removed)+len(c.Env.Changed)+
		len(c.Volumes.Added)+len(c.Volumes.Removed)+len(c.Volumes.Changed)+len(c.Mounts.Added)+len(c.Mounts.Removed)+
		len(c.Resources) == 0 && c.Command == nil && c.Image == nil
}

// engineContainer is the Pod's engine container: the one named naming.MainContainer, else the first.
func engineContainer(p *corev1.Pod) *corev1.Container {
	if p == nil || len(p.Spec.Containers) == 0 {
		return nil
	}
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == naming.MainContainer {
			return &p.Spec.Containers[i]
		}
	}
	return &p.Spec.Containers[0]
}

// podChanges diffs two leader Pods; either may be nil (a role without replicas renders none).
func podChanges(was, is *corev1.Pod) PodChanges {
	out := PodChanges{Args: ListChange{Added: []string{}, Removed: []string{}},
		Env:     EnvChanges{Added: []string{}, Removed: []string{}, Changed: []NamedChange{}},
		Volumes: VolumeChanges{Added: []string{}, Removed: []string{}, Changed: []string{}},
		Mounts:  ListChange{Added: []string{}, Removed: []string{}}}
	a, b := engineContainer(was), engineContainer(is)
	if a == nil || b == nil {
		return out
	}
	out.Args = listChange(argGroups(a.Args), argGroups(b.Args))
	if x, y := strings.Join(a.Command, " "), strings.Join(b.Command, " "); x != y {
		out.Command = &Change{From: x, To: y}
	}
	if a.Image != b.Image {
		out.Image = &Change{From: a.Image, To: b.Image}
	}
	out.Env = envChanges(a.Env, b.Env)
	out.Volumes = volumeChanges(was.Spec.Volumes, is.Spec.Volumes)
	out.Mounts = listChange(mounts(a.VolumeMounts), mounts(b.VolumeMounts))
	out.Resources = resourceChanges(a.Resources, b.Resources)
	return out
}

// argGroups groups a flag with the value that follows it (--port 8000), so that a changed value
// reads as one flag removed and one added rather than as loose tokens.
func argGroups(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if strings.HasPrefix(arg, "-") && !strings.Contains(arg, "=") && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			arg += " " + args[i+1]
			i++
		}
		out = append(out, arg)
	}
	return out
}

// listChange is the entries of b not in a (added) and of a not in b (removed), counting repeats.
func listChange(a, b []string) ListChange {
	out := ListChange{Added: []string{}, Removed: []string{}}
	count := map[string]int{}
	for _, s := range a {
		count[s]++
	}
	for _, s := range b {
		if count[s] > 0 {
			count[s]--
			continue
		}
		out.Added = append(out.Added, s)
	}
	count = map[string]int{}
	for _, s := range b {
		count[s]++
	}
	for _, s := range a {
		if count[s] > 0 {
			count[s]--
			continue
		}
		out.Removed = append(out.Removed, s)
	}
	return out
}

func envValue(e corev1.EnvVar) string {
	if f := e.ValueFrom; f != nil {
		switch {
		case f.SecretKeyRef != nil:
			return fmt.Sprintf("(secret %s key %s)", f.SecretKeyRef.Name, f.SecretKeyRef.Key)
		case f.ConfigMapKeyRef != nil:
			return fmt.Sprintf("(configmap %s key %s)", f.ConfigMapKeyRef.Name, f.ConfigMapKeyRef.Key)
		case f.FieldRef != nil:
			return fmt.Sprintf("(field %s)", f.FieldRef.FieldPath)
		case f.ResourceFieldRef != nil:
			return fmt.Sprintf("(resource %s)", f.ResourceFieldRef.Resource)
		}
	}
	return e.Value
}

func envChanges(a, b []corev1.EnvVar) EnvChanges {
	out := EnvChanges{Added: []string{}, Removed: []string{}, Changed: []NamedChange{}}
	was := map[string]string{}
	for _, e := range a {
		was[e.Name] = envValue(e)
	}
	is := map[string]bool{}
	for _, e := range b {
		is[e.Name] = true
		old, ok := was[e.Name]
		switch {
		case !ok:
			out.Added = append(out.Added, e.Name+"="+envValue(e))
		case old != envValue(e):
			out.Changed = append(out.Changed, NamedChange{Name: e.Name, From: old, To: envValue(e)})
		}
	}
	for _, e := range a {
		if !is[e.Name] {
			out.Removed = append(out.Removed, e.Name)
		}
	}
	return out
}

func volumeChanges(a, b []corev1.Volume) VolumeChanges {
	out := VolumeChanges{Added: []string{}, Removed: []string{}, Changed: []string{}}
	was := map[string]corev1.Volume{}
	for _, v := range a {
		was[v.Name] = v
	}
	is := map[string]bool{}
	for _, v := range b {
		is[v.Name] = true
		old, ok := was[v.Name]
		switch {
		case !ok:
			out.Added = append(out.Added, v.Name)
		case old.String() != v.String():
			out.Changed = append(out.Changed, v.Name+" ("+sourceChange(old, v)+")")
		}
	}
	for _, v := range a {
		if !is[v.Name] {
			out.Removed = append(out.Removed, v.Name)
		}
	}
	return out
}

// sourceChange says how a volume's source moved: a host path's directory (a compilation cache keyed
// by image and arguments starts cold in its new one), else only that it did.
func sourceChange(was, is corev1.Volume) string {
	if was.HostPath != nil && is.HostPath != nil && was.HostPath.Path != is.HostPath.Path {
		return "host path " + was.HostPath.Path + " → " + is.HostPath.Path
	}
	return "another source"
}

// mounts is each mount as "name at path" (read-only marked).
func mounts(ms []corev1.VolumeMount) []string {
	var out []string
	for _, m := range ms {
		s := m.Name + " at " + m.MountPath
		if m.SubPath != "" {
			s += " (subPath " + m.SubPath + ")"
		}
		if m.ReadOnly {
			s += " (read-only)"
		}
		out = append(out, s)
	}
	return out
}

// resourceChanges is the engine container's requests and limits that moved, keyed
// "requests.cpu", "limits.nvidia.com/gpu".
func resourceChanges(a, b corev1.ResourceRequirements) map[string]Change {
	out := map[string]Change{}
	compare := func(kind string, x, y corev1.ResourceList) {
		names := map[corev1.ResourceName]bool{}
		for n := range x {
			names[n] = true
		}
		for n := range y {
			names[n] = true
		}
		for n := range names {
			qx, okx := x[n]
			qy, oky := y[n]
			if okx == oky && (!okx || qx.Cmp(qy) == 0) {
				continue
			}
			from, to := "(none)", "(none)"
			if okx {
				from = qx.String()
			}
			if oky {
				to = qy.String()
			}
			out[kind+"."+string(n)] = Change{From: from, To: to}
		}
	}
	compare("requests", a.Requests, b.Requests)
	compare("limits", a.Limits, b.Limits)
	if len(out) == 0 {
		return nil
	}
	return out
}
