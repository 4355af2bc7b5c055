#!/bin/sh
# Node installer of the Galactic CNI chain, run from the image by the DaemonSet.
#
#   install.sh install   (init container) stage the plugin binaries, the node config, the
#                        datapath's host conflist and the plugins' kubeconfig onto the host;
#                        take over from the upstream Go chain; then exit
#   install.sh refresh   (long-running container) rewrite the kubeconfig whenever the service
#                        account token changes (projected tokens rotate), every REFRESH_SECONDS
#   install.sh rollback  (by hand, before the Go DaemonSet takes the node back) write every live
#                        allocation as the Go allocator's markers and upstream's static conflist
#
# Every file is written to a temporary name in the target directory and renamed into place, and
# only when its content changed (a second run changes nothing and prints nothing; each change
# prints the path it changed).
#
# The plugins switch as one set (decision 0061): every name in /opt/cni/bin is a symlink to
# .galactic/current/<name>, and .galactic/current is a symlink to a directory holding the whole
# set, named by its digest. Staging writes a new set directory, then renames one symlink: a chain
# started after the switch runs only new binaries, one started before it only old ones (the
# pattern of the kubelet's atomic volume writer). The upstream type names galactic-veth and
# galactic-tap are installed as copies of our masters whenever the Go binaries are there
# (ALIASES=auto), so no NAD can run a Go master in front of our IPAM, route and bgp stages.
#
# Host paths are mounted under HOST_ROOT (default /host):
#   /opt/cni/bin            the plugins (galactic-cni, galactic-tap-cni, galactic-ipam,
#                           galactic-route, galactic-bgp; the aliases galactic-veth, galactic-tap)
#   /etc/cni/net.d          the upstream static conflist 10-galactic.conflist: its settings are
#                           carried into the node config, then it is removed (a runtime could load
#                           it as a network)
#   /etc/galactic/node.json the node config (docs/configuration.md)
#   /etc/galactic/datapath  10-galactic.conflist for the datapath container (decision 0060)
#   /var/lib/galactic       state; kubeconfig and ca.crt for the plugins; on a node the Go chain
#                           served, ipam/legacy-annotations.json (upstream's BGPAdvertisement
#                           annotations, exported once before the switch, Kubernetes publisher)
#
# Settings (environment; an empty value is unset). The upstream installer's, by their upstream
# names, first; each one not set falls back to the value in the upstream static conflist:
#   NODE_NAME or GALACTIC_CNI_NODE_NAME (required; the latter wins, as upstream),
#   GALACTIC_CNI_LOG_LEVEL (info; debug|info|warn|warning|error, anything else is info with a
#     warning, as upstream; GALACTIC_LOG_LEVEL is this installer's older name),
#   GALACTIC_CNI_EGRESS_SHARD_SIDS (none; comma-separated IPv6 uSIDs; GALACTIC_CNI_NAT66_SHARD_SIDS
#     and the conflist's nat66_shard_sids are its older names, read until the release after 0.2;
#     both set and different is an error),
#   GALACTIC_CNI_NAT64_PREFIX (none; comma-separated IPv6 /96 prefixes),
#   GALACTIC_CNI_EBPF_INTERFACES (auto-detect; comma-separated interface names),
#   GALACTIC_CNI_EBPF_FILTER_PRIORITY (1; 1-65535, anything else is the default with a warning),
#   GALACTIC_CNI_DAN_DIR (Kata runtime-rs's /run/kata-containers/dans-rs; an absolute path, not
#     the Go shim's /run/kata-containers/dans),
#   KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT (set by the kubelet),
#   SA_DIR (/var/run/secrets/kubernetes.io/serviceaccount);
# and this project's: GALACTIC_NAMESPACE (galactic-system), GALACTIC_PUBLISHER (kubernetes),
#   GALACTIC_ROUTING_DOMAIN (auto), ALIASES (auto: alias the upstream type names where the Go
#   binaries are installed; true: always; false: remove them), REFRESH_SECONDS (300),
#   IMAGE_BIN (/galactic/bin).
set -eu

HOST_ROOT=${HOST_ROOT:-/host}
IMAGE_BIN=${IMAGE_BIN:-/galactic/bin}
SA_DIR=${SA_DIR:-/var/run/secrets/kubernetes.io/serviceaccount}
PLUGINS="galactic-cni galactic-tap-cni galactic-ipam galactic-route galactic-bgp"
# The upstream type names and the binary each is a copy of.
ALIAS_PAIRS="galactic-veth:galactic-cni galactic-tap:galactic-tap-cni"
BIN="$HOST_ROOT/opt/cni/bin"
SETS="$BIN/.galactic"
GO_CONFLIST="$HOST_ROOT/etc/cni/net.d/10-galactic.conflist"
# Where the first run moves it: the Go settings it carries stay the fallback of every later run
# (restart, reboot, DaemonSet update), and a rollback to the Go DaemonSet moves it back.
RETIRED_GO_CONFLIST="$HOST_ROOT/etc/galactic/go-chain/10-galactic.conflist"

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
    if [ -f "$target" ] && [ ! -L "$target" ] && cmp -s "$tmp" "$target" &&
        [ "$(stat -c %a "$target")" = "$(stat -c %a "$tmp")" ]; then
        rm -f "$tmp"
        return 0
    fi
    mv -f "$tmp" "$target"
    echo "$target"
}

# link_atomic TARGET LINK: LINK becomes a symlink to TARGET (replacing a file or link in one
# rename), only when it is not one already. Prints LINK when it changed.
link_atomic() {
    if [ -L "$2" ] && [ "$(readlink "$2")" = "$1" ]; then
        return 0
    fi
    tmp="$(dirname "$2")/.$(basename "$2").tmp.$$"
    rm -f "$tmp"
    ln -s "$1" "$tmp"
    mv -T -f "$tmp" "$2"
    echo "$2"
}

# The value of KEY in the upstream static conflist (the Go installer writes one "key": "value"
# per line, Go-quoted; values here are plain), or nothing: the one in the runtime's conf dir
# while it is there, else the copy the first run retired.
go_setting() {
    file=$GO_CONFLIST
    [ -f "$file" ] || file=$RETIRED_GO_CONFLIST
    [ -f "$file" ] || return 0
    sed -n "s/^[[:space:]]*\"$1\":[[:space:]]*\"\([^\"\\\\]*\)\",\{0,1\}[[:space:]]*\$/\1/p" "$file" | head -n 1
}

# first_set NAME...: the value of the first named variable that is set and not empty.
first_set() {
    for name in "$@"; do
        eval "value=\${$name:-}"
        if [ -n "$value" ]; then
            printf %s "$value"
            return 0
        fi
    done
}

# A comma-separated list, entries trimmed, blank ones dropped, repeats dropped; each entry checked
# by the case pattern of `kind` (sid or ifname).
clean_list() {
    key=$1 kind=$2 raw=$3 out=""
    old_ifs=$IFS
    IFS=,
    for entry in $raw; do
        entry=$(printf %s "$entry" | tr -d ' \t')
        [ -n "$entry" ] || continue
        case "$kind:$entry" in
            sid:*:*) case "$entry" in *[!0-9A-Fa-f:.]*) die "invalid $key entry '$entry' (an IPv6 address)" ;; esac ;;
            sid:*) die "invalid $key entry '$entry' (an IPv6 address)" ;;
            nat64:*:*/96) case "$entry" in *[!0-9A-Fa-f:./]*) die "invalid $key entry '$entry' (an IPv6 /96 prefix)" ;; esac ;;
            nat64:*) die "invalid $key entry '$entry' (an IPv6 /96 prefix)" ;;
            ifname:*) case "$entry" in */* | *:* | . | ..) die "invalid $key entry '$entry' (an interface name)" ;; esac
                [ "${#entry}" -lt 16 ] || die "invalid $key entry '$entry' (an interface name is at most 15 bytes)" ;;
        esac
        case ",$out," in *",$entry,"*) continue ;; esac
        out=${out:+$out,}$entry
    done
    IFS=$old_ifs
    printf %s "$out"
}

# The egress shard SIDs under their name (environment, then the Go conflist) and under the Go
# chain's older one: one list, or an error naming both when they differ.
egress_sids() {
    sids=$(first_set GALACTIC_CNI_EGRESS_SHARD_SIDS)
    [ -n "$sids" ] || sids=$(go_setting egress_shard_sids)
    sids=$(clean_list GALACTIC_CNI_EGRESS_SHARD_SIDS sid "$sids")
    old=$(first_set GALACTIC_CNI_NAT66_SHARD_SIDS)
    [ -n "$old" ] || old=$(go_setting nat66_shard_sids)
    old=$(clean_list GALACTIC_CNI_NAT66_SHARD_SIDS sid "$old")
    if [ -n "$sids" ] && [ -n "$old" ] && [ "$sids" != "$old" ]; then
        die "GALACTIC_CNI_EGRESS_SHARD_SIDS ($sids) and its older name GALACTIC_CNI_NAT66_SHARD_SIDS / nat66_shard_sids ($old) are both set and differ; keep GALACTIC_CNI_EGRESS_SHARD_SIDS"
    fi
    [ -n "$sids" ] || sids=$old
}

# Every setting is checked before anything is written.
check_settings() {
    NODE_NAME=$(first_set GALACTIC_CNI_NODE_NAME NODE_NAME)
    [ -n "$NODE_NAME" ] || NODE_NAME=$(go_setting node_name)
    token NODE_NAME "${NODE_NAME:-}"
    namespace=${GALACTIC_NAMESPACE:-galactic-system}
    publisher=${GALACTIC_PUBLISHER:-kubernetes}
    domain=${GALACTIC_ROUTING_DOMAIN:-auto}
    aliases=${ALIASES:-auto}
    token GALACTIC_NAMESPACE "$namespace"
    case "$publisher" in kubernetes | local) ;; *) die "GALACTIC_PUBLISHER must be kubernetes or local, got '$publisher'" ;; esac
    case "$domain" in vrf | table | auto) ;; *) die "GALACTIC_ROUTING_DOMAIN must be vrf, table or auto, got '$domain'" ;; esac
    case "$aliases" in auto | true | false) ;; *) die "ALIASES must be auto, true or false, got '$aliases'" ;; esac

    level=$(first_set GALACTIC_CNI_LOG_LEVEL GALACTIC_LOG_LEVEL)
    [ -n "$level" ] || level=$(go_setting log_level)
    level=$(printf %s "${level:-info}" | tr -d ' \t' | tr A-Z a-z)
    case "$level" in
        debug | info | warn | error) ;;
        warning) level=warn ;;
        *) log "warning: unknown GALACTIC_CNI_LOG_LEVEL '$level'; using info"; level=info ;;
    esac
    egress_sids
    nat64=$(first_set GALACTIC_CNI_NAT64_PREFIX)
    [ -n "$nat64" ] || nat64=$(go_setting nat64_prefix)
    nat64=$(clean_list GALACTIC_CNI_NAT64_PREFIX nat64 "$nat64")
    uplinks=$(first_set GALACTIC_CNI_EBPF_INTERFACES)
    [ -n "$uplinks" ] || uplinks=$(go_setting ebpf_interfaces)
    uplinks=$(clean_list GALACTIC_CNI_EBPF_INTERFACES ifname "$uplinks")
    dan_dir=$(first_set GALACTIC_CNI_DAN_DIR)
    [ -n "$dan_dir" ] || dan_dir=$(go_setting dan_dir)
    case "$dan_dir" in
        "") ;;
        /run/kata-containers/dans | /run/kata-containers/dans/ | /var/run/kata-containers/dans | /var/run/kata-containers/dans/)
            die "GALACTIC_CNI_DAN_DIR '$dan_dir' is the Kata Go shim's directory, which fails every sandbox on a host-tap file; use runtime-rs's /run/kata-containers/dans-rs" ;;
        /*) token GALACTIC_CNI_DAN_DIR "$dan_dir" ;;
        *) die "GALACTIC_CNI_DAN_DIR must be an absolute path, got '$dan_dir'" ;;
    esac
    priority=$(first_set GALACTIC_CNI_EBPF_FILTER_PRIORITY | tr -d ' \t')
    case "$priority" in
        "") ;;
        *[!0-9]* | 0 | 0*) log "warning: GALACTIC_CNI_EBPF_FILTER_PRIORITY '$priority' is not 1-65535; using 1"; priority="" ;;
        *) [ "$priority" -le 65535 ] 2>/dev/null || { log "warning: GALACTIC_CNI_EBPF_FILTER_PRIORITY '$priority' is not 1-65535; using 1"; priority=""; } ;;
    esac

    for plugin in $PLUGINS; do
        [ -x "$IMAGE_BIN/$plugin" ] || die "$IMAGE_BIN/$plugin is missing from the image"
    done
    if [ "$publisher" = kubernetes ]; then
        token KUBERNETES_SERVICE_HOST "${KUBERNETES_SERVICE_HOST:-}"
        [ -r "$SA_DIR/token" ] || die "no service account token at $SA_DIR/token"
    fi
}

# The names the new set holds: every plugin, and the upstream type names unless ALIASES=false;
# with auto, only those installed now (by the Go installer or an earlier run of this one).
set_names() {
    names=$PLUGINS
    for pair in $ALIAS_PAIRS; do
        alias=${pair%%:*}
        case "$aliases" in
            true) names="$names $alias" ;;
            auto) if [ -e "$BIN/$alias" ] || [ -L "$BIN/$alias" ]; then names="$names $alias"; fi ;;
        esac
    done
    printf %s "$names"
}

# The image file a name is a copy of.
source_of() {
    for pair in $ALIAS_PAIRS; do
        [ "${pair%%:*}" = "$1" ] && { printf %s "$IMAGE_BIN/${pair#*:}"; return 0; }
    done
    printf %s "$IMAGE_BIN/$1"
}

# Before the first switch: the binaries there now (the Go chain's, or an older install's plain
# files) become a set of their own and every name a link into it. Nothing runs differently, but
# from here on one rename switches every name.
adopt_plain_files() {
    [ -L "$SETS/current" ] && return 0
    mkdir -p "$SETS/adopted"
    found=""
    for name in $PLUGINS galactic-veth galactic-tap; do
        if [ -f "$BIN/$name" ] && [ ! -L "$BIN/$name" ]; then
            ln -f "$BIN/$name" "$SETS/adopted/$name" 2>/dev/null || cp -p "$BIN/$name" "$SETS/adopted/$name"
            found="$found $name"
        fi
    done
    link_atomic adopted "$SETS/current" >/dev/null
    for name in $found; do
        link_atomic ".galactic/current/$name" "$BIN/$name"
    done
}

stage_binaries() {
    names=$(set_names)
    digest=$(for name in $names; do printf '%s\n' "$name"; sha256sum <"$(source_of "$name")"; done |
        sha256sum | cut -c1-16)
    set_dir="$SETS/set-$digest"
    if [ ! -d "$set_dir" ]; then
        tmp="$SETS/.set-$digest.tmp.$$"
        rm -rf "$tmp"
        mkdir -p "$tmp"
        for name in $names; do
            cp "$(source_of "$name")" "$tmp/$name"
            chmod 755 "$tmp/$name"
        done
        mv -T "$tmp" "$set_dir"
    fi
    adopt_plain_files
    # The switch: one rename.
    link_atomic "set-$digest" "$SETS/current"
    for name in $names; do
        link_atomic ".galactic/current/$name" "$BIN/$name"
    done
    if [ "$aliases" = false ]; then
        for pair in $ALIAS_PAIRS; do
            alias=${pair%%:*}
            if [ -e "$BIN/$alias" ] || [ -L "$BIN/$alias" ]; then
                rm -f "$BIN/$alias"
                echo "$BIN/$alias"
            fi
        done
    fi
    # Older sets: a process started from one keeps running (its file is unlinked, not changed).
    for old in "$SETS"/set-* "$SETS/adopted"; do
        [ -e "$old" ] && [ "$old" != "$set_dir" ] && rm -rf "$old"
    done
    return 0
}

node_config_json() {
    printf '{\n'
    printf '  "node_name": "%s",\n' "$NODE_NAME"
    printf '  "namespace": "%s",\n' "$namespace"
    printf '  "publisher": "%s",\n' "$publisher"
    printf '  "routing_domain": "%s",\n' "$domain"
    printf '  "log_level": "%s",\n' "$level"
    [ -z "$sids" ] || printf '  "egress_shard_sids": "%s",\n' "$sids"
    [ -z "$nat64" ] || printf '  "nat64_prefix": "%s",\n' "$nat64"
    [ -z "$uplinks" ] || printf '  "ebpf_interfaces": "%s",\n' "$uplinks"
    [ -z "$priority" ] || printf '  "ebpf_filter_priority": "%s",\n' "$priority"
    [ -z "$dan_dir" ] || printf '  "dan_dir": "%s",\n' "$dan_dir"
    printf '  "kubeconfig": "/var/lib/galactic/kubeconfig",\n'
    printf '  "state_dir": "/var/lib/galactic",\n'
    printf '  "log_file": "/var/log/galactic/galactic-cni.log"\n'
    printf '}\n'
}

stage_node_config() {
    node_config_json | write_atomic 644 "$HOST_ROOT/etc/galactic/node.json"
}

# Upstream's static conflist, for the datapath container only (it reads node_name, namespace
# and the node keys, and rewrites ebpf_interfaces when its uplinks change); outside the runtime's
# conf dir. Written here only while the datapath is not running (this is the pod's init
# container), so the file has one writer at a time (decision 0060).
# The shard SIDs go under both names: the newest Go chain reads egress_shard_sids, the c4c2d06
# one a rollback returns to nat66_shard_sids.
stage_datapath_conflist() {
    write_atomic 644 "$HOST_ROOT/etc/galactic/datapath/10-galactic.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "galactic",
  "plugins": [
    {
      "type": "galactic-cni",
      "node_name": "$NODE_NAME",
      "kubeconfig": "/var/lib/galactic/kubeconfig",
      "namespace": "$namespace",
      "log_file": "/var/log/galactic/galactic-cni.log",
      "log_level": "$level",
      "egress_shard_sids": "$sids",
      "nat66_shard_sids": "$sids",
      "nat64_prefix": "$nat64",
      "ebpf_interfaces": "$uplinks",
      "dan_dir": "$dan_dir"
    }
  ]
}
JSON
}

# The upstream static conflist sits in the runtime's conf dir with a type that is now a real
# binary: it leaves the conf dir (a runtime could load it as a network) for /etc/galactic, where
# later runs read the settings it carries. A conflist the Go installer wrote again (a rollback
# and a second switch) replaces the retired copy: it is the newer statement of the Go settings.
retire_go_conflist() {
    [ -f "$GO_CONFLIST" ] || return 0
    mkdir -p "$(dirname "$RETIRED_GO_CONFLIST")"
    mv -f "$GO_CONFLIST" "$RETIRED_GO_CONFLIST"
    echo "$GO_CONFLIST"
}

# Whether the upstream Go chain has served this node: its IPAM markers, its static conflist, or
# its master binaries as plain files (before the first switch). Read before anything is staged.
go_chain_present() {
    [ -d "$HOST_ROOT/var/lib/cni/galactic-ipam" ] || [ -f "$GO_CONFLIST" ] && return 0
    for name in galactic-veth galactic-tap; do
        [ -f "$BIN/$name" ] && [ ! -L "$BIN/$name" ] && return 0
    done
    return 1
}

# On a node the Go chain served, upstream's BGPAdvertisement annotations are the only record of
# the allocations its in-memory allocator made: export them next to the IPAM store before the
# plugins switch, so the first write of the new IPAM imports them (decision 0061) and no pod
# gets a live pod's address. Once exported the file is kept (the import reads it once); a failed
# export fails the install, and the init container retries it.
ANNOTATIONS_EXPORT="$HOST_ROOT/var/lib/galactic/ipam/legacy-annotations.json"
stage_annotation_export() {
    [ "$go_chain" = yes ] && [ "$publisher" = kubernetes ] || return 0
    [ -f "$ANNOTATIONS_EXPORT" ] && return 0
    mkdir -p "$(dirname "$ANNOTATIONS_EXPORT")"
    if ! "$IMAGE_BIN/galactic-bgp" export-annotations "$installer_kubeconfig" "$namespace" "$ANNOTATIONS_EXPORT" >&2; then
        die "could not export the BGPAdvertisement annotations of namespace $namespace (the upstream allocations): check that this node reaches the API server and that the service account may list bgpadvertisements there, or write the export by hand on the node (kubectl get bgpadvertisements -n $namespace -o json > /var/lib/galactic/ipam/legacy-annotations.json); the Go chain keeps serving until then, and the init container retries"
    fi
    echo "$ANNOTATIONS_EXPORT"
}

# The installer's own kubeconfig, for the node-identity check and the export: this container's
# view (the service account's own CA path). Under a host mount, because the container's root
# filesystem is read-only and it has no /tmp; removed when the script exits, however it exits.
write_installer_kubeconfig() {
    host=${KUBERNETES_SERVICE_HOST:-}
    port=${KUBERNETES_SERVICE_PORT:-443}
    case "$host" in *:*) host="[$host]" ;; esac
    mkdir -p "$HOST_ROOT/var/lib/galactic"
    installer_kubeconfig=$(mktemp "$HOST_ROOT/var/lib/galactic/.installer-kubeconfig.XXXXXX")
    trap 'rm -f "$installer_kubeconfig"' EXIT
    cat >"$installer_kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: galactic
  cluster:
    server: https://$host:$port
    certificate-authority: $SA_DIR/ca.crt
users:
- name: galactic-cni
  user:
    token: $(cat "$SA_DIR/token")
contexts:
- name: galactic
  context: {cluster: galactic, user: galactic-cni}
current-context: galactic
YAML
}

# The node name must name this machine (as upstream checks): a Node whose InternalIP is one of
# the host's addresses (the pod shares the host's network namespace). Before anything is
# staged, so a wrong name changes nothing on the node.
check_node_identity() {
    if ! "$IMAGE_BIN/galactic-bgp" check-node "$installer_kubeconfig" "$NODE_NAME" >&2; then
        die "NODE_NAME $NODE_NAME does not name this node (see above); nothing was changed"
    fi
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

# Before the node returns to the Go DaemonSet (docs/operations.md, "Rolling back to the Go
# chain"): every live allocation written as the Go allocator's marker files, so it never hands
# out a live pod's address, and upstream's static conflist back in the runtime's conf dir with
# the node's current settings (the datapath's copy has upstream's shape). Safe to repeat; run it
# again after the Go pod started to write what was allocated in between.
prepare_rollback() {
    if ! "$IMAGE_BIN/galactic-ipam" write-markers --data-dir "$HOST_ROOT/var/lib/galactic/ipam" \
        --legacy-dir "$HOST_ROOT/var/lib/cni/galactic-ipam"; then
        die "not every live allocation could be written for the Go allocator (see the report above); do not start the Go chain on this node"
    fi
    datapath="$HOST_ROOT/etc/galactic/datapath/10-galactic.conflist"
    [ -f "$datapath" ] || die "no $datapath: this node was never installed"
    write_atomic 644 "$GO_CONFLIST" <"$datapath"
    log "ready for the Go DaemonSet on this node"
}

case "${1:-}" in
    install)
        check_settings
        go_chain=no
        if go_chain_present; then go_chain=yes; fi
        if [ "$publisher" = kubernetes ]; then
            write_installer_kubeconfig
            check_node_identity
        fi
        # The settings land before the binaries switch: the new plugins read node.json.
        stage_node_config
        stage_datapath_conflist
        if [ "$publisher" = kubernetes ]; then
            stage_kubeconfig
        fi
        mkdir -p "$HOST_ROOT/var/lib/galactic" "$HOST_ROOT/var/log/galactic"
        stage_annotation_export
        stage_binaries
        retire_go_conflist
        log "installed for node $NODE_NAME"
        ;;
    rollback)
        prepare_rollback
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
        die "usage: install.sh install|refresh|rollback"
        ;;
esac
