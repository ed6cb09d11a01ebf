# `sam local` on a Docker engine (docs/local.md "sam local"), sourced by
# infra/stack.sh: a Docker engine (the caller's if one answers, else
# Debian's docker.io started here and stopped again), an invoke image made
# without any registry, the functions' bootstraps, the services forwarded
# to Docker's bridge, then tests/sam_local.rs.

# ensure_docker: exports DOCKER_HOST for an engine that answers. An engine
# the caller runs (DOCKER_HOST, or the default socket) is used as it is
# and never stopped; otherwise dockerd starts with its data, state and
# socket in a folder of this run, no iptables rules and no masquerading
# (the containers reach the host's bridge address and nothing else), and
# on_exit stops it.
DOCKERD_PID=""
DOCKER_DIR=""
DOCKER_BRIDGE_NEW=0
ensure_docker() {
  if docker info >/dev/null 2>&1; then
    say "docker: the engine at ${DOCKER_HOST:-unix:///var/run/docker.sock} (yours: used, not stopped)"
    return
  fi
  if ! command -v dockerd >/dev/null; then
    say "installing docker.io (Debian), for sam local"
    local sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq docker.io >/dev/null 2>&1; then
      $sudo apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq docker.io >/dev/null
    fi
  fi
  [ "$(id -u)" = 0 ] || { say "dockerd needs root: run as root, or start an engine and set DOCKER_HOST"; return 1; }
  # Short paths: containerd's sockets live under the exec root, and a unix
  # socket's path must fit in 108 bytes wherever the clone is.
  # dockerd creates the bridge docker0 and leaves it when it stops: one it
  # created is deleted again.
  ip link show docker0 >/dev/null 2>&1 || DOCKER_BRIDGE_NEW=1
  DOCKER_DIR=$(mktemp -d /tmp/seckill-docker.XXXXXX)
  export DOCKER_HOST="unix://$DOCKER_DIR/docker.sock"
  dockerd --host "$DOCKER_HOST" --data-root "$DOCKER_DIR/data" --exec-root "$DOCKER_DIR/exec" \
    --pidfile "$DOCKER_DIR/docker.pid" --iptables=false --ip-masq=false \
    >"$STATE/dockerd.log" 2>&1 &
  DOCKERD_PID=$!
  wait_for dockerd 60 docker info
  say "docker: dockerd $(docker version --format '{{.Server.Version}}') on $DOCKER_HOST (stopped at the end)"
}

# stop_docker: what ensure_docker started, stopped; containers first (a
# SAM killed mid-run may leave some), then the engine, its folder and the
# bridge it made.
stop_docker() {
  [ -n "$DOCKERD_PID" ] || return 0
  local ids deadline=$((SECONDS + 30))
  ids=$(docker ps -aq 2>/dev/null || true)
  if [ -n "$ids" ]; then docker rm -f $ids >/dev/null 2>&1 || true; fi
  kill "$DOCKERD_PID" 2>/dev/null || true
  while kill -0 "$DOCKERD_PID" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
  kill -9 "$DOCKERD_PID" 2>/dev/null || true
  wait "$DOCKERD_PID" 2>/dev/null || true
  DOCKERD_PID=""
  rm -rf "$DOCKER_DIR" 2>/dev/null || true
  if [ "$DOCKER_BRIDGE_NEW" = 1 ]; then ip link delete docker0 2>/dev/null || true; fi
}

# bridge_gateway: the host's address on Docker's default bridge, where a
# container reaches the host.
bridge_gateway() {
  local gw
  gw=$(docker network inspect bridge --format '{{range .IPAM.Config}}{{.Gateway}}{{end}}' 2>/dev/null || true)
  if [ -z "$gw" ]; then
    gw=$(ip -4 -o addr show docker0 2>/dev/null | awk '{print $4}' | cut -d/ -f1)
  fi
  [ -n "$gw" ] || { say "no address for Docker's bridge (docker0)"; return 1; }
  printf '%s\n' "$gw"
}

# build_invoke_image TAG BOOTSTRAP...: the image SAM runs the functions in,
# from this machine alone: a static busybox (SAM's own Dockerfile runs `mv`
# and `chmod` to add Lambda's runtime interface emulator) and the C
# libraries the given bootstraps link, copied from the host. `make build`'s
# bootstraps need at most glibc 2.34; the host's debug builds need the host's.
build_invoke_image() {
  local tag="$1"; shift
  local dir="$STATE/invoke-image" root lib began=$SECONDS
  root="$dir/rootfs"
  rm -rf "$dir"; mkdir -p "$dir/deb" "$root"/{bin,etc/ssl/certs,tmp,var/task,var/runtime,opt}
  chmod 1777 "$root/tmp"
  if ! (cd "$dir/deb" && apt-get download busybox-static >/dev/null 2>&1); then
    local sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    (cd "$dir/deb" && apt-get download busybox-static >/dev/null)
  fi
  dpkg-deb -x "$dir"/deb/busybox-static_*.deb "$dir/busybox"
  cp "$dir/busybox/bin/busybox" "$root/bin/"
  for applet in sh mv chmod cp rm mkdir ls cat env; do ln -sf busybox "$root/bin/$applet"; done
  # Every library any bootstrap links, at the path the host's loader has it.
  for lib in $(ldd "$@" 2>/dev/null | grep -oE '/[^ ]+\.so[^ ]*' | sort -u); do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
  if [ -f /etc/ssl/certs/ca-certificates.crt ]; then cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"; fi
  printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
  tar -C "$root" --owner=0 --group=0 -c . \
    | docker import -c 'ENV PATH=/bin LANG=C.UTF-8' -c 'WORKDIR /var/task' - "$tag" >/dev/null
  say "invoke image $tag in $((SECONDS - began)) s: $(du -sh "$root" | cut -f1) (busybox and $(find "$root" -name '*.so*' | wc -l) libraries of this host)"
}

# cmd_sam_local [debug]: make sam-local. `sam build` (the release bootstraps
# `make build` makes), or with `debug` the workspace's debug build of the
# functions (what make test runs: no second build of the world); then
# tests/sam_local.rs against services of its own.
cmd_sam_local() {
  local mode="${1:-release}"
  mkdir -p "$STATE"
  if [ -z "${TEST_START:-}" ]; then
    ensure_tools
    trap on_exit EXIT
    trap 'exit 130' INT TERM
    # As make test's suite: counts at once (the lag has tests of its own).
    export STRICT_SQS_COUNT_LAG_SECONDS="${STRICT_SQS_COUNT_LAG_SECONDS:-0}"
  fi
  ensure_docker
  # seckill-local (forwarding, the authorizer stand-in), the functions'
  # debug bootstraps and the tests, with one feature set (as make test's
  # build phase: nothing here is built again there).
  cargo build --workspace --bins --tests
  STRICT_BIN="$CARGO_TARGET_DIR/debug/seckill-local"
  local build bins=()
  if [ "$mode" = debug ]; then
    build="$STATE/sam-build"
    bins=(--bins "$CARGO_TARGET_DIR/debug")
  else
    cmd_build
    build="$ROOT/.aws-sam/build"
  fi
  local template
  template=$("$VENV/bin/python" infra/sam_local/template.py "$build" "${bins[@]}" \
    --authorizer "$STRICT_BIN" --out sam-local.yaml)
  local tag="seckill-invoke:local"
  build_invoke_image "$tag" "$build"/*/bootstrap "$STRICT_BIN"
  if [ -z "${REDIS_URL:-}" ] || [ -z "${AWS_ENDPOINT_URL:-}" ]; then
    MOTO_RECORD=0 start_services "$(free_port)" "$(free_port)"
  fi
  local gw redis_port aws_port
  gw=$(bridge_gateway)
  redis_port="${REDIS_URL##*:}"; aws_port="${AWS_ENDPOINT_URL##*:}"
  "$STRICT_BIN" forward "$gw:$redis_port=127.0.0.1:$redis_port" "$gw:$aws_port=127.0.0.1:$aws_port" \
    >"$STATE/forward.log" 2>&1 &
  PIDS+=($!)
  wait_for forward 20 bash -c "exec 3<>/dev/tcp/$gw/$aws_port"
  say "sam local: $template, image $tag, services at $gw (Docker's bridge) forwarded to loopback"
  SAM_LOCAL_TEMPLATE="$template" SAM_LOCAL_IMAGE="$tag" SAM_LOCAL_HOST_GATEWAY="$gw" \
    SAM_CLI="$VENV/bin/sam" SECKILL_REQUIRE_SAM_LOCAL=1 \
    bounded 900 cargo test --workspace -- --nocapture --test-threads=1 sam_local::
}
