package artifacts

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Filter keeps the files a hub download fetches: those matching some allow pattern (every file when
// there is none) and no ignore pattern. Patterns are fnmatch globs as the hubs' clients apply them:
// '*' matches any run of characters, '/' included, '?' one character, [...] a class ([!...]
// negated), and a pattern ending in '/' matches everything under that directory.
func Filter(files []File, allow, ignore []string) []File {
	allowRE, ignoreRE := globs(allow), globs(ignore)
	var out []File
	for _, f := range files {
		if len(allowRE) > 0 && !anyMatch(allowRE, f.Path) {
			continue
		}
		if anyMatch(ignoreRE, f.Path) {
			continue
		}
		out = append(out, f)
	}
	return out
}

func anyMatch(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

func globs(patterns []string) []*regexp.Regexp {
	out := make([]*regexp.Regexp, 0, len(patterns))
	for _, p := range patterns {
		out = append(out, glob(p))
	}
	return out
}

// glob translates an fnmatch pattern to an anchored regular expression, as Python's fnmatch does.
func glob(pattern string) *regexp.Regexp {
	if strings.HasSuffix(pattern, "/") {
		pattern += "*"
	}
	var b strings.Builder
	b.WriteString(`^(?s:`)
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch c {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		case '[':
			end := strings.IndexByte(pattern[i+1:], ']')
			if end == 0 && i+2 < len(pattern) { // "[]...]": a ']' first is a member
				if e := strings.IndexByte(pattern[i+2:], ']'); e >= 0 {
					end = e + 1
				}
			}
			if end < 0 {
				b.WriteString(`\[`)
				continue
			}
			class := strings.ReplaceAll(pattern[i+1:i+1+end], `\`, `\\`)
			i += end + 1
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			} else if strings.HasPrefix(class, "^") {
				class = `\` + class
			}
			b.WriteString("[" + class + "]")
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString(`)$`)
	re, err := regexp.Compile(b.String())
	if err != nil { // a class Go cannot read (such as [z-a]): the pattern then matches itself only
		return regexp.MustCompile(`^` + regexp.QuoteMeta(pattern) + `$`)
	}
	return re
}

// Digest is the manifest digest: "sha256:" and the hex SHA-256 of the canonical manifest, one line
// per file sorted by path (byte order), each line "<oid> <size> <path>\n" with the size in decimal
// bytes and the oid as File names it. The commit is not part of it: two revisions holding the same
// files have the same digest.
func Digest(files []File) string {
	sortedFiles := append([]File(nil), files...)
	sort.Slice(sortedFiles, func(i, j int) bool { return sortedFiles[i].Path < sortedFiles[j].Path })
	h := sha256.New()
	for _, f := range sortedFiles {
		fmt.Fprintf(h, "%s %d %s\n", f.OID, f.Size, f.Path)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
