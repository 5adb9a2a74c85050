package settings

import "strings"

// Redirect applies the registry redirect to an image mdplane picks itself (an image Setting or its
// default). Never pass it an image named on an object: those are used verbatim.
//
// The rule: the image splits into [registry/][namespace/]name[:tag][@digest], the registry being
// the first path component when the image has more than one and that component holds a '.' or a ':'
// or is "localhost" (Docker's rule). A non-blank container-registry replaces the registry (or adds
// one); a non-blank container-namespace replaces every path component between the registry and the
// last one. The name, tag and digest are kept. Blank Settings keep their part as written; no
// "library/" or "docker.io" is added. So gpustack/llm-router:v0.1.0 with registry
// registry.local:5000 and namespace mirror becomes registry.local:5000/mirror/llm-router:v0.1.0.
func (s Settings) Redirect(image string) string {
	if image == "" || s.ContainerRegistry == "" && s.ContainerNamespace == "" {
		return image
	}
	parts := strings.Split(image, "/")
	var registry string
	if len(parts) > 1 && (strings.ContainsAny(parts[0], ".:") || parts[0] == "localhost") {
		registry, parts = parts[0], parts[1:]
	}
	last := parts[len(parts)-1]
	namespace := strings.Join(parts[:len(parts)-1], "/")
	if s.ContainerRegistry != "" {
		registry = s.ContainerRegistry
	}
	if s.ContainerNamespace != "" {
		namespace = s.ContainerNamespace
	}
	out := make([]string, 0, 3)
	for _, p := range []string{registry, namespace, last} {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "/")
}

// Image helpers: the redirected image of each image Setting.

// RouterImageRef is the router image when spec.router.image is unset.
func (s Settings) RouterImageRef() string { return s.Redirect(s.RouterImage) }

// RouterProxyImageRef is the llm-d router's Envoy image.
func (s Settings) RouterProxyImageRef() string { return s.Redirect(s.RouterProxyImage) }

// RoutingSidecarImageRef is the decode routing-proxy sidecar's image.
func (s Settings) RoutingSidecarImageRef() string { return s.Redirect(s.RoutingSidecarImage) }

// KVCacheBackendImageRef is the managed backend's fallback image ("" when the Setting is blank).
func (s Settings) KVCacheBackendImageRef() string { return s.Redirect(s.KVCacheBackendImage) }
