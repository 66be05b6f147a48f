#!/usr/bin/env bash
# Makes `docker compose` work on this machine, and writes the environment that reaches it to
# $STATE/env (source it). Docker, where its daemon answers, is used as it is. Elsewhere podman
# stands in: installed from Debian, its Docker-compatible API on a socket here, and Compose v2
# from Debian's docker-compose package, unpacked here (the system's apt sources stay as they
# are). Each step says what it does; a step already done is skipped.
#
# Usage: deploy/containers/engine.sh [STATE_DIR]   (default: test-output/containers)
#
# What podman needs on machines like our CI's (a sandbox without systemd or a registry):
# - a containers.conf, written only where there is none: rlimits the sandbox cannot raise
#   (podman's defaults raise them), runc (crun refuses its hybrid cgroups), cgroupfs and
#   file events (no systemd);
# - without a reachable registry, python:3.11-slim is built from Debian's packages
#   (mmdebstrap), trusting this machine's CA certificates for the HTTPS proxy builds go through;
# - without systemd nothing runs health checks: healthchecks.sh does, every 2 s.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
state=$(mkdir -p "${1:-test-output/containers}" && cd "${1:-test-output/containers}" && pwd)
say() { echo "containers: $*" >&2; }

socket="$state/podman.sock"
# A shell that sourced $state/env reaches podman through the docker CLI: that is no Docker.
if [ "${DOCKER_HOST:-}" != "unix://$socket" ] && docker info >/dev/null 2>&1 \
    && docker compose version >/dev/null 2>&1; then
    say "using Docker ($(docker compose version --short 2>/dev/null || echo compose v2))"
    : > "$state/env"
    exit 0
fi
say "no Docker daemon here: setting up podman with Compose v2 in $state"

if ! command -v podman >/dev/null || ! command -v mmdebstrap >/dev/null; then
    say "installing podman, runc and mmdebstrap from Debian"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends podman runc \
        containernetworking-plugins iptables mmdebstrap catatonit fuse-overlayfs slirp4netns \
        uidmap >/dev/null
fi
if [ ! -e /etc/containers/containers.conf ]; then
    say "writing /etc/containers/containers.conf (runc, cgroupfs, fixed ulimits)"
    mkdir -p /etc/containers
    cat > /etc/containers/containers.conf <<'CONF'
# Written by deploy/containers/engine.sh for sandboxes without systemd, where rlimits
# cannot be raised and crun refuses the hybrid cgroup layout.
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
fi

compose="$state/docker/cli-plugins/docker-compose"
if ! docker compose version >/dev/null 2>&1 && [ ! -x "$compose" ]; then
    say "fetching Compose v2 (Debian trixie's docker-compose package) into $state"
    apt_dir="$state/apt"
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$(dirname "$compose")"
    echo "deb http://deb.debian.org/debian trixie main" > "$apt_dir/sources.list"
    opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
          -o APT::Sandbox::User=root)
    apt-get "${opts[@]}" update -qq
    (cd "$apt_dir" && apt-get "${opts[@]}" download docker-compose >/dev/null)
    dpkg-deb -x "$apt_dir"/docker-compose_*.deb "$state/compose-v2"
    ln -sf "$state/compose-v2/usr/libexec/docker/cli-plugins/docker-compose" "$compose"
fi

if ! curl -fsS --unix-socket "$socket" http://d/_ping >/dev/null 2>&1; then
    say "starting podman's Docker API on $socket"
    nohup podman system service --time=0 "unix://$socket" > "$state/podman-service.log" 2>&1 &
    echo $! > "$state/podman-service.pid"
    for _ in $(seq 50); do
        curl -fsS --unix-socket "$socket" http://d/_ping >/dev/null 2>&1 && break
        sleep 0.2
    done
fi
if [ ! -d /run/systemd/system ] && ! pgrep -f "$here/healthchecks.sh" >/dev/null; then
    say "no systemd: running health checks every 2 s (healthchecks.sh)"
    nohup "$here/healthchecks.sh" > /dev/null 2>&1 &
    echo $! > "$state/healthchecks.pid"
fi

# DOCKER_BUILDKIT=0: podman's API builds with its own builder, not BuildKit.
cat > "$state/env" <<ENV
export DOCKER_HOST=unix://$socket
export DOCKER_BUILDKIT=0
ENV
if [ -x "$compose" ]; then
    # Podman reads registry logins from DOCKER_CONFIG too: it must hold a config.json.
    [ -e "$state/docker/config.json" ] || echo '{}' > "$state/docker/config.json"
    echo "export DOCKER_CONFIG=$state/docker" >> "$state/env"
fi

base=docker.io/library/python:3.11-slim
if ! podman image exists "$base" && ! podman pull -q "$base" >/dev/null 2>&1; then
    say "no registry reachable: building $base from Debian bookworm's packages (~2 min)"
    rootfs="$state/bookworm.tar"
    mmdebstrap --quiet --mode=root --variant=minbase --include=python3,ca-certificates \
        bookworm "$rootfs" "deb http://deb.debian.org/debian bookworm main" \
        "deb http://deb.debian.org/debian bookworm-updates main" \
        "deb http://deb.debian.org/debian-security bookworm-security main"
    podman import --quiet --change 'CMD ["/bin/bash"]' "$rootfs" localhost/bookworm >/dev/null
    rm -f "$rootfs"
    context="$state/python-slim"
    mkdir -p "$context/certs"
    cp "$here/python-slim.Dockerfile" "$context/Dockerfile"
    cp /usr/local/share/ca-certificates/*.crt "$context/certs/" 2>/dev/null || true
    podman build --quiet -t "$base" "$context" >/dev/null
fi
say "ready: source $state/env, then docker compose ..."
