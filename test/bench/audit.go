package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// auditEvent is the part of an audit.k8s.io/v1 Event the count needs.
type auditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
}

var versionSuffix = regexp.MustCompile(`-v[0-9][0-9.]*$`)

// Writes counts write requests by client and by client and resource.
type Writes struct {
	total      int
	byClient   map[string]int
	byResource map[[2]string]int // client, resource[/subresource]
	failed     map[string]int    // by client: answered with a status >= 400 (conflicts, refusals)
}

// clientOf names who sent a request: a ServiceAccount by its name (mdplane-controllers,
// mdplane-webhooks, crossplane, whose name the stack's Crossplane has), anyone else (the stack's
// other programs use the admin kubeconfig or a name of their own) by the program its user agent
// names (kueue, kube-scheduler, kwok, ...).
func clientOf(e auditEvent) string {
	if sa, ok := strings.CutPrefix(e.User.Username, "system:serviceaccount:"); ok {
		return sa[strings.LastIndex(sa, ":")+1:]
	}
	agent, _, _ := strings.Cut(e.UserAgent, "/")
	agent, _, _ = strings.Cut(agent, " ")
	if agent == "" {
		return e.User.Username
	}
	// crossplane-v2.4.0, kube-scheduler-v1.35.3: the program, without its version.
	return versionSuffix.ReplaceAllString(agent, "")
}

// countWrites reads the audit log, and the files the API server rotated it to (audit-<time>.log
// beside it), and counts the write requests received in [from, to).
func countWrites(path string, from, to time.Time) (Writes, error) {
	w := Writes{byClient: map[string]int{}, byResource: map[[2]string]int{}, failed: map[string]int{}}
	rotated, err := filepath.Glob(strings.TrimSuffix(path, ".log") + "-*.log")
	if err != nil {
		return w, err
	}
	for _, file := range append(rotated, path) {
		if err := w.add(file, from, to); err != nil {
			return w, err
		}
	}
	return w, nil
}

func (w *Writes) add(path string, from, to time.Time) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			var e auditEvent
			if json.Unmarshal(line, &e) == nil && !e.RequestReceived.Before(from) && e.RequestReceived.Before(to) {
				who, what := clientOf(e), "?"
				if e.ObjectRef != nil {
					what = e.ObjectRef.Resource
					if e.ObjectRef.Subresource != "" {
						what += "/" + e.ObjectRef.Subresource
					}
				}
				w.total++
				w.byClient[who]++
				w.byResource[[2]string{who, what}]++
				if e.ResponseStatus != nil && e.ResponseStatus.Code >= 400 {
					w.failed[who]++
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Print writes the counts per client and per client and resource, each also per Pod created.
func (w Writes) Print(out io.Writer, pods int) {
	per := func(n int) string {
		if pods == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", float64(n)/float64(pods))
	}
	clients := make([]string, 0, len(w.byClient))
	for c := range w.byClient {
		clients = append(clients, c)
	}
	sort.Slice(clients, func(i, j int) bool { return w.byClient[clients[i]] > w.byClient[clients[j]] })
	fmt.Fprintf(out, "  %-34s %8s %9s %8s\n", "client", "writes", "per Pod", "failed")
	for _, c := range clients {
		fmt.Fprintf(out, "  %-34s %8d %9s %8d\n", c, w.byClient[c], per(w.byClient[c]), w.failed[c])
	}
	fmt.Fprintf(out, "  %-34s %8d %9s\n", "all", w.total, per(w.total))
	ours, events := w.ours()
	fmt.Fprintf(out, "  %-34s %8d %9s\n", "crossplane + mdplane-controllers", ours, per(ours))
	fmt.Fprintf(out, "  %-34s %8d %9s\n", "  the same without events", ours-events, per(ours-events))
	keys := make([][2]string, 0, len(w.byResource))
	for k := range w.byResource {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return w.byClient[keys[i][0]] > w.byClient[keys[j][0]]
		}
		return w.byResource[keys[i]] > w.byResource[keys[j]]
	})
	fmt.Fprintln(out, "  (mdplane-bench-scale is the stack's own loops in this process, playing Crossplane's External package")
	fmt.Fprintln(out, "  runtime: its refused writes are Secret creates answered AlreadyExists; mdplane-bench is the harness.)")
	fmt.Fprintf(out, "\n  %-24s %-32s %8s %9s\n", "client", "resource", "writes", "per Pod")
	for _, k := range keys {
		fmt.Fprintf(out, "  %-24s %-32s %8d %9s\n", k[0], k[1], w.byResource[k], per(w.byResource[k]))
	}
}
