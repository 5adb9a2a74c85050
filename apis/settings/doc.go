// Package settings is mdplane's worker Settings, the Crossplane
// way: one cluster-scoped EnvironmentConfig (apiextensions.crossplane.io/v1beta1, the only version
// Crossplane v2.4.0 serves) named mdplane-settings, whose data keys are the spec's Setting names.
//
// Every reader goes through Parse, so the functions (a required resource), the webhooks and
// controllers (the API reader, Get) and `mdplane render`/`validate` (the document among their files)
// agree on one value per Setting:
//
//   - A key that is absent takes its default (Defaults); a missing object is all defaults.
//   - A key that is present is validated with the spec's validator, and a bad value is an error that
//     names the key, the value and the way out: it never falls back to the default. Blank is a value,
//     allowed only where the spec allows it (AllowBlank); null is refused like any other bad value.
//   - Booleans are JSON booleans or the strings strconv.ParseBool reads ("true", "false", "1", ...);
//     every other Setting is a JSON string.
//   - A key that is not a Setting mdplane reads is a warning, never a refusal: an object written for
//     another mdplane release (or holding one of the spec's Settings mdplane does not use) must not
//     stop every render; the warning names the key so a misspelling is seen.
//
// A Setting change reaches new and replaced Pods only: Settings are covered by the render version,
// not by the pod-spec hash, except model-deployment-kv-cache-dtype-owned (flipping it moves the
// pod-spec hash of every pool-attached deployment) and model-artifact-delivery-mode (changing it
// rolls every hub-artifact deployment): each enters the digest where it applies.
//
// The registry redirect (container-registry, container-namespace) applies to the images mdplane
// picks itself, that is the image Settings (or their defaults), never to an image named on an object
// (spec.router.image, roles[].image, a backend's image): see Settings.Redirect.
package settings
