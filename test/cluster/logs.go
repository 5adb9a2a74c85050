package cluster

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// systemNamespaces are where the stack's in-cluster components run; their Pods' logs are kept.
var systemNamespaces = []string{"kube-system", CrossplaneNamespace, Namespace}

// collectLogs keeps the output of every container of the system namespaces' Pods, every replica and
// every restart, in the stack's logs directory as the components' processes' logs are kept: one
// file a component (LogFile), its other containers beside it (<component>.<container>.log). It
// reads them through the API server, as kubectl logs does, until the stack stops.
func (s *Stack) collectLogs(context.Context) error {
	clients, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(context.Background())
	c := &logCollector{clients: clients, dir: filepath.Join(s.Dir, "logs"), following: map[string]bool{}, files: map[string]*os.File{}}
	done := make(chan struct{})
	go func() { defer close(done); c.run(ctx) }()
	s.stops = append(s.stops, func() {
		stop()
		<-done
		c.wg.Wait()
		c.close()
	})
	return nil
}

type logCollector struct {
	clients   kubernetes.Interface
	dir       string
	wg        sync.WaitGroup
	mu        sync.Mutex
	following map[string]bool
	files     map[string]*os.File
}

func (c *logCollector) run(ctx context.Context) {
	for ctx.Err() == nil {
		for _, ns := range systemNamespaces {
			pods, err := c.clients.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for i := range pods.Items {
				c.follow(ctx, &pods.Items[i])
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// follow starts streaming each container instance of a Pod that has started and is not streamed
// yet.
func (c *logCollector) follow(ctx context.Context, p *corev1.Pod) {
	component := podComponent(p)
	statuses := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, st := range statuses {
		if st.State.Running == nil && st.State.Terminated == nil {
			continue
		}
		key := fmt.Sprintf("%s/%s/%d", p.UID, st.Name, st.RestartCount)
		c.mu.Lock()
		seen := c.following[key]
		c.following[key] = true
		c.mu.Unlock()
		if seen {
			continue
		}
		file := component
		if len(p.Spec.Containers) > 0 && st.Name != p.Spec.Containers[0].Name {
			file += "." + st.Name
		}
		c.wg.Add(1)
		go func(namespace, pod, container string) {
			defer c.wg.Done()
			c.stream(ctx, namespace, pod, container, file)
		}(p.Namespace, p.Name, st.Name)
	}
}

func (c *logCollector) stream(ctx context.Context, namespace, pod, container, file string) {
	req := c.clients.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, Follow: true})
	body, err := req.Stream(ctx)
	if err != nil {
		return
	}
	defer body.Close()
	lines := bufio.NewScanner(body)
	lines.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for lines.Scan() {
		c.write(file, lines.Text())
	}
}

func (c *logCollector) write(file, line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.files[file]
	if f == nil {
		var err error
		if f, err = os.OpenFile(filepath.Join(c.dir, file+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			return
		}
		c.files[file] = f
	}
	_, _ = f.WriteString(line + "\n")
}

func (c *logCollector) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.files {
		_ = f.Close()
	}
}

// podComponent names the component a Pod belongs to: a Function's package, else its Deployment (the
// Pod's name without the ReplicaSet's and its own suffixes), else the Pod.
func podComponent(p *corev1.Pod) string {
	if fn := p.Labels["pkg.crossplane.io/function"]; fn != "" {
		return fn
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "ReplicaSet" {
			if i := strings.LastIndex(o.Name, "-"); i > 0 {
				return o.Name[:i]
			}
		}
	}
	return p.Name
}
