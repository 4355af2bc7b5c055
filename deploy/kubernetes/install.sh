#!/bin/sh
# Node installer of the Galactic CNI chain, run from the image by the DaemonSet.
#
#   install.sh install   (init container) stage the plugin binaries, the node config and the
#                        plugins' kubeconfig onto the host, then exit
#   install.sh refresh   (long-running container) rewrite the kubeconfig whenever the service
#                        account token changes (projected tokens rotate), every REFRESH_SECONDS
#
# It does what `cargo xtask build-and-stage` does after building: every file is written to a
# temporary name in the target directory and renamed into place (a runtime never executes a
# half-written binary), and only when its content changed (a second run changes nothing).
#
# Host paths are mounted under HOST_ROOT (default /host):
#   /opt/cni/bin           the plugins (galactic-cni, galactic-tap-cni, galactic-ipam,
#                          galactic-route, galactic-bgp; with ALIASES=true also the upstream type
#                          names galactic-veth and galactic-tap)
#   /etc/galactic/node.json the node config (docs/configuration.md)
#   /var/lib/galactic      state; kubeconfig and ca.crt for the plugins
#
# Settings (environment; each must be a plain token):
#   NODE_NAME (required, from the downward API), GALACTIC_NAMESPACE (galactic-system),
#   GALACTIC_PUBLISHER (kubernetes), GALACTIC_ROUTING_DOMAIN (auto), GALACTIC_LOG_LEVEL (info),
#   ALIASES (false), REFRESH_SECONDS (300), IMAGE_BIN (/galactic/bin),
#   SA_DIR (/var/run/secrets/kubernetes.io/serviceaccount),
#   KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT (set by the kubelet).
set -eu

HOST_ROOT=${HOST_ROOT:-/host}
IMAGE_BIN=${IMAGE_BIN:-/galactic/bin}
SA_DIR=${SA_DIR:-/var/run/secrets/kubernetes.io/serviceaccount}
PLUGINS="galactic-cni galactic-tap-cni galactic-ipam galactic-route galactic-bgp"

log() { echo "galactic-install: $*" >&2; }
die() { log "error: $*"; exit 1; }

# A value that can go into JSON and YAML unquoted-safe: letters, digits and . _ : / -.
token() {
    case "$2" in
        "" | *[!A-Za-z0-9._:/-]*) die "$1 must be a non-empty plain token, got '$2'" ;;
    esac
}

# write_atomic MODE TARGET: stdin to TARGET through a temporary file and a rename, only when the
# content differs. Prints the target when it changed.
write_atomic() {
    mode=$1 target=$2
    dir=$(dirname "$target")
    mkdir -p "$dir"
    tmp="$dir/.$(basename "$target").tmp.$$"
    cat >"$tmp"
    chmod "$mode" "$tmp"
    if [ -f "$target" ] && cmp -s "$tmp" "$target" &&
        [ "$(stat -c %a "$target")" = "$(stat -c %a "$tmp")" ]; then
        rm -f "$tmp"
        return 0
    fi
    mv -f "$tmp" "$target"
    echo "$target"
}

stage_binaries() {
    bin="$HOST_ROOT/opt/cni/bin"
    for plugin in $PLUGINS; do
        write_atomic 755 "$bin/$plugin" <"$IMAGE_BIN/$plugin"
    done
    if [ "${ALIASES:-false}" = true ]; then
        write_atomic 755 "$bin/galactic-veth" <"$IMAGE_BIN/galactic-cni"
        write_atomic 755 "$bin/galactic-tap" <"$IMAGE_BIN/galactic-tap-cni"
    fi
}

# Every setting is checked before anything is written.
check_settings() {
    token NODE_NAME "${NODE_NAME:-}"
    namespace=${GALACTIC_NAMESPACE:-galactic-system}
    publisher=${GALACTIC_PUBLISHER:-kubernetes}
    domain=${GALACTIC_ROUTING_DOMAIN:-auto}
    level=${GALACTIC_LOG_LEVEL:-info}
    token GALACTIC_NAMESPACE "$namespace"
    case "$publisher" in kubernetes | local) ;; *) die "GALACTIC_PUBLISHER must be kubernetes or local, got '$publisher'" ;; esac
    case "$domain" in vrf | table | auto) ;; *) die "GALACTIC_ROUTING_DOMAIN must be vrf, table or auto, got '$domain'" ;; esac
    case "$level" in debug | info | warn | warning | error) ;; *) die "GALACTIC_LOG_LEVEL must be debug, info, warn or error, got '$level'" ;; esac
    for plugin in $PLUGINS; do
        [ -x "$IMAGE_BIN/$plugin" ] || die "$IMAGE_BIN/$plugin is missing from the image"
    done
    if [ "$publisher" = kubernetes ]; then
        token KUBERNETES_SERVICE_HOST "${KUBERNETES_SERVICE_HOST:-}"
        [ -r "$SA_DIR/token" ] || die "no service account token at $SA_DIR/token"
    fi
}

stage_node_config() {
    write_atomic 644 "$HOST_ROOT/etc/galactic/node.json" <<JSON
{
  "node_name": "$NODE_NAME",
  "namespace": "$namespace",
  "publisher": "$publisher",
  "routing_domain": "$domain",
  "log_level": "$level",
  "kubeconfig": "/var/lib/galactic/kubeconfig",
  "state_dir": "/var/lib/galactic",
  "log_file": "/var/log/galactic/galactic-cni.log"
}
JSON
}

# The plugins run on the host, outside any pod: they get the service account's token and CA.
stage_kubeconfig() {
    host=${KUBERNETES_SERVICE_HOST:-}
    port=${KUBERNETES_SERVICE_PORT:-443}
    token KUBERNETES_SERVICE_HOST "$host"
    token KUBERNETES_SERVICE_PORT "$port"
    [ -r "$SA_DIR/token" ] || die "no service account token at $SA_DIR/token"
    case "$host" in *:*) host="[$host]" ;; esac
    state="$HOST_ROOT/var/lib/galactic"
    if [ -r "$SA_DIR/ca.crt" ]; then
        write_atomic 644 "$state/ca.crt" <"$SA_DIR/ca.crt"
    fi
    sa_token=$(cat "$SA_DIR/token")
    token "the service account token" "$(printf %s "$sa_token" | tr -d '=+')"
    write_atomic 600 "$state/kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: galactic
  cluster:
    server: https://$host:$port
    certificate-authority: /var/lib/galactic/ca.crt
users:
- name: galactic-cni
  user:
    token: $sa_token
contexts:
- name: galactic
  context: {cluster: galactic, user: galactic-cni}
current-context: galactic
YAML
}

case "${1:-}" in
    install)
        check_settings
        stage_binaries
        stage_node_config
        if [ "$publisher" = kubernetes ]; then
            stage_kubeconfig
        fi
        mkdir -p "$HOST_ROOT/var/lib/galactic" "$HOST_ROOT/var/log/galactic"
        log "installed for node $NODE_NAME"
        ;;
    refresh)
        seconds=${REFRESH_SECONDS:-300}
        token REFRESH_SECONDS "$seconds"
        while :; do
            stage_kubeconfig
            sleep "$seconds"
        done
        ;;
    *)
        die "usage: install.sh install|refresh"
        ;;
esac
