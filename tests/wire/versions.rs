//! The version sweep: for every API in the broker's own ApiVersions table and every version
//! from its advertised minimum to its maximum, a valid, meaningful request at that version
//! gets a response with the right correlation id that decodes at that version (with the
//! response header the codec names and nothing left over) and carries the expected error
//! codes. Each case does the API's real work (records produced and fetched back, offsets
//! looked up by every special timestamp, a consumer group driven through its calls...) and
//! checks its effect with other requests at fixed versions.
//!
//! An advertised version without a case fails the sweep, so a new API or version needs a
//! case here. Versions advertised but not served answer as Kafka 4 does (Produce v0-v2:
//! the connection is closed). Every failure is collected and reported at the end.
//!
//! By hand, another broker can be swept, e.g. Apache Kafka to check that the expected
//! answers are Kafka's: `SWEEP_BROKER=127.0.0.1:19092` (PLAINTEXT, no authorizer), and
//! optionally `SWEEP_SASL_BROKER` (a SASL_PLAINTEXT listener where PLAIN user
//! `SWEEP_SASL_USER`/`SWEEP_SASL_PASSWORD`, default sweeper/sweeper-pw, may log in) and
//! `SWEEP_AUTHZ_BROKER` (a PLAINTEXT listener of a broker with an authorizer whose clients
//! are super users; the same address as `SWEEP_BROKER` if that one has the authorizer).
//! There, versions without a case are listed instead of failing. `SWEEP_DUMP=FILE` appends
//! every decoded response to FILE, to compare two brokers' answers line by line.

/// Returns the formatted failure from the enclosing check unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

mod admin;
mod auth;
mod data;
mod fixture;
mod groups;
mod upcoming;
mod wire;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use fixture::{Ctx, Targets};
use ringbroker::protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use wire::{Check, Wire};

/// One API's case, for the versions it knows how to ask and check.
struct Case {
    api: ApiKey,
    min: i16,
    max: i16,
    run: fn(&Ctx, i16) -> Check,
}

const fn case(api: ApiKey, min: i16, max: i16, run: fn(&Ctx, i16) -> Check) -> Case {
    Case { api, min, max, run }
}

const CASES: &[Case] = &[
    case(ApiKey::ApiVersions, 0, 4, data::api_versions),
    case(ApiKey::Metadata, 0, 13, data::metadata),
    // Expected outcome: the connection is closed.
    case(ApiKey::Produce, 0, 2, data::produce_unserved),
    case(ApiKey::Produce, 3, 13, data::produce),
    case(ApiKey::Fetch, 4, 18, data::fetch),
    case(ApiKey::ListOffsets, 1, 10, data::list_offsets),
    case(ApiKey::OffsetForLeaderEpoch, 2, 4, data::offset_for_leader_epoch),
    case(ApiKey::InitProducerId, 0, 5, data::init_producer_id),
    case(ApiKey::CreateTopics, 2, 7, admin::create_topics),
    case(ApiKey::DeleteTopics, 1, 6, admin::delete_topics),
    case(ApiKey::DescribeConfigs, 1, 4, admin::describe_configs),
    case(ApiKey::IncrementalAlterConfigs, 0, 1, admin::incremental_alter_configs),
    case(ApiKey::DescribeCluster, 0, 2, admin::describe_cluster),
    case(ApiKey::AlterPartitionReassignments, 0, 1, admin::alter_partition_reassignments),
    case(ApiKey::ListPartitionReassignments, 0, 0, admin::list_partition_reassignments),
    case(ApiKey::ElectLeaders, 0, 2, admin::elect_leaders),
    case(ApiKey::FindCoordinator, 0, 6, groups::find_coordinator),
    case(ApiKey::JoinGroup, 0, 9, groups::join_group),
    case(ApiKey::SyncGroup, 0, 5, groups::sync_group),
    case(ApiKey::Heartbeat, 0, 4, groups::heartbeat),
    case(ApiKey::LeaveGroup, 0, 5, groups::leave_group),
    case(ApiKey::OffsetCommit, 2, 9, groups::offset_commit),
    case(ApiKey::OffsetFetch, 1, 9, groups::offset_fetch),
    case(ApiKey::ListGroups, 0, 5, groups::list_groups),
    case(ApiKey::DescribeGroups, 0, 6, groups::describe_groups),
    case(ApiKey::DeleteGroups, 0, 2, groups::delete_groups),
    case(ApiKey::OffsetDelete, 0, 0, groups::offset_delete),
    case(ApiKey::SaslHandshake, 0, 1, auth::sasl_handshake),
    case(ApiKey::SaslAuthenticate, 0, 2, auth::sasl_authenticate),
    case(ApiKey::CreateAcls, 1, 3, auth::create_acls),
    case(ApiKey::DescribeAcls, 1, 3, auth::describe_acls),
    case(ApiKey::DeleteAcls, 1, 3, auth::delete_acls),
    case(ApiKey::DescribeUserScramCredentials, 0, 0, auth::describe_user_scram_credentials),
    case(ApiKey::AlterUserScramCredentials, 0, 0, auth::alter_user_scram_credentials),
    // Not served yet: these run once the broker advertises them.
    case(ApiKey::CreatePartitions, 0, 3, upcoming::create_partitions),
    case(ApiKey::DeleteRecords, 0, 2, upcoming::delete_records),
    case(ApiKey::DescribeLogDirs, 1, 4, upcoming::describe_log_dirs),
    case(ApiKey::AlterConfigs, 0, 2, upcoming::alter_configs),
    case(ApiKey::DescribeClientQuotas, 0, 1, upcoming::describe_client_quotas),
    case(ApiKey::AlterClientQuotas, 0, 1, upcoming::alter_client_quotas),
    case(ApiKey::DescribeProducers, 0, 0, upcoming::describe_producers),
];

const SKIP: &str = "skipped: ";

/// A case's way of saying there is nothing to run it against (another broker without a
/// SASL listener, say): reported, not failed.
pub(crate) fn skip(why: &str) -> String {
    format!("{SKIP}{why}")
}

/// The ApiVersions v3 request the sweep reads the table with.
pub(crate) fn table_request() -> ApiVersionsRequest {
    let mut r = ApiVersionsRequest::default();
    r.client_software_name = fixture::sbs("ringbroker-sweep");
    r.client_software_version = fixture::sbs("1.0");
    r
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

#[test]
fn every_advertised_api_version_answers() {
    let started = Instant::now();
    let ctx = Ctx::new(Targets::start()).unwrap_or_else(|e| panic!("setting up the sweep: {e}"));
    let table: ApiVersionsResponse = Wire::connect(ctx.t.plain)
        .and_then(|mut w| w.call(ApiKey::ApiVersions, 3, &table_request()))
        .unwrap_or_else(|e| panic!("reading the ApiVersions table: {e}"));
    assert_eq!(table.error_code, 0, "ApiVersions v3");
    let listed: Vec<String> = table
        .api_keys
        .iter()
        .map(|k| {
            let name = ApiKey::try_from(k.api_key).map_or_else(|_| format!("key {}", k.api_key), |a| format!("{a:?}"));
            format!("{name} v{}-v{}", k.min_version, k.max_version)
        })
        .collect();
    println!("advertised: {}", listed.join(", "));
    println!("sweep setup took {:?}", started.elapsed());

    let (mut failures, mut uncovered, mut skipped) = (Vec::new(), Vec::new(), Vec::new());
    let mut ran = 0;
    for k in &table.api_keys {
        let Ok(api) = ApiKey::try_from(k.api_key) else {
            uncovered.push(format!(
                "API key {} v{}-v{}: advertised, unknown to the codec",
                k.api_key, k.min_version, k.max_version
            ));
            continue;
        };
        for v in k.min_version..=k.max_version {
            let Some(c) = CASES.iter().find(|c| c.api == api && (c.min..=c.max).contains(&v)) else {
                uncovered.push(format!("{api:?} v{v}: advertised, and the sweep has no case for it"));
                continue;
            };
            let t = Instant::now();
            let outcome = catch_unwind(AssertUnwindSafe(|| (c.run)(&ctx, v)))
                .unwrap_or_else(|p| Err(format!("the case panicked: {}", panic_text(&*p))));
            ran += 1;
            match outcome {
                Ok(()) => println!("ok   {api:?} v{v} ({:?})", t.elapsed()),
                Err(e) if e.starts_with(SKIP) => skipped.push(format!("{api:?} v{v}: {e}")),
                Err(e) => {
                    println!("FAIL {api:?} v{v}: {e}");
                    failures.push(format!("{api:?} v{v}: {e}"));
                }
            }
        }
    }
    println!("{ran} advertised versions swept in {:?}", started.elapsed());
    for s in &skipped {
        println!("{s}");
    }
    if ctx.t.external {
        for u in &uncovered {
            println!("not swept: {u}");
        }
    } else {
        failures.extend(uncovered);
    }
    if !failures.is_empty() {
        panic!("{} advertised API versions fail the sweep:\n  {}", failures.len(), failures.join("\n  "));
    }
}

/// Each case's versions exist in the codec (else it could not even encode them), and no
/// two cases claim the same version of an API.
#[test]
fn sweep_cases_fit_the_codec() {
    for (i, c) in CASES.iter().enumerate() {
        let codec = c.api.valid_versions();
        assert!(
            c.min <= c.max && c.max <= codec.max && (c.min >= codec.min || c.api == ApiKey::Produce),
            "{:?} case v{}-v{} outside the codec's v{}-v{} (only Produce's unserved v0-v2 are framed by hand)",
            c.api,
            c.min,
            c.max,
            codec.min,
            codec.max
        );
        for other in &CASES[i + 1..] {
            assert!(
                other.api != c.api || other.min > c.max || other.max < c.min,
                "two cases for {:?} v{}-v{}",
                c.api,
                other.min.max(c.min),
                other.max.min(c.max)
            );
        }
    }
}
