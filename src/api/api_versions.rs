//! ApiVersions: the table of APIs and versions, derived from each handler's `SPEC`. From v3
//! the client names its software (KIP-511); a name or version Kafka would not accept is
//! answered INVALID_REQUEST with no table, as Kafka does.

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

/// Kafka's rule for a client software name or version (`ApiVersionsRequest.isValid`):
/// `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`.
fn valid_software(s: &str) -> bool {
    let inner = |c: u8| c.is_ascii_alphanumeric() || c == b'-' || c == b'.';
    match s.as_bytes() {
        [] => false,
        [first, .., last] if !first.is_ascii_alphanumeric() || !last.is_ascii_alphanumeric() => false,
        [only] => only.is_ascii_alphanumeric(),
        bytes => bytes.iter().all(|&c| inner(c)),
    }
}

pub async fn handle(_broker: &impl Broker, req: Request) -> Outcome {
    let r: ApiVersionsRequest = req.decode()?;
    if req.version >= 3 && !(valid_software(&r.client_software_name) && valid_software(&r.client_software_version)) {
        let mut resp = ApiVersionsResponse::default();
        resp.error_code = ErrorCode::InvalidRequest.code();
        return req.respond(resp);
    }
    req.respond(table())
}

/// The answer to an ApiVersions version newer than ours: v0 body, UNSUPPORTED_VERSION.
pub fn unsupported(correlation_id: i32) -> Outcome {
    let mut r = table();
    r.error_code = ErrorCode::UnsupportedVersion.code();
    response::encode(ApiKey::ApiVersions, 0, correlation_id, r)
        .map(Some)
        .map_err(|e| Fault::Encode { api: ApiKey::ApiVersions, reason: e })
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use bytes::BytesMut;
    use proto_kafka::messages::RequestHeader;
    use proto_kafka::protocol::Encodable;

    use super::*;
    use crate::api::fake::{self, Fake};
    use crate::api::str_bytes;
    use crate::listener::SecurityProtocol;

    fn request(name: &str, version: &str) -> ApiVersionsRequest {
        let mut r = ApiVersionsRequest::default();
        r.client_software_name = str_bytes(name);
        r.client_software_version = str_bytes(version);
        r
    }

    /// (key, min, max) of each API listed.
    fn ranges(resp: &ApiVersionsResponse) -> Vec<(i16, i16, i16)> {
        resp.api_keys.iter().map(|k| (k.api_key, k.min_version, k.max_version)).collect()
    }

    fn range_of(resp: &ApiVersionsResponse, key: ApiKey) -> Option<(i16, i16)> {
        resp.api_keys.iter().find(|k| k.api_key == key as i16).map(|k| (k.min_version, k.max_version))
    }

    #[test]
    fn lists_every_served_api_with_the_versions_it_advertises() {
        let b = Fake::new();
        let resp: ApiVersionsResponse = b.call(ApiKey::ApiVersions, 3, &request("librdkafka", "2.3.0"));
        assert_eq!(resp.error_code, 0);
        let expected: Vec<_> = APIS.iter().map(|s| (s.key as i16, s.advertised_min, s.max)).collect();
        assert_eq!(ranges(&resp), expected);
        assert_eq!(range_of(&resp, ApiKey::Produce), Some((0, 13)), "advertised from v0, served from v3");
        assert_eq!(range_of(&resp, ApiKey::ApiVersions), Some((0, 4)));
        let resp: ApiVersionsResponse = b.call(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default());
        assert_eq!((resp.error_code, ranges(&resp)), (0, expected), "v0 alike, with no software named");
    }

    #[test]
    fn a_version_newer_than_ours_is_answered_at_v0_with_unsupported_version() {
        let b = Fake::new();
        let mut frame = BytesMut::new();
        let mut header = RequestHeader::default();
        header.request_api_key = ApiKey::ApiVersions as i16;
        header.request_api_version = 9;
        header.correlation_id = 7;
        header.encode(&mut frame, 2).expect("header encodes");
        request("future-client", "9.0").encode(&mut frame, 4).expect("body encodes");
        let conn = Rc::new(fake::connection(SecurityProtocol::Plaintext, None));
        let outcome = futures_lite::future::block_on(crate::api::dispatch(&b, frame.freeze(), &conn));
        let response = outcome.expect("answered, not closed").expect("a response");
        let resp: ApiVersionsResponse = fake::decode_response(ApiKey::ApiVersions, 0, &response);
        assert_eq!(resp.error_code, ErrorCode::UnsupportedVersion.code());
        assert_eq!(range_of(&resp, ApiKey::ApiVersions), Some((0, 4)), "so the client can pick a version");
    }

    #[test]
    fn from_v3_an_invalid_software_name_or_version_is_invalid_request() {
        let b = Fake::new();
        for (name, version) in
            [("", "1.0"), ("my client", "1.0"), ("-client", "1.0"), ("client", "1.0-"), ("client", "")]
        {
            let resp: ApiVersionsResponse = b.call(ApiKey::ApiVersions, 3, &request(name, version));
            assert_eq!(resp.error_code, ErrorCode::InvalidRequest.code(), "{name:?} {version:?}");
            assert!(resp.api_keys.is_empty(), "no table with the refusal");
        }
        for (name, version) in [("a", "1"), ("apache-kafka-java", "3.7.0"), ("kgo", "v1.17.1-rc.0")] {
            let resp: ApiVersionsResponse = b.call(ApiKey::ApiVersions, 4, &request(name, version));
            assert_eq!(resp.error_code, 0, "{name:?} {version:?}");
        }
    }
}
