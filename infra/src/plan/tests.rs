use super::*;

fn close(got: f64, want: f64) {
    assert!(
        (got - want).abs() <= want.abs() * 1e-9 + 1e-9,
        "got {got}, want {want}"
    );
}

fn verdict_of(plan: &Plan, item_starts: &str) -> Verdict {
    let row = plan
        .rows
        .iter()
        .find(|r| r.item.trim_start().starts_with(item_starts))
        .unwrap_or_else(|| panic!("no row {item_starts:?}"));
    row.verdict
        .unwrap_or_else(|| panic!("row {item_starts:?} has no verdict"))
}

#[test]
fn scarce_example_matches_the_hand_arithmetic() {
    let p = plan(&PlanInput::scarce()).unwrap();
    // Purchases: 1,000,000 buyers x 3 attempts / 10 s = 300,000/s.
    close(p.load.purchase_rps, 300_000.0);
    // Orders 10,000, taken at the buyers' arrival rate of 100,000/s:
    // 0.1 s. Writers: 10,000 / (90 s x 200/s) = 0.56, so the default 5,
    // 1,000 orders/s; drain = max(0.1, 10) + 1-s batching window = 11 s.
    close(p.drain.accept_secs, 0.1);
    assert_eq!(p.drain.writers, 5);
    close(p.drain.rate, 1_000.0);
    close(p.drain.secs, 11.0);
    // QUEUED at the peak: min(10,000, max(10,000 - 100, 100,000 x 2 s))
    // = 10,000, polled every 2 s: 5,000/s. Sale polls: 50 edges / 1 s
    // (the sale view's max-age).
    close(p.drain.peak_queued, 10_000.0);
    close(p.load.order_polls_rps, 5_000.0);
    close(p.load.sale_polls_rps, 50.0);
    // API: 300,000 + 50 + 5,000.
    close(p.load.api_rps, 305_050.0);
    // Lambda: 300,000 x 5 ms = 1,500 (all provisioned); orders-api
    // 5,050 x 10 ms = 50.5 -> 51; account 1,500 + 5 + max(100, 51 + 4).
    assert_eq!(p.concurrency.purchase, 1_500);
    assert_eq!(p.concurrency.provisioned, 1_500);
    assert_eq!(p.concurrency.orders_api, 51);
    assert_eq!(p.concurrency.account, 1_605);
    // Redis: 300,000 decisions + 5,000 order polls, 20,000/s a master
    // (half of 40,000): 15.25 -> 16 masters and shards.
    close(p.load.redis_ops, 305_000.0);
    assert_eq!(p.redis.masters, 16);
    assert_eq!(p.redis.sale_shards, 16);
    // DynamoDB: 1,000 orders/s x 4 WRU = 4,000, exactly a new table's.
    close(p.dynamo.table_wru, 4_000.0);
    assert_eq!(p.dynamo.warm, 0);
    close(p.dynamo.sale_item_wcu, 200.0);
    // Expiry: 3,000 unpaid; a chunk is 4 rounds of bucket queries x 10
    // ms + 250 ms for its 98 orders = 0.29 s, 189 in 55 s = 18,522 a run:
    // one run, but never under the drain + a run (71 s) nor two runs.
    close(p.expiry.unpaid, 3_000.0);
    close(p.expiry.per_run, 18_522.0);
    close(p.expiry.secs, 71.0);
    close(p.expiry.target_secs, 120.0);
    assert_eq!(verdict_of(&p, "expiry"), Verdict::Ok);
    assert_eq!(
        verdict_of(&p, "API Gateway requests"),
        Verdict::QuotaRequest
    );
    assert_eq!(
        verdict_of(&p, "Lambda concurrency of the account"),
        Verdict::QuotaRequest
    );
    // Requests: 306,000 x 1.25 = 382,500 -> 383,000; 1,605 x 1.25 =
    // 2,006 -> 2,010.
    let asked: Vec<u64> = p.quota_requests.iter().map(|q| q.value).collect();
    assert_eq!(asked, [383_000, 383_000, 2_010]);
    assert!(p.deploy_line().contains("ApiThrottlingRateLimit=306000 "));
    assert!(p.deploy_line().contains("RedisShards=16 "));
}

#[test]
fn plenty_example_matches_the_hand_arithmetic() {
    let p = plan(&PlanInput::plenty()).unwrap();
    // 100,000 x 3 / 10 s = 30,000/s; every buyer's first attempt takes
    // a unit: 100,000 orders over the 10-s arrival.
    close(p.load.purchase_rps, 30_000.0);
    close(p.drain.orders, 100_000.0);
    close(p.drain.accept_secs, 10.0);
    // 100,000 / (90 s x 200/s) = 5.6 -> 6 writers, 1,200/s:
    // 100,000 / 1,200 + 1 = 84.3 s.
    assert_eq!(p.drain.writers, 6);
    close(p.drain.secs, 100_000.0 / 1_200.0 + 1.0);
    assert_eq!(verdict_of(&p, "drain time"), Verdict::Ok);
    // QUEUED: 100,000 - 1,200 x 10 = 88,000 -> 44,000 polls/s.
    close(p.load.order_polls_rps, 44_000.0);
    close(p.load.api_rps, 30_000.0 + 50.0 + 44_000.0);
    // 150 purchase environments; orders-api 44,050 x 10 ms -> 441;
    // account 150 + 6 + 445 = 601, under the default 1,000.
    assert_eq!(p.concurrency.purchase, 150);
    assert_eq!(p.concurrency.orders_api, 441);
    assert_eq!(p.concurrency.account, 601);
    assert_eq!(
        verdict_of(&p, "Lambda concurrency of the account"),
        Verdict::Ok
    );
    // Redis 74,000 / 20,000 = 3.7 -> 4 masters.
    assert_eq!(p.redis.masters, 4);
    // 1,200 x 4 WRU = 4,800 > 4,000: warm throughput 4,800.
    close(p.dynamo.table_wru, 4_800.0);
    assert_eq!(p.dynamo.warm, 4_800);
    assert_eq!(verdict_of(&p, "DynamoDB orders table"), Verdict::Parameter);
    // Expiry: 30,000 / 18,522 = 1.6 -> 2 runs = 120 s, under the drain +
    // a run: the orders fall due no faster than they were written.
    close(p.expiry.secs, 100_000.0 / 1_200.0 + 1.0 + 60.0);
    close(p.expiry.target_secs, p.expiry.secs);
    assert_eq!(verdict_of(&p, "expiry"), Verdict::Ok);
    let quotas: Vec<&str> = p.quota_requests.iter().map(|q| q.quota).collect();
    assert!(!quotas.iter().any(|q| q.starts_with("Lambda")));
}

#[test]
fn lottery_example_matches_the_hand_arithmetic() {
    let p = plan(&PlanInput::lottery()).unwrap();
    // Window: 1,000,000 entries / 10 s = 100,000/s, 500 environments.
    close(p.load.purchase_rps, 100_000.0);
    assert_eq!(p.concurrency.purchase, 500);
    // Draw: 10,000 chunks x 2 ms + 1,000 winners / 40 per round x 20 ms
    // = 20 + 0.5 s.
    let draw = p.draw.clone().unwrap();
    close(draw.chunks, 10_000.0);
    close(draw.secs, 20.5);
    // Every holder polls once a second: 1,000,000/s, plus 50 sale polls
    // and 1,000 QUEUED winners / 2 s.
    close(p.load.ticket_polls_rps, 1_000_000.0);
    close(p.load.order_polls_rps, 500.0);
    close(p.load.api_rps, 1_000_550.0);
    // orders-api: 1,000,550 x 10 ms -> 10,006, over the 1,000 a
    // function gains in 10 s, so all of it provisioned ahead, and none
    // left to the ramp; account 500 + 10,006 + 5 + max(100, 0 + 4).
    assert_eq!(p.concurrency.orders_api, 10_006);
    assert_eq!(p.concurrency.orders_api_provisioned, 10_006);
    assert_eq!(p.concurrency.account, 10_611);
    assert_eq!(verdict_of(&p, "orders-api: new environments"), Verdict::Ok);
    assert_eq!(
        verdict_of(&p, "orders-api provisioned concurrency"),
        Verdict::Parameter
    );
    assert!(
        p.deploy_line()
            .contains("OrdersApiProvisionedConcurrency=10006 ")
    );
    // One shard: 2 calls x 1,000,000 + 500 on one master.
    assert_eq!(p.redis.masters, 1);
    assert_eq!(p.redis.sale_shards, 1);
    close(p.redis.per_master_load, 2_000_500.0);
    assert_eq!(verdict_of(&p, "on the busiest master"), Verdict::Limit);
    // Drain: 1,000 orders at 1,000/s + 1 s = 2 s; 300 unpaid, one run,
    // released by 2 + 60 s.
    close(p.drain.secs, 2.0);
    close(p.expiry.secs, 62.0);
}

#[test]
fn bad_input_is_refused_naming_the_flag() {
    let refused = |change: fn(&mut PlanInput)| {
        let mut input = PlanInput::default();
        change(&mut input);
        plan(&input).unwrap_err()
    };
    let flag_of = |e: PlanError| match e {
        PlanError::OutOfRange { flag, .. } => flag,
        other => panic!("not a range error: {other}"),
    };
    assert_eq!(flag_of(refused(|i| i.units = 0)), "--units");
    assert_eq!(flag_of(refused(|i| i.units = -5)), "--units");
    assert_eq!(flag_of(refused(|i| i.buyers = 0)), "--buyers");
    assert_eq!(
        flag_of(refused(|i| i.attempts_per_buyer = 0.5)),
        "--attempts-per-buyer"
    );
    assert_eq!(
        flag_of(refused(|i| i.arrival_secs = -1.0)),
        "--arrival-secs"
    );
    assert_eq!(
        flag_of(refused(|i| i.peak_rps = Some(f64::NAN))),
        "--peak-rps"
    );
    assert_eq!(
        flag_of(refused(|i| i.sale_poll_secs = 0.0)),
        "--sale-poll-secs"
    );
    assert_eq!(
        flag_of(refused(|i| i.order_poll_secs = 0.0)),
        "--order-poll-secs"
    );
    assert_eq!(
        flag_of(refused(|i| i.sale_cache_secs = 0)),
        "--sale-cache-secs"
    );
    assert_eq!(
        flag_of(refused(|i| i.paid_fraction = 1.5)),
        "--paid-fraction"
    );
    assert_eq!(
        flag_of(refused(|i| i.payment_window_secs = 10)),
        "--payment-window-secs"
    );
    assert_eq!(
        flag_of(refused(|i| i.purchase_ms = f64::INFINITY)),
        "--purchase-ms"
    );
    assert_eq!(flag_of(refused(|i| i.partition_wcu = 0)), "--partition-wcu");
    assert_eq!(
        flag_of(refused(|i| i.redis_replicas = 0)),
        "--redis-replicas"
    );
    assert_eq!(
        refused(|i| i.lottery_window_secs = 11),
        PlanError::LotteryWindow { value: 11 }
    );
    assert_eq!(
        refused(|i| i.lottery_window_secs = -1),
        PlanError::LotteryWindow { value: -1 }
    );
    assert_eq!(
        refused(|i| i.redis_node_type = "cache.m5.large".into()),
        PlanError::RedisNodeType("cache.m5.large".into())
    );
    assert_eq!(
        Example::parse("huge").unwrap_err(),
        PlanError::UnknownExample("huge".into())
    );
    let message = refused(|i| i.units = 0).to_string();
    assert_eq!(message, "--units must be from 1 to 10000000, not 0");
}

#[test]
fn the_overrides_name_only_the_template_parameters() {
    for example in Example::ALL {
        let p = plan(&example.input()).unwrap();
        let names: Vec<&str> = p.overrides.iter().map(|(name, _)| *name).collect();
        assert_eq!(names, PARAMETERS);
        let line = p.deploy_line();
        let rest = line
            .strip_prefix("sam deploy --parameter-overrides ")
            .unwrap();
        for pair in rest.split(' ') {
            let (name, value) = pair.split_once('=').unwrap();
            assert!(PARAMETERS.contains(&name), "{name} is not a parameter");
            assert!(!value.is_empty(), "{name} has no value");
        }
        assert_eq!(rest.split(' ').count(), PARAMETERS.len());
        let node = p.overrides[2].1.as_str();
        assert!(REDIS_NODES.iter().any(|n| n.name == node));
    }
}

#[test]
fn quota_and_parameter_figures_round_up_to_three_digits() {
    assert_eq!(nice_up(0.0), 0);
    assert_eq!(nice_up(441.0), 441);
    assert_eq!(nice_up(2_006.25), 2_010);
    assert_eq!(nice_up(305_025.0), 306_000);
    assert_eq!(nice_up(1_000_525.0), 1_010_000);
    assert_eq!(nice_up(4_800.0), 4_800);
}

#[test]
fn a_small_sale_needs_nothing_raised() {
    let p = plan(&PlanInput {
        units: 100,
        buyers: 1_000,
        ..PlanInput::default()
    })
    .unwrap();
    // 1,000 x 3 / 10 s = 300 purchases/s: everything at its default but
    // the provisioned concurrency (300 x 5 ms = 1.5 -> 2).
    assert!(p.quota_requests.is_empty());
    assert_eq!(p.concurrency.provisioned, 2);
    assert_eq!(p.redis.masters, 1);
    for row in &p.rows {
        if let Some(verdict) = row.verdict {
            let expected = if row.item.starts_with("purchase provisioned") {
                Verdict::Parameter
            } else {
                Verdict::Ok
            };
            assert_eq!(verdict, expected, "{}", row.item);
        }
    }
    assert!(p.deploy_line().contains("ApiThrottlingRateLimit=5000 "));
}

#[test]
fn the_jobs_that_read_the_whole_sale_are_held_to_their_timeouts_with_their_cpu_share() {
    // 256 MB is 256 / 1,769 of a vCPU.
    let share = 256.0 / 1_769.0;
    let hundred = plan(&PlanInput {
        units: 100_000,
        buyers: 100_000,
        ..PlanInput::default()
    })
    .unwrap();
    // 200 pages, 8 at once: 25 x 40 ms = 1 s of reads; prewarm's CPU
    // 100,000 x 11 us = 1.1 s, at the share 7.6 s, which is longer.
    close(hundred.jobs.ledger_pages, 200.0);
    close(hundred.jobs.ledger_secs, 1.0);
    close(hundred.jobs.rebuild_cpu_secs, 1.1 / share);
    close(hundred.jobs.rebuild_secs, 1.1 / share);
    // Reconcile: 1 s + 100,000 x 25 us of Redis + 2.0 s of CPU at the share.
    close(hundred.jobs.reconcile_secs, 1.0 + 2.5 + 2.0 / share);
    assert_eq!(verdict_of(&hundred, "prewarm's rebuild"), Verdict::Ok);
    assert_eq!(verdict_of(&hundred, "reconcile of the sale"), Verdict::Ok);
    assert!(
        !hundred
            .notes
            .iter()
            .any(|n| n.contains("too big for its jobs"))
    );

    // A small sale still reads one page of each of the 32 buckets, and
    // its reads are longer than its CPU.
    let small = plan(&PlanInput {
        units: 100,
        buyers: 1_000,
        ..PlanInput::default()
    })
    .unwrap();
    close(small.jobs.ledger_pages, 32.0);
    close(small.jobs.rebuild_secs, 0.16);

    // A million at 256 MB: prewarm's CPU 11 s at the share would be 76 s,
    // over its 60 s; reconcile's 20 s would be 138 s, and with 10 s of
    // reads and 25 s of Redis 173 s, over its 120 s. At 512 MB (a share
    // of 512 / 1,769) both fit: 38 s and 104 s, so the plan sets
    // JobsMemorySize=512 and its rows say "parameter".
    let million = plan(&PlanInput {
        units: 1_000_000,
        buyers: 1_000_000,
        ..PlanInput::default()
    })
    .unwrap();
    let share = 512.0 / 1_769.0;
    assert_eq!(million.jobs.memory_mb, 512);
    close(million.jobs.rebuild_secs, 11.0 / share);
    close(million.jobs.reconcile_secs, 10.0 + 25.0 + 20.0 / share);
    assert_eq!(
        verdict_of(&million, "prewarm's rebuild"),
        Verdict::Parameter
    );
    assert_eq!(
        verdict_of(&million, "reconcile of the sale"),
        Verdict::Parameter
    );
    assert!(
        million.deploy_line().contains(" JobsMemorySize=512"),
        "{}",
        million.deploy_line()
    );
    assert!(
        !million
            .notes
            .iter()
            .any(|n| n.contains("too big for its jobs"))
    );
    assert_eq!(hundred.jobs.memory_mb, 256);
    assert!(hundred.deploy_line().contains(" JobsMemorySize=256"));

    // Three million: even a whole vCPU (1,769 MB; more memory adds a
    // second vCPU the jobs' one thread cannot use) leaves reconcile at
    // 30 + 75 + 60 = 165 s, over its 120 s: the plan asks for the whole
    // vCPU and says the sale is too big.
    let three = plan(&PlanInput {
        units: 3_000_000,
        buyers: 3_000_000,
        ..PlanInput::default()
    })
    .unwrap();
    assert_eq!(three.jobs.memory_mb, 1_769);
    close(three.jobs.reconcile_secs, 30.0 + 75.0 + 60.0);
    assert_eq!(verdict_of(&three, "prewarm's rebuild"), Verdict::Parameter);
    assert_eq!(verdict_of(&three, "reconcile of the sale"), Verdict::Limit);
    assert!(
        three
            .notes
            .iter()
            .any(|n| n.contains("too big for its jobs") && n.contains("JobsMemorySize=1769")),
        "{:?}",
        three.notes
    );
}

#[test]
fn the_table_columns_line_up() {
    let p = plan(&PlanInput::scarce()).unwrap();
    let text = p.to_string();
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("verdict"))
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(table.len(), p.rows.len() + 1);
    // The need column ends at one offset on every line that has one.
    let header_end = table[0].find("need").unwrap() + "need".len();
    for (line, row) in table[1..].iter().zip(&p.rows) {
        let after_item = &line[row.item.len()..];
        let end = row.item.len() + after_item.find(&row.need).unwrap() + row.need.len();
        assert!(line.starts_with(&row.item) && end == header_end, "{line:?}");
    }
}

#[test]
fn flags_left_out_take_the_default_input_and_count_as_not_given() {
    use clap::FromArgMatches;
    let command = <PlanArgs as clap::Args>::augment_args(clap::Command::new("plan"));
    let matches = command.clone().try_get_matches_from(["plan"]).unwrap();
    assert!(flags_given(&matches).is_empty());
    let args = PlanArgs::from_arg_matches(&matches).unwrap();
    let input = args.input();
    assert_eq!(
        PlanInput {
            name: PlanInput::default().name,
            ..input
        },
        PlanInput::default()
    );
    let matches = command
        .try_get_matches_from(["plan", "--units", "500", "--lottery-window-secs", "3"])
        .unwrap();
    assert_eq!(flags_given(&matches), ["units", "lottery_window_secs"]);
    let args = PlanArgs::from_arg_matches(&matches).unwrap();
    assert_eq!(args.input().units, 500);
    assert_eq!(args.input().lottery_window_secs, 3);
}

#[test]
fn no_flag_prints_the_three_examples_and_an_example_takes_no_flag() {
    use clap::FromArgMatches;
    let command = <PlanArgs as clap::Args>::augment_args(clap::Command::new("plan"));
    let parse = |argv: &[&str]| {
        let matches = command.clone().try_get_matches_from(argv).unwrap();
        (
            PlanArgs::from_arg_matches(&matches).unwrap(),
            flags_given(&matches),
        )
    };
    let (args, given) = parse(&["plan"]);
    let all = render(&args, &given).unwrap();
    for example in Example::ALL {
        assert!(all.contains(&example.input().name), "{}", example.name());
    }
    let (args, given) = parse(&["plan", "--example", "lottery"]);
    let one = render(&args, &given).unwrap();
    assert!(one.starts_with("Plan (c)"));
    let (args, given) = parse(&["plan", "--example", "lottery", "--units", "5"]);
    assert_eq!(
        render(&args, &given).unwrap_err(),
        PlanError::ExampleWithFlags("--units".into())
    );
    let (args, given) = parse(&["plan", "--buyers", "0"]);
    assert!(matches!(
        render(&args, &given).unwrap_err(),
        PlanError::OutOfRange {
            flag: "--buyers",
            ..
        }
    ));
}

/// DynamoDB's size of an item: each attribute's name and value (a string
/// its UTF-8 bytes, a number about one byte per two digits plus one, a map
/// 3 bytes plus its entries and one a value).
fn item_bytes(
    item: &std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
) -> usize {
    use aws_sdk_dynamodb::types::AttributeValue as A;
    fn value(v: &A) -> usize {
        match v {
            A::S(s) => s.len(),
            A::N(n) => n.len().div_ceil(2) + 1,
            A::Bool(_) | A::Null(_) => 1,
            A::M(m) => 3 + m.iter().map(|(k, v)| k.len() + value(v) + 1).sum::<usize>(),
            A::L(l) => 3 + l.iter().map(|v| value(v) + 1).sum::<usize>(),
            _ => 64,
        }
    }
    item.iter().map(|(k, v)| k.len() + value(v)).sum()
}

#[test]
fn an_order_item_is_within_its_planned_size() {
    use seckill_shared::adapters::dynamo::order_index::order_item;
    use seckill_shared::domain::money::{Currency, Money};
    use seckill_shared::domain::orders::{NewOrder, OrderStatus};
    use seckill_shared::domain::{OrderId, OrderMessage, Quantity, SaleId, UserId};
    // A 36-character sale id and buyer (a Cognito `sub`), a priced sale,
    // still pending: the item the pending index holds.
    let sale_id = SaleId::parse("spring-sale-2026-12-04-limited-drop1").unwrap();
    let message = OrderMessage {
        v: OrderMessage::VERSION,
        order_id: OrderId::parse(&format!("n{:031}-s7", 123_456_789)).unwrap(),
        sale_id,
        user_id: UserId::parse("3f2b8c1e-9a4d-4e7b-8c2a-1d5e6f7a8b9c").unwrap(),
        quantity: Quantity::ONE,
        shard: 7,
        reserved_at: "2026-12-04T10:00:00.123Z".into(),
    };
    let mut order = NewOrder::new(message, 1_780_000_000_000, 1_780_000_000_000, 900);
    order.amount = Some(Money {
        amount: 1_999_999,
        currency: Currency::parse("EUR").unwrap(),
    });
    let bytes = item_bytes(&order_item(&order, OrderStatus::PendingPayment, None));
    assert!(
        (bytes as f64) <= ORDER_ITEM_BYTES && (bytes as f64) > ORDER_ITEM_BYTES / 2.0,
        "an order item is {bytes} bytes; the plan counts {ORDER_ITEM_BYTES}"
    );
}

#[test]
fn an_expiry_pays_for_the_queries_that_found_it() {
    // 98 due orders of 512 bytes a bucket: 49 KB, 13 x 4 KB, 6.5 RRU a
    // query; 32 buckets a chunk of 98 expiries: 2.12 RRU an expiry.
    close(rru_per_expiry_queries(), 32.0 * 6.5 / 98.0);
    // Plan (a): 47,561 RRU of polls, payments and the expiries' own reads,
    // and 3,000 expiries x 2.12 of queries: 53,929 (each rounded); and the
    // console's count of 10,000 orders (564 RRU) at its 100 RRU a second
    // for the hour, 360,000.
    let p = plan(&PlanInput::scarce()).unwrap();
    let reads = p.costs.iter().find(|c| c.item == "DynamoDB reads").unwrap();
    close(p.expiry.unpaid, 3_000.0);
    assert!(
        reads
            .arithmetic
            .starts_with("413,929 RRU (the console's order count 360,000)"),
        "{reads:?}"
    );
    // A small sale's count costs less than the budget: once a second.
    close(console_rru_per_hour(100.0), 69.0 * 3_600.0);
}

#[test]
fn a_plan_that_provisions_says_how_to_hold_it_for_the_window() {
    let window = |p: &Plan| {
        p.notes.iter().any(|n| {
            n.contains("ProvisionedConcurrencyFrom=") && n.contains("ProvisionedConcurrencyUntil=")
        })
    };
    let scarce = plan(&PlanInput::scarce()).unwrap();
    assert!(scarce.concurrency.provisioned > 0);
    assert!(window(&scarce), "{:?}", scarce.notes);
}
