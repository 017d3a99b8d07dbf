# Sourced by hack/ build scripts: a throwaway Go module that builds k8s.io/kubernetes commands.
#
# k8s.io/kubernetes cannot be `go install`ed: its go.mod replaces every k8s.io staging module
# with a local path. A throwaway module that requires it and replaces each staging module with
# its published v0.x.y twin builds it as any other module.

# kubernetes_module NAME VERSION: turns the current (empty) folder into that module.
kubernetes_module() {
  local name=$1 version=$2 gomod go_line staging_version
  staging_version="v0.${version#v1.}"
  go mod init "noctaya.local/$name" >/dev/null 2>&1
  gomod=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')
  go_line=$(grep -m1 '^go ' "$gomod")
  sed -i "s/^go .*/$go_line/" go.mod
  grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging/src/k8s\.io/[a-z0-9-]+' "$gomod" \
    | awk -v v="$staging_version" '{print "replace " $1 " => " $1 " " v}' >> go.mod
}

# The -ldflags of a Kubernetes command: stripped, with the release it reports.
kubernetes_ldflags() {
  echo "-s -w -X k8s.io/component-base/version.gitVersion=$1"
}
