#!/usr/bin/env bash
# The local stack's services: install what is missing, start Redis and the
# AWS emulator on loopback, run a command against them, stop what we started
# (also on failure or Ctrl-C).
#
#   infra/stack.sh run     # make run:  services + seckill-local up on 127.0.0.1:3000
#   infra/stack.sh test    # make test: fmt, clippy, cfn-lint, sam validate, checkov, cargo test
#   infra/stack.sh bench   # make bench
#   infra/stack.sh fairness  # make fairness: the bench's fairness table alone
#   infra/stack.sh nemesis # make nemesis: seeded real faults under a workload, then the checker
#   infra/stack.sh simulate  # make simulate: the deterministic simulation, any number of seeds
#   infra/stack.sh build   # make build:  sam build, every function's bootstrap (no AWS)
#   infra/stack.sh sam-local [debug]  # make sam-local: sam local invoke/start-api on a Docker engine
#   infra/stack.sh deploy  # make deploy: make build, then sam deploy --guided
#   infra/stack.sh check-deploy  # only the placeholder/secret check deploy starts with
#   infra/stack.sh bounded SECONDS CMD...  # CMD under make test's phase time limit (tests/harness.rs)
#   infra/stack.sh pages   # make pages: web/ + config.js into the stack's pages bucket
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"
CHECKOV_VENV="$ROOT/.venv-checkov"
SCHEMATHESIS_VENV="$ROOT/.venv-schemathesis"
STATE="$ROOT/.stack/$$"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/seckill/target}"
# The caller's own AWS settings, before the emulator's defaults below replace
# them: the commands that do reach AWS (deploy, pages) run with these.
CALLER_AWS_ENV=()
for name in AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION AWS_DEFAULT_REGION AWS_ENDPOINT_URL; do
  if [ -n "${!name+x}" ]; then CALLER_AWS_ENV+=("$name=${!name}"); fi
done
# Local credentials for the emulator; nothing here reaches AWS.
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
export AWS_REGION="${AWS_REGION:-us-east-1}"
export AWS_DEFAULT_REGION="$AWS_REGION"
export SAM_CLI_TELEMETRY=0

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

# shellcheck source=infra/sam_local/engine.sh
. "$ROOT/infra/sam_local/engine.sh"

# ensure_tools [--browser]: --browser also installs headless Chromium and
# chromedriver for the browser tests (only `make test` needs them).
ensure_tools() {
  if [ "${1:-}" = --browser ] && { ! command -v chromedriver >/dev/null \
    || ! command -v chromium >/dev/null; }; then
    say "installing chromium and chromium-driver (Debian), for the browser tests"
    local sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium chromium-driver >/dev/null
  fi
  ensure_redis
  # Also when infra/requirements.txt changed since the venv was made: a
  # venv from before a pin would keep the SAM CLI the pin moved away from.
  local pins="$ROOT/infra/requirements.txt"
  if [ ! -x "$VENV/bin/moto_server" ] || [ ! -x "$VENV/bin/cfn-lint" ] || [ ! -x "$VENV/bin/sam" ] \
    || [ ! -x "$VENV/bin/cargo-lambda" ] || ! "$VENV/bin/python3" -c 'import ziglang' 2>/dev/null \
    || ! cmp -s "$pins" "$VENV/requirements.txt"; then
    say "installing moto[server], cfn-lint, aws-sam-cli, cargo-lambda, ziglang into $VENV (PyPI)"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check -r "$pins"
    cp "$pins" "$VENV/requirements.txt"
  fi
}

# redis-server and redis-benchmark, if missing (Debian packages).
ensure_redis() {
  if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
    say "installing redis-server (Debian)"
    local sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server redis-tools >/dev/null
  fi
}

# ensure_tool_venv TOOL VENV: TOOL in a virtual environment of its own,
# from infra/TOOL/requirements.txt, reinstalled when those pins change.
# checkov's pinned dependencies conflict with SAM CLI's; schemathesis
# (tests/openapi.rs drives the API's OpenAPI description against the local
# stack with it) is kept apart the same way. Only make test uses them.
ensure_tool_venv() {
  local tool="$1" venv="$2" pins="$ROOT/infra/$1/requirements.txt"
  if [ ! -x "$venv/bin/$tool" ] || ! cmp -s "$pins" "$venv/requirements-$tool.txt"; then
    say "installing $tool into $venv (PyPI)"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$pins"
    cp "$pins" "$venv/requirements-$tool.txt"
  fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# A free port for a cluster node: its bus port (port + 10000) must be free
# too, and both must fit below 65536.
free_cluster_port() {
  python3 -c '
import random, socket
while True:
    port = random.randint(20000, 50000)
    ok = True
    for p in (port, port + 10000):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
        except OSError:
            ok = False
        finally:
            s.close()
    if ok:
        print(port)
        break'
}

port_busy() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Polls a condition until it holds or the deadline passes.
wait_for() {
  local what="$1" deadline=$((SECONDS + $2)); shift 2
  until "$@" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      say "$what did not come up; its log:"; tail -n 30 "$STATE/$what.log" >&2 || true
      return 1
    fi
    sleep 0.1
  done
}

PIDS=()
stop_services() {
  local pid deadline=$((SECONDS + 5))
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  # Polite first; whatever still runs after 5 s is killed, so a service that
  # ignores SIGTERM can never hang `make test` on its way out.
  for pid in "${PIDS[@]}"; do
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$STATE"
}
# What the script does on its way out: `make test`'s phase times, then stop
# what it started.
TEST_START=""
on_exit() {
  local rc=$?
  if [ -n "$TEST_START" ]; then print_phases "$rc"; fi
  stop_docker
  stop_services
}

# start_redis REDIS_PORT: redis-server alone, stopped on exit.
start_redis() {
  mkdir -p "$STATE"
  trap on_exit EXIT
  trap 'exit 130' INT TERM
  redis-server --bind 127.0.0.1 --port "$1" --save '' --appendonly no \
    --maxmemory-policy noeviction --dir "$STATE" >"$STATE/redis.log" 2>&1 &
  PIDS+=($!)
}

# start_services REDIS_PORT MOTO_PORT
start_services() {
  start_redis "$1"
  # MOTO_ITEM_UNDO=1 (make run, make bench): moto's server with its DynamoDB
  # transactions undone item by item (infra/moto/server.py), not by copying
  # whole tables: a long drain stays fast and small. make test and make
  # chaos run moto as it is (tests/strict.rs shows what its copies undo).
  local moto=("$VENV/bin/moto_server")
  if [ "${MOTO_ITEM_UNDO:-}" = 1 ]; then moto=("$VENV/bin/python3" "$ROOT/infra/moto/server.py"); fi
  # MOTO_RECORD=1 (make test): the emulator logs every request it serves,
  # which the IAM test reads (tests/iam.rs).
  if [ "${MOTO_RECORD:-}" = 1 ]; then
    MOTO_ENABLE_RECORDING=True MOTO_RECORDER_FILEPATH="$STATE/aws-calls.jsonl" \
      "${moto[@]}" -H 127.0.0.1 -p "$2" >"$STATE/moto.log" 2>&1 &
  else
    "${moto[@]}" -H 127.0.0.1 -p "$2" >"$STATE/moto.log" 2>&1 &
  fi
  PIDS+=($!)
  wait_for redis 20 redis-cli -p "$1" ping
  wait_for moto 60 python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$2/moto-api/')"
  export REDIS_URL="redis://127.0.0.1:$1"
  # The emulator itself, for the tests that compare it with the strict layer.
  export SECKILL_EMULATOR_URL="http://127.0.0.1:$2"
  export AWS_ENDPOINT_URL="$SECKILL_EMULATOR_URL"
  start_strict "${3:-$(free_port)}"
  say "redis on $REDIS_URL, emulator on $SECKILL_EMULATOR_URL, AWS_ENDPOINT_URL=$AWS_ENDPOINT_URL"
}

# start_strict PORT: the strict layer (seckill-local strict, docs/local.md
# "The strict layer") in front of the emulator, and AWS_ENDPOINT_URL pointed
# at it; SECKILL_STRICT=0 leaves AWS_ENDPOINT_URL at the emulator. Needs
# STRICT_BIN, the seckill-local binary the command built.
start_strict() {
  if [ "${SECKILL_STRICT:-1}" = 0 ]; then
    say "SECKILL_STRICT=0: the emulator as it is (no conflicts, throttles, lagging counts or duplicates)"
    return
  fi
  # MOTO_RECORD=1 (make test): the SQS calls the layer serves itself are
  # recorded beside the emulator's (the IAM test reads both).
  if [ "${MOTO_RECORD:-}" = 1 ]; then export STRICT_RECORD_FILE="$STATE/aws-calls-sqs.jsonl"; fi
  "$STRICT_BIN" strict --upstream "$SECKILL_EMULATOR_URL" --listen "127.0.0.1:$1" \
    >"$STATE/strict.log" 2>&1 &
  PIDS+=($!)
  wait_for strict 30 python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$1/moto-api/')"
  export AWS_ENDPOINT_URL="http://127.0.0.1:$1"
  # The functions trust a zero queue count only once it is older than the
  # layer's lag (QUEUE_COUNT_LAG_SECONDS, read by the rebuild).
  local lag="${STRICT_SQS_COUNT_LAG_SECONDS:-20}"
  export QUEUE_COUNT_LAG_SECONDS="${QUEUE_COUNT_LAG_SECONDS:-$(python3 -c 'import math, sys; print(math.ceil(float(sys.argv[1])))' "$lag")}"
}

# start_cluster: a real 3-master Redis Cluster on free loopback ports (no
# replicas), for the cluster tests and the shard benchmark. Exports
# REDIS_CLUSTER_URL (one seed node, `?cluster=true`) and REDIS_CLUSTER_PORTS.
start_cluster() {
  local dir="$STATE/cluster" port ports=() nodes=()
  mkdir -p "$dir"
  for _ in 1 2 3; do
    port=$(free_cluster_port)
    redis-server --bind 127.0.0.1 --port "$port" --cluster-enabled yes \
      --cluster-config-file "nodes-$port.conf" --cluster-node-timeout 5000 \
      --save '' --appendonly no --maxmemory-policy noeviction --dir "$dir" \
      >"$STATE/cluster-$port.log" 2>&1 &
    PIDS+=($!)
    ports+=("$port"); nodes+=("127.0.0.1:$port")
  done
  for port in "${ports[@]}"; do wait_for "cluster-$port" 20 redis-cli -p "$port" ping; done
  redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >"$STATE/cluster-create.log" 2>&1
  for port in "${ports[@]}"; do
    wait_for "cluster-$port" 20 sh -c "redis-cli -p $port cluster info | grep -q cluster_state:ok"
  done
  export REDIS_CLUSTER_URL="redis://127.0.0.1:${ports[0]}?cluster=true"
  export REDIS_CLUSTER_PORTS="${ports[*]}"
  say "redis cluster (3 masters) on ports ${ports[*]}"
}

cmd_run() {
  ensure_tools
  local redis_port=6379 moto_port=4566
  if port_busy "$redis_port"; then redis_port=$(free_port); fi
  if port_busy "$moto_port"; then
    say "port $moto_port is taken; set AWS_ENDPOINT_URL's port free and retry"; exit 1
  fi
  if port_busy 3000; then say "port 3000 is taken (is another 'make run' up?)"; exit 1; fi
  # A debug build unless RUN_PROFILE says otherwise: on a fresh machine it
  # is built in minutes (and shared with `make test`), where the optimised
  # `local` profile's link takes several times longer before anyone has
  # seen a page; the demo's load is far below what either serves.
  # `RUN_PROFILE=local make run` runs the optimised build `make bench` uses.
  local profile="${RUN_PROFILE:-dev}" dir
  case "$profile" in dev) dir=debug ;; *) dir="$profile" ;; esac
  say "building seckill-local ($profile profile; RUN_PROFILE=local for the optimised build)"
  cargo build --profile "$profile" -p seckill-infra --bin seckill-local
  local bin="$CARGO_TARGET_DIR/$dir/seckill-local"
  STRICT_BIN="$bin"
  # The strict layer on the documented 4566, the emulator behind it on a
  # free port (or the emulator itself on 4566 with SECKILL_STRICT=0).
  export MOTO_ITEM_UNDO="${MOTO_ITEM_UNDO:-1}"
  if [ "${SECKILL_STRICT:-1}" = 0 ]; then
    start_services "$redis_port" "$moto_port"
  else
    start_services "$redis_port" "$(free_port)" "$moto_port"
  fi
  RUST_LOG="${RUST_LOG:-info}" "$bin" up &
  PIDS+=($!)
  wait_for api 30 python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:3000/health')"
  local token; token=$("$bin" token --user alice)
  cat <<MSG

Seckill is up on http://127.0.0.1:3000 with a demo sale "demo" (100 units, 1 per buyer).
Buyer page: http://127.0.0.1:3000/    Operator dashboard: http://127.0.0.1:3000/ops
Or buy one with curl (paste into another terminal):

  curl -i -X POST http://127.0.0.1:3000/sales/demo/purchase \\
    -H "Authorization: Bearer $token" \\
    -H 'Content-Type: application/json' -d '{"quantity": 1}'

More tokens: $bin token --user bob
Ctrl-C stops the API, Redis and the emulator.
MSG
  wait "${PIDS[-1]}"
}

# Phase timing for `make test`: each phase's seconds, printed at the end
# (also when a phase fails), so a slow fresh machine shows where its time went.
PHASE_TIMES=()
PHASE_NAME=""
PHASE_T0=0
phase() {
  phase_done
  PHASE_NAME="$1"; PHASE_T0=$SECONDS
}
phase_done() {
  if [ -n "$PHASE_NAME" ]; then
    PHASE_TIMES+=("$(printf '%-9s %6d s' "$PHASE_NAME" $((SECONDS - PHASE_T0)))")
  fi
  PHASE_NAME=""
}
print_phases() {
  local rc=$1 line
  phase_done
  if [ "${#PHASE_TIMES[@]}" -gt 0 ]; then
    say "time by phase (exit $rc)"
    for line in "${PHASE_TIMES[@]}"; do printf '  %s\n' "$line" >&2; done
    printf '  %-9s %6d s\n' total $((SECONDS - TEST_START)) >&2
  fi
}

# bounded LIMIT_SECONDS CMD...: CMD, killed with its process group (the
# test binary and what it spawned) once over the limit. A hung test then
# fails its phase with a line that says so, instead of holding CI until
# CI's own limit cuts the log short. Each limit is several times what its
# phase takes on a fresh two-core machine.
bounded() {
  local limit="$1" rc=0; shift
  timeout --kill-after=30 "$limit" "$@" || rc=$?
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    say "${PHASE_NAME:+phase $PHASE_NAME: }over its ${limit} s limit, killed (a test libtest says has been running for over 60 seconds is the one that hung)"
  fi
  return "$rc"
}

cmd_test() {
  TEST_START=$SECONDS
  trap on_exit EXIT
  phase install
  ensure_tools --browser
  ensure_tool_venv checkov "$CHECKOV_VENV"
  ensure_tool_venv schemathesis "$SCHEMATHESIS_VENV"
  phase lint
  say "cargo fmt --check"; cargo fmt --all -- --check
  say "cargo clippy"; cargo clippy --workspace --all-targets -- -D warnings
  # The nested Redis stack too (cfn-lint also follows template.yaml's local
  # TemplateURL to check the parameters passed to it).
  say "cfn-lint"; "$VENV/bin/cfn-lint" template.yaml infra/*.yaml
  say "sam validate"; "$VENV/bin/sam" validate --template template.yaml --region "$AWS_REGION"
  say "sam validate --lint"; "$VENV/bin/sam" validate --lint --template template.yaml --region "$AWS_REGION"
  # Both templates; fails on a finding not accepted, with its reason, in
  # infra/checkov/skips.yaml.
  say "checkov"; "$CHECKOV_VENV/bin/python" infra/checkov/gate.py
  # The code's own docs (docs/architecture.md's code map links into them),
  # private items included: a broken intra-doc link fails here. A private
  # item linked from a public one is fine for docs nobody publishes.
  say "cargo doc"
  RUSTDOCFLAGS="-D warnings -A rustdoc::private_intra_doc_links" \
    cargo doc --workspace --no-deps --document-private-items
  phase build
  # Every binary (seckill-local, and the functions' bootstraps the sam-local
  # phase runs in containers) with every test, in one build: the binaries
  # get the tests' feature set, so no dependency is built twice.
  cargo build --workspace --bins --tests
  cargo test --workspace --no-run
  STRICT_BIN="$CARGO_TARGET_DIR/debug/seckill-local"
  # The suite's shared layer answers queue counts at once: a lag would hold
  # every test's rebuild for its length. The lag has tests of its own
  # (strict::, app::jobs::tests), each on a layer of its own.
  export STRICT_SQS_COUNT_LAG_SECONDS="${STRICT_SQS_COUNT_LAG_SECONDS:-0}"
  phase services
  MOTO_RECORD=1 start_services "$(free_port)" "$(free_port)"
  start_cluster
  phase suite
  say "cargo test"
  export SAM_CLI="$VENV/bin/sam"  # tests/consistency.rs: events from `sam local generate-event`
  export MOTO_SERVER="$VENV/bin/moto_server"
  # tests/openapi.rs: schemathesis against the local stack (required here).
  export SCHEMATHESIS="$SCHEMATHESIS_VENV/bin/schemathesis" SECKILL_REQUIRE_SCHEMATHESIS=1
  # A failing test's message, not its backtrace, is what the end of a CI
  # log shows (RUST_BACKTRACE=1 there pushed it out of view); a test run
  # alone still prints one when asked.
  RUST_BACKTRACE=0 bounded 2400 cargo test --workspace -- --skip browser:: --skip sam_local::
  # The pages in headless Chromium, timed apart; tests/browser.rs fails
  # (instead of skipping) without Chromium.
  phase browser
  say "cargo test: browser"
  # --workspace, as the suite ran: -p alone unifies features differently
  # and builds the suite again.
  SECKILL_REQUIRE_BROWSER=1 bounded 900 cargo test --workspace -- browser::
  phase iam
  # Every AWS call any function made in the suite, against its role.
  say "IAM: the suite's AWS calls against the template's roles"
  SECKILL_AWS_RECORDING="$STATE/aws-calls.jsonl,$STATE/aws-calls-sqs.jsonl" \
    bounded 600 cargo test --workspace -- --ignored --nocapture iam::whole_suite_recording
  # The bootstraps in Lambda containers: every events/*.json through `sam
  # local invoke`, a walk through `sam local start-api` (the debug build;
  # `make sam-local` runs the release build `make build` makes).
  phase sam-local
  cmd_sam_local debug
}

# The chaos scenarios at full size, one at a time so each prints its figures
# in one piece. (`make test` runs the same scenarios in their short form.)
cmd_chaos() {
  ensure_tools
  cargo build -p seckill-infra --bin seckill-local
  STRICT_BIN="$CARGO_TARGET_DIR/debug/seckill-local"
  start_services "$(free_port)" "$(free_port)"
  say "chaos scenarios (CHAOS=full)"
  # Only the chaos module's tests: a name given to `make chaos` narrows
  # them (`chaos::NAME`, NAME a scenario's file: `infra/stack.sh chaos failover`),
  # flags pass through.
  local filters=() named=0 arg
  for arg in "$@"; do
    case "$arg" in -*) filters+=("$arg") ;; *) filters+=("chaos::$arg"); named=1 ;; esac
  done
  [ "$named" = 1 ] || filters+=(chaos::)
  set +e
  CHAOS=full MOTO_SERVER="$VENV/bin/moto_server" \
    cargo test -p seckill-tests --test suite -- --test-threads=1 --nocapture "${filters[@]}" 2>&1 \
    | grep -E '^(chaos |  answers|test |test result|thread |  left|  right|error)'
  local rc=${PIPESTATUS[0]}
  set -e
  return "$rc"
}

# The nemesis (docs/testing.md "Nemesis"): a seeded schedule of real
# faults under a mixed workload, then a quiet period and the checker.
# NEMESIS_SEED replays a schedule and NEMESIS_SECONDS sets its length (the
# Makefile passes SEED and SECONDS). The test starts every server it
# breaks itself (the emulator, the strict layer, two redis-servers and the
# proxies between them) and stops them when it ends, so none starts here.
cmd_nemesis() {
  ensure_tools
  cargo test -p seckill-tests --test suite --no-run
  say "nemesis: seed ${NEMESIS_SEED:-drawn at random}, ${NEMESIS_SECONDS:-600} s of faults, then the quiet period and the checker"
  MOTO_SERVER="$VENV/bin/moto_server" \
    cargo test -p seckill-tests --test suite -- --ignored --nocapture --test-threads=1 \
    --exact nemesis::a_seeded_schedule_of_faults_under_a_mixed_workload_breaks_no_invariant "$@"
}

# The deterministic simulation (docs/testing.md "make simulate"): no
# services, only Rust. SEED replays one seed; SIM_SEEDS and SIM_FIRST choose
# a range; SIM_TRACE prints a replayed seed's story. make test runs its
# short form (sim::tests, 1,000 seeds and the kept regressions).
cmd_simulate() {
  [ -n "${SEED:-}" ] || unset SEED
  [ -n "${SIM_SEEDS:-}" ] || unset SIM_SEEDS
  [ -n "${SIM_FIRST:-}" ] || unset SIM_FIRST
  [ -n "${SIM_TRACE:-}" ] || unset SIM_TRACE
  if [ -n "${SEED:-}" ]; then
    say "simulate: seed $SEED replayed"
  else
    say "simulate: ${SIM_SEEDS:-10000} seeds from ${SIM_FIRST:-0}"
  fi
  cargo test -p seckill-shared --lib -- --ignored --nocapture --exact sim::tests::simulate 2>&1 \
    | grep -v -E '^(running [0-9]+ test|test result:|\s*$)'
  return "${PIPESTATUS[0]}"
}

cmd_bench() {
  ensure_tools
  # The purchase binary as Lambda runs it (release: fat LTO, stripped), for
  # the cold-start rows.
  cargo build --release -p purchase
  cargo build --profile local -p seckill-infra --bin seckill-bench --bin seckill-coldstart --bin seckill-local
  STRICT_BIN="$CARGO_TARGET_DIR/local/seckill-local"
  export PURCHASE_BINARY="$CARGO_TARGET_DIR/release/purchase"
  export MOTO_ITEM_UNDO="${MOTO_ITEM_UNDO:-1}"
  start_services "$(free_port)" "$(free_port)"
  start_cluster
  "$CARGO_TARGET_DIR/local/seckill-bench" "$@"
}

# The bench's fairness table alone: scripts at the opening
# millisecond against people over the first seconds, first come first served
# and with a lottery window, on a Redis of its own (no emulator, no venv).
cmd_fairness() {
  ensure_redis
  cargo build --profile local -p seckill-infra --bin seckill-bench
  local port; port=$(free_port)
  start_redis "$port"
  wait_for redis 20 redis-cli -p "$port" ping
  export REDIS_URL="redis://127.0.0.1:$port"
  say "redis on $REDIS_URL"
  "$CARGO_TARGET_DIR/local/seckill-bench" --only-fairness "$@"
}

# `sam build`: one `cargo lambda build --release --bin <name>` per function
# (BuildMethod: rust-cargolambda), then .aws-sam/build/<Function>/bootstrap.
# Offline once the crates are fetched; nothing here talks to AWS.
cmd_build() {
  ensure_tools
  # SAM finds `cargo-lambda` on PATH, and cargo-lambda finds Zig as the venv's
  # `python3 -m ziglang`.
  export PATH="$VENV/bin:$PATH"
  # Every function builds into the one CARGO_TARGET_DIR exported above (SAM's
  # Rust builder keeps an explicit CARGO_TARGET_DIR), so the dependencies are
  # compiled once for all seven, not once per function. cargo-lambda sets its
  # own RUSTFLAGS (target-cpu for Lambda's x86_64 hosts); one inherited from
  # the shell would change every fingerprint and rebuild the world.
  unset RUSTFLAGS
  say "sam build (release profile: fat LTO, one codegen unit; the first build takes a while)"
  "$VENV/bin/sam" build --beta-features --template template.yaml "$@"
  local missing=0 dir
  for dir in .aws-sam/build/*Function; do
    if [ -x "$dir/bootstrap" ]; then
      printf '  %-28s %s\n' "$(basename "$dir")" "$(du -h "$dir/bootstrap" | cut -f1)" >&2
    else
      say "no bootstrap in $dir"; missing=1
    fi
  done
  return "$missing"
}

# Refuses a deploy whose parameter overrides still hold a placeholder
# (CHANGEME) or a secret typed into a parameter (a GateSecret=... left from
# an old samconfig.toml, a RedisUrl with a password): the stack keeps its
# secrets in Secrets Manager, and a key published in this repository is no
# key. Checks what `sam deploy` would use: the --parameter-overrides given on
# the command line, else samconfig.toml's [<CONFIG_ENV or default>] profile
# (SAMCONFIG or --config-file names another file). Names the parameters,
# never their values; runs nothing else and reaches nothing.
check_deploy_overrides() {
  SAMCONFIG="${SAMCONFIG:-samconfig.toml}" CONFIG_ENV="${CONFIG_ENV:-default}" python3 - "$@" <<'PY'
import os, re, shlex, sys, tomllib

args = sys.argv[1:]
config_file, config_env, cli = os.environ["SAMCONFIG"], os.environ["CONFIG_ENV"], None
i = 0
while i < len(args):
    arg, value = (args[i].split("=", 1) + [None])[:2] if args[i].startswith("--") else (args[i], None)
    if arg in ("--config-file", "--config-env", "--parameter-overrides"):
        values = [value] if value is not None else []
        i += 1
        if value is None:
            while i < len(args) and not args[i].startswith("--"):
                values.append(args[i])
                i += 1
        if arg == "--config-file" and values:
            config_file = values[0]
        elif arg == "--config-env" and values:
            config_env = values[0]
        elif arg == "--parameter-overrides":
            cli = (cli or []) + values
        continue
    i += 1

if cli is not None:
    entries, source = cli, "--parameter-overrides"
elif os.path.exists(config_file):
    with open(config_file, "rb") as f:
        conf = tomllib.load(f).get(config_env, {})
    entries = None
    for section in ("deploy", "global"):
        found = conf.get(section, {}).get("parameters", {}).get("parameter_overrides")
        if found is not None:
            entries = found
            break
    entries = [entries] if isinstance(entries, str) else (entries or [])
    source = f"{config_file} [{config_env}]"
else:
    sys.exit(0)

pairs = []
for entry in entries:
    for token in shlex.split(entry):
        if token.startswith("ParameterKey="):
            fields = dict(f.split("=", 1) for f in token.split(",") if "=" in f)
            pairs.append((fields.get("ParameterKey", ""), fields.get("ParameterValue", "")))
        elif "=" in token:
            pairs.append(tuple(token.split("=", 1)))

problems = []
for key, value in pairs:
    if "CHANGEME" in value.upper():
        problems.append(f"{key} still holds a placeholder (CHANGEME): put the real value in")
    elif re.search(r"secret|password|token", key, re.I) and value and not value.startswith("arn:"):
        problems.append(
            f"{key} holds a secret value: secrets never go into parameters. The stack "
            "generates the gate key and the Redis AUTH token in Secrets Manager; "
            "GateSecretArn / RedisAuthSecretArn take the ARN of your own secret instead"
        )
    elif key == "RedisUrl" and re.match(r"^[a-z]+://[^/?#@]*:[^/?#]*@", value):
        problems.append("RedisUrl carries a password: put the AUTH token in a secret (RedisAuthSecretArn)")
if problems:
    print(f"refusing to deploy with {source}:", file=sys.stderr)
    for problem in problems:
        print(f"  - {problem}", file=sys.stderr)
    print("Edit samconfig.toml (or pass --parameter-overrides), then run make deploy again.", file=sys.stderr)
    sys.exit(1)
PY
}

# `sam deploy --guided` on what `make build` produced. The first run asks for
# the parameters (docs/operations.md "Parameters") and can save them to samconfig.toml;
# `make deploy CONFIG_ENV=production` uses the production profile. Nothing is
# built or asked while an override is a placeholder or a secret.
cmd_deploy() {
  check_deploy_overrides "$@"
  cmd_build
  local env_args=()
  if [ -n "${CONFIG_ENV:-}" ]; then env_args=(--config-env "$CONFIG_ENV"); fi
  say "sam deploy --guided ${env_args[*]}"
  with_caller_aws "$VENV/bin/sam" deploy --guided "${env_args[@]}" "$@"
}

# Runs a command with the caller's AWS environment (profile, SSO or
# credentials as they set them), not the emulator's test credentials.
with_caller_aws() {
  env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_REGION -u AWS_DEFAULT_REGION \
    -u AWS_ENDPOINT_URL "${CALLER_AWS_ENV[@]}" "$@"
}

# One value of samconfig.toml's [<env>.global.parameters] (stack_name, region).
samconfig_value() {
  python3 - "$1" "$2" <<'PY'
import sys, tomllib
env, key = sys.argv[1], sys.argv[2]
with open("samconfig.toml", "rb") as f:
    conf = tomllib.load(f)
print(conf.get(env, {}).get("global", {}).get("parameters", {}).get(key, ""))
PY
}

# `make pages`: the pages (web/) into the deployed stack's pages bucket,
# with a config.js for AWS: the API's URL (output ApiEdgeUrl, else ApiUrl), Cognito sign-in
# (output PagesLoginUrl, or LOGIN_URL) and the sale to show (SALE). Needs the
# AWS CLI and credentials; the stack must be deployed (make deploy). The
# stack and region are samconfig.toml's (CONFIG_ENV picks the profile), or
# STACK_NAME / REGION.
cmd_pages() {
  local env_name="${CONFIG_ENV:-default}"
  local stack="${STACK_NAME:-$(samconfig_value "$env_name" stack_name)}"
  local region="${REGION:-$(samconfig_value "$env_name" region)}"
  local sale="${SALE:-launch}"
  if [ -z "$stack" ] || [ -z "$region" ]; then
    say "no stack name or region: set STACK_NAME and REGION, or stack_name and region in samconfig.toml [$env_name.global.parameters]"
    exit 1
  fi
  if ! [[ "$sale" =~ ^[A-Za-z0-9_-]{1,64}$ ]]; then
    say "SALE=$sale is not a sale id ([A-Za-z0-9_-]{1,64})"; exit 1
  fi
  if ! command -v aws >/dev/null; then
    say "make pages needs the AWS CLI (v2) on PATH, with credentials for the stack's account: https://docs.aws.amazon.com/cli/latest/userguide/getting-started-install.html"
    exit 1
  fi
  if [ ! -f web/index.html ] || [ ! -f web/ops.html ]; then
    say "web/index.html and web/ops.html are missing: nothing to upload"; exit 1
  fi
  local outputs err
  err="$(mktemp)"
  if ! outputs=$(with_caller_aws aws cloudformation describe-stacks --stack-name "$stack" \
    --region "$region" --query 'Stacks[0].Outputs' --output json 2>"$err"); then
    say "stack $stack is not deployed in $region (or these credentials cannot read it): run make deploy first"
    sed 's/^/    /' "$err" >&2; rm -f "$err"
    exit 1
  fi
  rm -f "$err"
  local fields
  fields=$(OUTPUTS="$outputs" LOGIN_URL="${LOGIN_URL:-}" SALE="$sale" python3 - <<'PY'
import json, os, sys
outputs = {o["OutputKey"]: o["OutputValue"] for o in json.loads(os.environ["OUTPUTS"] or "[]") or []}
missing = [k for k in ("ApiUrl", "PagesBucketName", "PagesUrl") if not outputs.get(k)]
if missing:
    sys.exit("the stack has no output " + ", ".join(missing) + ": deploy this version of template.yaml (make deploy)")
config = {
    # The pages call apiBase + "/sales/...": no trailing slash. Through the
    # API's distribution when the stack has one (ApiEdge=on).
    "apiBase": (outputs.get("ApiEdgeUrl") or outputs["ApiUrl"]).rstrip("/"),
    "auth": "cognito",
    "saleId": os.environ["SALE"],
    "loginUrl": os.environ["LOGIN_URL"] or outputs.get("PagesLoginUrl", ""),
}
print(outputs["PagesBucketName"])
print(outputs["PagesUrl"])
print("window.SECKILL_CONFIG = " + json.dumps(config) + ";")
PY
  ) || exit 1
  local bucket url config
  bucket=$(sed -n 1p <<<"$fields"); url=$(sed -n 2p <<<"$fields"); config=$(sed -n 3p <<<"$fields")
  # Staged next to the build (ignored by git): web/ stays the local stack's.
  local stage="$ROOT/.aws-sam/pages"
  rm -rf "$stage"; mkdir -p "$stage"
  cp -R web/. "$stage/"
  printf '%s\n' "$config" >"$stage/config.js"
  say "uploading the pages to s3://$bucket ($config)"
  # no-cache: browsers revalidate, so a new upload shows at once (as locally).
  with_caller_aws aws s3 sync "$stage" "s3://$bucket" --region "$region" --delete \
    --cache-control no-cache --only-show-errors
  say "pages: $url/ (buyer) and $url/ops (operator dashboard)"
  if ! grep -q '"loginUrl": "h' "$stage/config.js"; then
    say "no sign-in link: set the stack parameter PagesLoginUrl (or LOGIN_URL=...) and run make pages again"
  fi
}

case "${1:-}" in
  run) shift; cmd_run "$@" ;;
  test) shift; cmd_test "$@" ;;
  bench) shift; cmd_bench "$@" ;;
  fairness) shift; cmd_fairness "$@" ;;
  chaos) shift; cmd_chaos "$@" ;;
  nemesis) shift; cmd_nemesis "$@" ;;
  simulate) shift; cmd_simulate "$@" ;;
  build) shift; cmd_build "$@" ;;
  sam-local) shift; cmd_sam_local "$@" ;;
  deploy) shift; cmd_deploy "$@" ;;
  check-deploy) shift; check_deploy_overrides "$@" ;;
  bounded) shift; bounded "$@" ;;
  pages) shift; cmd_pages "$@" ;;
  *) echo "usage: $0 run|test|bench|fairness|chaos|nemesis|simulate|build|sam-local|deploy|check-deploy|pages" >&2; exit 2 ;;
esac
