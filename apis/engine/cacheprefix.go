package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// CachePrefixInvalid is the reason a cache prefix is refused.
const CachePrefixInvalid = "CachePrefixInvalid"

// CachePrefix is the KV cache identity of a deployment's weights:
// m- and the first 32 hex digits of the artifact's manifest digest (sha256: stripped) or, when it
// has none (a claim or an image), of SHA-256 of its UID. The store keys blocks by it, so replicas
// of other weights never share blocks. It may not hold @, _ or :, which the stores read as
// separators; such a prefix is an error naming CachePrefixInvalid.
func CachePrefix(manifestDigest, uid string) (string, error) {
	digits := strings.TrimPrefix(manifestDigest, "sha256:")
	if manifestDigest == "" {
		sum := sha256.Sum256([]byte(uid))
		digits = hex.EncodeToString(sum[:])
	}
	if len(digits) > 32 {
		digits = digits[:32]
	}
	id := "m-" + digits
	if strings.ContainsAny(id, "@_:") {
		return "", fmt.Errorf("%s: the KV cache prefix %q of manifest digest %q holds @, _ or : (separators to the stores)", CachePrefixInvalid, id, manifestDigest)
	}
	return id, nil
}
