package artifacts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// File is one file of a manifest: its path in the repository, its size and the content id the hub
// names (sha256:<hex> for an LFS or ModelScope file, git:<blob id> for a file git stores on Hugging
// Face, "-" when the hub names none).
type File struct {
	Path string
	Size int64
	OID  string
}

// Manifest is a resolved revision: its commit and its files.
type Manifest struct {
	Commit string
	Files  []File
}

// failure is a resolution that did not succeed: the reason the condition carries, a message a
// person can act on, and whether it is worth retrying soon (the source was unreachable).
type failure struct {
	reason, message string
	transient       bool
}

func (f *failure) Error() string { return f.reason + ": " + f.message }

func fail(reason, format string, args ...any) *failure {
	return &failure{reason: reason, message: fmt.Sprintf(format, args...), transient: reason == workerv1.ReasonSourceUnavailable}
}

var commitID = regexp.MustCompile(`^[0-9a-f]{40}$`)

// maxResponse bounds a hub answer: a manifest of 100,000 files is a few MiB.
const maxResponse = 64 << 20

// hubClient calls a hub's HTTP API.
type hubClient struct {
	http *http.Client
}

// get answers the JSON body of GET endpoint+path into v, mapping the HTTP status to a reason: 404 is
// RevisionNotFound, 401 and 403 AccessDenied, a connection error or any other status
// SourceUnavailable.
func (c hubClient) get(ctx context.Context, endpoint, path, token, what string, v any) error {
	u := strings.TrimSuffix(endpoint, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fail(workerv1.ReasonSourceUnavailable, "cannot build the request for %s (%v): check the hub endpoint %q", what, err, endpoint)
	}
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rsp, err := c.http.Do(req)
	if err != nil {
		return fail(workerv1.ReasonSourceUnavailable, "cannot reach %s for %s: %v; retried with backoff", endpoint, what, unwrapURL(err))
	}
	defer func() { _ = rsp.Body.Close() }()
	switch {
	case rsp.StatusCode == http.StatusNotFound:
		return fail(workerv1.ReasonRevisionNotFound, "%s answered 404 for %s: check the repository and revision on the hub", endpoint, what)
	case rsp.StatusCode == http.StatusUnauthorized || rsp.StatusCode == http.StatusForbidden:
		return fail(workerv1.ReasonAccessDenied, "%s answered %d for %s: the repository is private or gated (or does not exist); name a Secret whose token key holds a token with access in secretRef", endpoint, rsp.StatusCode, what)
	case rsp.StatusCode != http.StatusOK:
		return fail(workerv1.ReasonSourceUnavailable, "%s answered %d for %s; retried with backoff", endpoint, rsp.StatusCode, what)
	}
	body, err := io.ReadAll(io.LimitReader(rsp.Body, maxResponse))
	if err != nil {
		return fail(workerv1.ReasonSourceUnavailable, "reading %s's answer for %s: %v; retried with backoff", endpoint, what, err)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fail(workerv1.ReasonSourceUnavailable, "%s answered %s with what is not the hub's JSON (%v): check the hub endpoint", endpoint, what, err)
	}
	return nil
}

func unwrapURL(err error) error {
	var u *url.Error
	if errors.As(err, &u) {
		return u.Err
	}
	return err
}

// repoPath is a repository id as a URL path: each element escaped, the slash between kept.
func repoPath(repo string) string {
	parts := strings.Split(repo, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

// huggingFace resolves a revision with one call:
//
//	GET {endpoint}/api/models/{repo}/revision/{revision}?blobs=true
//
// whose sha is the commit and whose siblings[] are the files: rfilename, size, and lfs.size and
// lfs.sha256 for an LFS file (lfs.size wins over size), blobId otherwise.
func (c hubClient) huggingFace(ctx context.Context, endpoint, repo, revision, token string) (Manifest, error) {
	var info struct {
		SHA      string `json:"sha"`
		Siblings []struct {
			RFilename string `json:"rfilename"`
			Size      *int64 `json:"size"`
			BlobID    string `json:"blobId"`
			LFS       *struct {
				Size   int64  `json:"size"`
				SHA256 string `json:"sha256"`
			} `json:"lfs"`
		} `json:"siblings"`
	}
	what := fmt.Sprintf("revision %q of %s", revision, repo)
	if err := c.get(ctx, endpoint, "/api/models/"+repoPath(repo)+"/revision/"+url.PathEscape(revision)+"?blobs=true", token, what, &info); err != nil {
		return Manifest{}, err
	}
	if !commitID.MatchString(info.SHA) {
		return Manifest{}, fail(workerv1.ReasonSourceUnavailable, "%s answered %s without a 40-character commit (sha %q): check the hub endpoint", endpoint, what, info.SHA)
	}
	m := Manifest{Commit: info.SHA}
	for _, s := range info.Siblings {
		f := File{Path: s.RFilename, OID: "-"}
		switch {
		case s.LFS != nil:
			f.Size, f.OID = s.LFS.Size, "sha256:"+s.LFS.SHA256
		case s.Size != nil:
			f.Size = *s.Size
		}
		if s.LFS == nil && s.BlobID != "" {
			f.OID = "git:" + s.BlobID
		}
		m.Files = append(m.Files, f)
	}
	return m, nil
}

// modelScope resolves a revision with two calls: the repository's branches and tags, to read the
// commit a branch or tag names (a 40-hex revision is taken as the commit itself), and the files of
// that commit:
//
//	GET {endpoint}/api/v1/models/{repo}/revisions
//	GET {endpoint}/api/v1/models/{repo}/repo/files?Revision={commit}&Recursive=true
//
// The first answers Data.RevisionMap.Branches[] and .Tags[], each {Revision, CommitId}; the second
// Data.Files[], each {Path, Type, Size, Sha256}, of which the tree entries (directories) are left out.
func (c hubClient) modelScope(ctx context.Context, endpoint, repo, revision, token string) (Manifest, error) {
	commit := revision
	if !commitID.MatchString(revision) {
		type ref struct {
			Revision string `json:"Revision"`
			CommitID string `json:"CommitId"`
		}
		var revs struct {
			Data struct {
				RevisionMap struct {
					Branches []ref `json:"Branches"`
					Tags     []ref `json:"Tags"`
				} `json:"RevisionMap"`
			} `json:"Data"`
		}
		if err := c.get(ctx, endpoint, "/api/v1/models/"+repoPath(repo)+"/revisions", token, "the revisions of "+repo, &revs); err != nil {
			return Manifest{}, err
		}
		commit = ""
		for _, r := range append(revs.Data.RevisionMap.Branches, revs.Data.RevisionMap.Tags...) {
			if r.Revision == revision {
				commit = r.CommitID
				break
			}
		}
		if commit == "" {
			return Manifest{}, fail(workerv1.ReasonRevisionNotFound, "%s has no branch or tag %q on %s: name an existing branch, tag or 40-character commit", repo, revision, endpoint)
		}
		if !commitID.MatchString(commit) {
			return Manifest{}, fail(workerv1.ReasonSourceUnavailable, "%s answered revision %q of %s without a 40-character commit (CommitId %q): check the hub endpoint", endpoint, revision, repo, commit)
		}
	}
	var files struct {
		Data struct {
			Files []struct {
				Path   string `json:"Path"`
				Type   string `json:"Type"`
				Size   int64  `json:"Size"`
				SHA256 string `json:"Sha256"`
			} `json:"Files"`
		} `json:"Data"`
	}
	q := url.Values{"Revision": {commit}, "Recursive": {"true"}}
	if err := c.get(ctx, endpoint, "/api/v1/models/"+repoPath(repo)+"/repo/files?"+q.Encode(), token, fmt.Sprintf("the files of %s at %s", repo, commit), &files); err != nil {
		return Manifest{}, err
	}
	m := Manifest{Commit: commit}
	for _, f := range files.Data.Files {
		if f.Type == "tree" {
			continue
		}
		oid := "-"
		if f.SHA256 != "" {
			oid = "sha256:" + f.SHA256
		}
		m.Files = append(m.Files, File{Path: f.Path, Size: f.Size, OID: oid})
	}
	return m, nil
}
