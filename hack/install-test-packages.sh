#!/usr/bin/env bash
# Debian packages the test suite runs beside the Python ones: a real OCI registry for the model
# fetcher's oci:// tests (docker-registry) and htpasswd for its basic-auth file (apache2-utils);
# mmdebstrap, umoci and runc to build the images and run their commands (tests/images); skopeo
# to push them to a registry as docs/operations/images.md does (tests/e2e/test_images.py).
set -euo pipefail
exec bash "$(dirname "$0")/install-debian-packages.sh" install-test-packages \
  /usr/bin/docker-registry=docker-registry \
  htpasswd=apache2-utils \
  mmdebstrap=mmdebstrap \
  umoci=umoci \
  runc=runc \
  skopeo=skopeo
