//! `seckill-local`: run the stack on loopback, mint tokens, invoke a handler
//! with an event file.
//!
//! ```text
//! seckill-local up
//! seckill-local token --user u1 [--admin] [--ttl SECONDS]
//! seckill-local invoke purchase --event events/purchase.json
//! seckill-local invoke order-writer --event events/order-writer.json
//! seckill-local run prewarm|release-unpaid|reconcile
//! seckill-local backfill-order-buckets --orders-table NAME
//! seckill-local sign-payment --order ORDER_ID [--payment-id ID] [--amount N]
//! seckill-local strict --upstream URL [--listen ADDR]
//! seckill-local forward LISTEN=TARGET...  # e.g. 172.17.0.1:6379=127.0.0.1:6379, for sam local
//! seckill-local jwt-authorizer   # as a Lambda function's bootstrap, for sam local start-api
//! seckill-local plan [--example NAME | --units N --buyers N ...]  # a sale's capacity plan on AWS
//! seckill-local openapi   # the API's OpenAPI 3.1 description (JSON)
//! ```

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use seckill_infra::invoke::{self, Function};
use seckill_infra::local::{self, LocalSettings};
use seckill_infra::token::TokenSettings;
use seckill_shared::config;
use seckill_shared::observe::metrics;
use std::process::ExitCode;

/// The local stack: what AWS wires around the functions, on loopback.
/// Settings come from the environment (`REDIS_URL`, `AWS_ENDPOINT_URL`, ...).
#[derive(Parser)]
#[command(name = "seckill-local")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the API, the pages and the order-writer's event source on
    /// loopback, with a demo sale (what `make run` starts).
    Up,
    /// Print the HTTP API's OpenAPI 3.1 description (JSON), generated from
    /// the body types (the local stack serves it at `GET /openapi.json`).
    Openapi,
    /// Mint a local token the gateway accepts and print it.
    Token {
        /// The buyer's user id (the token's `sub`).
        #[arg(long, value_name = "ID")]
        user: String,
        /// Put the user in the admin group.
        #[arg(long)]
        admin: bool,
        /// How long the token is valid, in whole seconds.
        #[arg(
            long,
            value_name = "SECONDS",
            default_value_t = 3_600,
            allow_negative_numbers = true
        )]
        ttl: i64,
    },
    /// Feed one event file to a function's handler, with the configuration
    /// the function reads from the environment, and print the response
    /// (`sam local invoke` without Docker).
    Invoke {
        /// purchase, orders-api, order-writer, admin-api, prewarm,
        /// release-unpaid or reconcile.
        #[arg(value_parser = function)]
        function: Function,
        /// The event file (see `events/`).
        #[arg(long, value_name = "FILE")]
        event: String,
    },
    /// Run one scheduled job now against the local services, through its
    /// function's own wiring and handler.
    Run {
        /// prewarm, release-unpaid or reconcile.
        #[arg(value_parser = job)]
        job: local::Job,
    },
    /// Give the orders written before the sale buckets existed their
    /// buckets; prints the report as one JSON line.
    BackfillOrderBuckets {
        /// The orders table.
        #[arg(long, value_name = "NAME")]
        orders_table: String,
    },
    /// Print a `curl` command of the payment provider's callback for an
    /// order (`POST /payments/callback`), signed with the local stack's
    /// payment key and good for five minutes.
    SignPayment {
        /// The order to pay (it must be written: PENDING_PAYMENT or later).
        #[arg(long, value_name = "ORDER_ID")]
        order: String,
        /// The provider's payment id (default `pay-<unix seconds>`); send
        /// the same one twice to see the callback is idempotent.
        #[arg(long, value_name = "ID")]
        payment_id: Option<String>,
        /// Another amount than the order's, in minor units (to see
        /// `400 AMOUNT_MISMATCH`).
        #[arg(long, value_name = "MINOR_UNITS")]
        amount: Option<u64>,
        /// The API's base URL (default `http://$SECKILL_LISTEN`).
        #[arg(long, value_name = "URL")]
        url: Option<String>,
    },
    /// Serve the strict layer in front of the AWS emulator: DynamoDB and
    /// SQS as AWS answers at its limits (the `STRICT_*` variables set its
    /// knobs), SQS served by the layer itself unless `STRICT_SQS_NATIVE=0`;
    /// point `AWS_ENDPOINT_URL` at it.
    Strict {
        /// The emulator's URL (`http://127.0.0.1:PORT`).
        #[arg(long, value_name = "URL")]
        upstream: String,
        /// Where the layer listens.
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:4566")]
        listen: String,
    },
    /// Run as a Lambda function (under the Lambda runtime API): API
    /// Gateway's JWT authorizer as a Lambda authorizer, for `sam local
    /// start-api`, whose gateway skips JWT authorizers (`docs/local.md`).
    JwtAuthorizer,
    /// Forward TCP connections from each LISTEN address to its TARGET
    /// (`sam local`'s containers reach the loopback-only services through
    /// Docker's bridge gateway address).
    Forward {
        /// LISTEN=TARGET, both ip:port.
        #[arg(required = true, value_parser = seckill_infra::forward::Route::parse, value_name = "LISTEN=TARGET")]
        routes: Vec<seckill_infra::forward::Route>,
    },
    /// Print a sale's capacity plan on AWS: requests, concurrency, Redis
    /// shards, DynamoDB throughput, drain and expiry times against the
    /// account's defaults, the quota requests, the `sam deploy` parameters
    /// and the cost of the sale's hour. Without flags: the three examples
    /// (docs/operations.md, "Capacity plan").
    Plan(seckill_infra::plan::PlanArgs),
}

fn function(name: &str) -> Result<Function, String> {
    Function::parse(name).ok_or_else(|| {
        format!(
            "unknown function {name:?}; known: {}",
            Function::ALL.map(Function::name).join(", ")
        )
    })
}

fn job(name: &str) -> Result<local::Job, String> {
    local::Job::parse(name).ok_or_else(|| format!("unknown job {name:?}"))
}

/// The allocator the functions run with (see `functions/purchase`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    seckill_shared::observe::telemetry::init();
    // The functions' EMF lines on stdout, with the logs: `up` serves many
    // invocations at once and writes them aggregated every second; `invoke`
    // and `run` are one invocation each, written as Lambda writes them.
    let flush = match cli.command {
        Command::Up => metrics::Flush::Periodic,
        _ => metrics::Flush::EachInvocation,
    };
    metrics::install(metrics::Emitter::stdout(flush));
    let result = match cli.command {
        Command::Up => local::up(LocalSettings::from_env())
            .await
            .map_err(|e| e.to_string()),
        Command::Openapi => {
            println!("{}", seckill_infra::openapi::document_json());
            Ok(())
        }
        Command::Token { user, admin, ttl } => token(&user, admin, ttl),
        Command::Invoke { function, event } => invoke(function, &event).await,
        Command::Run { job } => run(job).await,
        Command::SignPayment {
            order,
            payment_id,
            amount,
            url,
        } => seckill_infra::sign_payment::sign_payment(
            &seckill_infra::sign_payment::SignRequest {
                order_id: order,
                payment_id,
                amount,
                url,
            },
            &LocalSettings::from_env(),
        )
        .await
        .map(|curl| println!("{curl}")),
        Command::Strict { upstream, listen } => strict(&listen, &upstream).await,
        Command::JwtAuthorizer => seckill_infra::jwt_authorizer::serve().await,
        Command::Forward { routes } => seckill_infra::forward::serve(&routes).await,
        Command::Plan(args) => {
            // Which flags were typed: none prints the three examples.
            let given = matches
                .subcommand_matches("plan")
                .map(seckill_infra::plan::flags_given)
                .unwrap_or_default();
            seckill_infra::plan::render(&args, &given)
                .map(|text| print!("{text}"))
                .map_err(|e| e.to_string())
        }
        Command::BackfillOrderBuckets { orders_table } => {
            seckill_infra::backfill::backfill(&orders_table)
                .await
                .map(|report| println!("{report}"))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("seckill-local: {message}");
            ExitCode::from(2)
        }
    }
}

/// Serves the strict layer until the process is stopped.
async fn strict(listen: &str, upstream: &str) -> Result<(), String> {
    use seckill_infra::strict;
    let settings = strict::StrictSettings::from_env().map_err(|e| e.to_string())?;
    tracing::info!(?settings, "strict layer");
    let layer = strict::start(listen, upstream, settings)
        .await
        .map_err(|e| e.to_string())?;
    eprintln!("strict layer on {} in front of {upstream}", layer.url());
    std::future::pending::<()>().await;
    Ok(())
}

fn token(user: &str, admin: bool, ttl: i64) -> Result<(), String> {
    seckill_shared::domain::UserId::parse(user).map_err(|e| e.to_string())?;
    let token = TokenSettings::from_env()
        .mint(user, admin, ttl)
        .map_err(|e| e.to_string())?;
    println!("{token}");
    Ok(())
}

/// Feeds one event file to a handler, with the configuration that
/// function reads from the environment, and prints the response: `sam local
/// invoke` without Docker.
async fn invoke(function: Function, path: &str) -> Result<(), String> {
    let name = function.name();
    let raw = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    // The process's environment, with the local gate and payment secrets'
    // ARNs for a function that reads them (unless the variables name others).
    let settings = LocalSettings::from_env();
    let gate = local::invoke_gate_secret(function, &config::process_env, &settings)
        .await
        .map_err(|e| format!("{name}: {e}"))?;
    let payment = local::invoke_payment_secret(function, &config::process_env, &settings)
        .await
        .map_err(|e| format!("{name}: {e}"))?;
    let env = |var: &str| match var {
        "GATE_SECRET_ARN" => gate.clone(),
        "PAYMENT_SECRET_ARN" => payment.clone(),
        _ => config::process_env(var),
    };
    let printed = invoke::invoke(function, &raw, &env)
        .await
        .map_err(|e| match e {
            invoke::InvokeError::Event { .. } => format!("{path}: {e}"),
            _ => format!("{name}: {e}"),
        })?;
    println!("{printed}");
    Ok(())
}

/// Runs one scheduled job now against the local services, through its
/// function's own wiring and handler.
async fn run(job: local::Job) -> Result<(), String> {
    // Every job's settings: the three jobs run in this one process.
    let config = config::Config::from_lookup(&config::process_env).map_err(|e| e.to_string())?;
    let scheduled = local::Scheduled::wire(&config)
        .await
        .map_err(|e| e.to_string())?;
    println!("{}", scheduled.invoke(job).await);
    Ok(())
}
