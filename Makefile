# The two commands first; everything installs what it needs on first use.
.PHONY: run test bench fairness chaos nemesis simulate build sam-local deploy pages plan fmt clean-stack

run:    ## start Redis, the AWS emulator and the API on 127.0.0.1:3000 with a demo sale
	@bash infra/stack.sh run

test:   ## fmt, clippy, cfn-lint, sam validate, checkov and every test against real services (the pages in headless Chromium)
	@bash infra/stack.sh test

bench:  ## purchase decisions/s and latency next to redis-benchmark's ceiling; order-writer drain: writes per order
	@bash infra/stack.sh bench

fairness: ## the bench's fairness table alone: scripts at the opening 5 ms vs people over 3 s, FCFS and with a lottery window
	@bash infra/stack.sh fairness

chaos:  ## every fault scenario at full size (redis killed/paused, emulator stopped, writer crash, duplicates, pay vs expire), with figures
	@bash infra/stack.sh chaos

nemesis: ## a seeded schedule of real faults (redis killed/paused/flushed/failed over, emulator stopped, writer killed, duplicates) under a mixed workload, then the checker (SEED=<n> replays, SECONDS=<n>, default 600)
	@NEMESIS_SEED="$(SEED)" NEMESIS_SECONDS="$(SECONDS)" bash infra/stack.sh nemesis

simulate: ## the deterministic simulation of a whole sale over in-memory stores: SEEDS=<n> seeds (default 10000) from FIRST=<n>, or SEED=<n> replayed (TRACE=1 prints its story); seeds/s, faults by kind, violations
	@SEED="$(SEED)" SIM_SEEDS="$(SEEDS)" SIM_FIRST="$(FIRST)" SIM_TRACE="$(TRACE)" bash infra/stack.sh simulate

build:  ## sam build: every function's bootstrap in .aws-sam/build (cargo-lambda + Zig from PyPI; release profile, slow the first time)
	@bash infra/stack.sh build

sam-local: ## sam local invoke (every events/*.json, answers and effects checked) and sam local start-api (a buyer's walk) in Lambda containers on a Docker engine started here if none runs (BUILD=debug: the debug build make test uses, instead of make build's)
	@bash infra/stack.sh sam-local $(if $(filter debug,$(BUILD)),debug,release)

deploy: ## make build, then sam deploy --guided (CONFIG_ENV=production for the production profile of samconfig.toml)
	@bash infra/stack.sh deploy

pages:  ## upload web/ with an AWS config.js to the deployed stack's pages bucket (SALE=<id>; needs the AWS CLI)
	@bash infra/stack.sh pages

plan:   ## a sale's capacity plan on AWS (requests, concurrency, Redis shards, drain, expiry, quota requests, parameters, cost): the three examples, or one sale with ARGS="--units N --buyers N ..." (no AWS call)
	@CARGO_TARGET_DIR="$${CARGO_TARGET_DIR:-$$HOME/.cache/seckill/target}" cargo run -q -p seckill-infra --bin seckill-local -- plan $(ARGS)

fmt:
	cargo fmt --all
