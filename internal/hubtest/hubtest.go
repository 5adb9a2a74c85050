// Package hubtest is a model hub for tests: it speaks the subset of the Hugging Face and ModelScope
// HTTP APIs the ModelArtifact resolver calls (controllers/artifacts), over repositories, revisions,
// files and tokens a test configures, and fails on demand (404, 401, 403, 500). It is test-only:
// no production code imports it. The reconcile tests start it with httptest; the e2e stack (the
// test module, which may import this module's internal packages) serves it on loopback and points
// mdplane-controllers' --model-artifact-huggingface-endpoint and --model-artifact-modelscope-endpoint
// at it.
//
// Served, both hubs from one handler:
//
//	GET /api/models/{repo}/revision/{revision}[?blobs=true]                   Hugging Face
//	GET /api/v1/models/{repo}/revisions                                        ModelScope
//	GET /api/v1/models/{repo}/repo/files?Revision={revision}&Recursive=true    ModelScope
//
// A revision is a branch or tag of the repository or one of its commits. A repository with a token
// answers 401 to a request without "Authorization: Bearer <token>" and 403 to one with another
// token; an unknown repository or revision answers 404.
package hubtest

import (
	"crypto/sha1" //nolint:gosec // a fake commit id, as git spells one, not a security boundary
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
)

// File is one file of a commit.
type File struct {
	// Path in the repository, slash-separated.
	Path string
	// Size in bytes.
	Size int64
	// LFS files carry a sha256 on Hugging Face (lfs.sha256); other files a git blob id.
	LFS bool
	// SHA256 of the content, hex; Commit fills it from the path and size when empty.
	SHA256 string
}

// Repo is a repository of the hub.
type Repo struct {
	// Refs are the branches and tags, by name, each naming a commit.
	Refs map[string]string
	// Commits are the files of each commit, by commit id.
	Commits map[string][]File
	// Token, when set, is the one bearer token the repository answers.
	Token string
}

// Hub is the fake hub. Its methods are safe while it serves.
type Hub struct {
	mu       sync.Mutex
	repos    map[string]*Repo
	fail     map[string]int // repository ("" for every one) → status to answer
	requests []string
}

// New is an empty hub.
func New() *Hub {
	return &Hub{repos: map[string]*Repo{}, fail: map[string]int{}}
}

// CommitID is a deterministic 40-hex commit id for a seed.
func CommitID(seed string) string {
	sum := sha1.Sum([]byte(seed)) //nolint:gosec // see the import
	return hex.EncodeToString(sum[:])
}

// Put stores (or replaces) a repository: the files of one commit, which each ref names.
func (h *Hub) Put(repo, commit string, files []File, refs ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.repos[repo]
	if !ok {
		r = &Repo{Refs: map[string]string{}, Commits: map[string][]File{}}
		h.repos[repo] = r
	}
	for i := range files {
		if files[i].SHA256 == "" {
			files[i].SHA256 = hex.EncodeToString(sha1Pad(files[i].Path))
		}
	}
	r.Commits[commit] = files
	for _, ref := range refs {
		r.Refs[ref] = commit
	}
}

func sha1Pad(s string) []byte {
	a := sha1.Sum([]byte(s)) //nolint:gosec // see the import
	b := sha1.Sum(a[:])      //nolint:gosec // see the import
	return append(a[:], b[:12]...)
}

// Protect makes a repository answer only the bearer token.
func (h *Hub) Protect(repo, token string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r, ok := h.repos[repo]; ok {
		r.Token = token
	}
}

// Fail makes every request for repo ("" for every repository) answer status; 0 clears it.
func (h *Hub) Fail(repo string, status int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if status == 0 {
		delete(h.fail, repo)
		return
	}
	h.fail[repo] = status
}

// Requests are the request URIs served so far, in order.
func (h *Hub) Requests() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.requests...)
}

// ServeHTTP answers the subset of both hubs' APIs.
func (h *Hub) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.requests = append(h.requests, req.URL.RequestURI())
	if req.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := req.URL.EscapedPath()
	switch {
	case strings.HasPrefix(p, "/api/models/") && strings.Contains(p, "/revision/"):
		repo, rev, _ := strings.Cut(strings.TrimPrefix(p, "/api/models/"), "/revision/")
		h.huggingFace(w, req, unescape(repo), unescape(rev))
	case strings.HasPrefix(p, "/api/v1/models/") && strings.HasSuffix(p, "/revisions"):
		h.modelScopeRevisions(w, req, unescape(strings.TrimSuffix(strings.TrimPrefix(p, "/api/v1/models/"), "/revisions")))
	case strings.HasPrefix(p, "/api/v1/models/") && strings.HasSuffix(p, "/repo/files"):
		h.modelScopeFiles(w, req, unescape(strings.TrimSuffix(strings.TrimPrefix(p, "/api/v1/models/"), "/repo/files")))
	default:
		http.NotFound(w, req)
	}
}

func unescape(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// lookup finds the repository and answers the failure, authentication and existence errors; nil
// when it answered.
func (h *Hub) lookup(w http.ResponseWriter, req *http.Request, repo string) *Repo {
	for _, key := range []string{repo, ""} {
		if status, ok := h.fail[key]; ok {
			http.Error(w, http.StatusText(status), status)
			return nil
		}
	}
	r, ok := h.repos[repo]
	if !ok {
		http.Error(w, `{"error":"Repository not found"}`, http.StatusNotFound)
		return nil
	}
	if r.Token != "" {
		auth := req.Header.Get("Authorization")
		switch {
		case auth == "":
			http.Error(w, `{"error":"Invalid credentials in Authorization header"}`, http.StatusUnauthorized)
			return nil
		case auth != "Bearer "+r.Token:
			http.Error(w, `{"error":"Access to this repository is restricted"}`, http.StatusForbidden)
			return nil
		}
	}
	return r
}

// commit resolves a ref or commit id of r.
func (r *Repo) commit(rev string) (string, bool) {
	if c, ok := r.Refs[rev]; ok {
		return c, true
	}
	_, ok := r.Commits[rev]
	return rev, ok
}

func (h *Hub) huggingFace(w http.ResponseWriter, req *http.Request, repo, rev string) {
	r := h.lookup(w, req, repo)
	if r == nil {
		return
	}
	commit, ok := r.commit(rev)
	if !ok {
		http.Error(w, `{"error":"Invalid rev id: `+rev+`"}`, http.StatusNotFound)
		return
	}
	blobs := req.URL.Query().Get("blobs") == "true"
	siblings := []map[string]any{}
	for _, f := range sorted(r.Commits[commit]) {
		s := map[string]any{"rfilename": f.Path}
		if blobs {
			s["size"] = f.Size
			s["blobId"] = CommitID("blob:" + f.SHA256)
			if f.LFS {
				s["size"] = int64(134) // the pointer file's size, as Hugging Face answers it
				s["lfs"] = map[string]any{"size": f.Size, "sha256": f.SHA256, "pointerSize": 134}
			}
		}
		siblings = append(siblings, s)
	}
	write(w, map[string]any{"id": repo, "modelId": repo, "sha": commit, "private": r.Token != "", "siblings": siblings})
}

func (h *Hub) modelScopeRevisions(w http.ResponseWriter, req *http.Request, repo string) {
	r := h.lookup(w, req, repo)
	if r == nil {
		return
	}
	branches := []map[string]any{}
	for _, name := range sortedKeys(r.Refs) {
		branches = append(branches, map[string]any{"Revision": name, "CommitId": r.Refs[name]})
	}
	write(w, map[string]any{"Code": 200, "Success": true, "Data": map[string]any{"RevisionMap": map[string]any{"Branches": branches, "Tags": []any{}}}})
}

func (h *Hub) modelScopeFiles(w http.ResponseWriter, req *http.Request, repo string) {
	r := h.lookup(w, req, repo)
	if r == nil {
		return
	}
	commit, ok := r.commit(req.URL.Query().Get("Revision"))
	if !ok {
		http.Error(w, `{"Code":404,"Message":"revision not found","Success":false}`, http.StatusNotFound)
		return
	}
	files := []map[string]any{}
	dirs := map[string]bool{}
	for _, f := range sorted(r.Commits[commit]) {
		if i := strings.LastIndex(f.Path, "/"); i > 0 && !dirs[f.Path[:i]] {
			dirs[f.Path[:i]] = true
			files = append(files, map[string]any{"Name": f.Path[:i], "Path": f.Path[:i], "Type": "tree", "Size": 0})
		}
		files = append(files, map[string]any{"Name": f.Path[strings.LastIndex(f.Path, "/")+1:], "Path": f.Path, "Type": "blob",
			"Size": f.Size, "Sha256": f.SHA256, "Revision": commit})
	}
	write(w, map[string]any{"Code": 200, "Success": true, "Data": map[string]any{"Files": files}})
}

func sorted(files []File) []File {
	out := append([]File(nil), files...)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func write(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
