//! ApiVersions: the table of APIs and versions, derived from each handler's `SPEC`.

use proto_kafka::messages::api_versions_response::ApiVersion;
use proto_kafka::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};

use super::{ApiSpec, Broker, Fault, Outcome, Request, APIS};
use crate::protocol::response;
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::ApiVersions, 0, 4);

fn table() -> ApiVersionsResponse {
    let mut r = ApiVersionsResponse::default();
    r.api_keys = APIS
        .iter()
        .map(|s| {
            let mut v = ApiVersion::default();
            v.api_key = s.key as i16;
            v.min_version = s.advertised_min;
            v.max_version = s.max;
            v
        })
        .collect();
    r
}

pub async fn handle(_broker: &impl Broker, req: Request) -> Outcome {
    let _: ApiVersionsRequest = req.decode()?;
    req.respond(table())
}

/// The answer to an ApiVersions version newer than ours: v0 body, UNSUPPORTED_VERSION.
pub fn unsupported(correlation_id: i32) -> Outcome {
    let mut r = table();
    r.error_code = ErrorCode::UnsupportedVersion.code();
    response::encode(ApiKey::ApiVersions, 0, correlation_id, r)
        .map(Some)
        .map_err(|e| Fault::Encode { api: ApiKey::ApiVersions, reason: e.to_string() })
}
